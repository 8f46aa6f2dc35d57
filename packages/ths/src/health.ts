import {
  type Assessment,
  CAPABILITY_FAMILIES,
  type CapabilityFamily,
  type FailClass,
  type HostStatus,
  PROVIDER_RUN_OUTCOMES,
  type ProviderRunOutcome,
  type ProviderState,
} from "@asp/contracts";
import type { FactInput, FactLog } from "@asp/evidence";

/** One provider's entry in `host/status`. */
export type ProviderStatus = HostStatus["providers"][number];

/** The pinned identity health is kept under: a new version or digest starts with a clean record. */
export interface ProviderIdentity {
  readonly id: string;
  readonly version: string;
  readonly digest: string;
}

/** Fact kind of a persisted {@link ProviderHealthRecord} in the evidence fact log. */
export const HEALTH_FACT_KIND = "ths.health";
/** Fact kind of an operator's quarantine reset, appended with the provider's cleared health. */
export const QUARANTINE_RESET_FACT_KIND = "ths.quarantine-reset";

/** How many of the latest successful-run latencies are kept (in memory and in the store) for p50/p95. */
export const LATENCY_SAMPLES = 64;

/**
 * Failure classes that count toward quarantine (host §8): health and budget failures, and a
 * provider that tried and failed (`errored`). Capability gaps (`unsupported`), stale answers,
 * cancellations and the host's own refusals do not.
 */
export const QUARANTINE_FAILURES: ReadonlySet<FailClass> = new Set<FailClass>([
  "crashed",
  "timed_out",
  "malformed",
  "incomplete",
  "incompatible",
  "unavailable",
  "errored",
]);

/** The fact log state key under which the latest health of a provider identity is recorded. */
export function healthStateKey(provider: ProviderIdentity): string {
  return `${HEALTH_FACT_KIND}:${provider.id}@${provider.version}#${provider.digest}`;
}

/**
 * The outcome kind of a validated, fresh assessment (host §2): its status, except that a
 * `complete` answer listing anything in `coverage.missing` is `partial`. Only `complete` is a
 * successful run.
 */
export function outcomeOfAssessment(a: Assessment): ProviderRunOutcome {
  if (a.status !== "complete") return a.status;
  return (a.coverage?.missing?.length ?? 0) > 0 ? "partial" : "complete";
}

/**
 * The outcome kind of a typed failure: a JSON-RPC error is `error`, a capability gap
 * `unsupported`; everything else (including a request cut off by the callback budget) gave no
 * answer at all and is `failed`.
 */
export function outcomeOfFailure(failClass: FailClass): ProviderRunOutcome {
  if (failClass === "errored") return "error";
  if (failClass === "unsupported") return "unsupported";
  return "failed";
}

/** What the store keeps per provider identity (fact kind {@link HEALTH_FACT_KIND}). */
export interface ProviderHealthRecord {
  readonly $$type: "@asp/ProviderHealth";
  readonly version: 1;
  readonly provider: ProviderIdentity;
  readonly consecutiveFailures: number;
  readonly quarantined: boolean;
  readonly restarts: number;
  readonly timeouts: number;
  readonly outcomes: Readonly<Record<ProviderRunOutcome, number>>;
  /** The latest successful-run latencies, oldest first, at most {@link LATENCY_SAMPLES}. */
  readonly latencyMs: readonly number[];
}

const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * A stored health record for `provider`, or null when `value` is not one (another identity,
 * another record version, a wrong shape): the provider then starts with a clean record.
 */
export function parseHealthRecord(value: unknown, provider: ProviderIdentity): ProviderHealthRecord | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  const r = value as Record<string, unknown>;
  const p = r.provider as Record<string, unknown> | null | undefined;
  const outcomes = r.outcomes as Record<string, unknown> | null | undefined;
  const ok =
    r.$$type === "@asp/ProviderHealth" &&
    r.version === 1 &&
    typeof p === "object" &&
    p !== null &&
    p.id === provider.id &&
    p.version === provider.version &&
    p.digest === provider.digest &&
    isCount(r.consecutiveFailures) &&
    typeof r.quarantined === "boolean" &&
    isCount(r.restarts) &&
    isCount(r.timeouts) &&
    typeof outcomes === "object" &&
    outcomes !== null &&
    PROVIDER_RUN_OUTCOMES.every((o) => isCount(outcomes[o])) &&
    Array.isArray(r.latencyMs) &&
    r.latencyMs.length <= LATENCY_SAMPLES &&
    r.latencyMs.every((ms) => typeof ms === "number" && Number.isFinite(ms) && ms >= 0);
  return ok ? (value as ProviderHealthRecord) : null;
}

/**
 * The latest stored health of a provider identity, or null when none was recorded (or the
 * record is not one this host reads).
 * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN`, `ASP_EVIDENCE_STORE_CLOSED` from the fact log.
 */
export async function loadHealth(log: FactLog, provider: ProviderIdentity): Promise<ProviderHealthRecord | null> {
  const entry = await log.latest(healthStateKey(provider));
  // THREAT-MODEL invariant 13: only the host's own health record counts (a quarantine another
  // writer cleared under the key is not cleared).
  if (entry === undefined || entry === null || entry.kind !== HEALTH_FACT_KIND) return null;
  return parseHealthRecord(entry.record, provider);
}

const zeroOutcomes = (): Record<ProviderRunOutcome, number> =>
  Object.fromEntries(PROVIDER_RUN_OUTCOMES.map((o) => [o, 0])) as Record<ProviderRunOutcome, number>;

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * Health and metrics of one provider identity (host §2, §8): consecutive failures and
 * quarantine, restarts, timeouts, a count per run outcome kind, and the latencies of successful
 * runs. Only a `complete` run resets the failure count and adds a latency sample; `error` and
 * the {@link QUARANTINE_FAILURES} count toward quarantine; `unsupported`, `incomplete` and
 * `partial` answers count as their own kind and neither reset nor advance it. Persisted as a
 * {@link ProviderHealthRecord}, so one-shot hosts accumulate it.
 */
export class ProviderHealth {
  private failures = 0;
  private quarantinedValue = false;
  private restartsValue = 0;
  private timeoutsValue = 0;
  private outcomes = zeroOutcomes();
  private latencies: number[] = [];

  constructor(
    readonly provider: ProviderIdentity,
    private readonly quarantineAfterFailures: number,
  ) {}

  get consecutiveFailures(): number {
    return this.failures;
  }

  get quarantined(): boolean {
    return this.quarantinedValue;
  }

  /** Continue from a stored record of this identity. */
  restore(record: ProviderHealthRecord): void {
    this.failures = record.consecutiveFailures;
    this.quarantinedValue = record.quarantined;
    this.restartsValue = record.restarts;
    this.timeoutsValue = record.timeouts;
    this.outcomes = { ...zeroOutcomes(), ...record.outcomes };
    this.latencies = record.latencyMs.slice(-LATENCY_SAMPLES);
  }

  /** Count a validated, fresh assessment. Returns true when this answer put the provider in quarantine. */
  assessed(a: Assessment, ms: number): boolean {
    const outcome = outcomeOfAssessment(a);
    this.outcomes[outcome]++;
    if (outcome === "complete") {
      this.failures = 0;
      this.latencies.push(round3(ms));
      if (this.latencies.length > LATENCY_SAMPLES) this.latencies.shift();
      return false;
    }
    return outcome === "error" ? this.countFailure() : false;
  }

  /** Count a run that gave no valid fresh answer. Returns true when it put the provider in quarantine. */
  failed(failClass: FailClass): boolean {
    this.outcomes[outcomeOfFailure(failClass)]++;
    return QUARANTINE_FAILURES.has(failClass) ? this.countFailure() : false;
  }

  /**
   * Lift the quarantine (an operator's reset): the provider may launch again and its consecutive
   * failures start from zero; every other figure is kept. Returns the failures it had, or null
   * when it was not quarantined (nothing changes).
   */
  liftQuarantine(): number | null {
    if (!this.quarantinedValue) return null;
    const had = this.failures;
    this.quarantinedValue = false;
    this.failures = 0;
    return had;
  }

  /** A provider that initialized before was launched again. */
  restarted(): void {
    this.restartsValue++;
  }

  /** A request or launch ran out of its budget. */
  timedOut(): void {
    this.timeoutsValue++;
  }

  private countFailure(): boolean {
    this.failures++;
    if (this.quarantinedValue || this.failures < this.quarantineAfterFailures) return false;
    this.quarantinedValue = true;
    return true;
  }

  /** The record the store keeps for this identity. */
  toRecord(): ProviderHealthRecord {
    return {
      $$type: "@asp/ProviderHealth",
      version: 1,
      provider: { id: this.provider.id, version: this.provider.version, digest: this.provider.digest },
      consecutiveFailures: this.failures,
      quarantined: this.quarantinedValue,
      restarts: this.restartsValue,
      timeouts: this.timeoutsValue,
      outcomes: { ...this.outcomes },
      latencyMs: [...this.latencies],
    };
  }

  /** The fact that makes this record the latest for its identity (append it with the decision). */
  toFact(): FactInput {
    return {
      kind: HEALTH_FACT_KIND,
      record: this.toRecord(),
      index: [{ name: "provider", value: this.provider.id }],
      state: [healthStateKey(this.provider)],
    };
  }

  /** The health, latency, timeout, coverage and outcome figures of `host/status`. */
  figures(): Pick<ProviderStatus, "health" | "latency" | "timeouts" | "coverage" | "outcomes"> {
    return figuresOf(this.toRecord());
  }
}

/** `host/status` figures of a health record: `ran` counts only complete runs, `degraded` every other kind. */
function figuresOf(
  r: ProviderHealthRecord,
): Pick<ProviderStatus, "health" | "latency" | "timeouts" | "coverage" | "outcomes"> {
  const sorted = [...r.latencyMs].sort((a, b) => a - b);
  const pick = (q: number): number | null =>
    sorted.length === 0 ? null : round3(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0);
  const runs = PROVIDER_RUN_OUTCOMES.reduce((n, o) => n + r.outcomes[o], 0);
  return {
    health: { restarts: r.restarts, consecutiveFailures: r.consecutiveFailures, quarantined: r.quarantined },
    latency: { samples: sorted.length, p50Ms: pick(0.5), p95Ms: pick(0.95) },
    timeouts: r.timeouts,
    coverage: { ran: r.outcomes.complete, degraded: runs - r.outcomes.complete },
    outcomes: { ...r.outcomes },
  };
}

/** A provider as {@link readHealthStatus} needs it: pinned identity and declared capability families. */
export interface HealthSubject extends ProviderIdentity {
  readonly capabilities: readonly CapabilityFamily[];
}

/** What {@link readHealthStatus} reports on. */
export interface ReadHealthStatusParams {
  readonly log: FactLog;
  readonly providers: readonly HealthSubject[];
  readonly hostVersion: string;
  readonly policyDigest: string | null;
  readonly now: Date;
}

/**
 * `host/status` from the store alone, launching nothing (`asp status`): every provider is
 * `exited` (or `quarantined`) with the health, latency, timeout, coverage and outcome figures
 * its identity has accumulated across hosts.
 * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN`, `ASP_EVIDENCE_STORE_CLOSED` from the fact log.
 */
export async function readHealthStatus(params: ReadHealthStatusParams): Promise<HostStatus> {
  const providers: ProviderStatus[] = [];
  for (const p of params.providers) {
    const identity = { id: p.id, version: p.version, digest: p.digest };
    // Reading only: nothing is counted here, so no quarantine threshold applies.
    const health = new ProviderHealth(identity, Number.POSITIVE_INFINITY);
    const record = await loadHealth(params.log, identity);
    if (record !== null) health.restore(record);
    const state: ProviderState = health.quarantined ? "quarantined" : "exited";
    const families: Partial<Record<CapabilityFamily, ProviderState>> = {};
    for (const f of CAPABILITY_FAMILIES) if (p.capabilities.includes(f)) families[f] = state;
    providers.push({ id: p.id, version: p.version, state, families, ...health.figures() });
  }
  const capabilities = Object.fromEntries(
    CAPABILITY_FAMILIES.map((f) => [
      f,
      providers.filter((s) => s.families[f] !== undefined && s.state !== "quarantined").map((s) => s.id),
    ]),
  ) as HostStatus["capabilities"];
  return {
    $$type: "@asp/HostStatus",
    version: 1,
    hostVersion: params.hostVersion,
    policyDigest: params.policyDigest,
    providers,
    capabilities,
    generatedAt: params.now.toISOString(),
  };
}
