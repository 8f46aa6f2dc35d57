import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { composeHost, loadHostConfig, parseHostConfig, THS_ERROR_CODES } from "../src/index.js";
import { manifest, policyFor } from "./helpers.js";

describe("host configuration", () => {
  it("resolves relative paths against the file's folder", () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-ths-config-"));
    const file = join(dir, "asp.host.json");
    writeFileSync(file, JSON.stringify({ store: ".asp/store", policy: "asp.policy.json", plugins: ["plugins"] }));
    expect(loadHostConfig(file)).toEqual({
      store: join(dir, ".asp/store"),
      policy: join(dir, "asp.policy.json"),
      trustRoots: [],
      plugins: [join(dir, "plugins")],
      providers: [],
      excludes: [],
      candidatePolicy: null,
      environment: { roots: "auto" },
      autoMode: null,
      pluginOptions: {},
    });
  });

  it("carries the server section with repository paths resolved, and refuses a raw token, an unknown scope or a path-like name", () => {
    const digest = `sha256:${"a".repeat(64)}`;
    const server = { repositories: { demo: "repo" }, tokens: [{ id: "ci", digest, scopes: ["read", "evaluate"] }] };
    expect(parseHostConfig({ store: "s", policy: "p", server }, "/x").server).toEqual({
      repositories: { demo: "/x/repo" },
      tokens: [{ id: "ci", digest, scopes: ["read", "evaluate"] }],
    });
    expect(parseHostConfig({ store: "s", policy: "p" }, "/x").server).toBeUndefined();
    for (const bad of [
      { ...server, tokens: [{ id: "ci", token: "s3cret", scopes: ["read"] }] },
      { ...server, tokens: [{ id: "ci", digest, scopes: ["root"] }] },
      { ...server, tokens: [{ id: "ci", digest, scopes: [] }] },
      { ...server, repositories: { "../etc": "repo" } },
      { ...server, repositories: {} },
    ]) {
      expect(
        () => parseHostConfig({ store: "s", policy: "p", server: bad }, "/x"),
        JSON.stringify(bad),
      ).toThrowWithCode("ASP_THS_BAD_CONFIG");
    }
  });

  it("carries in-process plugin options by id, and refuses options that are not an object", () => {
    const pluginOptions = { "asp.verifier-openai": { baseUrl: "http://127.0.0.1:1/v1", model: "m", apiKeyEnv: "K" } };
    expect(parseHostConfig({ store: "s", policy: "p", pluginOptions }, "/x").pluginOptions).toEqual(pluginOptions);
    expect(() => parseHostConfig({ store: "s", policy: "p", pluginOptions: { a: "text" } }, "/x")).toThrowWithCode(
      "ASP_THS_BAD_CONFIG",
    );
  });

  it("carries the Auto Mode rollout of the trusted file (issue 14), and refuses an unknown stage", () => {
    const autoMode = { stages: { stage2_auto_run_storage: true }, result_review_mode: "review_only" };
    expect(parseHostConfig({ store: "s", policy: "p", autoMode }, "/x").autoMode).toEqual(autoMode);
    expect(() =>
      parseHostConfig({ store: "s", policy: "p", autoMode: { stages: { stage99: true } } }, "/x"),
    ).toThrowWithCode("ASP_THS_BAD_CONFIG");
  });

  it("keeps a queue URL as written (never resolved as a path), and refuses one that is not PostgreSQL", () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-ths-config-"));
    const queue = "postgres://db.internal:5432/asp";
    expect(parseHostConfig({ store: "s", policy: "p", queue }, dir).queue).toBe(queue);
    expect(parseHostConfig({ store: "s", policy: "p" }, dir)).not.toHaveProperty("queue");
    expect(() => parseHostConfig({ store: "s", policy: "p", queue: "file:///etc/passwd" }, dir)).toThrowWithCode(
      "ASP_THS_BAD_CONFIG",
    );
  });

  it.each([
    ["not an object", [], "ASP_THS_BAD_CONFIG"],
    ["an unknown key", { store: "s", policy: "p", shell: "sh -c x" }, "ASP_THS_BAD_CONFIG"],
    ["no store", { policy: "p" }, "ASP_THS_BAD_CONFIG"],
    [
      "a relative executable",
      { store: "s", policy: "p", providers: [{ ...manifest("fake-hang"), executable: "node" }] },
      "ASP_THS_BAD_MANIFEST",
    ],
    [
      "a shell string instead of argv",
      { store: "s", policy: "p", providers: [{ ...manifest("fake-hang"), args: "a b" }] },
      "ASP_THS_BAD_MANIFEST",
    ],
    [
      "a candidate policy path escaping the repository",
      { store: "s", policy: "p", candidatePolicy: "../asp.policy.json" },
      "ASP_THS_BAD_CONFIG",
    ],
    [
      "an absolute candidate policy path",
      { store: "s", policy: "p", candidatePolicy: "/etc/asp.policy.json" },
      "ASP_THS_BAD_CONFIG",
    ],
    [
      "an unknown key beside valid ones (a misspelt trustRoots)",
      { store: "s", policy: "p", trustroots: ["k.pub"] },
      "ASP_THS_BAD_CONFIG",
    ],
    ["a $schema that is not a string", { store: "s", policy: "p", $schema: 3 }, "ASP_THS_BAD_CONFIG"],
    [
      "a description that is not a string",
      { store: "s", policy: "p", description: { shell: "x" } },
      "ASP_THS_BAD_CONFIG",
    ],
    ["an empty trust root path", { store: "s", policy: "p", trustRoots: [""] }, "ASP_THS_BAD_CONFIG"],
    ["providers that are not a list", { store: "s", policy: "p", providers: {} }, "ASP_THS_BAD_CONFIG"],
    [
      "an unknown key inside a provider manifest",
      { store: "s", policy: "p", providers: [{ ...manifest("fake-hang"), shell: "/bin/sh" }] },
      "ASP_THS_BAD_MANIFEST",
    ],
    [
      "a bad manifest next to an unknown top-level key",
      { store: "s", policy: "p", extra: 1, providers: [{ ...manifest("fake-hang"), args: "a b" }] },
      "ASP_THS_BAD_CONFIG",
    ],
    [
      "a duplicate provider",
      { store: "s", policy: "p", providers: [manifest("fake-hang"), manifest("fake-hang")] },
      "ASP_THS_BAD_MANIFEST",
    ],
  ])("refuses %s", (_what, raw, code) => {
    expect(() => parseHostConfig(raw, "/tmp")).toThrowWithCode(code);
  });

  it("validates with the published contracts schema: what the schema accepts, the host accepts", () => {
    const raw = {
      $schema: "x",
      description: "ci host",
      store: "s",
      policy: "p",
      trustRoots: ["k.pub"],
      excludes: ["dist/"],
    };
    expect(validate("host-config", raw).ok).toBe(true);
    expect(parseHostConfig(raw, "/tmp").trustRoots).toEqual(["/tmp/k.pub"]);
    const typo = { ...raw, exclude: ["dist/"] };
    expect(validate("host-config", typo).ok).toBe(false);
    expect(() => parseHostConfig(typo, "/tmp")).toThrowWithCode("ASP_THS_BAD_CONFIG");
  });

  it("host §2: keeps a postgres:// store as written (a database, not a path resolved beside the file), and composeHost refuses it as a string", async () => {
    const url = "postgres://asp@db.internal:5432/evidence?sslmode=require";
    const config = parseHostConfig({ store: url, policy: "p" }, "/tmp");
    expect(config.store).toBe(url);
    expect(parseHostConfig({ store: "POSTGRESQL://db/x", policy: "p" }, "/tmp").store).toBe("POSTGRESQL://db/x");
    expect(parseHostConfig({ store: "postgres-store", policy: "p" }, "/tmp").store).toBe("/tmp/postgres-store");
    await expect(composeHost({ store: url, policy: policyFor([]), providers: [] })).rejects.toThrowWithCode(
      "ASP_THS_BAD_CONFIG",
    );
  });

  it("host §2: refuses a file with a key given twice, never reads it as its last value", () => {
    const file = join(mkdtempSync(join(tmpdir(), "asp-ths-config-")), "asp.host.json");
    // The second "trustRoots" would silently replace the first under JSON.parse.
    writeFileSync(file, '{"store":"s","policy":"p","trustRoots":["/etc/asp/team.pub"],"trustRoots":["/tmp/mine.pub"]}');
    expect(() => loadHostConfig(file)).toThrowWithCode("ASP_THS_BAD_CONFIG");
  });

  it("refuses an unreadable file and an invalid policy with typed codes", async () => {
    expect(() => loadHostConfig("/nonexistent/asp.host.json")).toThrowWithCode("ASP_THS_BAD_CONFIG");
    await expect(composeHost({ store: "memory:", policy: "/nonexistent/policy.json" })).rejects.toThrowWithCode(
      "ASP_THS_BAD_POLICY",
    );
    await expect(
      composeHost({ store: "memory:", policy: { ...policyFor([]), apiVersion: "v0" } as never }),
    ).rejects.toThrow();
    expect(THS_ERROR_CODES).toContain("ASP_THS_BAD_REQUEST");
  });

  it("host §2: a policy file with a key given twice is refused, never read as its last value", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "asp-ths-policy-")), "asp.policy.json");
    const text = JSON.stringify(policyFor([manifest("fake-hang")]));
    // The second "grants" would silently win under JSON.parse: an empty grant list.
    writeFileSync(file, text.replace(/^\{/, '{"grants":[],'));
    await expect(composeHost({ store: "memory:", policy: file })).rejects.toThrowWithCode("ASP_POLICY_DUPLICATE_KEY");
  });
});
