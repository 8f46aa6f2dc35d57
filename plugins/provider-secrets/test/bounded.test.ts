// The bounded scanner over the built entry (the module that is both the provider and its worker).
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { builtEntry } from "@asp/sdk/testing";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type BlobScanner, createBoundedScanner, DEFAULT_RULES, MAX_SCAN_BYTES } from "../src/index.js";
import { ALNUM, fake } from "./fakes.js";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
let workerUrl: URL;
let scanner: BlobScanner | undefined;

beforeAll(() => {
  workerUrl = pathToFileURL(builtEntry(PKG));
}, 120_000);

afterEach(async () => {
  await scanner?.close();
  scanner = undefined;
});

const ghp = `ghp_${fake(ALNUM, 36, 501)}`;
const job = (text: string | Uint8Array, path = "a.txt") => ({
  path,
  bytes: typeof text === "string" ? new TextEncoder().encode(text) : text,
  fingerprints: [],
  values: [],
});

describe("createBoundedScanner", () => {
  it("scans a file in the worker and returns its redacted findings", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES });
    const outcome = await scanner.scan(job(`t = ${ghp}\n`));
    expect(outcome.ok && outcome.diagnostics.map((d) => d.code)).toEqual(["secrets/secretlint-github"]);
    expect(JSON.stringify(outcome)).not.toContain(ghp);
  });

  it("host §2: a file larger than maxBytes is a 'size' outcome, never a pass, and the next file is scanned", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES, maxBytes: 1024 });
    const outcome = await scanner.scan(job(`${"x".repeat(2048)}\nt = ${ghp}\n`, "big.txt"));
    expect(outcome).toEqual({ ok: false, reason: "size" });
    const next = await scanner.scan(job(`t = ${ghp}\n`, "b.txt"));
    expect(next.ok && next.diagnostics.map((d) => d.range?.path)).toEqual(["b.txt"]);
  });

  it("scans a file of the largest size allowed within the default memory limits", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES, fileDeadlineMs: 600_000 });
    // The worst shape for memory: one run that decodes (base64 of base64 of text) into views.
    const inner = Buffer.from(`${"token: ".repeat(1000)}${ghp}\n`.repeat(600)).toString("base64");
    const bytes = new Uint8Array(Buffer.from(Buffer.from(inner).toString("base64").slice(0, MAX_SCAN_BYTES)));
    const outcome = await scanner.scan(job(bytes, "huge.b64"));
    expect(outcome.ok).toBe(true);
  }, 300_000);

  it("host §2: a file past the deadline is a 'deadline' outcome and the worker is replaced", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES, fileDeadlineMs: 3_000 });
    const pathological = "-----BEGIN PRIVATE KEY-----AAAAAAAAAAAAAAAAAAAA\n".repeat(48_000);
    expect(await scanner.scan(job(pathological, "bundle.pem"))).toEqual({ ok: false, reason: "deadline" });
    const next = await scanner.scan(job(`t = ${ghp}\n`));
    expect(next.ok).toBe(true);
  }, 120_000);

  it("host §2: queued files each get their own deadline; a stuck file fails alone and the files behind it are scanned", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES, fileDeadlineMs: 3_000 });
    const pathological = "-----BEGIN PRIVATE KEY-----AAAAAAAAAAAAAAAAAAAA\n".repeat(48_000);
    const outcomes = await Promise.all([
      scanner.scan(job(`t = ${ghp}\n`, "first.txt")),
      scanner.scan(job(pathological, "bundle.pem")),
      ...Array.from({ length: 20 }, (_, i) => scanner?.scan(job(`t = ${ghp}\n`, `after-${i}.txt`))),
    ]);
    expect(outcomes[0]?.ok && outcomes[0].diagnostics.map((d) => d.range?.path)).toEqual(["first.txt"]);
    expect(outcomes[1]).toEqual({ ok: false, reason: "deadline" });
    // In order, each with its own finding: re-posted to the replacement worker, none lost or swapped.
    expect(outcomes.slice(2).map((o) => o?.ok && o.diagnostics.map((d) => d.range?.path)[0])).toEqual(
      Array.from({ length: 20 }, (_, i) => `after-${i}.txt`),
    );
  }, 120_000);

  it("a cancelled request is a 'cancelled' outcome", async () => {
    scanner = createBoundedScanner({ workerUrl, rules: DEFAULT_RULES });
    const controller = new AbortController();
    controller.abort();
    expect(await scanner.scan(job("x"), controller.signal)).toEqual({ ok: false, reason: "cancelled" });
  });
});
