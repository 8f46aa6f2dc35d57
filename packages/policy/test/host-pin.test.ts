import type { Policy } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { hostPinMismatch, parsePolicy, type RunningHost, validatePolicy } from "../src/index.js";
import { basePolicy, D } from "./fixtures/policies.js";

const THS: RunningHost = { name: "asp-ths", version: "0.1.0", digest: null };
const withHost = (host: Policy["host"]): Policy => {
  const { host: _drop, ...rest } = basePolicy();
  return host === undefined ? rest : { ...rest, host };
};

describe("H2.6 hostPinMismatch (host §2: an incompatible host is never allow)", () => {
  describe("when the running host matches", () => {
    it.each([
      ["no host block", undefined],
      ["the implementation only", { implementation: "asp-ths" }],
      ["the exact version", { implementation: "asp-ths", version: "0.1.0" }],
      ["a caret range", { implementation: "asp-ths", version: "^0.1.0" }],
      ["a two-sided range", { implementation: "asp-ths", version: ">=0.1.0 <0.3.0" }],
      ["an or-range", { implementation: "asp-ths", version: "0.0.x || 0.1.x" }],
      ["a hyphen range", { implementation: "asp-ths", version: "0.1.0 - 0.2.0" }],
    ] as const)("is null for %s", (_what, host) => {
      expect(hostPinMismatch(parsePolicy(withHost(host)), THS)).toBeNull();
    });

    it("accepts a digest pin only from a host that measured that digest", () => {
      const policy = parsePolicy(withHost({ implementation: "asp-ths", digest: D(4) }));
      expect(hostPinMismatch(policy, { ...THS, digest: D(4) })).toBeNull();
    });
  });

  describe("when it does not", () => {
    it.each([
      ["another implementation", { implementation: "asp.ths" }, THS, "implementation"],
      ["a version outside the range", { implementation: "asp-ths", version: "^0.2.0" }, THS, "version"],
      ["another exact version", { implementation: "asp-ths", version: "0.1.1" }, THS, "version"],
      [
        "a pre-release host under a plain range",
        { implementation: "asp-ths", version: "^0.1.0" },
        { ...THS, version: "0.2.0-rc.1" },
        "version",
      ],
      [
        "an unparseable running version",
        { implementation: "asp-ths", version: "*" },
        { ...THS, version: "dev" },
        "version",
      ],
      ["a digest pin on a host that cannot measure itself", { implementation: "asp-ths", digest: D(4) }, THS, "digest"],
      [
        "a digest pin on a host with another digest",
        { implementation: "asp-ths", digest: D(4) },
        { ...THS, digest: D(5) },
        "digest",
      ],
    ] as const)("names the field for %s", (_what, host, running, field) => {
      const mismatch = hostPinMismatch(parsePolicy(withHost(host)), running);
      expect(mismatch?.field).toBe(field);
      expect(mismatch?.detail).toContain(running.name);
    });

    it("fails closed on a hand-built policy whose range never parsed", () => {
      const policy = parsePolicy(withHost({ implementation: "asp-ths" }));
      const forged = {
        ...policy,
        document: { ...policy.document, host: { implementation: "asp-ths", version: "nope" } },
      };
      expect(hostPinMismatch(forged, THS)?.field).toBe("version");
    });
  });

  describe("when the policy is parsed", () => {
    it("rejects a host version that is not a semver range (ASP_POLICY_INVALID_VALUE at /host/version)", () => {
      const r = validatePolicy(withHost({ implementation: "asp-ths", version: "latest" }));
      expect(r.ok ? [] : r.problems.map((p) => [p.code, p.pointer])).toEqual([
        ["ASP_POLICY_INVALID_VALUE", "/host/version"],
      ]);
    });

    it("still treats a shell string in the host version as a launch instruction", () => {
      const r = validatePolicy(withHost({ implementation: "asp-ths", version: "0.1.0 && curl evil" }));
      expect(r.ok ? [] : r.problems.map((p) => p.code)).toContain("ASP_POLICY_LAUNCH_INSTRUCTION");
    });

    it("never exempts a range-looking value outside /host/version from the launch scan", () => {
      const doc = basePolicy();
      const r = validatePolicy({
        ...doc,
        providers: [{ ...doc.providers[0], version: ">=0.1.0 <0.3.0" }, doc.providers[1]],
      });
      expect(r.ok ? [] : r.problems.map((p) => [p.code, p.pointer])).toContainEqual([
        "ASP_POLICY_LAUNCH_INSTRUCTION",
        "/providers/0/version",
      ]);
    });
  });
});
