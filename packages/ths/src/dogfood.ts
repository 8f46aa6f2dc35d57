import {
  APPLY_OUTCOMES,
  type ApplyOutcome,
  type ApplyReceipt,
  ASSURANCE_MODES,
  type AssuranceMode,
  type AuditReceipt,
  CAPABILITY_FAMILIES,
  type CallSite,
  type CapabilityFamily,
  type DecisionEnvelope,
  type DogfoodReport,
  TRANSACTION_GUARANTEES,
  type TransactionGuarantee,
  validate,
} from "@asp/contracts";
import { digest, type FactEntry, type FactLog } from "@asp/evidence";
import { APPLY_FACT_KINDS } from "./apply/applier.js";
import { ThsError } from "./errors.js";
import { HEALTH_FACT_KIND, type ProviderHealthRecord } from "./health.js";
import { FACT_KINDS } from "./receipts.js";

/** A label of the labelled set: the finding (or the receipt's blocking answer) is a true or a false positive. */
export type DogfoodLabel = "tp" | "fp";

/**
 * The labelled set (`--labels FILE`). A key is either a receipt id (the receipt's decision as a
 * whole: `fp` = it should not have blocked, `tp` = it should have) or `<path>#<code>` (one
 * diagnostic code on one repository path: `fp` = it should not be reported, `tp` = it must be).
 * A code ending in `*` matches every code it prefixes: `src/a.txt#secrets/*` labels any finding of
 * the secrets provider on that path, `src/a.txt#*` any finding at all (a near miss is `fp` for
 * every code; a planted secret is `tp` when some rule of the family finds it).
 */
export type DogfoodLabels = Readonly<Record<string, DogfoodLabel>>;

/**
 * The outside inputs of the host §9 sections the receipts alone cannot fill. Each is checked
 * against its shape (`ASP_THS_BAD_BASELINE`) and named in the report by its canonical digest.
 */
export interface DogfoodBaselines {
  /**
   * Parity (`--parity-baseline FILE`, repeatable): a reference or predecessor tool's results over
   * the same runs and labelled set, each a `dogfood-report` document. The report gives, per
   * served family, the difference of each figure both sides carry (ours minus theirs).
   */
  readonly parity?: readonly unknown[];
  /**
   * Old-tool compatibility (`--compat-baseline FILE`): `{ surfaces: [{ surface, status }] }`, the
   * status of each protected surface as the operator declares it (reported as `declared`).
   */
  readonly compatibility?: unknown;
  /**
   * Release evidence (`--release-baseline FILE`): `[{ kind, digest, uri? }]`, the digest of each
   * readiness artifact as the caller measured it (the CLI hashes each file).
   */
  readonly releaseEvidence?: unknown;
}

/** Options of {@link dogfoodReport}. */
export interface DogfoodReportOptions {
  /** Only receipts appended at or after this time. */
  readonly since?: Date;
  /** The labelled set false positives and negatives are counted against. */
  readonly labels?: DogfoodLabels;
  /** The host toolkit that builds the report (default `asp-host` 0.0.0). Never a reference engine. */
  readonly engine?: { readonly name: string; readonly version: string };
  /**
   * The reference engine or server these receipts dogfood (host §9). A report that names one
   * must carry parity, compatibility and release evidence: every {@link DogfoodBaselines} entry is
   * then required (`ASP_THS_DOGFOOD_BASELINE_MISSING` otherwise).
   */
  readonly referenceEngine?: { readonly name: string; readonly version: string };
  /** The inputs of the parity, compatibility and release-evidence sections. */
  readonly baselines?: DogfoodBaselines;
  /** The report's `generatedAt` (default now). */
  readonly now?: Date;
}

type Section = DogfoodReport["sections"]["parity"];
type SectionName = keyof DogfoodReport["sections"];

/** What each section needs when it is not measured: the input, and the flag that gives it. */
const SECTION_NEEDS: Readonly<Record<SectionName, string>> = {
  parity:
    "a reference or predecessor tool's results over the same runs, as a dogfood-report document: --parity-baseline FILE (repeatable)",
  compatibility:
    'the old-tool compatibility status of each protected surface: --compat-baseline FILE ({ "surfaces": [{ "surface", "status" }] })',
  releaseEvidence:
    'the release artifacts used as readiness input: --release-baseline FILE ({ "artifacts": [{ "kind", "path", "uri"? }] }, each file hashed)',
};

/** The CLI flag of each section's input. */
const SECTION_FLAG: Readonly<Record<SectionName, string>> = {
  parity: "--parity-baseline",
  compatibility: "--compat-baseline",
  releaseEvidence: "--release-baseline",
};

/**
 * The families this host routes requests for (host §9: inspect, check and edit stay separately
 * visible). The host serves `check/assess` and `edit/propose`; it routes no inspect request.
 */
const SERVED: ReadonlySet<CapabilityFamily> = new Set<CapabilityFamily>(["check", "edit"]);
const NOT_SERVED_NOTE = "this host routes no inspect request (no inspect method is served): nothing to measure";
const EDIT_LATENCY_NOTE =
  "proposal and apply records carry no duration: edit latency is not recorded by this host (see the check family for the validation's)";

type FamilyRow = DogfoodReport["capabilities"][number];
type Sample = FamilyRow["falsePositives"][number];

const MAX_DETAIL = 4000;
const clip = (s: string): string => (s.length > MAX_DETAIL ? `${s.slice(0, MAX_DETAIL - 1)}…` : s);

/**
 * Check a parsed labels file: an object of `"tp"` / `"fp"` values.
 * @throws ThsError `ASP_THS_BAD_LABELS` when it is not one.
 */
export function parseDogfoodLabels(value: unknown): DogfoodLabels {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ThsError("ASP_THS_BAD_LABELS", 'the labelled set must be a JSON object of id -> "tp" | "fp"');
  }
  for (const [key, label] of Object.entries(value)) {
    if (key.length === 0 || (label !== "tp" && label !== "fp")) {
      throw new ThsError("ASP_THS_BAD_LABELS", `label ${JSON.stringify(key)} must be "tp" or "fp"`, {
        data: { key },
      });
    }
  }
  return value as DogfoodLabels;
}

/**
 * The records of `entries` as the schema `name`, or a typed refusal: a report never guesses over
 * (or silently drops) a stored receipt it cannot read.
 */
function readAll<T>(entries: readonly FactEntry[], name: "audit-receipt" | "apply-receipt"): T[] {
  return entries.map((e) => {
    const r = validate(name, e.record);
    if (!r.ok) {
      throw new ThsError("ASP_THS_BAD_RECEIPT", `the ${name} at seq ${e.seq} does not validate (asp receipts verify)`, {
        data: { seq: e.seq, errors: r.errors.slice(0, 5) },
      });
    }
    return r.value as T;
  });
}

const badBaseline = (what: string, detail: string, data: Record<string, unknown> = {}): ThsError =>
  new ThsError("ASP_THS_BAD_BASELINE", `the ${what} baseline ${detail} (docs/dogfood.md)`, { data: { what, ...data } });

/** The parity baselines as dogfood reports, or a typed refusal. */
function parityBaselines(values: readonly unknown[]): DogfoodReport[] {
  return values.map((v, i) => {
    const r = validate("dogfood-report", v);
    if (!r.ok)
      throw badBaseline("parity", `#${i + 1} is not a dogfood-report document`, { errors: r.errors.slice(0, 5) });
    return r.value;
  });
}

const COMPAT_STATUSES = new Set(["native_provider", "asp_provider_compat", "retained_gate", "descoped", "roadmap"]);

/** `{ surfaces: [{ surface, status }] }`, each surface once. */
function compatibilitySurfaces(value: unknown): DogfoodReport["compatibility"] {
  const surfaces = (value as { surfaces?: unknown } | null)?.surfaces;
  const keys = typeof value === "object" && value !== null ? Object.keys(value) : [];
  if (!Array.isArray(surfaces) || keys.length !== 1) {
    throw badBaseline("compatibility", 'must be { "surfaces": [{ "surface", "status" }] }');
  }
  const seen = new Set<string>();
  return surfaces.map((s: unknown, i) => {
    const e = s as { surface?: unknown; status?: unknown } | null;
    const ok =
      typeof e === "object" &&
      e !== null &&
      Object.keys(e).every((k) => k === "surface" || k === "status") &&
      typeof e.surface === "string" &&
      e.surface.length > 0 &&
      e.surface.length <= 256 &&
      !seen.has(e.surface) &&
      typeof e.status === "string" &&
      COMPAT_STATUSES.has(e.status);
    if (!ok) {
      throw badBaseline(
        "compatibility",
        `surface #${i + 1} is not a distinct { surface, status } of ${[...COMPAT_STATUSES].join(", ")}`,
      );
    }
    seen.add(e.surface as string);
    return { surface: e.surface, status: e.status } as DogfoodReport["compatibility"][number];
  });
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** `[{ kind, digest, uri? }]`. */
function releaseEntries(value: unknown): DogfoodReport["releaseEvidence"] {
  if (!Array.isArray(value)) throw badBaseline("release evidence", "must be a list of { kind, digest, uri? }");
  return value.map((v: unknown, i) => {
    const e = v as { kind?: unknown; digest?: unknown; uri?: unknown } | null;
    const ok =
      typeof e === "object" &&
      e !== null &&
      Object.keys(e).every((k) => k === "kind" || k === "digest" || k === "uri") &&
      typeof e.kind === "string" &&
      e.kind.length > 0 &&
      e.kind.length <= 256 &&
      typeof e.digest === "string" &&
      DIGEST.test(e.digest) &&
      (e.uri === undefined || (typeof e.uri === "string" && URL.canParse(e.uri)));
    if (!ok) throw badBaseline("release evidence", `entry #${i + 1} is not { kind, digest: sha256:<hex>, uri? }`);
    return {
      kind: e.kind,
      digest: e.digest,
      ...(e.uri === undefined ? {} : { uri: e.uri }),
    } as DogfoodReport["releaseEvidence"][number];
  });
}

/** The figures of one family row that parity compares, by metric id. */
function figures(row: FamilyRow): Map<string, number> {
  const out = new Map<string, number>([
    ["false_positives", row.falsePositives.length],
    ["false_negatives", row.falseNegatives.length],
    ["stale_rejections", row.staleRejections],
    ["typed_failures", Object.values(row.typedFailures).reduce((a, b) => a + b, 0)],
    ["degraded", row.degraded.length],
    ["edit_conflicts", row.editConflicts.length],
  ]);
  for (const l of row.latency) {
    out.set(`latency.${l.callSite}.p50_ms`, l.p50Ms);
    out.set(`latency.${l.callSite}.p95_ms`, l.p95Ms);
    out.set(`latency.${l.callSite}.timeouts`, l.timeouts);
  }
  return out;
}

/** Ours minus theirs, for every figure both carry, per served family (host §9 parity deltas). */
function parityDeltas(ours: FamilyRow, baselines: readonly DogfoodReport[]): FamilyRow["parityDeltas"] {
  if (!SERVED.has(ours.family)) return [];
  const mine = figures(ours);
  return baselines.flatMap((b) => {
    const who = b.referenceEngine ?? b.engine;
    const theirs = b.capabilities.find((c) => c.family === ours.family);
    if (theirs === undefined) return [];
    const other = figures(theirs);
    return [...mine.entries()].flatMap(([metric, value]) => {
      const t = other.get(metric);
      if (t === undefined) return [];
      // Rounded to a microsecond of latency: float noise is no parity difference.
      return [{ baseline: `${who.name}@${who.version}`, metric, delta: Math.round((value - t) * 1000) / 1000 }];
    });
  });
}

/** The three outside-input sections, and their contents, from the given baselines. */
function sectionsOf(baselines: DogfoodBaselines): {
  sections: DogfoodReport["sections"];
  parity: DogfoodReport[];
  compatibility: DogfoodReport["compatibility"];
  releaseEvidence: DogfoodReport["releaseEvidence"];
} {
  const notMeasured = (name: SectionName): Section => ({ status: "not_measured", needs: SECTION_NEEDS[name] });
  const parity = baselines.parity === undefined ? [] : parityBaselines(baselines.parity);
  const compatibility = baselines.compatibility === undefined ? [] : compatibilitySurfaces(baselines.compatibility);
  const releaseEvidence = baselines.releaseEvidence === undefined ? [] : releaseEntries(baselines.releaseEvidence);
  return {
    sections: {
      parity:
        parity.length === 0
          ? notMeasured("parity")
          : {
              status: "measured",
              baselines: parity.map((b) => {
                const who = b.referenceEngine ?? b.engine;
                return { name: who.name, version: who.version, digest: digest(b) };
              }),
            },
      compatibility:
        baselines.compatibility === undefined
          ? notMeasured("compatibility")
          : { status: "declared", baselines: [{ digest: digest(baselines.compatibility) }] },
      releaseEvidence:
        baselines.releaseEvidence === undefined
          ? notMeasured("releaseEvidence")
          : { status: "measured", baselines: [{ digest: digest(baselines.releaseEvidence) }] },
    },
    parity,
    compatibility,
    releaseEvidence,
  };
}

/** Nearest-rank percentile of sorted samples (0 when there are none). */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}

/** Per-family accumulator. */
interface Acc {
  readonly latency: Map<CallSite, { samples: number[]; timeouts: number }>;
  staleRejections: number;
  readonly typedFailures: Record<string, number>;
  readonly degraded: FamilyRow["degraded"];
  readonly editConflicts: FamilyRow["editConflicts"];
  readonly applyOutcomes: Partial<Record<ApplyOutcome, number>>;
  readonly falsePositives: Sample[];
  readonly falseNegatives: Sample[];
}

const newAcc = (): Acc => ({
  latency: new Map(),
  staleRejections: 0,
  typedFailures: {},
  degraded: [],
  editConflicts: [],
  applyOutcomes: {},
  falsePositives: [],
  falseNegatives: [],
});

const callSiteRow = (acc: Acc, callSite: CallSite): { samples: number[]; timeouts: number } => {
  let row = acc.latency.get(callSite);
  if (row === undefined) {
    row = { samples: [], timeouts: 0 };
    acc.latency.set(callSite, row);
  }
  return row;
};

/** Freshness failures (host §5): a stale answer, or a worktree that moved under the run. */
const FRESHNESS = new Set(["stale", "worktree_changed"]);

/**
 * Where a family's latency comes from (host §9 "latency by call-site and capability"): check from
 * the health samples of its receipts, edit not recorded (its records carry no duration), inspect
 * not served. A family with nothing in the window has `no_runs`.
 */
function latencyStatusOf(
  family: CapabilityFamily,
  acc: Acc,
  editRuns: number,
): Pick<FamilyRow, "routing" | "latencyStatus" | "latencyNote"> {
  if (!SERVED.has(family)) return { routing: "not_served", latencyStatus: "not_served", latencyNote: NOT_SERVED_NOTE };
  if (family === "edit") {
    return editRuns === 0
      ? { routing: "served", latencyStatus: "no_runs" }
      : { routing: "served", latencyStatus: "not_recorded", latencyNote: EDIT_LATENCY_NOTE };
  }
  return { routing: "served", latencyStatus: acc.latency.size === 0 ? "no_runs" : "measured" };
}

const weaker = <T extends string>(order: readonly T[], a: T | null, b: T): T =>
  a === null || order.indexOf(b) < order.indexOf(a) ? b : a;

/**
 * The dogfood report (host §9) over the receipts in a fact log: per capability family (inspect,
 * check, edit) separately, never one pass/fail label.
 *
 * - **check**: the audit receipts of decisions. Latency per call-site comes from the provider
 *   health facts appended in the same batch as each receipt (a provider whose `complete` count
 *   rose in that batch contributed its newest latency sample); timeouts, typed failures (by fail
 *   class), stale rejections (`stale`, `worktree_changed`) and degraded entries come from the
 *   receipt's `coverage.degraded`, each under the entry's own capability (default `check`).
 * - **edit**: the apply receipts. A rejection (`ASP_APPLY_*`) is an edit conflict or refused
 *   edit; the receipt's transaction guarantee is its rollback/staging outcome (`none` = `no_write`).
 * - **assurance**: the weakest assurance mode and transaction guarantee any receipt reported
 *   (`advisory` / `none` when there is none: nothing was proven).
 * - **false positives / negatives** against `labels` (see {@link DogfoodLabels}), with samples
 *   that name the receipt.
 *
 * - **latency per family**: each row says its `routing` (`served`, or `not_served` for inspect: the
 *   host routes no inspect request) and `latencyStatus` (`measured`, `no_runs`, `not_recorded` for
 *   edit, whose records carry no duration, `not_served`), with a note when it is not measured.
 * - **parity, compatibility, release evidence** (`sections`): built only from
 *   {@link DogfoodBaselines}; without one, the section is `not_measured` and says what it needs.
 *   Naming a `referenceEngine` requires all three.
 *
 * Apply receipts carry no latency and decisions record no per-provider latency of a failed run,
 * so a latency row with no complete run reads `p50Ms` = `p95Ms` = 0 with its timeouts.
 * @throws ThsError `ASP_THS_DOGFOOD_BASELINE_MISSING` when `referenceEngine` is given without every
 * baseline; `ASP_THS_BAD_BASELINE` when a baseline is not of its shape; `ASP_THS_BAD_RECEIPT` when
 * a stored audit or apply receipt does not validate (never skipped); `ASP_THS_INTERNAL` when the
 * report does not validate against the `dogfood-report` schema; EvidenceError from the fact log.
 */
export async function dogfoodReport(log: FactLog, options: DogfoodReportOptions = {}): Promise<DogfoodReport> {
  const outside = sectionsOf(options.baselines ?? {});
  if (options.referenceEngine !== undefined) {
    const missing = (Object.keys(outside.sections) as SectionName[]).filter(
      (n) => outside.sections[n].status === "not_measured",
    );
    if (missing.length > 0) {
      throw new ThsError(
        "ASP_THS_DOGFOOD_BASELINE_MISSING",
        `a report for reference engine ${options.referenceEngine.name}@${options.referenceEngine.version} must carry ${missing.join(", ")} (host §9); give ${missing.map((n) => SECTION_FLAG[n]).join(", ")}, or report the host's own runs without naming a reference engine`,
        { data: { missing, needs: Object.fromEntries(missing.map((n) => [n, SECTION_NEEDS[n]])) } },
      );
    }
  }
  const since = options.since?.getTime();
  const inWindow = (e: FactEntry): boolean => since === undefined || Date.parse(e.at) >= since;
  const acc = Object.fromEntries(CAPABILITY_FAMILIES.map((f) => [f, newAcc()])) as Record<CapabilityFamily, Acc>;
  let mode: AssuranceMode | null = null;
  let guarantee: TransactionGuarantee | null = null;

  const [receiptFacts, decisions, health, applyFacts] = await Promise.all([
    log.list({ kind: FACT_KINDS.receipt }),
    log.list({ kind: FACT_KINDS.decision }),
    log.list({ kind: HEALTH_FACT_KIND }),
    log.list({ kind: APPLY_FACT_KINDS.receipt }),
  ]);
  const receiptRecords = readAll<AuditReceipt>(receiptFacts, "audit-receipt");
  const receipts = receiptFacts.map((e, i) => ({ ...e, receipt: receiptRecords[i] as AuditReceipt }));
  const applyRecords = readAll<ApplyReceipt>(applyFacts, "apply-receipt");
  const applies = applyFacts.map((e, i) => ({ ...e, apply: applyRecords[i] as ApplyReceipt }));
  const envelopes = new Map<string, DecisionEnvelope>();
  for (const d of decisions) {
    const env = d.record as unknown as DecisionEnvelope;
    envelopes.set(env.decisionId, env);
  }

  // Latency: walk receipts and health facts in log order; health facts right after a receipt are its batch.
  const merged: Array<FactEntry & { receipt?: AuditReceipt }> = [...receipts, ...health].sort((a, b) => a.seq - b.seq);
  const completes = new Map<string, number>();
  let batch: { receipt: AuditReceipt; lastSeq: number; counted: boolean } | null = null;
  for (const e of merged) {
    if (e.receipt !== undefined) {
      batch = { receipt: e.receipt, lastSeq: e.seq, counted: inWindow(e) };
      continue;
    }
    const h = e.record as unknown as ProviderHealthRecord;
    const key = `${h.provider?.id}@${h.provider?.version}#${h.provider?.digest}`;
    const before = completes.get(key) ?? 0;
    const now = h.outcomes?.complete ?? 0;
    completes.set(key, now);
    const inBatch = batch !== null && e.seq === batch.lastSeq + 1;
    if (batch !== null) batch.lastSeq = inBatch ? e.seq : batch.lastSeq;
    if (!inBatch || batch === null || !batch.counted || now <= before) continue;
    const ms = h.latencyMs?.[h.latencyMs.length - 1];
    if (typeof ms === "number") callSiteRow(acc.check, batch.receipt.callSite).samples.push(ms);
  }

  const labels = options.labels ?? {};
  const seenFindings = new Set<string>();
  // Wildcard labels (`<path>#<prefix>*`), by path: matched against every finding on that path.
  const wildcards = new Map<string, { key: string; prefix: string; label: DogfoodLabel }[]>();
  for (const [key, label] of Object.entries(labels)) {
    const hash = key.lastIndexOf("#");
    if (hash <= 0 || !key.endsWith("*")) continue;
    const path = key.slice(0, hash);
    const list = wildcards.get(path) ?? [];
    list.push({ key, prefix: key.slice(hash + 1, -1), label });
    wildcards.set(path, list);
  }
  let lastReceiptId: string | null = null;
  for (const e of receipts) {
    if (!inWindow(e)) continue;
    const r = e.receipt;
    lastReceiptId = r.receiptId;
    callSiteRow(acc.check, r.callSite);
    mode = weaker(ASSURANCE_MODES, mode, r.assurance.mode);
    if (r.assurance.transactionGuarantee !== undefined) {
      guarantee = weaker(TRANSACTION_GUARANTEES, guarantee, r.assurance.transactionGuarantee);
    }
    for (const d of r.coverage.degraded) {
      const family = acc[d.capability ?? "check"];
      const failClass = d.failClass ?? d.reason.replaceAll("-", "_");
      family.degraded.push(d);
      family.typedFailures[failClass] = (family.typedFailures[failClass] ?? 0) + 1;
      if (FRESHNESS.has(failClass)) family.staleRejections += 1;
      if (failClass === "timed_out") callSiteRow(family, r.callSite).timeouts += 1;
    }
    const receiptLabel = labels[r.receiptId];
    if (receiptLabel === "fp" && r.decision === "deny") {
      acc.check.falsePositives.push({ ref: r.receiptId, detail: `labelled fp, decided deny at ${r.callSite}` });
    } else if (receiptLabel === "tp" && r.decision === "allow") {
      acc.check.falseNegatives.push({ ref: r.receiptId, detail: `labelled tp, decided allow at ${r.callSite}` });
    }
    for (const f of envelopes.get(r.decisionId)?.findings ?? []) {
      const path = f.diagnostic.range?.path;
      if (path === undefined) continue;
      const key = `${path}#${f.diagnostic.code}`;
      seenFindings.add(key);
      const matched = (wildcards.get(path) ?? []).filter((w) => f.diagnostic.code.startsWith(w.prefix));
      for (const w of matched) seenFindings.add(w.key);
      if (labels[key] === "fp" || (labels[key] === undefined && matched.some((w) => w.label === "fp"))) {
        acc.check.falsePositives.push({ ref: r.receiptId, detail: clip(`${key} (${f.provider.id}): labelled fp`) });
      }
    }
  }
  for (const [key, label] of Object.entries(labels)) {
    if (label !== "tp" || !key.includes("#") || seenFindings.has(key) || lastReceiptId === null) continue;
    acc.check.falseNegatives.push({
      ref: lastReceiptId,
      detail: clip(`${key}: labelled tp, reported by no receipt in the window (newest named)`),
    });
  }

  let editRuns = 0;
  for (const e of applies) {
    if (!inWindow(e)) continue;
    editRuns += 1;
    const a = e.apply;
    if (a.rejection !== undefined)
      acc.edit.editConflicts.push({ kind: a.rejection.code, detail: clip(a.rejection.detail) });
    const outcome: ApplyOutcome = a.transactionGuarantee === "none" ? "no_write" : a.transactionGuarantee;
    acc.edit.applyOutcomes[outcome] = (acc.edit.applyOutcomes[outcome] ?? 0) + 1;
    mode = weaker(ASSURANCE_MODES, mode, a.assuranceMode);
    guarantee = weaker(TRANSACTION_GUARANTEES, guarantee, a.transactionGuarantee);
  }

  const report: DogfoodReport = {
    $$type: "@asp/DogfoodReport",
    version: 2,
    engine: { name: options.engine?.name ?? "asp-host", version: options.engine?.version ?? "0.0.0" },
    ...(options.referenceEngine === undefined
      ? {}
      : { referenceEngine: { name: options.referenceEngine.name, version: options.referenceEngine.version } }),
    generatedAt: (options.now ?? new Date()).toISOString(),
    sections: outside.sections,
    capabilities: CAPABILITY_FAMILIES.map((family): FamilyRow => {
      const a = acc[family];
      const row: FamilyRow = {
        family,
        ...latencyStatusOf(family, a, family === "edit" ? editRuns : 0),
        parityDeltas: [],
        falsePositives: a.falsePositives,
        falseNegatives: a.falseNegatives,
        latency: [...a.latency.entries()]
          .sort(([x], [y]) => x.localeCompare(y))
          .map(([callSite, row]) => {
            const sorted = [...row.samples].sort((x, y) => x - y);
            return {
              callSite,
              p50Ms: percentile(sorted, 0.5),
              p95Ms: percentile(sorted, 0.95),
              timeouts: row.timeouts,
            };
          }),
        staleRejections: a.staleRejections,
        typedFailures: a.typedFailures,
        degraded: a.degraded,
        editConflicts: a.editConflicts,
        applyOutcomes: Object.fromEntries(
          APPLY_OUTCOMES.flatMap((o) => (a.applyOutcomes[o] ? [[o, a.applyOutcomes[o]]] : [])),
        ),
      };
      return { ...row, parityDeltas: parityDeltas(row, outside.parity) };
    }),
    assurance: { mode: mode ?? "advisory", transactionGuarantee: guarantee ?? "none" },
    compatibility: outside.compatibility,
    releaseEvidence: outside.releaseEvidence,
  };
  const ok = validate("dogfood-report", report);
  if (!ok.ok) {
    throw new ThsError("ASP_THS_INTERNAL", "the host built an invalid dogfood report", { data: { errors: ok.errors } });
  }
  return ok.value;
}
