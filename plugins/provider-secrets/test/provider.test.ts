// The built provider as a real subprocess over the real protocol (LSP-framed JSON-RPC on stdio),
// with a test host serving host/readBlob / host/readTree from memory.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Assessment, validateAssessment } from "@asp/contracts";
import { builtEntry, type Files, type MemoryChangeset, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretFingerprint } from "../src/index.js";
import { ALNUM, fake, UPPER_DIGITS } from "./fakes.js";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
// One provider process serves every request of this file (as a host would); each request gets
// its own requestId, bound to the trees of its fixture.
const repo = new MemoryRepo();
let provider: TestHost;
let requests = 0;

beforeAll(async () => {
  const entry = builtEntry(PKG);
  provider = new TestHost(entry, { repo });
  await provider.initialize();
}, 120_000);

afterAll(() => provider.kill());

/** A base and an after tree with the changeset between them. */
interface Fixture {
  readonly base: string;
  readonly after: string;
  readonly changeset: MemoryChangeset;
}

async function assess(
  baseFiles: Files,
  afterFiles: Files,
  options: { callSite?: "gate" | "sweep"; whole?: boolean; deadlineMs?: number } = {},
): Promise<{ assessment: Assessment; requestId: string; fx: Fixture }> {
  const changeset = repo.changeset(baseFiles, afterFiles);
  const fx: Fixture = { base: changeset.base, after: changeset.after, changeset };
  const requestId = `req-${++requests}`;
  const assessment = await provider.request<Assessment>("check/assess", {
    requestId,
    callSite: options.callSite ?? "gate",
    baseline: options.whole === true ? fx.after : fx.base,
    changeset: options.whole === true ? null : fx.changeset,
    requirements: ["no-secrets"],
    deadlineMs: options.deadlineMs ?? 10_000,
  });
  return { assessment, requestId, fx };
}

const BASE: Files = { "README.md": "# app\n", "src/app.ts": "export const app = 1;\n" };

describe("provider-secrets over the protocol", () => {
  it("answers initialize with its identity, the secrets source and the check capability; exits 0 after shutdown", async () => {
    const own = new TestHost(builtEntry(PKG));
    const init = await own.initialize();
    expect(init).toMatchObject({
      provider: { id: "asp.provider-secrets", version: "0.1.0" },
      diagnosticSources: ["secrets"],
      capabilities: ["check"],
    });
    expect(await own.shutdown()).toBe(0);
  });

  describe("when a change plants a fake AWS key and a GitHub token", () => {
    const aws = `AKIA${fake(UPPER_DIGITS, 16, 101)}`;
    const ghp = `ghp_${fake(ALNUM, 36, 102)}`;
    const after: Files = {
      ...BASE,
      "src/app.ts": `export const app = 1;\nconst AWS_ACCESS_KEY_ID = "${aws}";\n`,
      "deploy/ci.env": `GITHUB_TOKEN=${ghp}\n`,
    };

    it("reports both as gating-severity findings with a next step, bound to the request", async () => {
      const { assessment, requestId, fx } = await assess(BASE, after);
      const checked = validateAssessment(assessment);
      expect(checked.ok ? [] : checked.errors).toEqual([]);
      expect(assessment.status).toBe("complete");
      expect(assessment.diagnostics.map((d) => [d.code, d.range?.path, d.severity])).toEqual([
        ["secrets/secretlint-github", "deploy/ci.env", "error"],
        ["secrets/aws-access-key-id", "src/app.ts", "error"],
      ]);
      for (const d of assessment.diagnostics) expect(d.help).toMatch(/rotate|revoke|deactivate/i);
      // host §5: validAsOf echoes the baseline, the changeset and exactly the blobs read.
      expect(assessment.validAsOf.baseline).toBe(fx.base);
      expect(assessment.validAsOf.changeset).toBe(fx.changeset.digest);
      expect(assessment.validAsOf.reads).toEqual([...(provider.served.get(requestId) ?? [])].sort());
      // Only the changed files were read (the unchanged README was not).
      expect(assessment.validAsOf.reads).toHaveLength(2);
    });

    it("never sends either secret, anywhere in anything it writes to stdout", async () => {
      await assess(BASE, after);
      const wire = provider.output();
      expect(wire).toContain("secrets/aws-access-key-id");
      expect(wire).not.toContain(aws);
      expect(wire).not.toContain(ghp);
      expect(wire).not.toContain(aws.slice(4)); // not even the random part
    });
  });

  describe("when the change is clean (the fixed change)", () => {
    it("answers complete with no findings", async () => {
      const { assessment } = await assess(BASE, { ...BASE, "src/app.ts": "export const app = 2;\n" });
      expect(assessment.status).toBe("complete");
      expect(assessment.diagnostics).toEqual([]);
      expect(assessment.coverage).toEqual({ sources: ["secrets"], paths: 1 });
    });
  });

  describe("content that is not clean UTF-8 text (no bypass by encoding)", () => {
    it("host §2: a blob with a NUL byte and an invalid UTF-8 byte is still scanned, as latin1", async () => {
      const aws = `AKIA${fake(UPPER_DIGITS, 16, 103)}`;
      const bytes = new Uint8Array([0x00, 0x01, ...new TextEncoder().encode(` ${aws} `), 0xff]);
      const { assessment } = await assess(BASE, { ...BASE, "assets/logo.png": bytes });
      expect(assessment.status).toBe("complete");
      expect(
        assessment.diagnostics.map((d) => [d.code, d.range?.path, (d.data as { textEncoding?: string }).textEncoding]),
      ).toEqual([["secrets/aws-access-key-id", "assets/logo.png", "latin1"]]);
      expect(JSON.stringify(assessment)).not.toContain(aws);
    });
    it("finds a token saved as UTF-16 (every other byte NUL)", async () => {
      const ghp = `ghp_${fake(ALNUM, 36, 110)}`;
      const bytes = new Uint8Array(Buffer.from(`\ufefftoken = ${ghp}\r\n`, "utf16le"));
      const { assessment } = await assess(BASE, { ...BASE, "notes.txt": bytes });
      expect(assessment.diagnostics.map((d) => [d.code, (d.data as { encoding?: string }).encoding])).toEqual([
        ["secrets/secretlint-github", "utf-16le"],
      ]);
      expect(JSON.stringify(assessment)).not.toContain(ghp);
    });
    it("decodes base64 and hex runs and finds the tokens inside, redacted", async () => {
      const aws = `AKIA${fake(UPPER_DIGITS, 16, 111)}`;
      const google = `AIza${fake(ALNUM, 35, 112)}`;
      const b64 = Buffer.from(`aws_access_key_id=${aws}`).toString("base64");
      const hex = Buffer.from(`maps key ${google}`).toString("hex");
      const { assessment } = await assess(BASE, {
        ...BASE,
        "k8s/secret.yaml": `data:\n  config: ${b64}\n`,
        "src/blob.ts": `export const blob = "${hex}";\n`,
      });
      expect(assessment.status).toBe("complete");
      expect(
        assessment.diagnostics.map((d) => [d.code, d.range?.path, (d.data as { encoding?: string }).encoding]),
      ).toEqual([
        ["secrets/aws-access-key-id", "k8s/secret.yaml", "base64"],
        ["secrets/google-api-key", "src/blob.ts", "hex"],
      ]);
      const out = JSON.stringify(assessment);
      for (const secret of [aws, google, b64, hex]) expect(out).not.toContain(secret);
    });
  });

  describe("a file whose scan does not end (bounded scan)", () => {
    // Thousands of key headers with no end line: every rule that looks for the end of a private
    // key block scans up to its window from each header, far past the per-file deadline.
    const pathological = "-----BEGIN PRIVATE KEY-----AAAAAAAAAAAAAAAAAAAA\n".repeat(48_000);
    it("host §2: goes to coverage.missing and the answer is incomplete; the other files are still scanned", async () => {
      const ghp = `ghp_${fake(ALNUM, 36, 113)}`;
      const { assessment } = await assess(
        BASE,
        { ...BASE, "certs/bundle.pem": pathological, "src/z.ts": `const t = "${ghp}";\n` },
        { deadlineMs: 120_000 },
      );
      expect(assessment.status).toBe("incomplete");
      expect(assessment.coverage?.missing).toEqual(["certs/bundle.pem"]);
      expect(assessment.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([
        ["secrets/secretlint-github", "src/z.ts"],
      ]);
    }, 150_000);
  });

  describe("more findings than the cap (issue 26 item 4)", () => {
    it("host §2: reports the first 500, says how many there were and which files were cut, and is incomplete", async () => {
      // 30 files with 20 distinct tokens each: 600 findings, 100 past the cap.
      const files: Record<string, string> = { ...BASE } as Record<string, string>;
      for (let f = 0; f < 30; f++) {
        const lines = Array.from({ length: 20 }, (_, i) => `t${i} = "ghp_${fake(ALNUM, 36, 1000 + f * 20 + i)}"`);
        files[`leak/f${String(f).padStart(2, "0")}.env`] = `${lines.join("\n")}\n`;
      }
      const { assessment } = await assess(BASE, files, { deadlineMs: 120_000 });
      expect(validateAssessment(assessment).ok).toBe(true);
      expect(assessment.status).toBe("incomplete");
      expect(assessment.diagnostics).toHaveLength(500);
      expect(assessment.coverage?.truncated).toEqual({ total: 600, reported: 500 });
      // Files 0–24 fit (25 × 20 = 500); the findings of files 25–29 were cut.
      expect(assessment.coverage?.missing).toEqual([
        "leak/f25.env",
        "leak/f26.env",
        "leak/f27.env",
        "leak/f28.env",
        "leak/f29.env",
      ]);
      expect(assessment.coverage?.paths).toBe(30);
    }, 150_000);
  });

  describe("asp.secrets.json", () => {
    const aws = `AKIA${fake(UPPER_DIGITS, 16, 104)}`;
    const config = JSON.stringify({
      allowlist: { paths: ["test/fixtures/**"], fingerprints: [secretFingerprint("aws-access-key-id", aws)] },
    });
    it("applies when it is in the base tree (by path and by fingerprint)", async () => {
      const base = { ...BASE, "asp.secrets.json": config };
      const { assessment } = await assess(base, {
        ...base,
        "test/fixtures/creds.txt": `ghp_${fake(ALNUM, 36, 105)}\n`,
        "src/app.ts": `const k = "${aws}";\n`,
      });
      expect(assessment.status).toBe("complete");
      expect(assessment.diagnostics).toEqual([]);
    });
    it("does not apply when the change itself adds it (a change cannot allowlist its own secret)", async () => {
      const { assessment } = await assess(BASE, {
        ...BASE,
        "asp.secrets.json": config,
        "src/app.ts": `const k = "${aws}";\n`,
      });
      expect(assessment.diagnostics.map((d) => d.code)).toEqual(["secrets/aws-access-key-id"]);
    });
    it("makes the answer an error when it is invalid (never a silent pass)", async () => {
      const base = { ...BASE, "asp.secrets.json": '{"allowlist": {"values": ["x"]}}' };
      const { assessment } = await assess(base, { ...base, "src/app.ts": "x\n" });
      expect(assessment.status).toBe("error");
      expect(assessment.error?.code).toBe("ASP_SECRETS_INVALID_CONFIG");
    });
  });

  describe("a sweep", () => {
    it("scans every file of the tree, not only the changed ones", async () => {
      const slack = `xoxb-${fake("0123456789", 12, 106)}-${fake(ALNUM, 24, 107)}`;
      const files = { ...BASE, "old/legacy.cfg": `slack = ${slack}\n` };
      const { assessment } = await assess(files, files, { callSite: "sweep", whole: true });
      expect(assessment.status).toBe("complete");
      expect(assessment.validAsOf.changeset).toBeNull();
      expect(assessment.diagnostics.map((d) => d.code)).toEqual(["secrets/secretlint-slack"]);
      expect(assessment.coverage?.paths).toBe(3);
    });
  });
});
