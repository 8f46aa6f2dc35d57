import { parsePolicy } from "@asp/policy";
import { describe, expect, it } from "vitest";
import { loadPlugins, signPlugin, verifyPlugin } from "../src/index.js";
import { grantPolicy, makeKey, makePlugin } from "./helpers.js";

// Issue 18 item 5: a host composer hands the loader what `parsePolicy` returns (an ActivePolicy,
// `{ document, digest, ... }`); the loader used to read `plugins[]` off the wrapper, found none,
// and refused a granted plugin as ASP_PLUGIN_NOT_GRANTED.
describe("loadPlugins and verifyPlugin take the policy parsePolicy returns", () => {
  it("host §1: loads a plugin the parsed policy grants, exactly as with the document", async () => {
    const { key, roots } = makeKey();
    const dir = makePlugin("provider");
    signPlugin(dir, key);
    const document = grantPolicy([{ dir, capabilities: ["check"] }]);
    const active = parsePolicy(document);
    const fromActive = await loadPlugins({ dirs: [dir], trustRoots: roots, policy: active });
    expect(fromActive.refused).toEqual([]);
    expect(fromActive.providers.map((p) => p.manifest.id)).toEqual(["provider-test"]);
    expect(verifyPlugin(dir, { trustRoots: roots, policy: active }).evidence.authorityGrant).toBe("verified");
  });

  it("host §1: still refuses what the parsed policy does not grant, with the precise code", async () => {
    const { key, roots } = makeKey();
    const dir = makePlugin("provider");
    signPlugin(dir, key);
    const ungranted = parsePolicy({ ...grantPolicy([]), plugins: [] });
    const wrongDigest = parsePolicy(grantPolicy([{ dir, digest: `sha256:${"0".repeat(64)}` }]));
    const noCapability = parsePolicy(grantPolicy([{ dir, capabilities: ["review"] }]));
    for (const [policy, code] of [
      [ungranted, "ASP_PLUGIN_NOT_GRANTED"],
      [wrongDigest, "ASP_PLUGIN_NOT_GRANTED"],
      [noCapability, "ASP_PLUGIN_CAPABILITY_NOT_GRANTED"],
    ] as const) {
      const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy });
      expect(result.providers).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual([code]);
    }
  });

  it("refuses a policy that is neither a document nor an ActivePolicy (ASP_PLUGIN_BAD_POLICY), loading nothing", async () => {
    const { key, roots } = makeKey();
    const dir = makePlugin("provider");
    signPlugin(dir, key);
    const document = grantPolicy([{ dir }]);
    // A look-alike wrapper without the brand: never trusted as a parsed policy.
    const wrapper = { document, digest: "sha256:x" } as unknown as Parameters<typeof loadPlugins>[0]["policy"];
    await expect(loadPlugins({ dirs: [dir], trustRoots: roots, policy: wrapper })).rejects.toThrowWithCode(
      "ASP_PLUGIN_BAD_POLICY",
    );
    expect(() => verifyPlugin(dir, { trustRoots: roots, policy: wrapper })).toThrowWithCode("ASP_PLUGIN_BAD_POLICY");
  });
});
