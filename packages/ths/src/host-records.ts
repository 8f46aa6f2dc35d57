import { type AuditReceipt, type DecisionEnvelope, validate } from "@asp/contracts";
import { digest, type FactEntry, type FactLog } from "@asp/evidence";

/**
 * What makes a fact log entry a verified host record (THREAT-MODEL invariant 13, issue 32 hole 1):
 * host-only state (the trusted base, provider health) is read only from entries of the kind the
 * host writes under that key, and a trusted base only from a receipt that is bound, by digest
 * and position, to a valid gate-allow envelope appended in the same batch. Anything else that
 * names a host-only key was appended by another writer: `verifyReceipts` reports it and the
 * host ignores it.
 */

/** Fact kinds the host appends to the evidence fact log. */
export const FACT_KINDS = Object.freeze({ decision: "ths.decision", receipt: "ths.receipt" } as const);

/** Host-only state key prefixes and the one fact kind the host writes under each. */
export const HOST_STATE_KEYS: ReadonlyArray<{ readonly prefix: string; readonly kind: string }> = Object.freeze([
  { prefix: "ths.trustedBase:", kind: FACT_KINDS.receipt },
  { prefix: "ths.health:", kind: "ths.health" },
]);

/** Why `entry` may not carry the host-only state keys it carries, or null when it may. */
export function hostStateProblem(entry: FactEntry): string | null {
  for (const key of entry.state) {
    const rule = HOST_STATE_KEYS.find((r) => key.startsWith(r.prefix));
    if (rule === undefined) continue;
    if (entry.kind !== rule.kind) {
      return `entry of kind ${entry.kind} names the host-only state key ${key} (only ${rule.kind} may)`;
    }
    if (rule.prefix === "ths.trustedBase:") {
      const r = entry.record as { decision?: unknown; callSite?: unknown };
      if (r.decision !== "allow" || r.callSite !== "gate") {
        return `a receipt that is not a gate allow names the trusted-base key ${key}`;
      }
    }
  }
  return null;
}

/**
 * Why the receipt entry `receipt` is not bound to the decision entry `decision`, or null when it
 * is: both valid, the envelope's digest, decision, call-site, policy, baseline and receipt id
 * equal the receipt's.
 */
export function receiptProblem(
  receipt: FactEntry,
  decision: FactEntry | undefined,
): { readonly problem: string; readonly receipt: AuditReceipt | null } | null {
  const r = validate("audit-receipt", receipt.record);
  if (!r.ok) {
    return {
      problem: `not a valid audit receipt: ${r.errors[0]?.pointer} ${r.errors[0]?.message}`,
      receipt: null,
    };
  }
  if (decision === undefined) return { problem: `decision ${r.value.decisionId} is not in the log`, receipt: r.value };
  const env = validate("verdict", decision.record);
  if (!env.ok) return { problem: `decision ${r.value.decisionId} is not a valid envelope`, receipt: r.value };
  if (digest(env.value) !== r.value.envelopeDigest) {
    return { problem: "envelopeDigest does not match the recorded envelope", receipt: r.value };
  }
  const e: DecisionEnvelope = env.value;
  if (
    e.decision !== r.value.decision ||
    e.callSite !== r.value.callSite ||
    e.policyDigest !== r.value.policyDigest ||
    e.baseline !== r.value.baseline ||
    e.receipt?.id !== r.value.receiptId
  ) {
    return { problem: "receipt and envelope disagree", receipt: r.value };
  }
  return null;
}

/** The decision entry a receipt names (by its `decisionId` index), if any. */
export async function decisionOf(log: FactLog, receipt: FactEntry): Promise<FactEntry | undefined> {
  const id = (receipt.record as { decisionId?: unknown }).decisionId;
  if (typeof id !== "string") return undefined;
  return (await log.list({ index: { name: "decisionId", value: id } })).find((e) => e.kind === FACT_KINDS.decision);
}

/** What {@link readTrustedBase} read: the verified after-tree (or null), and the key's head seq. */
export interface TrustedBaseRead {
  readonly tree: string | null;
  /**
   * The seq of the latest entry naming the key, verified host record or not (`null`: none ever
   * did): what the allow that moves the base next must still find there (a conditional append).
   */
  readonly seq: number | null;
}

/**
 * The after-tree the trusted base `key` names, read only from a verified host record: the latest
 * entry under `key` must be a `ths.receipt` of a gate allow, its envelope appended just before
 * it (same batch: `appendDecision`), the two bound by {@link receiptProblem}. Null otherwise
 * (the caller then measures the change from the empty tree, which only ever shows more); with
 * the key's head seq, from the same read.
 */
export async function readTrustedBase(log: FactLog, key: string): Promise<TrustedBaseRead> {
  const last = await log.latest(key);
  if (last === null || last === undefined) return { tree: null, seq: null };
  const none = { tree: null, seq: last.seq };
  if (hostStateProblem(last) !== null) return none;
  const decision = await decisionOf(log, last);
  if (decision === undefined || decision.seq !== last.seq - 1) return none;
  if (receiptProblem(last, decision) !== null) return none;
  const record = last.record as unknown as AuditReceipt;
  return record.decision === "allow" && record.callSite === "gate" ? { tree: record.baseline, seq: last.seq } : none;
}
