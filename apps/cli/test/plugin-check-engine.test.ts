import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signPlugin, writeKeyPair } from "@asp/plugin-host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runInProcess } from "./helpers.js";

// `asp plugin check` on an engine plugin (issue 25 item 7): loaded as a host loads it (signature,
// digest, grant of `engine`, brand), its port built by registerPlugins, one sample run read to its
// terminal step with every proposed action refused, each step checked by plugin-host.

let work: string;
let key: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "asp-plugin-check-engine-"));
  key = join(work, "team");
  writeKeyPair(key);
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

/** A signed engine folder whose run is `body` (the inside of an async generator over `params`). */
function engineFolder(id: string, body: string): string {
  const dir = join(work, id);
  mkdirSync(dir);
  writeFileSync(
    join(dir, "asp-plugin.json"),
    JSON.stringify({
      id,
      version: "0.1.0",
      kind: "engine",
      entry: "main.mjs",
      capabilities: ["engine"],
      diagnosticSources: [],
      protocolVersion: "1.0",
      engines: { node: ">=20" },
    }),
  );
  writeFileSync(
    join(dir, "main.mjs"),
    `export default {
  $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: ${JSON.stringify(id)}, capabilities: ["engine"],
  register(reg) { reg.registerInit({ deps: {}, init: () => ({ async *run(params) { ${body} } }) }); },
};
`,
  );
  signPlugin(dir, key);
  return dir;
}

interface Report {
  kind: string;
  passed: boolean;
  steps: Array<{ id: string; status: string; code?: string; detail: string }>;
}

async function check(dir: string, extra: string[] = []): Promise<{ code: number; report: Report }> {
  const r = await runInProcess(["--json", "plugin", "check", dir, "--trust", `${key}.pub`, ...extra], { cwd: work });
  return { code: r.code, report: JSON.parse(r.stdout) as Report };
}

const failed = (r: Report) => r.steps.filter((s) => s.status !== "pass").map((s) => ({ id: s.id, code: s.code }));

describe("asp plugin check on an engine", () => {
  it("passes an engine that proposes an action, reads the refusal, and completes", async () => {
    const dir = engineFolder(
      "engine-good",
      `const r = yield { kind: "action", action: { tool: "read_file", arguments: { path: "README.md" } } };
       yield { kind: "turn", usage: { input_tokens: 1, output_tokens: 1 } };
       yield { kind: "completion", payload: r.status + " " + r.code, artifacts: [], evidence: [] };`,
    );
    const { code, report } = await check(dir);
    expect(failed(report)).toEqual([]);
    expect(report).toMatchObject({ kind: "engine", passed: true });
    expect(report.steps.map((s) => s.id)).toEqual(["load", "init", "run"]);
    expect(report.steps[2]?.detail).toBe(
      "ended completion after action 1, turn 1, completion 1; every step valid, every action refused",
    );
    expect(code).toBe(0);
  });

  it("fails the run step with the engine's own code when its run ends failed", async () => {
    const dir = engineFolder(
      "engine-down",
      `yield { kind: "failed", code: "ASP_ENGINE_X_CONNECTION_FAILED", outcome: "provider_error", message: "no server" };`,
    );
    const { code, report } = await check(dir);
    expect(failed(report)).toEqual([{ id: "run", code: "ASP_ENGINE_X_CONNECTION_FAILED" }]);
    expect(code).toBe(1);
  });

  it("fails ASP_PLUGIN_BAD_OUTPUT for a step outside the contract (a host-owned field on an action)", async () => {
    const dir = engineFolder(
      "engine-forger",
      `yield { kind: "action", action: { tool: "shell", arguments: {}, action_digest: "sha256:forged" } };`,
    );
    const { report } = await check(dir);
    expect(failed(report)).toEqual([{ id: "run", code: "ASP_PLUGIN_BAD_OUTPUT" }]);
  });

  it("fails ASP_CLI_PLUGIN_TIMEOUT for a run that never ends, and for one that never answers", async () => {
    const endless = engineFolder("engine-endless", `for (;;) yield { kind: "prose", text: "more" };`);
    expect(failed((await check(endless)).report)).toEqual([{ id: "run", code: "ASP_CLI_PLUGIN_TIMEOUT" }]);
    // It never answers, whatever the bound: the check's deadline aborts its signal.
    const silent = engineFolder(
      "engine-silent",
      `await new Promise((resolve) => params.signal.addEventListener("abort", resolve)); return;`,
    );
    expect(failed((await check(silent, ["--timeout", "50"])).report)).toEqual([
      { id: "run", code: "ASP_CLI_PLUGIN_TIMEOUT" },
    ]);
  });

  it("fails the load step ASP_PLUGIN_CAPABILITY_NOT_GRANTED when --policy grants it no engine", async () => {
    const dir = engineFolder(
      "engine-ungranted",
      `yield { kind: "completion", payload: "", artifacts: [], evidence: [] };`,
    );
    const { report: first } = await check(dir);
    const policy = join(work, "policy-review.json");
    writeFileSync(
      policy,
      JSON.stringify({
        apiVersion: "asp.policy/v1",
        requirements: [],
        providers: [],
        grants: [],
        plugins: [
          { id: "engine-ungranted", digest: (first as unknown as { digest: string }).digest, capabilities: ["review"] },
        ],
      }),
    );
    const { code, report } = await check(dir, ["--policy", policy]);
    expect(failed(report)).toEqual([{ id: "load", code: "ASP_PLUGIN_CAPABILITY_NOT_GRANTED" }]);
    expect(code).toBe(1);
  });
});
