import { CALL_SITES } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  type ActivePolicy,
  authorityFor,
  grantsFor,
  type ProviderClaim,
  parsePolicy,
  pluginGrant,
} from "../src/index.js";
import { basePolicy, D, SECRETS, TS } from "./fixtures/policies.js";

const policy = parsePolicy(basePolicy());

// host §1, §2 "Provider supervision": certification, provenance, first-party labels, package
// scope, repository config, local overrides and installed manifests never satisfy a gate
// without a trusted grant pinned to id + version + digest + requirement + call-site.
const EVIDENCE_ONLY: ReadonlyArray<readonly [string, Partial<ProviderClaim>]> = [
  ["a certification label", { labels: ["certified"] }],
  ["a first-party label", { labels: ["first-party"] }],
  ["every label at once", { labels: ["certified", "first-party", "trusted", "verified", "official"] }],
  ["manifest presence", { evidence: { manifest: { id: "asp.provider-lint", capabilities: ["check"] } } }],
  ["installed state", { evidence: { installed: true, state: "active" } }],
  ["package scope", { evidence: { packageScope: "@asp", npmPackage: "@asp/provider-lint" } }],
  [
    "repository config",
    { evidence: { repositoryConfig: { grants: [{ requirement: "types", callSites: ["gate"] }] } } },
  ],
  ["a local override", { evidence: { localOverride: { authority: "granted" } } }],
  ["a conformance pass", { evidence: { conformance: "passed", provenance: "slsa-3" } }],
];

describe("authorityFor", () => {
  describe("when the provider has an exact pinned grant", () => {
    it("H1.3 returns the grant for each granted call-site only", () => {
      expect(authorityFor(policy, TS, "types", "gate")).toEqual({
        provider: TS,
        requirement: "types",
        callSite: "gate",
      });
      expect(authorityFor(policy, TS, "types", "sweep")).not.toBeNull();
      expect(authorityFor(policy, TS, "types", "interactive")).toBeNull();
      expect(authorityFor(policy, TS, "secrets", "gate")).toBeNull();
    });

    it("H1a.2 still grants with labels attached: labels are ignored, not held against it", () => {
      expect(authorityFor(policy, { ...TS, labels: ["community"] }, "types", "gate")).not.toBeNull();
    });
  });

  // Grants are the only authority (issue 4 item 5): the matrix of labels × call-sites × requirements.
  describe("when the provider has only labels or evidence", () => {
    const unpinned = { id: "asp.provider-lint", version: "1.0.0", digest: D(50) };
    const cases = EVIDENCE_ONLY.flatMap(([why, extra]) =>
      CALL_SITES.flatMap((site) =>
        ["types", "secrets"].flatMap((requirement) =>
          [
            ["an unpinned provider", unpinned],
            ["the granted id at another version", { ...TS, version: "0.1.1" }],
            ["the granted id with another digest", { ...TS, digest: D(77) }],
            ["a pinned provider at a requirement it is not granted", requirement === "types" ? SECRETS : TS],
          ].map(
            ([who, claim]) =>
              [why, who as string, site, requirement, { ...(claim as ProviderClaim), ...extra }] as const,
          ),
        ),
      ),
    );

    it.each(cases)("H1.4 H1a.2 %s on %s never grants %s authority for %s", (_why, _who, site, requirement, claim) => {
      expect(authorityFor(policy, claim, requirement, site)).toBeNull();
    });
  });

  describe("when the pin exists but the grant does not", () => {
    it("H1.3 pinning alone grants nothing", () => {
      const doc = basePolicy();
      doc.grants = [];
      expect(authorityFor(parsePolicy(doc), TS, "types", "gate")).toBeNull();
    });

    it("H1.3 a forged grant without a matching pin grants nothing", () => {
      const doc = basePolicy();
      const forged = { ...policy, document: { ...doc, providers: [] } } as unknown as ActivePolicy;
      expect(authorityFor(forged, TS, "types", "gate")).toBeNull();
    });
  });

  describe("when the policy is not active", () => {
    it("throws ASP_POLICY_NOT_ACTIVE for a raw document", () => {
      expect(() => authorityFor(basePolicy() as unknown as ActivePolicy, TS, "types", "gate")).toThrowWithCode(
        "ASP_POLICY_NOT_ACTIVE",
      );
    });
  });
});

describe("grantsFor", () => {
  it("lists every authority cell of a provider, sorted", () => {
    expect(grantsFor(policy, TS).map((g) => `${g.requirement}@${g.callSite}`)).toEqual(["types@gate", "types@sweep"]);
    expect(grantsFor(policy, { ...TS, labels: ["certified"], digest: D(1) })).toEqual([]);
  });
});

describe("pluginGrant", () => {
  it("grants a plugin by exact id + digest and capability", () => {
    expect(pluginGrant(policy, { id: "asp.verifier-rules", digest: D(9) }, "review")).toEqual({
      id: "asp.verifier-rules",
      digest: D(9),
      capabilities: ["review"],
    });
    expect(pluginGrant(policy, { id: "asp.verifier-rules", digest: D(9) })).not.toBeNull();
  });

  it.each([
    ["another digest", { id: "asp.verifier-rules", digest: D(10) }, "review"],
    ["a capability not granted", { id: "asp.verifier-rules", digest: D(9) }, "guardian"],
    ["a signed-looking label", { id: "asp.verifier-other", digest: D(9), labels: ["signed", "first-party"] }, "review"],
  ] as const)("refuses %s", (_why, claim, capability) => {
    expect(pluginGrant(policy, claim, capability)).toBeNull();
  });
});
