import type { CallSite, Policy } from "@asp/contracts";

/** Every bound the host enforces on providers (host §8). Policy values win; host defaults fill gaps. */
export interface Budgets {
  /** Per-call-site timeout. For `interactive` it is one whole-host ceiling across all providers. */
  readonly timeoutMs: Readonly<Record<CallSite, number>>;
  readonly callbacksPerRequest: number;
  readonly callbacksPerSession: number;
  /** Largest provider message body (the `Content-Length`) the host reads. */
  readonly maxResponseBytes: number;
  /** Consecutive health or budget failures after which a provider is quarantined. */
  readonly quarantineAfterFailures: number;
  /** Re-proposals of one apply after its baseline moved under a touched path (host §6 step 5). */
  readonly editRetries: number;
}

/** Host-side supervision timings that trusted policy does not carry. */
export interface SupervisorTimings {
  /** Deadline for spawn + `initialize` (default 5000 ms). */
  readonly initializeTimeoutMs: number;
  /** How long `shutdown` may take before the process is killed (default 1000 ms). */
  readonly shutdownTimeoutMs: number;
  /** First restart delay after a failure; doubles per consecutive failure (default 100 ms). */
  readonly restartBackoffMs: number;
  /** Ceiling of the restart delay (default 5000 ms). */
  readonly restartBackoffMaxMs: number;
}

/** Defaults used when the policy names no budget. */
export const DEFAULT_BUDGETS: Budgets = Object.freeze({
  timeoutMs: Object.freeze({ interactive: 2_000, gate: 60_000, sweep: 300_000 }),
  callbacksPerRequest: 10_000,
  callbacksPerSession: 100_000,
  maxResponseBytes: 4 * 1024 * 1024,
  quarantineAfterFailures: 3,
  editRetries: 2,
});

/** Default supervision timings. */
export const DEFAULT_TIMINGS: SupervisorTimings = Object.freeze({
  initializeTimeoutMs: 5_000,
  shutdownTimeoutMs: 1_000,
  restartBackoffMs: 100,
  restartBackoffMaxMs: 5_000,
});

/** The budgets a trusted policy sets, completed with {@link DEFAULT_BUDGETS}. */
export function budgetsOf(policy: Policy): Budgets {
  const b = policy.budgets ?? {};
  return {
    timeoutMs: {
      interactive: b.timeoutMs?.interactive ?? DEFAULT_BUDGETS.timeoutMs.interactive,
      gate: b.timeoutMs?.gate ?? DEFAULT_BUDGETS.timeoutMs.gate,
      sweep: b.timeoutMs?.sweep ?? DEFAULT_BUDGETS.timeoutMs.sweep,
    },
    callbacksPerRequest: b.callbacksPerRequest ?? DEFAULT_BUDGETS.callbacksPerRequest,
    callbacksPerSession: b.callbacksPerSession ?? DEFAULT_BUDGETS.callbacksPerSession,
    maxResponseBytes: b.maxResponseBytes ?? DEFAULT_BUDGETS.maxResponseBytes,
    quarantineAfterFailures: b.quarantineAfterFailures ?? DEFAULT_BUDGETS.quarantineAfterFailures,
    editRetries: b.editRetries ?? DEFAULT_BUDGETS.editRetries,
  };
}
