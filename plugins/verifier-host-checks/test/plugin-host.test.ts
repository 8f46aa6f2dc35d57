// Through the host's plugin machinery: the plugin packed and signed, verified and granted by
// loadPlugins, registered by registerPlugins with a HostChecks port, its answers validated by
// plugin-host (apps/cli/test/auto.test.ts proves the Auto Run core admits them, end to end).
import "reflect-metadata";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { EvidenceSnapshot, HostChecks, HostChecksResult, Policy } from "@asp/contracts";
import { loadPlugins, readTrustRoots, registerPlugins, TOKENS, writeKeyPair } from "@asp/plugin-host";
import { packPlugin } from "@asp/plugin-pack";
import { container } from "tsyringe";
import { beforeAll, describe, expect, it } from "vitest";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
let packed: { dir: string; digest: string; id: string };
let pub: string;

beforeAll(async () => {
  const at = mkdtempSync(join(tmpdir(), "asp-hostchecks-pack-"));
  copyFileSync(join(pkg, "asp-plugin.json"), join(at, "asp-plugin.json"));
  writeFileSync(
    join(at, "package.json"),
    JSON.stringify({ aspPlugin: { entry: relative(at, join(pkg, "src", "main.ts")) } }),
  );
  const key = join(mkdtempSync(join(tmpdir(), "asp-hostchecks-key-")), "team");
  writeKeyPair(key);
  pub = `${key}.pub`;
  packed = await packPlugin(at, key);
}, 60_000);

const D = (n: number) => `sha256:${String(n).repeat(64)}`;

const snapshot: EvidenceSnapshot = {
  digest: D(9),
  run: { root_frame_id: "cli", branch_id: "b", turn_id: "t", execution_id: "e" },
  candidate_id: "cand-1",
  complete: true,
  refs: [
    { name: "payload", kind: "blob", digest: D(1) },
    { name: "artifact:src/a.ts", kind: "blob", digest: D(2) },
  ],
  labels: {},
  created_at: "2026-01-01T00:00:00.000Z",
};
const subject = { candidate_id: "cand-1", payload: "done", snapshot };

/** The packed plugin, verified and granted `review` by a policy, as a host loads it. */
function load() {
  return loadPlugins({
    dirs: [packed.dir],
    trustRoots: readTrustRoots([pub]),
    policy: {
      apiVersion: "asp.policy/v1",
      requirements: [],
      providers: [],
      grants: [],
      plugins: [{ id: packed.id, digest: packed.digest, capabilities: ["review"] }],
    } satisfies Policy,
    kinds: ["verifier"],
  });
}

async function reviewer(answer: HostChecksResult | Error, seen: unknown[] = []) {
  const result = await load();
  expect(result.refused).toEqual([]);
  const checks: HostChecks = {
    evaluate: async (params) => {
      seen.push(params);
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
  const c = container.createChildContainer();
  registerPlugins(c, result, {
    clock: { now: () => new Date(0) },
    content: { read: async () => new Uint8Array() },
    checks,
  });
  const [v] = c.resolveAll(TOKENS.Verifier);
  if (v === undefined) throw new Error("no verifier");
  return v;
}

describe("verifier-host-checks through plugin-host (issue 14 item 10)", () => {
  it("sends the candidate's file artifacts (artifact:<path> refs) to the host's checks; allow is a pass", async () => {
    const seen: unknown[] = [];
    const v = await reviewer({ decision: "allow", receipt_id: "rcpt-1", findings: [] }, seen);
    const answer = await v.verify({ kind: "review", subject });
    expect(seen).toEqual([{ files: [{ path: "src/a.ts", digest: D(2) }] }]);
    expect(answer).toEqual({ kind: "review", verdict: "pass", findings: [] });
  });

  it("deny is issues: one admissible finding per gating finding, severity and category from the diagnostic", async () => {
    const v = await reviewer({
      decision: "deny",
      receipt_id: "rcpt-2",
      findings: [
        {
          provider: "asp.provider-secrets",
          path: "src/a.ts",
          line: 3,
          severity: "error",
          code: "secrets/aws",
          message: "key",
        },
        { provider: "Type Script!", path: "other.ts", line: 1, severity: "warning", code: "ts/2322", message: "type" },
        { provider: "p", severity: "info", code: "p/x", message: "note" },
      ],
    });
    const answer = await v.verify({ kind: "review", subject });
    expect(answer.kind === "review" && answer.verdict).toBe("issues");
    const refs = new Set(snapshot.refs.map((r) => r.name));
    const findings = answer.kind === "review" ? answer.findings : [];
    // Every ref resolves in the reviewed snapshot (what the Auto Run core's parseVerdict requires).
    for (const f of findings) for (const r of f.evidence_refs) expect(refs.has(r)).toBe(true);
    expect(
      findings.map(({ severity, category, claim, evidence_refs }) => ({ severity, category, claim, evidence_refs })),
    ).toEqual([
      {
        severity: "major",
        category: "host_check.asp.provider-secrets",
        claim: "src/a.ts:3 secrets/aws key",
        evidence_refs: ["artifact:src/a.ts"],
      },
      {
        severity: "minor",
        category: "host_check.type_script_",
        claim: "other.ts:1 ts/2322 type",
        evidence_refs: ["payload"],
      },
      { severity: "info", category: "host_check.p", claim: "p/x note", evidence_refs: ["payload"] },
    ]);
  });

  it.each([
    ["indeterminate", { decision: "indeterminate", receipt_id: "r", findings: [] } as HostChecksResult],
    ["a deny without a gating finding", { decision: "deny", receipt_id: "r", findings: [] } as HostChecksResult],
    ["a refusal by the host", Object.assign(new Error("bad path"), { code: "ASP_THS_HOST_CHECKS_BAD_PATH" })],
  ])("%s is never a pass: verify throws (the runner records provider_failed)", async (_why, answer) => {
    const v = await reviewer(answer);
    await expect(v.verify({ kind: "review", subject })).rejects.toThrow();
  });

  it("a candidate without a file artifact is never a pass (ASP_HOST_CHECKS_NO_FILES)", async () => {
    const v = await reviewer({ decision: "allow", receipt_id: "r", findings: [] });
    const bare = { ...snapshot, refs: snapshot.refs.slice(0, 1) };
    await expect(v.verify({ kind: "review", subject: { ...subject, snapshot: bare } })).rejects.toThrowWithCode(
      "ASP_HOST_CHECKS_NO_FILES",
    );
  });

  it("is refused at init when the host supplies no checks (ASP_PLUGIN_PORT_UNAVAILABLE)", async () => {
    const result = await load();
    const c = container.createChildContainer();
    registerPlugins(c, result, { clock: { now: () => new Date(0) }, content: { read: async () => null } });
    expect(() => c.resolveAll(TOKENS.Verifier)).toThrowWithCode("ASP_PLUGIN_PORT_UNAVAILABLE");
  });
});
