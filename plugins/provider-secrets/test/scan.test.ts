import { type Diagnostic, validateAssessment } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compileAllowlist,
  DEFAULT_RULES,
  effectiveAllowlist,
  findingFingerprint,
  isBinary,
  isPlaceholder,
  parseSecretsConfig,
  passesEntropy,
  scanBlob,
  scanText,
  secretFingerprint,
  shannonEntropy,
} from "../src/index.js";
import { ALNUM, BASE64, fake, HEX, samples, UPPER_DIGITS } from "./fakes.js";

/** Diagnostics are valid wherever an Assessment carries them. */
function expectValid(diagnostics: Diagnostic[]): void {
  const r = validateAssessment({
    provider: { id: "asp.provider-secrets", version: "0.1.0" },
    requestId: "r",
    status: "complete",
    validAsOf: { baseline: `sha256:${"0".repeat(64)}`, changeset: null, reads: [] },
    diagnostics,
  });
  expect(r.ok ? [] : r.errors).toEqual([]);
}

describe("scanText", () => {
  describe("when a file holds one sample of each rule", () => {
    it.each(samples().map((s) => [s.rule, s] as const))("finds %s at its location", async (rule, s) => {
      const text = `// header\nconst x = 1;\n${s.line}\n`;
      const found = await scanText(text, "src/config.ts");
      expect(found.map((d) => d.code)).toEqual([`secrets/${rule}`]);
      const d = found[0] as Diagnostic;
      const offset = text.indexOf(s.secret);
      const before = text.slice(0, offset).split("\n");
      expect(d.range?.start).toEqual({ line: before.length - 1, character: (before.at(-1) as string).length });
      expect(d.fingerprint).toBe(findingFingerprint(rule, "src/config.ts", s.secret));
      expect((d.data as { secretFingerprint: string }).secretFingerprint).toBe(secretFingerprint(rule, s.secret));
      expect(d.help).toBeTruthy();
      expect(JSON.stringify(found)).not.toContain(s.secret.trim());
      expectValid(found);
    });
  });

  describe("when an AWS key sits in an assignment", () => {
    it("reports it once, under the specific rule (not also as a high-entropy string)", async () => {
      const key = `AKIA${fake(UPPER_DIGITS, 16, 7)}`;
      const found = await scanText(`export const AWS_ACCESS_KEY = "${key}";\n`, "a.ts");
      expect(found.map((d) => d.code)).toEqual(["secrets/aws-access-key-id"]);
      expect(found[0]?.severity).toBe("error");
    });
    it("finds a fake key of AKIA plus 16 random upper-case characters anywhere", async () => {
      await fc.assert(
        fc.asyncProperty(fc.stringMatching(/^[A-Z0-9]{16}$/), async (tail) => {
          const key = `AKIA${tail}`;
          const found = await scanText(`x ${key} y`, "k.txt");
          return found.some((d) => d.code === "secrets/aws-access-key-id");
        }),
        { numRuns: 100 },
      );
    });
  });

  describe("documented example values", () => {
    const line = "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n";
    it("are allowlisted by default (AWS's AKIAIOSFODNN7EXAMPLE is published, never a live key)", async () => {
      expect(await scanText(line, "docs/setup.md")).toEqual([]);
    });
    it("are reported when a repository turns documentedExamples off", async () => {
      const allow = effectiveAllowlist(DEFAULT_RULES, parseSecretsConfig('{"documentedExamples": false}'));
      expect((await scanText(line, "docs/setup.md", DEFAULT_RULES, allow)).map((d) => d.code)).toEqual([
        "secrets/aws-access-key-id",
      ]);
    });
  });

  describe("allowlists", () => {
    const key = `AKIA${fake(UPPER_DIGITS, 16, 11)}`;
    const text = `key: ${key}\n`;
    it("skip paths matching a glob (dot files included)", async () => {
      const allow = compileAllowlist({ paths: ["test/fixtures/**", "**/.env.example"] });
      expect(await scanText(text, "test/fixtures/creds.txt", DEFAULT_RULES, allow)).toEqual([]);
      expect(await scanText(text, "app/.env.example", DEFAULT_RULES, allow)).toEqual([]);
      expect(await scanText(text, "src/creds.txt", DEFAULT_RULES, allow)).toHaveLength(1);
    });
    it("drop a finding by its secret fingerprint, wherever the value occurs", async () => {
      const allow = compileAllowlist({ fingerprints: [secretFingerprint("aws-access-key-id", key)] });
      expect(await scanText(text, "a.txt", DEFAULT_RULES, allow)).toEqual([]);
      expect(await scanText(text, "b/c.txt", DEFAULT_RULES, allow)).toEqual([]);
    });
    it("drop one finding by its own fingerprint, only at that path", async () => {
      const allow = compileAllowlist({ fingerprints: [findingFingerprint("aws-access-key-id", "a.txt", key)] });
      expect(await scanText(text, "a.txt", DEFAULT_RULES, allow)).toEqual([]);
      expect(await scanText(text, "b.txt", DEFAULT_RULES, allow)).toHaveLength(1);
    });
  });

  describe("the high-entropy assignment rule", () => {
    it.each([
      "changeme_changeme_changeme",
      "this_is_not_a_secret_value",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
      "process.env.API_TOKEN_VALUE",
      "1111111111222222222233333333334444",
      "short1",
    ])("ignores the low-entropy or word-like value %s", async (value) => {
      expect(await scanText(`api_token = "${value}"\n`, "a.env")).toEqual([]);
    });
    it("reports a random base64 or hex value, as a warning with its entropy", async () => {
      for (const value of [fake(BASE64, 32, 3), fake(HEX, 40, 4)]) {
        const [d, ...rest] = await scanText(`client_secret: '${value}'\n`, "a.yml");
        expect(rest).toEqual([]);
        expect(d?.code).toBe("secrets/high-entropy-assignment");
        expect(d?.severity).toBe("warning");
        expect(((d?.data ?? {}) as { entropy: number }).entropy).toBeGreaterThan(3);
      }
    });
    it("ignores random values that are not assigned to a secret-looking name", async () => {
      expect(await scanText(`const colour = "${fake(BASE64, 32, 5)}";\n`, "a.ts")).toEqual([]);
    });
  });

  describe("placeholders (issue 26)", () => {
    it("a value mostly made of repeated characters, or a documentation password in a URL, is a placeholder", () => {
      for (const v of [
        `ghp_${"x".repeat(36)}`,
        `glpat-${"X".repeat(20)}`,
        `xoxb-${"0".repeat(12)}-${"0".repeat(13)}-${"x".repeat(24)}`,
        "AKIAXXXXXXXXXXXXXXXX",
        "ghp_x0xx00x0xXxx0x000xxxx0xx0x0xxxXx00x0",
        "sk_live_****************",
        "redis://user:pass@localhost:6379",
        "postgres://postgres:postgres@db:5432/app",
      ]) {
        expect(isPlaceholder(v), v).toBe(true);
      }
    });

    it("a random token never is, whatever its alphabet (property), nor a private key block with runs of A", () => {
      fc.assert(
        fc.property(
          fc.constantFrom(ALNUM, HEX, BASE64, UPPER_DIGITS),
          fc.integer({ min: 16, max: 64 }),
          fc.nat(),
          (alphabet, length, seed) => {
            const token = fake(alphabet, length, seed);
            return !isPlaceholder(token) && !isPlaceholder(`ghp_${token}`);
          },
        ),
      );
      const key = samples().find((s) => s.rule === "private-key");
      if (key !== undefined) expect(isPlaceholder(key.secret)).toBe(false);
      expect(
        isPlaceholder("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQAAACDx"),
      ).toBe(false);
      expect(isPlaceholder(`redis://user:${fake(ALNUM, 16, 7)}@cache.internal:6379`)).toBe(false);
    });

    it("placeholders give no finding, and are not reported by a more generic rule either", async () => {
      const text = [
        `GITHUB_TOKEN=ghp_${"x".repeat(36)}`,
        "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX",
        "REDIS_URL=redis://user:pass@localhost:6379/0",
        `SLACK_TOKEN=xoxb-${"0".repeat(12)}-${"0".repeat(13)}-${"x".repeat(24)}`,
        "credentialsId: 'a1b2c3d4-e5f6-4789-abcd-0123456789ab'",
      ].join("\n");
      expect(await scanText(text, "docs/setup.md")).toEqual([]);
    });
  });

  describe("fingerprints", () => {
    const key = `ghp_${fake(ALNUM, 36, 9)}`;
    it("survive unrelated line shifts (content-based, not position-based)", async () => {
      const a = (await scanText(`t = ${key}\n`, "a.ts"))[0]?.fingerprint;
      const b = (await scanText(`\n\n// moved\n\n   t = ${key}\n`, "a.ts"))[0]?.fingerprint;
      expect(a).toBeDefined();
      expect(a).toBe(b);
    });
    it("differ per path so two leaking files stay two findings; the secret fingerprint is shared", async () => {
      const [a] = await scanText(`t = ${key}\n`, "a.ts");
      const [b] = await scanText(`t = ${key}\n`, "b.ts");
      expect(a?.fingerprint).not.toBe(b?.fingerprint);
      expect(((a?.data ?? {}) as { secretFingerprint: string }).secretFingerprint).toBe(
        ((b?.data ?? {}) as { secretFingerprint: string }).secretFingerprint,
      );
    });
    it("fold repeats of one value in one file into one finding with its occurrence count", async () => {
      const found = await scanText(`a = ${key}\nb = ${key}\n`, "a.ts");
      expect(found).toHaveLength(1);
      expect(((found[0]?.data ?? {}) as { occurrences: number }).occurrences).toBe(2);
    });
  });

  describe("redaction (property)", () => {
    const secretArb = fc.oneof(
      fc.stringMatching(/^[A-Z0-9]{16}$/).map((t) => ({ secret: `AKIA${t}`, line: (s: string) => `id=${s}` })),
      fc.stringMatching(/^[A-Za-z0-9]{36}$/).map((t) => ({ secret: `ghp_${t}`, line: (s: string) => `tok ${s}` })),
      fc
        .stringMatching(/^[A-Za-z0-9+/]{28}$/)
        .map((t) => ({ secret: `${t}7Qz9`, line: (s: string) => `password = "${s}"` })),
    );
    const noise = fc.array(fc.stringMatching(/^[ -~]{0,60}$/), { maxLength: 8 });
    it("never echoes a random secret embedded in random text, in any field", async () => {
      await fc.assert(
        fc.asyncProperty(secretArb, noise, noise, async ({ secret, line }, before, after) => {
          const text = [...before, line(secret), ...after].join("\n");
          const out = JSON.stringify(await scanText(text, "src/file.txt"));
          expect(out).not.toContain(secret);
        }),
        { numRuns: 300 },
      );
    });
    it("reports every planted token-shaped secret (the property above is not vacuous)", async () => {
      await fc.assert(
        fc.asyncProperty(secretArb, async ({ secret, line }) => {
          const found = await scanText(`${line(secret)}\n`, "f.txt");
          // Only the generic rule has an entropy gate; fast-check's biased strings may fall under it.
          return found.length >= 1 || shannonEntropy(secret) < 3.5;
        }),
        { numRuns: 200 },
      );
    });
  });

  describe("a private key block", () => {
    it("spans its lines and is reported without any of its body", async () => {
      const s = samples(42).find((x) => x.rule === "private-key");
      if (s === undefined) throw new Error("no sample");
      const [d] = await scanText(`a\n${s.line}\n`, "id_rsa");
      expect(d?.range?.start.line).toBe(1);
      expect(d?.range?.end.line).toBe(6);
      for (const bodyLine of s.secret.trim().split("\n")) expect(JSON.stringify(d)).not.toContain(bodyLine);
    });
    it("is not reported for a header alone (code that checks for PEM headers)", async () => {
      expect(await scanText('if (pem.startsWith("-----BEGIN PRIVATE KEY-----")) {}\n', "a.ts")).toEqual([]);
    });
  });
});

describe("no bypass", () => {
  const ghp = `ghp_${fake(ALNUM, 36, 301)}`;
  const aws = `AKIA${fake(UPPER_DIGITS, 16, 302)}`;
  it("a secretlint-disable comment in the scanned file does not switch the catalogue off", async () => {
    const text = `// secretlint-disable\nconst t = "${ghp}"; // secretlint-disable-line\n`;
    expect((await scanText(text, "a.ts")).map((d) => d.code)).toEqual(["secrets/secretlint-github"]);
  });
  it("a blob with invalid UTF-8 and NUL bytes is read as latin1 and scanned", async () => {
    const bytes = new Uint8Array([0xc3, 0x28, 0x00, ...new TextEncoder().encode(`key=${aws}\n`), 0xfe]);
    const found = await scanBlob(bytes, "blob.bin");
    expect(found.map((d) => [d.code, (d.data as { textEncoding?: string }).textEncoding])).toEqual([
      ["secrets/aws-access-key-id", "latin1"],
    ]);
  });
  it.each<[string, (s: string) => string]>([
    ["base64", (s) => Buffer.from(s).toString("base64")],
    ["base64url", (s) => Buffer.from(s).toString("base64url")],
    ["hex", (s) => Buffer.from(s).toString("hex")],
    ["base64 of base64", (s) => Buffer.from(Buffer.from(s).toString("base64")).toString("base64")],
  ])("a token %s-encoded is decoded, found at the encoded run, and never echoed", async (_how, encode) => {
    const encoded = encode(`token: ${ghp}`);
    const text = `blob = "${encoded}"\n`;
    const found = await scanText(text, "a.cfg");
    expect(found.map((d) => d.code)).toEqual(["secrets/secretlint-github"]);
    expect(found[0]?.range?.start.character).toBe(text.indexOf(encoded));
    expect(found[0]?.fingerprint).toBe(findingFingerprint("secretlint-github", "a.cfg", ghp));
    const out = JSON.stringify(found);
    expect(out).not.toContain(ghp);
    expect(out).not.toContain(encoded);
  });
  it("random base64 (a lock file's integrity hashes) decodes to nothing that is reported", async () => {
    const text = Array.from({ length: 50 }, (_, i) => `integrity sha512-${fake(BASE64, 86, 400 + i)}==`).join("\n");
    expect(await scanText(text, "pnpm-lock.yaml")).toEqual([]);
  });
});

describe("shannonEntropy", () => {
  it.each([
    ["", 0],
    ["aaaa", 0],
    ["ab", 1],
    ["0123456789abcdef", 4],
  ])("of %j is %d bits", (s, bits) => {
    expect(shannonEntropy(s)).toBeCloseTo(bits, 10);
  });
  it("gates by alphabet: hex values need less entropy than base64", async () => {
    const gate = { minLength: 8, hex: 3, base64: 4.5 };
    expect(passesEntropy("0123456789abcdef", gate)).toBe(true);
    expect(passesEntropy("ABCDEFGHIJKLMNOP", gate)).toBe(false);
  });
});

describe("isBinary", () => {
  it("treats a NUL byte or invalid UTF-8 as binary, text as text", async () => {
    expect(isBinary(new Uint8Array([0x41, 0x00, 0x42]))).toBe(true);
    expect(isBinary(new Uint8Array([0xff, 0xfe, 0x41]))).toBe(true);
    expect(isBinary(new TextEncoder().encode("héllo\n"))).toBe(false);
  });
});
