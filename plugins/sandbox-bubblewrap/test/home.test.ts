import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LaunchRequest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { createBubblewrapSandbox, findBwrap, isWithin, probeBwrap, readElfLinks, realHost } from "../src/index.js";
import { roBinds, runLaunch } from "./helpers.js";

// issue 32 hole 4 (THREAT-MODEL invariant 12): an executable under `<home>/bin` (node from a
// version manager, `~/bin/node` on a CI image) made the sandbox bind its "install prefix", the
// home itself, so an `isolated` provider read `~/.ssh` and `~/.aws/credentials`.

const tmp = realpathSync(mkdtempSync(join(tmpdir(), "asp-bwrap-home-")));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A HOME-like layout: `~/bin/node` a copy of the real node binary, and the user's secrets beside it. */
const home = join(tmp, "home", "u");
for (const d of ["bin", ".ssh", ".aws", ".config/gcloud", "providers/tool"])
  mkdirSync(join(home, d), { recursive: true });
const node = join(home, "bin", "node");
copyFileSync(realpathSync(process.execPath), node);
chmodSync(node, 0o755);
const SSH_KEY = join(home, ".ssh", "id_ed25519");
const AWS = join(home, ".aws", "credentials");
writeFileSync(SSH_KEY, "-----BEGIN OPENSSH PRIVATE KEY----- fake\n");
writeFileSync(AWS, "[default]\naws_secret_access_key = fake\n");
writeFileSync(join(home, "providers", "tool", "main.mjs"), "console.log('tool')\n");

const code = join(tmp, "provider");
mkdirSync(code);
/** The provider: tries to read the secrets and list the home, prints what it got. */
writeFileSync(
  join(code, "main.mjs"),
  [
    'import { existsSync, readFileSync, readdirSync } from "node:fs";',
    "const get = (f) => { try { return f(); } catch (e) { return null; } };",
    "console.log(JSON.stringify({",
    `  ssh: get(() => readFileSync(${JSON.stringify(SSH_KEY)}, "utf8")),`,
    `  aws: get(() => readFileSync(${JSON.stringify(AWS)}, "utf8")),`,
    `  home: get(() => readdirSync(${JSON.stringify(home)}).sort()),`,
    `  bin: get(() => readdirSync(${JSON.stringify(join(home, "bin"))}).sort()),`,
    `  nodeThere: existsSync(${JSON.stringify(node)}),`,
    "}));",
  ].join("\n"),
);

const request = (over: Partial<LaunchRequest> = {}): LaunchRequest => ({
  executable: node,
  args: [join(code, "main.mjs")],
  cwd: code,
  env: { PATH: "/usr/bin:/bin" },
  readOnly: [code],
  deny: [],
  ...over,
});

/** The real host, knowing the fake home as one of the machine's homes (as `$HOME` would make it). */
const host = () => {
  const real = realHost();
  return { ...real, homes: [...(real.homes ?? []), home] };
};

const bwrap = findBwrap(process.env.PATH);
const works = bwrap !== null && probeBwrap(bwrap, process.execPath).ok;

describe("sandbox-bubblewrap and a runtime under a home folder", () => {
  it.runIf(!works && process.env.ASP_TEST_NO_BWRAP !== "1")(
    "bubblewrap runs on this machine (set ASP_TEST_NO_BWRAP=1 to skip)",
    () => {
      throw new Error("these tests need a working bwrap (apt-get install -y bubblewrap)");
    },
  );

  describe.skipIf(!works)("when node is ~/bin/node", () => {
    it("issue 32 hole 4 (THREAT-MODEL inv. 12): an isolated provider cannot read ~/.ssh or ~/.aws/credentials", async () => {
      const r = await createBubblewrapSandbox(host()).launch(request());
      expect(r.mode).toBe("isolated");
      const out = await runLaunch(r);
      expect(out.status, out.stderr).toBe(0);
      expect(JSON.parse(out.stdout)).toEqual({ ssh: null, aws: null, home: ["bin"], bin: ["node"], nodeThere: true });
    }, 30_000);

    it("issue 32 hole 4: binds exactly the executable file under the home, never the home nor a folder in it", async () => {
      const r = await createBubblewrapSandbox(host()).launch(request());
      const underHome = roBinds(r.args).filter(
        ([src, dest]) => isWithin(home, src ?? "") || isWithin(dest ?? "", home),
      );
      expect(underHome).toEqual([[node, node]]);
      for (const [src] of roBinds(r.args)) expect(isWithin(home, src ?? "")).toBe(false);
    });

    it("issue 32 hole 4: a provider folder that is the home is reported advisory with ASP_BWRAP_SECRET_FOLDER, never isolated", async () => {
      const r = await createBubblewrapSandbox(host()).launch(request({ readOnly: [code, home] }));
      expect(r).toMatchObject({ mode: "advisory", directWrite: true });
      expect(r.reason).toMatch(/^ASP_BWRAP_SECRET_FOLDER: /);
      expect(r.reason).toContain(home);
    });

    it("issue 32 hole 4: a provider folder holding a home, or inside a credential folder, is advisory too", async () => {
      for (const ro of [join(tmp, "home"), join(home, ".config", "gcloud")]) {
        const r = await createBubblewrapSandbox(host()).launch(request({ readOnly: [ro], cwd: ro }));
        expect([ro, r.mode, r.reason?.split(":")[0]]).toEqual([ro, "advisory", "ASP_BWRAP_SECRET_FOLDER"]);
      }
    });

    it("a provider's own code folder under the home is bound alone: the secrets beside it stay hidden", async () => {
      const tool = join(home, "providers", "tool");
      const r = await createBubblewrapSandbox(host()).launch(request({ readOnly: [code, tool] }));
      expect(r.mode).toBe("isolated");
      const out = await runLaunch(r);
      expect(out.status, out.stderr).toBe(0);
      expect(JSON.parse(out.stdout)).toMatchObject({ ssh: null, aws: null, home: ["bin", "providers"] });
    }, 30_000);

    it("an executable whose libraries it cannot tell is reported advisory with ASP_BWRAP_RUNTIME_UNKNOWN", async () => {
      const broken = join(home, "bin", "broken");
      // An ELF header announcing program headers past the end of the file.
      const header = Buffer.alloc(64);
      header.writeUInt32BE(0x7f454c46, 0);
      header[4] = 2;
      header[5] = 1;
      header.writeBigUInt64LE(4096n, 0x20);
      header.writeUInt16LE(56, 0x36);
      header.writeUInt16LE(1, 0x38);
      writeFileSync(broken, header, { mode: 0o755 });
      const r = await createBubblewrapSandbox(host()).launch(request({ executable: broken }));
      expect(r).toMatchObject({ mode: "advisory", directWrite: true });
      expect(r.reason).toMatch(/^ASP_BWRAP_RUNTIME_UNKNOWN: /);
    });
  });
});

describe("readElfLinks", () => {
  it("reads node's loader and libraries without running it", () => {
    const links = readElfLinks(realpathSync(process.execPath));
    expect(links?.interpreter).toMatch(/^\/.*ld-linux.*\.so/);
    expect(links?.needed).toContain("libc.so.6");
  });

  it("is null for a file that is not ELF", () => {
    expect(readElfLinks(join(code, "main.mjs"))).toBeNull();
  });
});
