import { type ArbitrateParams, arbitrate, type ProviderRun } from "@asp/arbitration";
import { type Diagnostic, type Policy, validate } from "@asp/contracts";
import { digest } from "@asp/evidence";
import { byFingerprint, fingerprint } from "../diagnostics.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

const PROVIDERS = 20;
const PER_PROVIDER = 5_000;
const hex = (n: number): string => `sha256:${n.toString(16).padStart(64, "0")}`;

/**
 * 20 providers, each owning one source; ten requirements of two sources each; the first 15
 * providers hold grants, the last 5 are unauthorized (their findings go advisory). About 1% of
 * diagnostics are in-source duplicates and 0.5% are outside any declared source, so dedup and
 * ownership drops are exercised, not just routing.
 */
function world(): { params: ArbitrateParams; diagnostics: Diagnostic[] } {
  const source = (p: number): string => `src${p}`;
  const doc: Policy = {
    apiVersion: "asp.policy/v1",
    requirements: Array.from({ length: PROVIDERS / 2 }, (_, r) => ({
      id: `req${r}`,
      capability: "check" as const,
      sources: [source(2 * r), source(2 * r + 1)],
      callSites: ["gate" as const],
    })),
    providers: Array.from({ length: PROVIDERS }, (_, p) => ({
      id: `bench.p${p}`,
      version: "1.0.0",
      digest: hex(p + 1),
    })),
    grants: Array.from({ length: 15 }, (_, p) => ({
      provider: `bench.p${p}`,
      version: "1.0.0",
      digest: hex(p + 1),
      requirement: `req${Math.floor(p / 2)}`,
      callSites: ["gate" as const],
    })),
    severityCaps: [{ authority: "ungranted", maxSeverity: "warning" }],
  };
  const checked = validate("policy", doc);
  if (!checked.ok) throw new Error(`bench policy is invalid: ${JSON.stringify(checked.errors)}`);
  // @asp/bench does not depend on @asp/policy, so the fixture policy is activated by hand: the
  // same frozen, branded shape parsePolicy returns for this (schema-valid, grant-consistent) document.
  const policy = Object.freeze({
    $$type: "@asp/ActivePolicy" as const,
    version: 1 as const,
    document: doc,
    digest: digest(doc),
    origin: { kind: "inline" as const },
  }) as unknown as ArbitrateParams["policy"];
  const diagnostics: Diagnostic[] = [];
  const runs: ProviderRun[] = [];
  for (let p = 0; p < PROVIDERS; p++) {
    const own: Diagnostic[] = [];
    for (let i = 0; i < PER_PROVIDER; i++) {
      const foreign = i % 200 === 7;
      const dup = i % 100 === 3 && i > 0;
      const n = dup ? i - 1 : i;
      const src = foreign ? "stray" : source(p);
      own.push({
        source: src,
        code: `${src}/E${n % 50}`,
        severity: n % 7 === 0 ? "error" : n % 3 === 0 ? "warning" : "info",
        message: `finding ${n} of provider ${p}`,
        range: {
          path: `src/m${n % 400}.ts`,
          start: { line: n % 1000, character: 2 },
          end: { line: n % 1000, character: 9 },
        },
        // content fingerprints: deliberately not in generation order, so sorting has work to do
        fingerprint: fingerprint(n, p),
      });
    }
    diagnostics.push(...own);
    runs.push({
      provider: { id: `bench.p${p}`, version: "1.0.0", digest: hex(p + 1) },
      declaredSources: [source(p)],
      isolation: "gated",
      result: {
        status: "assessed",
        assessment: {
          provider: { id: `bench.p${p}`, version: "1.0.0" },
          requestId: `req-${p}`,
          status: "complete",
          validAsOf: { baseline: hex(1000), changeset: hex(1001), reads: [] },
          diagnostics: own,
        },
      },
    });
  }
  return { params: { policy, callSite: "gate", runs }, diagnostics };
}

const suite: Suite = {
  name: "arbitration",
  description: `arbitrate ${PROVIDERS} providers x ${PER_PROVIDER.toLocaleString("en")} diagnostics against Array.prototype.sort of the same diagnostics by fingerprint`,
  async run(ctx) {
    const { params, diagnostics } = world();
    const result = arbitrate(params);
    const gating = result.requirements.reduce((n, r) => n + r.diagnostics.length, 0);
    ctx.progress(
      `${diagnostics.length.toLocaleString("en")} diagnostics: ${gating.toLocaleString("en")} gating, ${result.advisory.length.toLocaleString("en")} advisory, ${result.dropped.length.toLocaleString("en")} dropped`,
    );
    const ratio = await compare({
      name: `arbitrate ${PROVIDERS}x${PER_PROVIDER}`,
      baselineName: "Array.prototype.sort by fingerprint (copy + sort)",
      baseline: () => diagnostics.slice().sort(byFingerprint),
      subject: () => arbitrate(params),
      rounds: 15,
      warmup: 3,
      target: 3,
    });
    const perSecond = (ms: number): string =>
      `${Math.round((diagnostics.length / ms) * 1000).toLocaleString("en")} diagnostics/s`;
    ctx.progress(
      `throughput: arbitrate ${perSecond(ratio.subjectMedianMs)} (${ratio.subjectMedianMs.toFixed(1)} ms); sort ${perSecond(ratio.baselineMedianMs)} (${ratio.baselineMedianMs.toFixed(1)} ms)`,
    );
    ctx.report(ratio);
  },
};
export default suite;
