import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { type Assessment, type Diagnostic, type Policy, validate, validateAssessment } from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";
import { decide, freshnessMismatch, HOST_INFO, loadPolicy, type ProviderEvaluation } from "@asp/ths";
import { byFingerprint, fingerprint } from "../diagnostics.js";
import { compare, type Ratio } from "../measure.js";
import type { Suite } from "../suite.js";

// The host's work after the providers' answers arrive (issue 17), at 1 / 10 / 50 providers x
// 1k / 10k / 100k diagnostics in total, against what a raw client would do with the same
// answers: JSON.parse each one and sort all diagnostics.
//
// The subject is the host's own path, in the order Host.evaluate runs it: JSON.parse of each
// answer's text (vscode-jsonrpc does this on the wire), `validateAssessment` (schema and no
// host-owned fields, supervisor.ts), `freshnessMismatch` against the blobs the provider read,
// then `decide` (arbitration: ownership, dedup, precedence, severity caps; the envelope with its
// stamped, sorted findings), the receipt's binding `digest(envelope)` (the only costly part of
// buildReceipt, which @asp/ths does not export) and `validate("verdict", envelope)`. The durable
// append is left out: it is a store write, measured by the `evidence` and `ths` suites.
//
// One assessment holds at most 10,000 diagnostics (the contracts schema), so 1 provider x 100k is
// not a state the host can be in; that cell is skipped and said so.

const PROVIDER_COUNTS = [1, 10, 50] as const;
const TOTALS = [1_000, 10_000, 100_000] as const;
const MAX_PER_ASSESSMENT = 10_000;
const READS_PER_PROVIDER = 50;

const hex = (n: number, salt = 0): Digest => `sha256:${(n * 2 + salt).toString(16).padStart(64, "0")}` as Digest;
const BASELINE = hex(1000);
const CHANGESET = hex(1001);

interface World {
  readonly policy: ReturnType<typeof loadPolicy>;
  readonly required: Array<{ id: string; capability: "check"; sources: string[] }>;
  /** Each provider's answer as it arrives: JSON text. */
  readonly wire: readonly string[];
  readonly reads: ReadonlyArray<ReadonlySet<string>>;
  readonly pins: ReadonlyArray<{ id: string; version: string; digest: string }>;
}

/**
 * `providers` granted providers, each owning one source and one requirement, `total`
 * diagnostics split evenly: mostly info and warnings, a few errors, about 1% in-source
 * duplicates (dedup has work), code and paths varied. Every provider read READS_PER_PROVIDER
 * blobs and says so in validAsOf (freshness compares the sets).
 */
function world(providers: number, total: number): World {
  const per = Math.floor(total / providers);
  const doc: Policy = {
    apiVersion: "asp.policy/v1",
    requirements: Array.from({ length: providers }, (_, p) => ({
      id: `req${p}`,
      capability: "check" as const,
      sources: [`src${p}`],
      callSites: ["gate" as const],
    })),
    providers: Array.from({ length: providers }, (_, p) => ({
      id: `bench.p${p}`,
      version: "1.0.0",
      digest: hex(p, 1),
    })),
    grants: Array.from({ length: providers }, (_, p) => ({
      provider: `bench.p${p}`,
      version: "1.0.0",
      digest: hex(p, 1),
      requirement: `req${p}`,
      callSites: ["gate" as const],
    })),
  };
  const policy = loadPolicy(doc);
  const wire: string[] = [];
  const reads: Set<string>[] = [];
  for (let p = 0; p < providers; p++) {
    const diagnostics: Diagnostic[] = [];
    for (let i = 0; i < per; i++) {
      const n = i % 100 === 3 ? i - 1 : i;
      diagnostics.push({
        source: `src${p}`,
        code: `src${p}/E${n % 50}`,
        severity: n % 97 === 0 ? "error" : n % 3 === 0 ? "warning" : "info",
        message: `finding ${n} of provider ${p}: something in this line deserves a look`,
        range: {
          path: `src/m${n % 400}.ts`,
          start: { line: n % 1000, character: 2 },
          end: { line: n % 1000, character: 9 },
        },
        fingerprint: fingerprint(n, p),
      });
    }
    const read = Array.from({ length: READS_PER_PROVIDER }, (_, r) => hex(10_000 + p * READS_PER_PROVIDER + r));
    reads.push(new Set(read));
    const assessment: Assessment = {
      provider: { id: `bench.p${p}`, version: "1.0.0" },
      requestId: `req-${p}`,
      status: "complete",
      validAsOf: { baseline: BASELINE, changeset: CHANGESET, reads: read },
      diagnostics,
    };
    wire.push(JSON.stringify(assessment));
  }
  return {
    policy,
    required: doc.requirements.map((r) => ({ id: r.id, capability: "check" as const, sources: [...r.sources] })),
    wire,
    reads,
    pins: doc.providers.map((p) => ({ id: p.id, version: p.version, digest: p.digest })),
  };
}

let decisions = 0;

/** The host's path from the answers' text to a validated envelope and its receipt digest. */
function hostPath(w: World): { decision: string; findings: number; envelopeDigest: string } {
  const providers: ProviderEvaluation[] = w.wire.map((text, p) => {
    const valid = validateAssessment(JSON.parse(text));
    if (!valid.ok) throw new Error(`bench assessment is invalid: ${JSON.stringify(valid.errors[0])}`);
    const stale = freshnessMismatch(
      { baseline: BASELINE, changeset: CHANGESET, environment: null },
      w.reads[p] as ReadonlySet<string>,
      valid.value.validAsOf,
    );
    if (stale !== null) throw new Error(`bench assessment is stale: ${stale}`);
    const pin = w.pins[p] as { id: string; version: string; digest: string };
    return {
      provider: pin,
      capability: "check",
      state: "initialized",
      declaredSources: [`src${p}`],
      grants: [{ requirement: `req${p}`, callSite: "gate" }],
      authority: {
        providerId: pin.id,
        providerVersion: pin.version,
        providerDigest: pin.digest,
        identity: "verified",
        integrity: "verified",
        conformance: "unverified",
        isolation: "verified",
        authorityGrant: "verified",
        grants: [{ requirement: `req${p}`, callSite: "gate" }],
      },
      outcome: { kind: "ok", assessment: valid.value },
      directWrite: false,
      isolation: "isolated",
    };
  });
  const { envelope } = decide({
    callSite: "gate",
    policy: w.policy,
    baseline: BASELINE,
    changeset: CHANGESET,
    required: w.required,
    providers,
    assurance: { mode: "isolated", directWriteRisk: false },
    host: { name: HOST_INFO.name, version: HOST_INFO.version, digest: null },
    decisionId: `decision-${++decisions}`,
    decidedAt: new Date(0).toISOString(),
  });
  const envelopeDigest = digest(envelope);
  const checked = validate("verdict", envelope);
  if (!checked.ok) throw new Error(`the host built an invalid envelope: ${JSON.stringify(checked.errors[0])}`);
  return { decision: envelope.decision, findings: envelope.findings.length, envelopeDigest };
}

/** What a raw client does with the same answers: parse each, sort every diagnostic. */
function rawPath(w: World): number {
  const all: Diagnostic[] = [];
  for (const text of w.wire) all.push(...(JSON.parse(text) as Assessment).diagnostics);
  return all.sort(byFingerprint).length;
}

/** `global.gc`, made available without a node flag (the bench runs under plain `node`). */
function collector(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

/**
 * Heap in use (MB) right after `op` ran once, minus before it (collected first): what the run
 * allocated and had not yet been collected. A young-generation collection during the run makes
 * it a lower bound of the peak, not the peak itself (the ops are synchronous: nothing can sample
 * the heap while they run).
 */
function heapGrowthMb(gc: () => void, op: () => unknown): number {
  gc();
  const start = process.memoryUsage().heapUsed;
  op();
  const end = process.memoryUsage().heapUsed;
  return Math.round((Math.max(0, end - start) / 2 ** 20) * 10) / 10;
}

const suite: Suite = {
  name: "decide",
  description:
    "the host's decide + arbitrate path (parse, validateAssessment, freshness, decide, envelope digest and validation) at 1/10/50 providers x 1k/10k/100k diagnostics vs JSON.parse + sort of the same answers",
  async run(ctx) {
    const providerCounts = ctx.size === "smoke" ? [1, 2] : PROVIDER_COUNTS;
    const totals = ctx.size === "smoke" ? [100] : TOTALS;
    const gc = collector();
    const cells: Ratio[] = [];
    for (const total of totals) {
      for (const providers of providerCounts) {
        if (total / providers > MAX_PER_ASSESSMENT) {
          ctx.progress(
            `${providers} provider(s) x ${total.toLocaleString("en")}: skipped, one assessment holds at most ${MAX_PER_ASSESSMENT.toLocaleString("en")} diagnostics`,
          );
          continue;
        }
        const w = world(providers, total);
        const answer = hostPath(w);
        const rounds = ctx.size === "smoke" ? 1 : total >= 100_000 ? 5 : total >= 10_000 ? 9 : 15;
        const r = await compare({
          name: `decide path, ${providers} provider(s) x ${total.toLocaleString("en")} diagnostics`,
          baselineName: "JSON.parse + sort of the same answers",
          baseline: () => rawPath(w),
          subject: () => hostPath(w),
          rounds,
          warmup: ctx.size === "smoke" ? 0 : 2,
          iterations: ctx.size === "smoke" || total >= 10_000 ? 1 : 5,
        });
        const subjectHeapMb = heapGrowthMb(gc, () => hostPath(w));
        const baselineHeapMb = heapGrowthMb(gc, () => rawPath(w));
        const cell: Ratio = {
          ...r,
          ...(providers === 50 && total === 100_000 ? { headline: true } : {}),
          details: {
            providers,
            diagnostics: total,
            findings: answer.findings,
            decision: answer.decision,
            wireMb: Math.round((w.wire.reduce((n, t) => n + t.length, 0) / 2 ** 20) * 10) / 10,
            usPerDiagnostic: Math.round((r.subjectMedianMs / total) * 1000 * 100) / 100,
            subjectHeapMb,
            baselineHeapMb,
          },
        };
        cells.push(cell);
        ctx.report(cell);
      }
    }
    // Growth: time per diagnostic from one size to the next, per provider count (1.0 = linear).
    for (const providers of providerCounts) {
      const row = cells.filter((c) => c.details?.providers === providers);
      const steps = row.slice(1).map((c, i) => {
        const prev = row[i] as Ratio;
        const per = (x: Ratio) => x.subjectMedianMs / Number(x.details?.diagnostics);
        return `${Number(prev.details?.diagnostics).toLocaleString("en")}->${Number(c.details?.diagnostics).toLocaleString("en")}: ${(per(c) / per(prev)).toFixed(2)}`;
      });
      if (steps.length > 0)
        ctx.progress(`${providers} provider(s): time per diagnostic relative to the size before (${steps.join(", ")})`);
    }
  },
};

export default suite;
