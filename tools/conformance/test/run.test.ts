import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PROTOCOL_VERSION } from "@asp/contracts";
import { METHODS, ProviderConnection } from "@asp/protocol";
import { describe, expect, it } from "vitest";
import { CHECKS, type ConformanceReport, formatReport, isConformanceReport, runConformance } from "../src/index.js";

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const EXAMPLE = fileURLToPath(new URL("../../../plugins/provider-example/plugin/main.mjs", import.meta.url));
const THS_FIXTURES = fileURLToPath(new URL("../../../packages/ths/test/fixtures/", import.meta.url));

const run = (script: string, extra: { cancelBoundMs?: number } = {}): Promise<ConformanceReport> =>
  runConformance({ command: [process.execPath, script], timeoutMs: 5000, cancelBoundMs: 2000, ...extra });

const failed = (r: ConformanceReport): string[] => r.checks.filter((c) => c.status === "fail").map((c) => c.id);

describe("runConformance", () => {
  describe("when the provider conforms", () => {
    it("H0.1 passes the SDK's example provider (plugins/provider-example)", async () => {
      const r = await run(EXAMPLE);
      expect(failed(r), formatReport(r)).toEqual([]);
      expect(r.passed).toBe(true);
      expect(r.provider).toEqual({ id: "provider-example", version: "1.0.0" });
      expect(r.checks.map((c) => c.id)).toEqual(CHECKS.map((c) => c.id));
      expect(isConformanceReport(r)).toBe(true);
    });

    it("passes a raw provider that follows the protocol, with a reproducible digest", async () => {
      const [a, b] = await Promise.all([run(fixture("fake-good.mjs")), run(fixture("fake-good.mjs"))]);
      expect(failed(a as ConformanceReport), formatReport(a as ConformanceReport)).toEqual([]);
      expect(a?.digest).toBe(b?.digest);
      expect(a?.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    });

    it("binds the subject digest into the conformance digest", async () => {
      const subjectDigest = `sha256:${"a".repeat(64)}`;
      const [plain, bound] = await Promise.all([
        run(fixture("fake-good.mjs")),
        runConformance({ command: [process.execPath, fixture("fake-good.mjs")], timeoutMs: 3000, subjectDigest }),
      ]);
      expect(bound.subjectDigest).toBe(subjectDigest);
      expect(bound.digest).not.toBe(plain.digest);
    });
  });

  describe("when the provider does not declare check", () => {
    it("H2.3 accepts an honest `unsupported` answer to check/assess (a capability gap, host §2)", async () => {
      const r = await run(fixture("fake-edit-only.mjs"));
      expect(failed(r), formatReport(r)).toEqual([]);
    });
    it("still fails assess-status when the provider declares check and answers `unsupported`", async () => {
      const r = await runConformance({
        command: [process.execPath, fixture("fake-edit-only.mjs"), "--claims-check"],
        timeoutMs: 5000,
        cancelBoundMs: 2000,
      });
      expect(failed(r)).toEqual(["assess-status"]);
    });
  });

  // Each fault fixture breaks one obligation; the report must name that check.
  describe("when the provider misbehaves", () => {
    it.each([
      ["fake-host-owned.mjs", "host-owned-fields"],
      ["fake-stale-valid-as-of.mjs", "valid-as-of"],
      ["fake-undeclared-source.mjs", "declared-sources"],
      ["fake-reads-disk.mjs", "callback-reads"],
      ["fake-ignores-cancel.mjs", "cancellation"],
      ["fake-unclean-shutdown.mjs", "shutdown"],
      ["fake-crash-at-start.mjs", "initialize"],
      ["fake-non-json.mjs", "transport"],
      ["fake-unknown-method-result.mjs", "unknown-method"],
      ["fake-incompatible-version.mjs", "protocol-version"],
    ])("%s fails %s", async (script, check) => {
      const r = await run(fixture(script));
      expect(r.passed).toBe(false);
      expect(failed(r), formatReport(r)).toContain(check);
    });

    it("fails a command that cannot be launched, without throwing", async () => {
      const r = await runConformance({ command: ["/nonexistent/provider-binary"], timeoutMs: 1000 });
      expect(r.passed).toBe(false);
      expect(failed(r)).toContain("initialize");
    });
  });

  it("rejects an empty command", async () => {
    await expect(runConformance({ command: [] })).rejects.toThrowWithCode("ASP_CONFORMANCE_BAD_OPTIONS");
  });

  // The host engineer's protocol fault fixtures (packages/ths/test/fixtures): each fails its check.
  describe.skipIf(!existsSync(THS_FIXTURES))("the host's fault fixtures", () => {
    it.concurrent.each([
      ["fake-crash-start.mjs", "initialize", []],
      ["fake-crash-mid.mjs", "assess-deadline", []],
      ["fake-hang.mjs", "assess-deadline", []],
      ["fake-late.mjs", "assess-deadline", ["--delay", "6000"]],
      ["fake-non-json.mjs", "transport", []],
      ["fake-schema-invalid.mjs", "assess-shape", []],
      ["fake-host-owned.mjs", "host-owned-fields", []],
      ["fake-oversize.mjs", "response-size", []],
      ["fake-callback-flood.mjs", "callback-budget", []],
      ["fake-read-outside.mjs", "reads-in-baseline", []],
      ["fake-stale.mjs", "valid-as-of", []],
      ["fake-undeclared-source.mjs", "declared-sources", []],
      ["fake-unsupported.mjs", "assess-status", []],
      ["fake-error.mjs", "assess-status", []],
      ["fake-incompatible.mjs", "protocol-version", []],
      ["fake-exit-on-shutdown.mjs", "shutdown", []],
    ] as const)("%s fails %s", async (script, check, args) => {
      const r = await runConformance({
        command: [process.execPath, join(THS_FIXTURES, script), ...args],
        timeoutMs: 3000,
        cancelBoundMs: 1000,
        maxCallbacksPerRequest: 32,
      });
      expect(r.passed).toBe(false);
      expect(failed(r), formatReport(r)).toContain(check);
    });
  });
});

// host §8: the response-size bound is judged on the framed Content-Length, by the kit exactly as
// by the host (both through @asp/protocol's ProviderConnection). A provider that pads a small
// answer with JSON whitespace is under the bound re-serialized and over it framed.
describe("H8.4 response size, judged as the host judges it (host §8)", () => {
  const BOUND = 16 * 1024;
  const padded = fixture("fake-padded-answer.mjs");

  /** The host's verdict: the call path ths's supervisor uses, with the same bound. */
  async function hostVerdict(pad: number): Promise<"accepted" | string> {
    const conn = ProviderConnection.launch(
      { executable: process.execPath, args: [padded, String(pad)], cwd: process.cwd(), env: { PATH: "" } },
      BOUND,
      () => {},
    );
    try {
      const init = await conn.call(
        METHODS.initialize,
        { protocolVersion: PROTOCOL_VERSION, host: { name: "h", version: "1.0.0" }, processId: null },
        15_000,
      );
      expect(init.ok).toBe(true);
      conn.notify(METHODS.initialized, { grants: [] });
      const r = await conn.call(
        METHODS.checkAssess,
        {
          requestId: "r1",
          callSite: "gate",
          baseline: `sha256:${"b".repeat(64)}`,
          changeset: null,
          requirements: [],
          deadlineMs: 5000,
        },
        5000,
      );
      return r.ok ? "accepted" : r.failure.kind;
    } finally {
      conn.kill();
    }
  }

  it("refuses a whitespace-padded answer whose framed size is over the bound, like the host", async () => {
    const pad = 64 * 1024;
    const [report, host] = await Promise.all([
      runConformance({ command: [process.execPath, padded, String(pad)], timeoutMs: 5000, maxResponseBytes: BOUND }),
      hostVerdict(pad),
    ]);
    expect(host).toBe("oversize");
    expect(failed(report), formatReport(report)).toContain("response-size");
  });

  it("accepts the same answer unpadded, like the host", async () => {
    const [report, host] = await Promise.all([
      runConformance({ command: [process.execPath, padded, "0"], timeoutMs: 5000, maxResponseBytes: BOUND }),
      hostVerdict(0),
    ]);
    expect(host).toBe("accepted");
    expect(report.checks.find((c) => c.id === "response-size")?.status, formatReport(report)).toBe("pass");
  });
});
