import {
  CALL_SITES,
  type CallSite,
  FAIL_CLASSES,
  FAIL_POLICY_OUTCOMES,
  type FailClass,
  type FailPolicyOutcome,
} from "@asp/contracts";
import { policyError } from "./errors.js";
import type { ActivePolicy } from "./parse.js";

/** One row of the fail-policy table: the outcome per call-site. */
export type FailPolicyRow = { readonly [S in CallSite]: FailPolicyOutcome };

/** A complete fail-policy table: every fail class × every call-site. */
export type FailPolicyTable = { readonly [C in FailClass]: FailPolicyRow };

const row = (interactive: FailPolicyOutcome, gate: FailPolicyOutcome, sweep: FailPolicyOutcome): FailPolicyRow =>
  Object.freeze({ interactive, gate, sweep });

/**
 * The built-in fail-policy table (host §2), used for every cell a policy does not set.
 *
 * - `interactive` is warn-allow: availability failures (crash, timeout, cancellation, missing or
 *   quarantined provider, provider error, unsupported capability, missing authority, direct
 *   write risk) fail `open`, always logged and always visible as degraded coverage. Failures
 *   that say the answer cannot be trusted (malformed, stale, incomplete, incompatible,
 *   insufficient assurance) are `indeterminate`.
 * - `gate` never opens: every cell is `indeterminate`, except `malformed` and
 *   `policy_self_authorization`, which are `deny` because they are evidence of tampering rather
 *   than of bad luck.
 * - `sweep` (background, whole-repository) is `indeterminate` everywhere with the same two `deny`s:
 *   a sweep reports, it does not warn-allow.
 */
export const DEFAULT_FAIL_POLICY: FailPolicyTable = Object.freeze({
  crashed: row("open", "indeterminate", "indeterminate"),
  timed_out: row("open", "indeterminate", "indeterminate"),
  malformed: row("indeterminate", "deny", "deny"),
  stale: row("indeterminate", "indeterminate", "indeterminate"),
  unsupported: row("open", "indeterminate", "indeterminate"),
  errored: row("open", "indeterminate", "indeterminate"),
  cancelled: row("open", "indeterminate", "indeterminate"),
  incomplete: row("indeterminate", "indeterminate", "indeterminate"),
  quarantined: row("open", "indeterminate", "indeterminate"),
  incompatible: row("indeterminate", "indeterminate", "indeterminate"),
  missing: row("open", "indeterminate", "indeterminate"),
  unavailable: row("open", "indeterminate", "indeterminate"),
  missing_authority: row("open", "indeterminate", "indeterminate"),
  insufficient_assurance: row("indeterminate", "indeterminate", "indeterminate"),
  policy_self_authorization: row("deny", "deny", "deny"),
  direct_write_risk: row("open", "indeterminate", "indeterminate"),
  // A configured provider whose measured tree digest is missing or differs from its pin: its
  // grant is not honoured, and the answer cannot be attributed to what policy pinned.
  integrity_unverified: row("indeterminate", "indeterminate", "indeterminate"),
  // The worktree moved while the providers were answering: the answer describes another tree.
  worktree_changed: row("indeterminate", "indeterminate", "indeterminate"),
  // The policy's `host` pin (implementation, version range, digest) does not match this host.
  host_incompatible: row("indeterminate", "indeterminate", "indeterminate"),
});

/** How strict an outcome is: `open` 0 < `indeterminate` 1 < `deny` 2. */
export function outcomeStrictness(outcome: FailPolicyOutcome): number {
  return FAIL_POLICY_OUTCOMES.indexOf(outcome);
}

/** The stricter of two fail-policy outcomes. */
export function stricterOutcome(a: FailPolicyOutcome, b: FailPolicyOutcome): FailPolicyOutcome {
  return outcomeStrictness(a) >= outcomeStrictness(b) ? a : b;
}

/** Options of {@link failPolicyCell}. */
export interface FailPolicyCellOptions {
  /** Whether the failing provider serves a source some requirement requires at this call-site. */
  readonly requiredSource: boolean;
}

const isOutcome = (v: unknown): v is FailPolicyOutcome =>
  typeof v === "string" && (FAIL_POLICY_OUTCOMES as ReadonlyArray<string>).includes(v);

function configuredCell(policy: ActivePolicy | null | undefined, failClass: FailClass, callSite: CallSite): unknown {
  // Defensive reads: this is the one function that must hold its floor even for a hand-built,
  // never-validated policy object, so nothing about its shape is assumed.
  const doc = (policy as { document?: unknown } | null | undefined)?.document;
  if (typeof doc !== "object" || doc === null) return undefined;
  const table = (doc as { failPolicy?: unknown }).failPolicy;
  if (typeof table !== "object" || table === null || !Object.hasOwn(table, failClass)) return undefined;
  const cells = (table as Record<string, unknown>)[failClass];
  if (typeof cells !== "object" || cells === null || !Object.hasOwn(cells, callSite)) return undefined;
  return (cells as Record<string, unknown>)[callSite];
}

/**
 * What the host does when a provider fails with `failClass` at `callSite` (host §2): `open`
 * (continue, logged, degraded), `indeterminate` or `deny`. The policy's `failPolicy` overrides
 * {@link DEFAULT_FAIL_POLICY} cell by cell. The floor holds whatever the input: a `gate` cell for
 * a required source is never `open`; an `open` there (only possible in a policy object that
 * bypassed {@link parsePolicy}) falls back to the built-in cell, which never opens a gate.
 *
 * @throws PolicyError `ASP_POLICY_UNKNOWN_VALUE` when `failClass` or `callSite` is outside its vocabulary.
 * @example
 * ```ts
 * failPolicyCell(policy, "timed_out", "gate", { requiredSource: true }); // "indeterminate"
 * ```
 */
export function failPolicyCell(
  policy: ActivePolicy | null | undefined,
  failClass: FailClass,
  callSite: CallSite,
  options: FailPolicyCellOptions,
): FailPolicyOutcome {
  if (!(FAIL_CLASSES as ReadonlyArray<string>).includes(failClass)) {
    throw policyError("ASP_POLICY_UNKNOWN_VALUE", `unknown fail class ${JSON.stringify(String(failClass))}`, {
      pointer: "",
    });
  }
  if (!(CALL_SITES as ReadonlyArray<string>).includes(callSite)) {
    throw policyError("ASP_POLICY_UNKNOWN_VALUE", `unknown call-site ${JSON.stringify(String(callSite))}`, {
      pointer: "",
    });
  }
  const builtIn = DEFAULT_FAIL_POLICY[failClass][callSite];
  const configured = configuredCell(policy, failClass, callSite);
  const outcome = isOutcome(configured) ? configured : builtIn;
  if (callSite === "gate" && options.requiredSource === true && outcome === "open") return builtIn;
  return outcome;
}

/**
 * The complete effective table of `policy` (policy cells over the built-in ones) for required
 * sources: what `asp policy validate` prints and `docs/policy.md` documents.
 */
export function failPolicyTable(policy: ActivePolicy | null | undefined): FailPolicyTable {
  const out: Record<string, FailPolicyRow> = {};
  for (const failClass of FAIL_CLASSES) {
    const cells: Record<string, FailPolicyOutcome> = {};
    for (const callSite of CALL_SITES) {
      cells[callSite] = failPolicyCell(policy, failClass, callSite, { requiredSource: true });
    }
    out[failClass] = Object.freeze(cells) as FailPolicyRow;
  }
  return Object.freeze(out) as FailPolicyTable;
}
