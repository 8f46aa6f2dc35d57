import { existsSync, mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { CliContext } from "../src/context.js";
import { findHostConfig, hostConfigLocations, requireHostConfig, SYSTEM_HOST_CONFIG } from "../src/host-config.js";
import { EXIT } from "../src/index.js";
import { runInProcess } from "./helpers.js";

// A policy that requires nothing: under it every gate is allow. The attacker's dream.
const PERMISSIVE = { apiVersion: "asp.policy/v1", requirements: [], providers: [], grants: [] };
// The trusted policy requires a provider nobody installed: an honest gate is indeterminate.
const TRUSTED = {
  apiVersion: "asp.policy/v1",
  requirements: [{ id: "secrets", capability: "check", sources: ["secrets"], callSites: ["gate"] }],
  providers: [],
  grants: [],
};
const NO_SYSTEM_CONFIG = !existsSync(SYSTEM_HOST_CONFIG);

/** `<root>/repo`, a candidate carrying its own host configuration and permissive policy, and `<root>/trusted`. */
function attack(): { root: string; repo: string; trusted: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "asp-cli-trust-")));
  const repo = join(root, "repo");
  const trusted = join(root, "trusted");
  mkdirSync(repo);
  mkdirSync(trusted);
  writeFileSync(join(repo, "upload.ts"), 'export const key = "AKIA-not-scanned";\n');
  writeFileSync(join(repo, "asp.policy.json"), JSON.stringify(PERMISSIVE));
  writeFileSync(join(repo, "asp.host.json"), JSON.stringify({ store: ".asp/store", policy: "asp.policy.json" }));
  // Leaves a mark when anything runs it, then exits.
  writeFileSync(
    join(repo, "evil.mjs"),
    'import { writeFileSync } from "node:fs";\nwriteFileSync(new URL("./pwned", import.meta.url), "ran");\nprocess.exit(0);\n',
  );
  writeFileSync(join(trusted, "policy.json"), JSON.stringify(TRUSTED));
  return { root, repo, trusted };
}

/** A provider manifest with these launch fields. */
function launch(fields: { id: string; executable: string; args: string[]; cwd: string }): Record<string, unknown> {
  return {
    version: "1.0.0",
    digest: `sha256:${"0".repeat(64)}`,
    capabilities: ["check"],
    diagnosticSources: ["evil"],
    protocolVersion: "1.0",
    ...fields,
  };
}

function trustedConfig(dir: string, body: Record<string, unknown>, name = "host.json"): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ store: "store", policy: "policy.json", ...body }));
  return file;
}

async function refusal(argv: string[], cwd: string, env: Record<string, string> = {}) {
  const r = await runInProcess([...argv, "--json"], { cwd, env });
  const error = JSON.parse(r.stdout).error as { code: string; data: Record<string, unknown> };
  return { code: r.code, error };
}

function ctx(env: Record<string, string | undefined>, cwd = "/work/cwd"): CliContext {
  return {
    io: { stdout: () => {}, stderr: () => {}, cwd, env },
    json: () => true,
    print: () => {},
    setExit: () => {},
  };
}

describe("trusted host configuration", () => {
  describe("when the candidate repository carries its own asp.host.json and a permissive policy", () => {
    it.skipIf(!NO_SYSTEM_CONFIG)(
      "threat model invariant 2: asp gate run inside it without --config does not read it: no default in the current directory",
      async () => {
        const { repo } = attack();
        const r = await refusal(["gate"], repo);
        expect(r.code).toBe(EXIT.usage);
        expect(r.error.code).toBe("ASP_CLI_NO_HOST_CONFIG");
        const searched = (r.error.data.searched as Array<{ path: string }>).map((s) => s.path);
        expect(searched).toEqual([SYSTEM_HOST_CONFIG]);
        expect(searched.some((p) => p.startsWith(repo))).toBe(false);
      },
    );

    it("H2a.2 threat model invariant 2: --config repo/asp.host.json is refused with ASP_THS_UNTRUSTED_LOCATION before it is read", async () => {
      const { repo } = attack();
      for (const argv of [
        ["gate", "--config", "asp.host.json"],
        ["check", "--config", join(repo, "asp.host.json"), "--repo", repo],
        ["sweep", "--config", "./asp.host.json", "--repo", "."],
      ]) {
        const r = await refusal(argv, repo);
        expect(r.code, argv.join(" ")).toBe(EXIT.usage);
        expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
        expect(r.error.data.locations).toEqual([
          { field: "config", path: join(repo, "asp.host.json"), inside: join(repo, "asp.host.json") },
        ]);
      }
    });

    it("ASP_HOST_CONFIG naming the repository's file is refused the same way", async () => {
      const { repo } = attack();
      const r = await refusal(["gate"], repo, { ASP_HOST_CONFIG: join(repo, "asp.host.json") });
      expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
    });
  });

  describe("when a trusted configuration outside the repository names something inside it", () => {
    it("a policy reached through a symlink from outside into the repository is refused, naming the field", async () => {
      const { repo, trusted } = attack();
      symlinkSync(join(repo, "asp.policy.json"), join(trusted, "linked.json"));
      const config = trustedConfig(trusted, { policy: "linked.json" });
      const r = await refusal(["gate", "--config", config], repo);
      expect(r.code).toBe(EXIT.usage);
      expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
      expect(r.error.data.locations).toEqual([
        { field: "policy", path: join(trusted, "linked.json"), inside: join(repo, "asp.policy.json") },
      ]);
    });

    it("a policy, trust root and plugin folder under a folder named ..x inside the repository are each named", async () => {
      const { repo, trusted } = attack();
      mkdirSync(join(repo, "..x"));
      writeFileSync(join(repo, "..x", "policy.json"), JSON.stringify(PERMISSIVE));
      const config = trustedConfig(trusted, {
        policy: join(repo, "..x", "policy.json"),
        trustRoots: [join(repo, "..x", "team.pub")],
        plugins: [join(repo, "..x", "plugins")],
        store: join(repo, "..x", "store"),
      });
      const r = await refusal(["gate", "--config", config, "--repo", repo], trusted);
      expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
      expect((r.error.data.locations as Array<{ field: string }>).map((l) => l.field)).toEqual([
        "store",
        "policy",
        "trustRoots[0]",
        "plugins[0]",
      ]);
    });

    it("H2a.4 host §2: a provider executable inside the repository is refused", async () => {
      const { repo, trusted } = attack();
      const provider = launch({ id: "evil", executable: join(repo, "evil.mjs"), args: [], cwd: trusted });
      const r = await refusal(["gate", "--config", trustedConfig(trusted, { providers: [provider] })], repo);
      expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
      expect((r.error.data.locations as Array<{ field: string }>).map((l) => l.field)).toEqual([
        "providers[evil].executable",
      ]);
    });

    it("H2a.4 host §2: a provider argument naming a file inside the repository is refused, and nothing is launched", async () => {
      const { repo, trusted } = attack();
      const provider = launch({
        id: "node-evil",
        executable: process.execPath,
        args: ["--import", join(repo, "evil.mjs"), join(trusted, "main.mjs")],
        cwd: trusted,
      });
      const r = await refusal(["gate", "--config", trustedConfig(trusted, { providers: [provider] })], repo);
      expect(r.error.code).toBe("ASP_THS_UNTRUSTED_LOCATION");
      expect(r.error.data.locations).toEqual([
        { field: "providers[node-evil].args[1]", path: join(repo, "evil.mjs"), inside: join(repo, "evil.mjs") },
      ]);
      expect(existsSync(join(repo, "pwned"))).toBe(false);
    });
  });

  describe("when the configuration lies outside the repository", () => {
    it("asp gate uses it: the trusted policy decides (indeterminate), not the repository's permissive one", async () => {
      const { repo, trusted } = attack();
      const config = trustedConfig(trusted, {});
      const r = await runInProcess(["gate", "--json", "--config", config], { cwd: repo });
      expect(r.code).toBe(EXIT.indeterminate);
      expect(JSON.parse(r.stdout).coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "secrets", reason: "missing" }),
      ]);
    });

    it.each([
      ["ASP_HOST_CONFIG", (t: string) => ({ ASP_HOST_CONFIG: join(t, "host.json") })],
      ["XDG_CONFIG_HOME", (t: string) => ({ XDG_CONFIG_HOME: join(t, "xdg") })],
      ["HOME", (t: string) => ({ HOME: join(t, "home") })],
    ])("asp gate finds it through %s", async (_source, env) => {
      const { repo, trusted } = attack();
      mkdirSync(join(trusted, "xdg", "asp"), { recursive: true });
      mkdirSync(join(trusted, "home", ".config", "asp"), { recursive: true });
      writeFileSync(join(trusted, "xdg", "asp", "policy.json"), JSON.stringify(TRUSTED));
      writeFileSync(join(trusted, "home", ".config", "asp", "policy.json"), JSON.stringify(TRUSTED));
      trustedConfig(trusted, {});
      trustedConfig(join(trusted, "xdg", "asp"), {});
      trustedConfig(join(trusted, "home", ".config", "asp"), {});
      const r = await runInProcess(["gate", "--json"], { cwd: repo, env: env(trusted) });
      expect(r.code).toBe(EXIT.indeterminate);
    });
  });

  describe("resolution order", () => {
    const env = {
      ASP_HOST_CONFIG: "/env/host.json",
      XDG_CONFIG_HOME: "/xdg",
      HOME: "/home/u",
    };

    it("--config, else ASP_HOST_CONFIG, else $XDG_CONFIG_HOME/asp/host.json, else /etc/asp/host.json", () => {
      expect(hostConfigLocations("rel/host.json", env, "/work/cwd")).toEqual([
        { source: "--config", path: "/work/cwd/rel/host.json", explicit: true },
      ]);
      expect(hostConfigLocations(undefined, env, "/work/cwd")).toEqual([
        { source: "ASP_HOST_CONFIG", path: "/env/host.json", explicit: true },
      ]);
      expect(hostConfigLocations(undefined, { ...env, ASP_HOST_CONFIG: "" }, "/work/cwd")).toEqual([
        { source: "XDG_CONFIG_HOME", path: "/xdg/asp/host.json", explicit: false },
        { source: "system", path: SYSTEM_HOST_CONFIG, explicit: false },
      ]);
    });

    it("XDG_CONFIG_HOME unset falls back to $HOME/.config; a relative XDG_CONFIG_HOME or HOME is ignored", () => {
      expect(hostConfigLocations(undefined, { HOME: "/home/u" }, "/c").map((l) => l.path)).toEqual([
        "/home/u/.config/asp/host.json",
        SYSTEM_HOST_CONFIG,
      ]);
      expect(
        hostConfigLocations(undefined, { XDG_CONFIG_HOME: "cfg", HOME: "/home/u" }, "/c").map((l) => l.path),
      ).toEqual([SYSTEM_HOST_CONFIG]);
      expect(hostConfigLocations(undefined, { HOME: "." }, "/c").map((l) => l.path)).toEqual([SYSTEM_HOST_CONFIG]);
    });

    it("never lists a path in the current directory", () => {
      for (const e of [{}, env, { HOME: "/work/cwd" }]) {
        for (const l of hostConfigLocations(undefined, e, "/work/cwd")) {
          expect(l.path).not.toBe("/work/cwd/asp.host.json");
        }
      }
    });

    it("takes the first that exists, ending at /etc/asp/host.json", () => {
      const only = (path: string) => (p: string) => p === path;
      const c = ctx({ XDG_CONFIG_HOME: "/xdg" });
      expect(findHostConfig(c, undefined, only("/xdg/asp/host.json"))?.source).toBe("XDG_CONFIG_HOME");
      expect(findHostConfig(c, undefined, only(SYSTEM_HOST_CONFIG))?.source).toBe("system");
      expect(findHostConfig(c, undefined, () => false)).toBeNull();
      expect(() => requireHostConfig(c, undefined, () => false)).toThrowWithCode("ASP_CLI_NO_HOST_CONFIG");
    });

    it("an explicit --config or ASP_HOST_CONFIG that is missing is an error, never a fall back to another file", () => {
      const exists = (p: string) => p === SYSTEM_HOST_CONFIG;
      expect(() => findHostConfig(ctx({}), "/nope.json", exists)).toThrowWithCode("ASP_CLI_NO_HOST_CONFIG");
      expect(() => findHostConfig(ctx({ ASP_HOST_CONFIG: "/nope.json" }), undefined, exists)).toThrowWithCode(
        "ASP_CLI_NO_HOST_CONFIG",
      );
    });
  });
});
