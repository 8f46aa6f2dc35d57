import type { AuditReceipt, DecisionEnvelope } from "@asp/contracts";
import { type Digest, digest, type FactEntry, type FactInput, type FactLog } from "@asp/evidence";
import type { FailOpen } from "./decide.js";
import { ThsError } from "./errors.js";
import { trustedBaseKey } from "./freshness.js";
import { FACT_KINDS, hostStateProblem, receiptProblem } from "./host-records.js";

export { FACT_KINDS } from "./host-records.js";

/** What a receipt needs beyond the envelope. */
export interface ReceiptParts {
  readonly receiptId: string;
  readonly validAsOf: AuditReceipt["validAsOf"];
  readonly provenance: AuditReceipt["provenance"];
  readonly failOpens: readonly FailOpen[];
}

/** The audit receipt of a decision (host §1 "attach an audit receipt"): bound to the envelope by digest. */
export function buildReceipt(envelope: DecisionEnvelope, parts: ReceiptParts): AuditReceipt {
  return {
    $$type: "@asp/AuditReceipt",
    version: 1,
    receiptId: parts.receiptId,
    decisionId: envelope.decisionId,
    decision: envelope.decision,
    callSite: envelope.callSite,
    policyDigest: envelope.policyDigest,
    baseline: envelope.baseline,
    changeset: envelope.changeset,
    // host §9: the dependency environment the providers were given is part of what was decided on.
    ...(envelope.environment === undefined ? {} : { environment: envelope.environment.tree }),
    validAsOf: [...parts.validAsOf],
    coverage: envelope.coverage,
    provenance: [...parts.provenance],
    authority: envelope.authority,
    assurance: envelope.assurance,
    envelopeDigest: digest(envelope),
    failOpens: parts.failOpens.map((f) => ({ provider: f.provider, failClass: f.failClass, callSite: f.callSite })),
    decidedAt: envelope.decidedAt,
  };
}

/** Options of {@link appendDecision}. */
export interface AppendDecisionOptions {
  /** More facts that must be durable with the decision, in the same batch (e.g. provider health). */
  readonly facts?: readonly FactInput[];
  /**
   * The head seq of the repository's trusted-base key the evaluation was bound on
   * (`Binding.trustedBaseSeq`; `null`: none). When given, an allow at the gate moves the trusted
   * base only if the key still has this head at commit; omitted, it moves it unconditionally.
   */
  readonly trustedBaseSeq?: number | null;
}

/**
 * Append the decision and its receipt in ONE atomic, synced batch (host §1, DESIGN §8), before
 * the envelope is returned, with `options.facts` after them. Only an **allow at the gate call-site** also records its receipt as
 * the trusted base of `repo` (its after-tree is the base of the next gate without `--base`);
 * a deny, an indeterminate, a check or a sweep never moves it. With `options.trustedBaseSeq`, that
 * move is a conditional append on the head the evaluation was bound on: when another host (on a
 * shared store) recorded a trusted base since, nothing is written and the call throws, so an
 * allow decided on an older view never replaces a newer trusted base.
 * @throws ThsError `ASP_THS_TRUSTED_BASE_MOVED` (`data: { repo, key, expected, actual }`) when the
 *   trusted base moved since the evaluation was bound: nothing is written; gate again.
 * @throws EvidenceError from the fact log (`ASP_EVIDENCE_STORE_CLOSED`, ...): nothing is written.
 */
export async function appendDecision(
  log: FactLog,
  envelope: DecisionEnvelope,
  receipt: AuditReceipt,
  repo: string | null,
  options: AppendDecisionOptions = {},
): Promise<FactEntry[]> {
  const index = [
    { name: "decisionId", value: envelope.decisionId },
    { name: "callSite", value: envelope.callSite },
  ];
  const movesBase = repo !== null && envelope.callSite === "gate" && envelope.decision === "allow";
  const key = movesBase ? trustedBaseKey(repo) : null;
  const entries: FactInput[] = [
    { kind: FACT_KINDS.decision, record: envelope, index },
    {
      kind: FACT_KINDS.receipt,
      record: receipt,
      index: [...index, { name: "receiptId", value: receipt.receiptId }],
      state: key === null ? [] : [key],
    },
    ...(options.facts ?? []),
  ];
  const seq = options.trustedBaseSeq;
  if (key === null || seq === undefined) return log.append(entries);
  try {
    return await log.append(entries, { expect: [{ key, seq }] });
  } catch (error) {
    const e = error as { code?: unknown; data?: { key?: unknown; actual?: unknown } };
    if (e.code !== "ASP_EVIDENCE_CONDITION_FAILED" || e.data?.key !== key) throw error;
    throw trustedBaseMoved(repo as string, key, seq, e.data.actual as number | null, error);
  }
}

function trustedBaseMoved(
  repo: string,
  key: string,
  expected: number | null,
  actual: number | null,
  cause: unknown,
): ThsError {
  const at = (seq: number | null): string => (seq === null ? "none" : `seq ${seq}`);
  return new ThsError(
    "ASP_THS_TRUSTED_BASE_MOVED",
    `the trusted base of ${repo} moved while this gate ran (bound on ${at(expected)}, now ${at(actual)}: another host recorded a gate allow): this allow was not recorded and no decision is returned; run the gate again to decide against the new base`,
    { cause, data: { repo, key, expected, actual } },
  );
}

/** One stored receipt with where it sits in the log. */
export interface StoredReceipt {
  readonly seq: number;
  readonly at: string;
  readonly receipt: AuditReceipt;
}

/**
 * Receipts, newest first: at most `limit`, and with `before` only those at a smaller seq (the
 * cursor of the next page is the last row's seq).
 */
export async function listReceipts(log: FactLog, limit = 50, before?: number): Promise<StoredReceipt[]> {
  const entries = await log.list({
    kind: FACT_KINDS.receipt,
    reverse: true,
    limit,
    ...(before === undefined ? {} : { afterSeq: before }),
  });
  return entries.map((e) => ({ seq: e.seq, at: e.at, receipt: e.record as unknown as AuditReceipt }));
}

/**
 * One receipt (by receipt id or decision id) and the envelope it is bound to.
 * @throws ThsError `ASP_THS_RECEIPT_NOT_FOUND`.
 */
export async function showReceipt(
  log: FactLog,
  id: string,
): Promise<StoredReceipt & { readonly envelope: DecisionEnvelope | null }> {
  const byReceipt = await log.list({ index: { name: "receiptId", value: id }, limit: 1 });
  const entries =
    byReceipt.length > 0
      ? byReceipt
      : (await log.list({ index: { name: "decisionId", value: id } })).filter((e) => e.kind === FACT_KINDS.receipt);
  const entry = entries[0];
  if (entry === undefined) {
    throw new ThsError(
      "ASP_THS_RECEIPT_NOT_FOUND",
      `no receipt or decision with id ${JSON.stringify(id)} in the store`,
      {
        data: { id },
      },
    );
  }
  const receipt = entry.record as unknown as AuditReceipt;
  const decision = (await log.list({ index: { name: "decisionId", value: receipt.decisionId } })).find(
    (e) => e.kind === FACT_KINDS.decision,
  );
  return {
    seq: entry.seq,
    at: entry.at,
    receipt,
    envelope: decision === undefined ? null : (decision.record as unknown as DecisionEnvelope),
  };
}

/** One problem {@link verifyReceipts} found. */
export interface ReceiptProblem {
  readonly seq: number;
  readonly receiptId: string | null;
  readonly problem: string;
}

/** Outcome of {@link verifyReceipts}. */
export interface ReceiptVerification {
  readonly ok: boolean;
  /** Entries in the fact log chain. */
  readonly entries: number;
  readonly head: { readonly seq: number; readonly digest: Digest } | null;
  readonly receipts: number;
  readonly problems: readonly ReceiptProblem[];
}

/**
 * Walk the hash chain, then check every receipt: schema, the envelope it names exists and
 * validates, and the envelope's digest and decision match the receipt. Never throws for a bad store.
 */
export async function verifyReceipts(log: FactLog): Promise<ReceiptVerification> {
  const chain = await log.verify();
  if (!chain.ok) {
    return {
      ok: false,
      entries: chain.entries,
      head: null,
      receipts: 0,
      problems: [{ seq: chain.seq, receiptId: null, problem: `fact log chain broken: ${chain.reason}` }],
    };
  }
  const problems: ReceiptProblem[] = [];
  const decisions = new Map<string, FactEntry>();
  for (const e of await log.list({ kind: FACT_KINDS.decision })) {
    decisions.set((e.record as { decisionId?: string }).decisionId ?? "", e);
  }
  const receipts = await log.list({ kind: FACT_KINDS.receipt });
  for (const e of receipts) {
    const rid = (e.record as { receiptId?: unknown }).receiptId;
    const receiptId = typeof rid === "string" ? rid : null;
    const decisionId = (e.record as { decisionId?: unknown }).decisionId;
    const found = receiptProblem(e, typeof decisionId === "string" ? decisions.get(decisionId) : undefined);
    if (found !== null) problems.push({ seq: e.seq, receiptId, problem: found.problem });
  }
  // THREAT-MODEL invariant 13: host-only state (the trusted base, provider health) written by
  // anything but the host's own record of that kind is another writer's entry.
  for (const e of await log.list()) {
    const problem = hostStateProblem(e);
    if (problem !== null) problems.push({ seq: e.seq, receiptId: null, problem });
  }
  problems.sort((a, b) => a.seq - b.seq);
  return { ok: problems.length === 0, entries: chain.entries, head: chain.head, receipts: receipts.length, problems };
}
