import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DecisionEnvelope } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { type ComposedHost, composeHost } from "../src/index.js";
import { type ProviderSet, THS_TOKENS } from "../src/tokens.js";
import { FAKE_AWS_KEY, ID, SIGNED, secretsPolicy, TRUST_ROOT } from "./example-plugin.js";
import { fakeClock, tempRepo } from "./helpers.js";

// Issue 12 item 1 (THREAT-MODEL invariant 4): what runs is exactly what was verified, at every
// launch and restart. The attacker controls the plugin folder's bytes at every instant: between
// verification and launch, and after a crash. The plugin is the real, built and signed example
// secrets provider (`pnpm build`), verified against the example trust root and policy.

const scratch = (): string => realpathSync(mkdtempSync(join(tmpdir(), "asp-ths-plugin-cache-")));

/** A copy of the signed plugin the attacker may rewrite, and a marker its code would leave. */
function attackable() {
  const dir = join(scratch(), "secrets");
  cpSync(SIGNED, dir, { recursive: true });
  const marker = join(scratch(), "attacker-ran");
  // The attacker's provider: proves it ran, then answers nothing (a crash the host must not mistake for a pass).
  const rewrite = () =>
    writeFileSync(
      join(dir, "main.mjs"),
      `import { writeFileSync } from "node:fs";\nwriteFileSync(${JSON.stringify(marker)}, "ran");\n`,
    );
  return { dir, marker, rewrite };
}

/** Pids of this process's children whose command line names `path` (Linux /proc). */
function childrenRunning(path: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && readFileSync(`/proc/${name}/cmdline`, "utf8").includes(path)) pids.push(Number(name));
    } catch {
      // Gone since it was listed.
    }
  }
  return pids;
}

const dirty = () => tempRepo({ "src/upload.ts": `export const k = "${FAKE_AWS_KEY}";\n` });

function expectSecretsDeny(e: DecisionEnvelope): void {
  expect(e.decision).toBe("deny");
  expect(e.coverage.ran).toEqual(["secrets"]);
  expect(e.findings.map((x) => [x.provider.id, x.diagnostic.code])).toEqual([[ID, "secrets/aws-access-key-id"]]);
  expect(e.authority.filter((a) => a.providerId === ID)).toEqual([
    expect.objectContaining({ integrity: "verified", authorityGrant: "verified" }),
  ]);
}

async function compose(dir: string, warm: boolean): Promise<{ host: ComposedHost; store: string }> {
  const store = join(scratch(), "store");
  const host = await composeHost({
    store,
    policy: secretsPolicy(),
    plugins: [dir],
    trustRoots: [TRUST_ROOT],
    clock: fakeClock,
    failOpenSink: { log: () => {} },
    warm,
  });
  return { host, store };
}

describe("a verified plugin runs from the host's copy (issue 12 item 1)", () => {
  describe("when the plugin folder is rewritten between verification and the first launch", () => {
    const a = attackable();
    const composed = compose(a.dir, false);
    afterAll(async () => (await composed).host.close());

    it("H1.3 host §1: what runs is what was verified: the secret is still found, the attacker's code never runs", async () => {
      const { host, store } = await composed;
      a.rewrite();
      expectSecretsDeny((await host.gate({ repo: dirty() })).envelope);
      expect(existsSync(a.marker)).toBe(false);
      // The copy lives beside the store, named by the verified digest, and nothing runs from the folder.
      const [entry] = readdirSync(`${store}.plugins`).filter((n) => !n.startsWith("."));
      expect(entry).toMatch(/^sha256-[0-9a-f]{64}$/);
      expect(childrenRunning(a.dir)).toEqual([]);
      expect(childrenRunning(join(`${store}.plugins`, entry ?? ""))).toHaveLength(1);
    }, 60_000);
  });

  describe("when the plugin folder is rewritten under the running provider and the provider crashes", () => {
    const a = attackable();
    const composed = compose(a.dir, true);
    afterAll(async () => (await composed).host.close());

    it("H1.3 host §1: the relaunch runs the same verified copy: the secret is still found, the attacker's code never runs", async () => {
      const { host, store } = await composed;
      expectSecretsDeny((await host.gate({ repo: dirty() })).envelope);
      const [pid] = childrenRunning(`${store}.plugins`);
      expect(pid).toBeTypeOf("number");
      a.rewrite();
      process.kill(pid ?? 0, "SIGKILL");
      // A gate racing the kill may still see the crash; the relaunch after it is what is judged.
      let { envelope } = await host.gate({ repo: dirty() });
      for (let i = 0; i < 3 && envelope.coverage.degraded.some((d) => d.reason === "crashed"); i++) {
        ({ envelope } = await host.gate({ repo: dirty() }));
      }
      expectSecretsDeny(envelope);
      expect(existsSync(a.marker)).toBe(false);
      const relaunched = childrenRunning(`${store}.plugins`);
      expect(relaunched).toHaveLength(1);
      expect(relaunched).not.toContain(pid);
    }, 60_000);
  });

  describe("when the store is in memory", () => {
    it("the copy is in a temp folder the host owns and removes when it closes", async () => {
      const host = await composeHost({
        store: "memory:",
        policy: secretsPolicy(),
        plugins: [SIGNED],
        trustRoots: [TRUST_ROOT],
        clock: fakeClock,
        failOpenSink: { log: () => {} },
      });
      const cwd = host.container.resolve<ProviderSet>(THS_TOKENS.Providers).providers[0]?.manifest.cwd;
      expect(cwd?.startsWith(tmpdir())).toBe(true);
      expect(existsSync(cwd ?? "")).toBe(true);
      await host.close();
      expect(existsSync(cwd ?? "")).toBe(false);
    }, 60_000);
  });
});
