import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { digest } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { REPO_ROOT, runBinary, runInProcess } from "./helpers.js";

const EXAMPLE = join(REPO_ROOT, "examples/asp.policy.json");

/** A base policy of our own (the shipped example evolves with the example plugins). */
const example = (): Record<string, unknown> => ({
  apiVersion: "asp.policy/v1",
  requirements: [
    { id: "types", capability: "check", sources: ["ts"], callSites: ["interactive", "gate", "sweep"] },
    { id: "secrets", capability: "check", sources: ["secrets"], callSites: ["gate", "sweep"] },
  ],
  providers: [],
  grants: [],
  severityCaps: [{ authority: "ungranted", maxSeverity: "warning" }],
  assurance: { interactive: "advisory", gate: "gated", sweep: "gated" },
  permissions: { default: "ask", rules: [{ tool: "shell", outcome: "deny" }] },
});

function workdir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-policy-cli-"));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

describe("asp policy validate", () => {
  describe("when the policy is valid", () => {
    it("summarizes what it requires and grants", async () => {
      const r = await runInProcess(["policy", "validate", "base.json"], { cwd: workdir({ "base.json": example() }) });
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("valid asp.policy/v1");
      expect(r.stdout).toMatch(/gate\s+requires secrets, types; assurance gated/);
      expect(r.stdout).toContain("no grants");
    });

    it("accepts the shipped example policy", async () => {
      const r = await runInProcess(["policy", "validate", EXAMPLE]);
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("valid asp.policy/v1");
    });

    it("prints the report as JSON with --json", async () => {
      const r = await runInProcess(["--json", "policy", "validate", "base.json"], {
        cwd: workdir({ "base.json": example() }),
      });
      expect(r.code).toBe(EXIT.ok);
      const report = JSON.parse(r.stdout);
      expect(report).toMatchObject({
        valid: true,
        apiVersion: "asp.policy/v1",
        digest: digest(example()),
        requirements: { interactive: ["types"], gate: ["secrets", "types"], sweep: ["secrets", "types"] },
        grants: [],
      });
      expect(report.failPolicy.timed_out.gate).toBe("indeterminate");
    });
  });

  describe("when the policy is invalid", () => {
    it.each([
      ["an unknown field", { ...example(), extra: 1 }, "ASP_POLICY_UNKNOWN_FIELD", "/extra"],
      [
        "a gate cell opened",
        { ...example(), failPolicy: { crashed: { gate: "open" } } },
        "ASP_POLICY_FAIL_OPEN_FLOOR",
        "/failPolicy/crashed/gate",
      ],
      [
        "a launch command",
        { ...example(), host: { implementation: "asp.ths", command: "node evil.js" } },
        "ASP_POLICY_LAUNCH_INSTRUCTION",
        "/host/command",
      ],
      ["text that is not JSON", "{ nope", "ASP_POLICY_NOT_JSON", ""],
    ])("exits 64 on %s, naming the code and pointer", async (_why, content, code, pointer) => {
      const cwd = workdir({ "p.json": content });
      const human = await runInProcess(["policy", "validate", "p.json"], { cwd });
      expect(human.code).toBe(EXIT.usage);
      expect(human.stdout).toBe("");
      expect(human.stderr).toContain(`asp: ${code}: policy p.json is invalid`);
      expect(human.stderr).toContain(`${pointer || "/"}  ${code}`);
      const machine = await runInProcess(["--json", "policy", "validate", "p.json"], { cwd });
      expect(machine.code).toBe(EXIT.usage);
      expect(JSON.parse(machine.stdout).error).toMatchObject({ code, data: { pointer, errors: expect.any(Array) } });
    });

    it("lists every problem on stderr", async () => {
      const cwd = workdir({ "p.json": { ...example(), extra: 1, assurance: { gate: "sandboxed" } } });
      const r = await runInProcess(["policy", "validate", "p.json"], { cwd });
      expect(r.stderr).toContain("p.json: 2 problems");
      expect(r.stderr).toContain("/assurance/gate  ASP_POLICY_UNKNOWN_VALUE");
    });

    it("exits 64 when the file cannot be read", async () => {
      const r = await runInProcess(["policy", "validate", "missing.json"], { cwd: workdir({}) });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stderr).toContain("asp: ASP_CLI_BAD_INPUT: cannot read policy missing.json: ENOENT");
    });
  });
});

describe("asp policy digest", () => {
  it("prints the digest of the canonical document, whatever the formatting", async () => {
    const cwd = workdir({ "compact.json": JSON.stringify(example()), "pretty.json": example() });
    const a = await runInProcess(["policy", "digest", "compact.json"], { cwd });
    const b = await runInProcess(["--json", "policy", "digest", "pretty.json"], { cwd });
    expect(a.code).toBe(EXIT.ok);
    expect(a.stdout).toBe(`${digest(example())}  compact.json\n`);
    expect(JSON.parse(b.stdout)).toEqual({ path: "pretty.json", digest: digest(example()) });
  });

  it("refuses to give an invalid policy an identity (exit 64)", async () => {
    const cwd = workdir({
      "p.json": {
        ...example(),
        grants: [
          {
            provider: "x",
            version: "1.0.0",
            digest: `sha256:${"a".repeat(64)}`,
            requirement: "types",
            callSites: ["gate"],
          },
        ],
      },
    });
    const r = await runInProcess(["policy", "digest", "p.json"], { cwd });
    expect(r.code).toBe(EXIT.usage);
    expect(r.stderr).toContain("asp: ASP_POLICY_UNPINNED_GRANT");
  });
});

// host §7: a candidate policy is pending; diff lists every self-authorization attempt.
describe("asp policy diff", () => {
  const pin = { id: "acme.provider-lax", version: "1.0.0", digest: `sha256:${"b".repeat(64)}` };
  const selfAuthorizing = {
    ...example(),
    providers: [pin],
    grants: [{ provider: pin.id, version: pin.version, digest: pin.digest, requirement: "types", callSites: ["gate"] }],
    assurance: { interactive: "advisory", gate: "advisory", sweep: "gated" },
  };

  describe("when the candidate self-authorizes", () => {
    it("H7.3 lists each attempt and exits 1", async () => {
      const cwd = workdir({ "base.json": example(), "cand.json": selfAuthorizing });
      const r = await runInProcess(["policy", "diff", "base.json", "cand.json"], { cwd });
      expect(r.code).toBe(EXIT.deny);
      expect(r.stdout).toContain("self-authorization attempts (2):");
      expect(r.stdout).toMatch(/grants-new-provider\s+candidate \/grants\/0/);
      expect(r.stdout).toMatch(/lowers-assurance\s+candidate \/assurance\/gate/);
      expect(r.stdout).toMatch(/added\s+providers acme\.provider-lax/);
    });

    it("prints attempts, changes and degraded entries with --json", async () => {
      const cwd = workdir({ "base.json": example(), "cand.json": selfAuthorizing });
      const r = await runInProcess(["--json", "policy", "diff", "base.json", "cand.json"], { cwd });
      expect(r.code).toBe(EXIT.deny);
      const out = JSON.parse(r.stdout);
      expect(out.selfAuthorizing).toBe(true);
      expect(out.candidate.status).toBe("pending");
      expect(out.attempts.map((a: { kind: string }) => a.kind).sort()).toEqual([
        "grants-new-provider",
        "lowers-assurance",
      ]);
      expect(out.degraded.every((d: { reason: string }) => d.reason === "policy-self-authorization")).toBe(true);
    });

    it("compares against the base tightened by an organization floor", async () => {
      const floor = {
        apiVersion: "asp.policy/v1",
        requirements: [],
        providers: [],
        grants: [],
        assurance: { sweep: "isolated" },
      };
      const cwd = workdir({ "base.json": example(), "cand.json": example(), "floor.json": floor });
      const r = await runInProcess(["--json", "policy", "diff", "base.json", "cand.json", "--floor", "floor.json"], {
        cwd,
      });
      expect(r.code).toBe(EXIT.deny);
      expect(JSON.parse(r.stdout).attempts).toEqual([
        expect.objectContaining({ kind: "lowers-assurance", callSite: "sweep" }),
      ]);
    });
  });

  describe("when the candidate only tightens", () => {
    it("lists the changes and exits 0", async () => {
      const tighter = { ...example(), assurance: { interactive: "gated", gate: "mediated-write", sweep: "gated" } };
      const cwd = workdir({ "base.json": example(), "cand.json": tighter });
      const r = await runInProcess(["policy", "diff", "base.json", "cand.json"], { cwd });
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("self-authorization attempts: none");
      expect(r.stdout).toMatch(/changed\s+assurance gate/);
    });
  });

  describe("when either side is invalid", () => {
    it("exits 64: an invalid candidate is reported, never compared", async () => {
      const cwd = workdir({ "base.json": example(), "cand.json": { ...example(), grants: "all" } });
      const r = await runInProcess(["policy", "diff", "base.json", "cand.json"], { cwd });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stderr).toContain("asp: ASP_POLICY_INVALID_VALUE: policy cand.json is invalid: /grants");
    });
  });
});

describe("asp policy (built binary)", () => {
  it("validates, digests and diffs through the real process", () => {
    const cwd = workdir({
      "base.json": example(),
      "cand.json": { ...example(), failPolicy: { crashed: { sweep: "open" } } },
    });
    const validate = runBinary(["policy", "validate", EXAMPLE], cwd);
    expect(validate.code).toBe(0);
    expect(validate.stdout).toContain("valid asp.policy/v1");
    const d = runBinary(["--json", "policy", "digest", "base.json"], cwd);
    expect(JSON.parse(d.stdout).digest).toBe(digest(example()));
    const diff = runBinary(["policy", "diff", "base.json", "cand.json"], cwd);
    expect(diff.code).toBe(1);
    expect(diff.stdout).toMatch(/opens-fail-policy-cell\s+candidate \/failPolicy\/crashed\/sweep/);
    const bad = runBinary(["policy", "validate", "nope.json"], cwd);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toMatch(/^asp: ASP_CLI_BAD_INPUT: cannot read policy nope\.json/m);
  });
});
