import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Assessment, type InspectResult, validate } from "@asp/contracts";
import { blobDigest, builtEntry, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterEach, beforeAll, describe, expect, it } from "vitest";

const FILES: Record<string, string> = {
  "package.json": "{}\n",
  "src/util.ts": "export const one = 1;\n",
  "src/math.ts": 'import { one } from "./util.js";\nexport const two = one + one;\n',
  "src/index.ts": 'import { two } from "./math.js";\nexport const four = two * 2;\n',
  "src/other.ts": "export const other = 0;\n",
};
const AFTER = { ...FILES, "src/util.ts": "export const one = 1;\nexport const zero = 0;\n" };

/** The built plugin entry; the protocol tests drive it as a real subprocess. */
let ENTRY: string;
beforeAll(() => {
  ENTRY = builtEntry(fileURLToPath(new URL("..", import.meta.url)));
}, 120_000);

const hosts: TestHost[] = [];
afterEach(() => {
  for (const h of hosts.splice(0)) h.kill();
});

describe("the provider over the protocol (a real subprocess)", () => {
  it("initializes as asp.provider-import-graph, matching its manifest", async () => {
    const host = new TestHost(ENTRY);
    hosts.push(host);
    const init = await host.initialize();
    const manifest = JSON.parse(readFileSync(new URL("../asp-plugin.json", import.meta.url), "utf8")) as Record<
      string,
      unknown
    >;
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(init).toEqual({
      protocolVersion: manifest.protocolVersion,
      provider: { id: manifest.id, version: manifest.version },
      diagnosticSources: manifest.diagnosticSources,
      capabilities: manifest.capabilities,
    });
    expect(manifest.version).toBe(pkg.version);
    expect(await host.shutdown()).toBe(0);
  });

  it("answers impact, dependents and symbol queries bound to the baseline, warm on the second", async () => {
    const repo = new MemoryRepo();
    const host = new TestHost(ENTRY, { repo });
    hosts.push(host);
    await host.initialize();
    const cs = repo.changeset(FILES, AFTER);
    const query = (requestId: string, q: Record<string, unknown>) =>
      host.request<InspectResult>("inspect/query", {
        requestId,
        baseline: cs.base,
        changeset: cs,
        query: q,
        deadlineMs: 30_000,
      });

    const impact = await query("q1", { kind: "impact" });
    expect(validate("protocol-inspect-result", impact).ok).toBe(true);
    expect(impact.status).toBe("complete");
    expect(impact.results.map((r) => r.path)).toEqual(["src/util.ts", "src/math.ts", "src/index.ts"]);
    const served = host.callbacks.filter((c) => c.requestId === "q1" && c.method === "host/readBlob");
    expect(impact.validAsOf).toEqual({
      baseline: cs.base,
      changeset: cs.digest,
      reads: [...new Set(served.map((c) => c.digest))].sort(),
    });

    const dependents = await query("q2", { kind: "dependents", path: "src/math.ts" });
    expect(dependents.results).toEqual([{ path: "src/index.ts", line: 0, detail: 'imports "./math.js"' }]);
    expect(dependents.validAsOf.reads).toEqual([]); // the same tree: answered from the warm graph

    const symbol = await query("q3", { kind: "symbol", symbol: "zero" });
    expect(symbol.results).toEqual([{ path: "src/util.ts", symbol: "zero", line: 1, detail: "const" }]);

    const bad = await query("q4", { kind: "dependents" });
    expect(bad.status).toBe("error");
    expect(bad.error?.code).toBe("ASP_IMPORTS_BAD_QUERY");
    expect(await host.shutdown()).toBe(0);
  });

  it("answers incomplete when a file cannot be read", async () => {
    const repo = new MemoryRepo();
    const host = new TestHost(ENTRY, { repo });
    hosts.push(host);
    await host.initialize();
    const cs = repo.changeset(FILES, AFTER);
    repo.refuse.add(blobDigest(FILES["src/math.ts"] as string));
    const r = await host.request<InspectResult>("inspect/query", {
      requestId: "q1",
      baseline: cs.base,
      changeset: cs,
      query: { kind: "impact" },
      deadlineMs: 30_000,
    });
    expect(r.status).toBe("incomplete");
    expect(r.error).toMatchObject({ code: "ASP_IMPORTS_UNREADABLE" });
    expect(r.error?.message).toContain("src/math.ts");
  });

  it("answers check/assess with an honest unsupported (inspect-only by default)", async () => {
    const repo = new MemoryRepo();
    const host = new TestHost(ENTRY, { repo });
    hosts.push(host);
    await host.initialize();
    const cs = repo.changeset(FILES, AFTER);
    const a = await host.request<Assessment>("check/assess", {
      requestId: "a1",
      callSite: "gate",
      baseline: cs.base,
      changeset: cs,
      requirements: [],
      deadlineMs: 30_000,
    });
    expect(a.status).toBe("unsupported");
    expect(a.diagnostics).toEqual([]);
    expect(a.validAsOf.reads).toEqual([]);
  });

  it("with --check, declares check and reports unresolved relative imports of the changed files", async () => {
    const repo = new MemoryRepo();
    const host = new TestHost(ENTRY, { repo, args: ["--check"] });
    hosts.push(host);
    const init = await host.initialize();
    expect(init).toMatchObject({ capabilities: ["check", "inspect"], diagnosticSources: ["imports"] });
    const broken = { ...FILES, "src/index.ts": 'import { two } from "./maths.js";\nexport const four = two * 2;\n' };
    const cs = repo.changeset(FILES, broken);
    const a = await host.request<Assessment>("check/assess", {
      requestId: "a1",
      callSite: "gate",
      baseline: cs.base,
      changeset: cs,
      requirements: [],
      deadlineMs: 30_000,
    });
    expect(a.status).toBe("complete");
    expect(a.diagnostics).toMatchObject([
      {
        source: "imports",
        code: "imports/unresolved",
        severity: "warning",
        range: { path: "src/index.ts", start: { line: 0, character: 21 }, end: { line: 0, character: 31 } },
      },
    ]);
    expect(a.validAsOf.reads).toEqual([cs.changes[0]?.after]);
  });

  it("refuses an unknown option with exit 64", async () => {
    const host = new TestHost(ENTRY, { args: ["--verbose"] });
    hosts.push(host);
    expect(await host.exited).toBe(64);
  });
});
