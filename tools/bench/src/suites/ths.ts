import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type { Policy, ProviderManifest } from "@asp/contracts";
import { type FactLog, TOKENS } from "@asp/evidence";
import { digestPlugin } from "@asp/plugin-host";
import { composeHost } from "@asp/ths";
import {
  createMessageConnection,
  type MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";
import { compare, type Ratio } from "../measure.js";
import type { Suite } from "../suite.js";

// A trivial honest provider: with an empty changeset it answers at once, reading nothing.
const FIXTURES = fileURLToPath(new URL("../../../../packages/ths/test/fixtures/", import.meta.url));
const SCRIPT = join(FIXTURES, "fake-honest-ts.mjs");
const PROVIDERS = 3;

function manifests(): ProviderManifest[] {
  // The host grants only over a measured root: the fixtures folder, pinned to its plugin digest.
  const root = FIXTURES.replace(/\/$/, "");
  const digest = digestPlugin(root).digest;
  return Array.from({ length: PROVIDERS }, (_, i) => ({
    id: `bench-${i}`,
    version: "1.0.0",
    digest,
    executable: process.execPath,
    args: [SCRIPT, "--id", `bench-${i}`, "--source", `s${i}`],
    cwd: root,
    root,
    capabilities: ["check"],
    diagnosticSources: [`s${i}`],
    protocolVersion: "1.0",
  }));
}

function policy(ms: ProviderManifest[]): Policy {
  const sites = ["interactive", "gate", "sweep"] as const;
  return {
    apiVersion: "asp.policy/v1",
    requirements: ms.map((m) => ({
      id: m.id,
      capability: "check",
      sources: m.diagnosticSources,
      callSites: [...sites],
    })),
    providers: ms.map((m) => ({ id: m.id, version: m.version, digest: m.digest })),
    grants: ms.map((m) => ({
      provider: m.id,
      version: m.version,
      digest: m.digest,
      requirement: m.id,
      callSites: [...sites],
    })),
    budgets: { timeoutMs: { interactive: 10_000, gate: 10_000, sweep: 10_000 } },
  };
}

/** The same provider over a raw vscode-jsonrpc connection (no host): the baseline. */
async function rawConnection(m: ProviderManifest): Promise<{ conn: MessageConnection; kill: () => void }> {
  const child = spawn(m.executable, m.args, { cwd: m.cwd, stdio: ["pipe", "pipe", "inherit"] });
  // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
  const conn = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  conn.listen();
  await conn.sendRequest("initialize", {
    protocolVersion: "1.0",
    host: { name: "bench", version: "0.0.0" },
    processId: null,
  });
  await conn.sendNotification("initialized", { grants: [] });
  return { conn, kill: () => child.kill() };
}

const pct = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? Number.NaN;
};

async function sample(op: () => Promise<unknown>, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await op();
    out.push(performance.now() - t);
  }
  return out;
}

const suite: Suite = {
  name: "ths",
  description:
    "host check/assess round trip with 3 warm trivial providers vs a raw vscode-jsonrpc round trip to the same providers",
  async run(ctx) {
    const ms = manifests();
    const repo = mkdtempSync(join(tmpdir(), "asp-bench-ths-"));
    mkdirSync(join(repo, "src"));
    writeFileSync(join(repo, "src/a.ts"), "export const a = 1;\n");
    ctx.progress(`launching ${PROVIDERS} providers through the host and ${PROVIDERS} raw`);
    // Memory store: the receipt is appended in the same batch, without the fsync of a level store.
    // The fact log is wrapped to time the receipt append, so it can be reported apart (the
    // issue's target excludes the durable receipt write).
    let appendMs = 0;
    const host = await composeHost({
      store: "memory:",
      policy: policy(ms),
      providers: ms,
      failOpenSink: { log() {} },
      register: (c) => {
        const log = c.resolve<FactLog>(TOKENS.FactLog);
        const timed: FactLog = Object.assign(Object.create(log) as FactLog, {
          append: async (entries: Parameters<FactLog["append"]>[0]) => {
            const t = performance.now();
            try {
              return await log.append(entries);
            } finally {
              appendMs += performance.now() - t;
            }
          },
        });
        c.register(TOKENS.FactLog, { useValue: timed });
      },
    });
    const raws = await Promise.all(ms.map(rawConnection));
    try {
      const first = await host.gate({ repo });
      if (first.envelope.decision !== "allow")
        throw new Error(`bench host did not allow: ${JSON.stringify(first.envelope.coverage)}`);
      const baseline = first.envelope.baseline;
      let n = 0;
      const rawRound = () =>
        Promise.all(
          raws.map((r) =>
            r.conn.sendRequest("check/assess", {
              requestId: `raw-${++n}`,
              callSite: "gate",
              baseline,
              changeset: { digest: baseline, base: baseline, after: baseline, changes: [] },
              requirements: [],
              deadlineMs: 10_000,
            }),
          ),
        );
      const hostRound = () => host.gate({ repo });
      ctx.report(
        await compare({
          name: `host gate round trip, ${PROVIDERS} providers (snapshot, validation, freshness, decide, receipt append)`,
          baselineName: `raw vscode-jsonrpc check/assess to the same ${PROVIDERS} providers`,
          baseline: rawRound,
          subject: hostRound,
          iterations: 20,
          rounds: 15,
          target: 2,
        }),
      );
      // Interleaved samples, each host round split into total and total minus the receipt append.
      const rawSamples: number[] = [];
      const hostSamples: number[] = [];
      const hostNoReceipt: number[] = [];
      for (let i = 0; i < 300; i++) {
        rawSamples.push(...(await sample(rawRound, 1)));
        appendMs = 0;
        const [t] = await sample(hostRound, 1);
        hostSamples.push(t ?? 0);
        hostNoReceipt.push((t ?? 0) - appendMs);
      }
      const fmt = (xs: number[]) => `p50 ${pct(xs, 0.5).toFixed(3)} ms, p95 ${pct(xs, 0.95).toFixed(3)} ms`;
      ctx.progress(`raw  round trip (${PROVIDERS} providers): ${fmt(rawSamples)}`);
      ctx.progress(`host round trip (${PROVIDERS} providers): ${fmt(hostSamples)}`);
      ctx.progress(`host round trip without the receipt append: ${fmt(hostNoReceipt)}`);
      const median = (xs: number[]) => pct(xs, 0.5);
      const excl: Ratio = {
        name: `host gate round trip, ${PROVIDERS} providers, excluding the receipt append`,
        baselineName: `raw vscode-jsonrpc check/assess to the same ${PROVIDERS} providers`,
        subjectMedianMs: median(hostNoReceipt),
        baselineMedianMs: median(rawSamples),
        ratio: median(hostNoReceipt) / median(rawSamples),
        target: 2,
        withinTarget: median(hostNoReceipt) / median(rawSamples) <= 2,
        rounds: 300,
        iterations: 1,
      };
      ctx.report(excl);
      const status = host.status();
      for (const p of status.providers)
        ctx.progress(
          `host/status ${p.id}: p50 ${p.latency.p50Ms} ms, p95 ${p.latency.p95Ms} ms over ${p.latency.samples}`,
        );
    } finally {
      for (const r of raws) r.kill();
      await host.close();
      rmSync(repo, { recursive: true, force: true });
    }
  },
};

export default suite;
