import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CallSite, validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// Issue 11 item 9: every edge of the freshness binding (host §5) and of the host-owned field
// check (host §1), each through a real host, a real level store and a real subprocess provider
// that reads through host/readBlob and then lies in exactly one way.

const FILES = { "src/a.ts": "export const a = 1;\n", "src/b.ts": "export const b = 2;\n", "README.md": "# demo\n" };
const store = (): string => mkdtempSync(join(tmpdir(), "asp-ths-store-"));

async function evaluate(fixture: string, args: string[], callSite: CallSite) {
  const m = manifest(fixture, { args });
  const { host } = await testHost({ policy: policyFor([m], { timeoutMs: 5000 }), providers: [m], store: store() });
  try {
    const result = await host.evaluate(callSite, { repo: tempRepo(FILES) });
    expect(validate("verdict", result.envelope).ok).toBe(true);
    expect(validate("audit-receipt", result.receipt).ok).toBe(true);
    return { ...result, id: m.id };
  } finally {
    await host.close();
  }
}

describe("H5.2 freshness edges (host §5: validAsOf must equal baseline, changeset digest and the read set)", () => {
  it.each([
    ["gate", "none"],
    ["sweep", "none"],
  ] as const)("H5.1 control: an honest validAsOf at %s is fresh and allowed", async (callSite, lie) => {
    const { envelope, receipt, id } = await evaluate("fake-freshness-lie", ["--lie", lie], callSite);
    expect(envelope.coverage.degraded).toEqual([]);
    expect(envelope.decision).toBe("allow");
    expect(receipt.validAsOf.map((v) => [v.provider, v.validAsOf.reads.length])).toEqual([[id, 3]]);
  });

  it.each([
    ["host §5: a validAsOf.changeset digest that is not the request's", "changeset", "gate"],
    ["host §5: a null validAsOf.changeset when the request carries a changeset", "no-changeset", "gate"],
    ["host §5: a validAsOf.changeset digest when the request has none (sweep)", "a-changeset", "sweep"],
    ["host §5: a validAsOf.baseline that is not the request's", "baseline", "gate"],
    ["host §5: validAsOf.reads claims a baseline blob never read through host/readBlob", "extra-read", "gate"],
    ["host §5: validAsOf.reads claims a blob outside the baseline, never read", "foreign-read", "gate"],
    ["host §5: validAsOf.reads leaves out a blob it did read", "missing-read", "gate"],
    ["host §5: validAsOf.reads claims a blob never read (sweep)", "extra-read", "sweep"],
    ["host §5: validAsOf.reads leaves out a blob it did read (sweep)", "missing-read", "sweep"],
    ["host §5: validAsOf.reads leaves out a blob it did read (interactive)", "missing-read", "interactive"],
  ] as const)(
    "H5.2 H5.3 %s: stale, never allow",
    async (_title, lie, callSite) => {
      const { envelope, receipt, id } = await evaluate("fake-freshness-lie", ["--lie", lie], callSite);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: id, requirement: `req-${id}`, reason: "stale", failOpen: false }),
      ]);
      expect(envelope.coverage.ran).toEqual([]);
      expect(envelope.decision).toBe("indeterminate");
      // The stale answer contributes nothing: no binding of it is recorded as the receipt's evidence.
      expect(receipt.validAsOf).toEqual([]);
      expect(receipt.coverage.degraded.map((d) => d.reason)).toEqual(["stale"]);
    },
    30_000,
  );
});

describe("H1.2 host-owned fields through a real provider (host §1: malformed, never allow)", () => {
  it.each([
    ["isAllowed", "0"],
    ["passed", "0"],
    ["approved", "0"],
    ["Verdict", "0"],
    ["transaction_guarantee", "0"],
    ["TRANSACTION-GUARANTEE", "0"],
    ["ｖｅｒｄｉｃｔ", "0"],
    ["is\u200bAllowed", "0"],
    ["verdict", "300"],
  ])(
    "a diagnostic's data carrying %s (nested %s deep) is malformed and denied at the gate",
    async (key, depth) => {
      const { envelope, id } = await evaluate("fake-host-owned-spelled", ["--key", key, "--depth", depth], "gate");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: id, requirement: `req-${id}`, reason: "malformed" }),
      ]);
      expect(envelope.decision).toBe("deny");
      expect(envelope.findings).toEqual([]);
    },
    30_000,
  );
});
