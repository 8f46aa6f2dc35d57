// @asp/sdk/testing driving real providers built with defineProvider: the template provider
// (plugins/provider-example) and a fixture that probes the host's callbacks.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { validate, validateAssessment, validateEditPlan } from "@asp/contracts";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { SdkError } from "../src/index.js";
import { blobDigest, builtEntry, MemoryRepo, RpcError, TestHost } from "../src/testing/index.js";

const SDK = fileURLToPath(new URL("..", import.meta.url));
const EXAMPLE = fileURLToPath(new URL("../../../plugins/provider-example/plugin/main.mjs", import.meta.url));
const FIXTURE = fileURLToPath(new URL("./fixtures/provider.mjs", import.meta.url));

// Both providers import the built SDK: make sure it is there and current.
beforeAll(() => {
  builtEntry(SDK, "dist/index.js");
}, 120_000);

const hosts: TestHost[] = [];
const launch = (entry: string, repo = new MemoryRepo()): TestHost => {
  const host = new TestHost(entry, { repo });
  hosts.push(host);
  return host;
};
afterEach(() => {
  for (const h of hosts.splice(0)) h.kill();
});

const BASE = { "README.md": "# demo\n", "src/app.ts": "export const app = 1;\n" };

describe("TestHost with the template provider", () => {
  it("initializes, assesses a change through host/readBlob, binds the answer to what it read, and shuts down", async () => {
    const host = launch(EXAMPLE);
    const init = await host.initialize();
    expect(init).toMatchObject({
      provider: { id: "provider-example", version: "1.0.0" },
      diagnosticSources: ["todo"],
      capabilities: ["check"],
    });
    const after = { ...BASE, "src/app.ts": "export const app = 1; // TODO tidy\n" };
    const cs = host.repo.changeset(BASE, after);
    const assessment = await host.assess({ baseline: cs.after, changeset: cs });
    expect(validateAssessment(assessment).ok).toBe(true);
    expect(assessment.requestId).toBe("req-1");
    expect(assessment.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([["todo/marker", "src/app.ts"]]);
    expect(assessment.validAsOf).toEqual({
      baseline: cs.after,
      changeset: cs.digest,
      reads: [blobDigest(after["src/app.ts"])],
    });
    expect(host.reads("req-1")).toEqual(assessment.validAsOf.reads);
    expect(host.callbacks).toEqual([
      { method: "host/readBlob", requestId: "req-1", digest: blobDigest(after["src/app.ts"]), ok: true },
    ]);
    expect(host.output()).toMatch(/^Content-Length: \d+\r\n\r\n/);
    expect(host.output()).toContain("todo/marker");
    expect(await host.shutdown()).toBe(0);
  });

  it("answers an unsupported method with an RpcError carrying the JSON-RPC code", async () => {
    const host = launch(EXAMPLE);
    await host.initialize();
    const error = await host
      .query({ baseline: host.repo.tree(BASE), query: { kind: "impact" } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RpcError);
    expect((error as RpcError).code).toBe(-32004);
  });
});

describe("TestHost serving callbacks bound to the request", () => {
  it("serves blobs of the request's trees, and refuses blobs outside them and blobs the repo refuses", async () => {
    const repo = new MemoryRepo();
    const host = launch(FIXTURE, repo);
    await host.initialize();
    const elsewhere = repo.blob("not in any tree of the request\n");
    const refused = blobDigest(BASE["README.md"]);
    repo.refuse.add(refused);
    const probe = [`read ${blobDigest(BASE["src/app.ts"])}`, `read ${elsewhere}`, `read ${refused}`].join("\n");
    const cs = repo.changeset(BASE, { ...BASE, "probe.txt": probe });
    const a = await host.assess({ requestId: "probe-1", baseline: cs.base, changeset: cs });
    expect(a.diagnostics.map((d) => [d.code, d.message])).toEqual([
      ["probe/read", "read 22 chars"],
      ["probe/refused", expect.stringContaining("is not a blob of this request's baseline")],
      ["probe/refused", expect.stringContaining("refused")],
    ]);
    // validAsOf.reads lists exactly the blobs served, never the refused ones.
    expect(a.validAsOf.reads).toEqual(host.reads("probe-1"));
    expect(host.reads("probe-1")).toEqual([blobDigest(probe), blobDigest(BASE["src/app.ts"])].sort());
    expect(host.callbacks.map((c) => [c.digest, c.ok])).toEqual([
      [blobDigest(probe), true],
      [blobDigest(BASE["src/app.ts"]), true],
      [elsewhere, false],
      [refused, false],
    ]);
    expect([...(host.served.get("probe-1") ?? [])].sort()).toEqual(host.reads("probe-1"));
  });

  it("serves host/readTree for inspect/query, with each entry's mode", async () => {
    const host = launch(FIXTURE);
    await host.initialize();
    const baseline = host.repo.tree({ ...BASE, "bin/run": { content: "#!/bin/sh\n", mode: "100755" } });
    const r = await host.query({ baseline, query: { kind: "dependents", path: "src/app.ts" } });
    expect(validate("protocol-inspect-result", r).ok).toBe(true);
    expect(r.results).toEqual([
      { path: "README.md", detail: "100644" },
      { path: "bin/run", detail: "100755" },
      { path: "src/app.ts", detail: "100644" },
    ]);
    expect(host.callbacks.filter((c) => c.method === "host/readTree")).toHaveLength(3);
    expect(r.validAsOf.reads).toEqual([]);
  });

  it("sends edit/propose and turns a refusal into an RpcError with the provider's code in data", async () => {
    const host = launch(FIXTURE);
    await host.initialize();
    const baseline = host.repo.tree(BASE);
    const plan = await host.propose({ baseline, intent: { kind: "delete", arguments: { path: "README.md" } } });
    expect(validateEditPlan(plan).ok).toBe(true);
    expect(plan.preconditions).toEqual([{ path: "README.md", blob: blobDigest(BASE["README.md"]) }]);
    const error = await host
      .propose({ baseline, intent: { kind: "delete", arguments: { path: "nope.md" } } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RpcError);
    expect((error as RpcError).message).toContain("no file nope.md");
    expect((error as RpcError).data).toMatchObject({ code: "FIXTURE_NOT_FOUND" });
  });
});

describe("TestHost and the process", () => {
  it("refuses an entry that does not exist", () => {
    expect(() => new TestHost(join(SDK, "dist", "nope.js"))).toThrow(/is missing/);
  });

  it("rejects a request once the process has gone, instead of waiting forever", async () => {
    const host = launch(FIXTURE);
    await host.initialize();
    host.kill();
    expect(await host.exited).toBeNull();
    await expect(host.request("shutdown")).rejects.toThrow();
    host.notify("exit"); // ignored
  });

  it("passes node options, arguments, cwd and a bare environment", async () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-sdk-testing-"));
    const script = join(dir, "env.mjs");
    writeFileSync(
      script,
      "console.error(JSON.stringify({ argv: process.argv.slice(2), cwd: process.cwd(), env: Object.keys(process.env), title: process.title }));\n",
    );
    const host = new TestHost(script, { args: ["--flag"], nodeArgs: ["--title=asp-probe"], cwd: dir });
    hosts.push(host);
    expect(await host.exited).toBe(0);
    const seen = JSON.parse(host.stderr) as { argv: string[]; cwd: string; env: string[]; title: string };
    expect(seen).toMatchObject({ argv: ["--flag"], cwd: dir, title: "asp-probe" });
    expect(seen.env.filter((k) => !k.startsWith("__CF") && k !== "PWD")).toEqual(["PATH"]);
  });

  // host §8: TestHost speaks through the host's own connection, so an author's test sees what a
  // host refuses: an answer over the bound by its framed Content-Length (here: padded with JSON
  // whitespace, small once re-serialized; the fixture is @asp/protocol's) fails, and the stream stays usable after it.
  it("H8.4 host §8: refuses an answer whose framed size is over maxResponseBytes, like the host", async () => {
    const host = new TestHost(fileURLToPath(new URL("../../protocol/test/fixtures/fake-padded.mjs", import.meta.url)), {
      maxResponseBytes: 1024,
    });
    hosts.push(host);
    const error = await host.request("padded").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SdkError);
    expect(error).toMatchObject({ code: "ASP_SDK_CONNECTION_FAILED", data: { kind: "oversize" } });
    expect(await host.request("small")).toBe(2);
  });
});

describe("builtEntry", () => {
  it("returns the entry of a package whose entry is newer than its sources, without building", () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-sdk-entry-"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "x", aspPlugin: { entry: "main.js" } }));
    writeFileSync(join(dir, "main.js"), "");
    expect(builtEntry(dir)).toBe(join(dir, "main.js"));
  });
});
