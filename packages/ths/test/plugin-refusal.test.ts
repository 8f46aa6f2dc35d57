import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DecisionEnvelope, validate } from "@asp/contracts";
import { openStore } from "@asp/evidence";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { composeHost, showReceipt } from "../src/index.js";
import { FAKE_AWS_KEY, ID, SIGNED, secretsPolicy, TRUST_ROOT } from "./example-plugin.js";
import { fakeClock, manifest, tempRepo } from "./helpers.js";

// Issue 11 item 10: a refused plugin is keyed by its folder, never by the id it claims, and no
// set of plugin folders can end an evaluation without a decision and a durable receipt. The
// plugin under attack is the real, built and signed example secrets provider (`pnpm build`),
// verified against the example trust root and pinned by the example policy.

const scratch = (): string => realpathSync(mkdtempSync(join(tmpdir(), "asp-ths-plugin-refusal-")));

/** Copies of the signed plugin, each attacked in one way. */
function folders() {
  const root = scratch();
  const tampered = join(root, "tampered");
  cpSync(SIGNED, tampered, { recursive: true });
  appendFileSync(join(tampered, "main.mjs"), "\n// one more byte\n");
  const unsigned = join(root, "unsigned");
  cpSync(SIGNED, unsigned, { recursive: true });
  rmSync(join(unsigned, "asp-plugin.sig"));
  const copy = join(root, "verified-copy");
  cpSync(SIGNED, copy, { recursive: true });
  // A plugins folder whose subfolders are plugins: the signed one and a link to nowhere.
  const parent = join(root, "plugins");
  mkdirSync(parent);
  cpSync(SIGNED, join(parent, "secrets"), { recursive: true });
  symlinkSync(join(root, "nowhere"), join(parent, "dangling"));
  // A refused folder whose path is longer than any provider id may be.
  const long = join(root, "x".repeat(200), "y".repeat(100), "plugin");
  mkdirSync(join(long, ".."), { recursive: true });
  cpSync(unsigned, long, { recursive: true });
  // A copy whose signature file is a named pipe: reading it would wait forever.
  const pipe = join(root, "pipe");
  cpSync(unsigned, pipe, { recursive: true });
  execFileSync("mkfifo", [join(pipe, "asp-plugin.sig")]);
  return { root, tampered, unsigned, copy, parent, long, pipe, missing: join(root, "missing") };
}

async function gateWith(plugins: readonly string[], files: Record<string, string> = { "README.md": "# ok\n" }) {
  const store = join(scratch(), "store");
  const host = await composeHost({
    store,
    policy: secretsPolicy(),
    plugins,
    trustRoots: [TRUST_ROOT],
    clock: fakeClock,
    failOpenSink: { log: () => {} },
  });
  let envelope: DecisionEnvelope;
  try {
    const result = await host.gate({ repo: tempRepo(files) });
    envelope = result.envelope;
    expect(validate("verdict", envelope).ok).toBe(true);
    expect(validate("audit-receipt", result.receipt).ok).toBe(true);
  } finally {
    await host.close();
  }
  // Durable: the receipt is in the level store after the host is gone.
  const reopened = await openStore(store);
  try {
    expect((await showReceipt(reopened.log, envelope.decisionId)).envelope).toEqual(envelope);
  } finally {
    await reopened.close();
  }
  return envelope;
}

const degradedOf = (e: DecisionEnvelope) => Object.fromEntries(e.coverage.degraded.map((d) => [d.provider, d]));

describe("a refused plugin beside the signed one (issue 11 item 10)", () => {
  const f = folders();

  it.each([
    ["tampered copy after", [SIGNED, f.tampered], f.tampered],
    ["tampered copy before", [f.tampered, SIGNED], f.tampered],
    ["unsigned copy after", [SIGNED, f.unsigned], f.unsigned],
    ["unsigned copy before", [f.unsigned, SIGNED], f.unsigned],
  ])(
    "H1.3 host §1: a %s is refused under plugin:<its folder>; the signed one still decides (allow, then deny on a key)",
    async (_how, plugins, refusedDir) => {
      const clean = await gateWith(plugins);
      expect(clean.decision).toBe("allow");
      expect(clean.coverage.ran).toEqual(["secrets"]);
      expect(degradedOf(clean)).toEqual({
        [`plugin:${refusedDir}`]: expect.objectContaining({ reason: "unavailable", failOpen: false }),
      });
      expect(clean.coverage.degraded[0]?.requirement).toBeUndefined();
      // Exactly one authority entry carries the claimed id: the verified plugin's.
      expect(clean.authority.filter((a) => a.providerId === ID)).toEqual([
        expect.objectContaining({ integrity: "verified", authorityGrant: "verified" }),
      ]);

      const dirty = await gateWith(plugins, { "src/upload.ts": `export const k = "${FAKE_AWS_KEY}";\n` });
      expect(dirty.decision).toBe("deny");
      expect(dirty.findings.map((x) => [x.provider.id, x.diagnostic.code])).toEqual([
        [ID, "secrets/aws-access-key-id"],
      ]);
    },
    60_000,
  );

  it.each([
    ["in this order", [SIGNED, f.copy]],
    ["in the other order", [f.copy, SIGNED]],
  ])(
    "two VERIFIED folders claiming one id (%s): both refused as a conflict, the requirement is missing, indeterminate",
    async (_order, plugins) => {
      const e = await gateWith(plugins);
      expect(e.decision).toBe("indeterminate");
      expect(e.coverage.ran).toEqual([]);
      expect(degradedOf(e)).toEqual({
        [`plugin:${SIGNED}`]: expect.objectContaining({ reason: "unavailable" }),
        [`plugin:${f.copy}`]: expect.objectContaining({ reason: "unavailable" }),
        undefined: expect.objectContaining({ requirement: "secrets", reason: "missing" }),
      });
      expect(e.authority.map((a) => a.providerId)).not.toContain(ID);
    },
    60_000,
  );

  it("a verified plugin whose id a configured provider already has is refused under its folder, not dropped silently", async () => {
    const configured = manifest("fake-honest-secrets", { id: ID, version: "0.1.0", source: "secrets" });
    const host = await composeHost({
      store: join(scratch(), "store"),
      policy: secretsPolicy(),
      providers: [configured],
      plugins: [SIGNED],
      trustRoots: [TRUST_ROOT],
      clock: fakeClock,
      failOpenSink: { log: () => {} },
    });
    try {
      const { envelope, receipt } = await host.gate({ repo: tempRepo() });
      expect(validate("audit-receipt", receipt).ok).toBe(true);
      expect(degradedOf(envelope)[`plugin:${SIGNED}`]).toMatchObject({ reason: "unavailable" });
      expect(envelope.authority.filter((a) => a.providerId === ID)).toHaveLength(1);
    } finally {
      await host.close();
    }
  }, 60_000);

  it("the same folder named twice (directly and through its real path) loads once", async () => {
    const link = join(scratch(), "link-to-signed");
    symlinkSync(SIGNED, link);
    const e = await gateWith([SIGNED, link, SIGNED]);
    expect(e.decision).toBe("allow");
    expect(e.coverage.degraded).toEqual([]);
  }, 60_000);

  it("a dangling link in a plugins folder, a missing folder, a named pipe for a signature and a very long path: still a decision", async () => {
    const e = await gateWith([f.parent, f.missing, f.long, f.pipe]);
    expect(e.decision).toBe("allow");
    const keys = Object.keys(degradedOf(e)).sort();
    expect(keys).toHaveLength(4);
    for (const k of keys) {
      expect(k.startsWith("plugin:")).toBe(true);
      expect(k.length).toBeLessThanOrEqual(256);
    }
    expect(keys).toEqual(expect.arrayContaining([`plugin:${join(f.parent, "dangling")}`, `plugin:${f.missing}`]));
  }, 60_000);

  // The invariant, over random sets and orders of these folders: every gate ends in a decision
  // with a durable receipt; a refused folder is only ever named by its folder; the decision is
  // allow exactly when one verified folder claims the id (the requirement's only provider).
  it("no set of plugin folders ends a gate without a decision and a receipt (fast-check)", async () => {
    const pool = [SIGNED, f.copy, f.tampered, f.unsigned, f.parent, f.missing, f.long, f.pipe];
    const verified = new Set([SIGNED, f.copy, f.parent]);
    await fc.assert(
      fc.asyncProperty(
        fc.subarray(pool, { minLength: 1 }).chain((s) => fc.shuffledSubarray(s, { minLength: s.length })),
        async (plugins) => {
          const e = await gateWith(plugins);
          const claimed = plugins.filter((p) => verified.has(p)).length;
          expect(e.decision).toBe(claimed === 1 ? "allow" : "indeterminate");
          for (const d of e.coverage.degraded) if (d.provider !== undefined) expect(d.provider).toMatch(/^plugin:[/…]/);
          expect(e.authority.filter((a) => a.providerId === ID)).toHaveLength(claimed === 1 ? 1 : 0);
        },
      ),
      { numRuns: 12 },
    );
  }, 300_000);
});
