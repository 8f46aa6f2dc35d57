import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type Assessment, validateAssessment } from "@asp/contracts";
import { builtEntry, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { createFixture, findingsOf, runTsc, snapshotFixture } from "./env-fixture.js";

const FILES: Record<string, string> = {
  "package.json": JSON.stringify({ name: "demo", type: "module" }),
  "tsconfig.json": JSON.stringify({
    compilerOptions: { target: "ES2022", lib: ["ES2022"], module: "NodeNext", strict: true, noEmit: true },
    include: ["src"],
  }),
  "src/math.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
  "src/index.ts": 'import { add } from "./math.js";\n\nexport const total: number = add(1, 2);\n',
};
const BAD = { ...FILES, "src/index.ts": `${FILES["src/index.ts"]}export const label: number = "three";\n` };
const FIXED = { ...FILES, "src/index.ts": `${FILES["src/index.ts"]}export const label: string = "three";\n` };

/** The built plugin entry; the protocol tests drive it as a real subprocess. */
let ENTRY: string;
beforeAll(() => {
  ENTRY = builtEntry(fileURLToPath(new URL("..", import.meta.url)));
}, 120_000);

const hosts: TestHost[] = [];
afterEach(() => {
  for (const h of hosts.splice(0)) h.kill();
});

function assessParams(
  repo: MemoryRepo,
  requestId: string,
  before: Record<string, string>,
  after: Record<string, string>,
) {
  const changeset = repo.changeset(before, after);
  return {
    requestId,
    callSite: "gate",
    baseline: changeset.base,
    changeset,
    requirements: ["typecheck"],
    deadlineMs: 60_000,
  };
}

describe("the provider over the protocol (a real subprocess)", () => {
  it("initializes as asp.provider-typescript with source ts, matching its manifest", async () => {
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

  it("denies-worthy change -> ts/2322 bound to what it read; fixed change -> clean; refused blob -> incomplete", async () => {
    const repo = new MemoryRepo();
    const host = new TestHost(ENTRY, { repo });
    hosts.push(host);
    await host.initialize();

    const p1 = assessParams(repo, "r1", FILES, BAD);
    const a1 = await host.request<Assessment>("check/assess", p1);
    expect(validateAssessment(a1).ok).toBe(true);
    expect(a1.status).toBe("complete");
    expect(a1.diagnostics.map((d) => [d.code, d.range?.path, d.range?.start.line])).toEqual([
      ["ts/2322", "src/index.ts", 3],
    ]);
    expect(a1.diagnostics[0]?.codeDescription?.href).toBe("https://typescript.tv/errors/#ts2322");
    // host §5: validAsOf echoes the request and exactly the blobs read through host/readBlob.
    const served = host.callbacks.filter((c) => c.requestId === "r1" && c.method === "host/readBlob");
    expect(a1.validAsOf).toEqual({
      baseline: p1.baseline,
      changeset: p1.changeset.digest,
      reads: [...new Set(served.map((c) => c.digest))].sort(),
    });
    expect(a1.validAsOf.reads).toContain(p1.changeset.changes[0]?.after);

    // The warm process reads only the one changed blob for the fixed change.
    const p2 = assessParams(repo, "r2", FILES, FIXED);
    const a2 = await host.request<Assessment>("check/assess", p2);
    expect(a2.status).toBe("complete");
    expect(a2.diagnostics).toEqual([]);
    expect(a2.validAsOf.reads).toEqual([p2.changeset.changes[0]?.after]);

    // A blob the host refuses: an honest incomplete naming the file, never a clean complete.
    const other = { ...FILES, "src/math.ts": `${FILES["src/math.ts"]}export const two = 2;\n` };
    const p3 = assessParams(repo, "r3", FILES, other);
    repo.refuse.add(p3.changeset.changes[0]?.after as string);
    const a3 = await host.request<Assessment>("check/assess", p3);
    expect(a3.status).toBe("incomplete");
    expect(a3.coverage?.missing).toEqual(["src/math.ts"]);

    expect(await host.shutdown()).toBe(0);
  });

  it("host §9: over a real pnpm-installed environment, answers what tsc says and binds validAsOf to the environment", async () => {
    const fx = createFixture("pnpm");
    try {
      fx.write({
        "package.json": JSON.stringify({ name: "fixture", type: "module" }),
        "tsconfig.json": JSON.stringify({ extends: "@fixture/tsconfig", include: ["src"] }),
        "src/index.ts":
          'import { Type } from "@sinclair/typebox";\nimport { Emitter } from "vscode-jsonrpc";\n\nexport const Name = Type.String({ minLength: "1" });\nexport const emitter = new Emitter<number>();\nemitter.fire("one");\n',
      });
      const tsc = runTsc(fx.dir, "project");
      expect(tsc.length).toBe(2);
      const repo = new MemoryRepo();
      const snap = await snapshotFixture(fx.dir, ["node_modules"], repo);
      const host = new TestHost(ENTRY, { repo });
      hosts.push(host);
      await host.initialize();
      if (snap.environment === null) throw new Error("the fixture has no node_modules");
      const a = await host.assess({ requestId: "env1", baseline: snap.tree, environment: snap.environment });
      expect(validateAssessment(a).ok).toBe(true);
      expect(a.status).toBe("complete");
      expect(findingsOf(a.diagnostics)).toEqual(tsc);
      expect(a.validAsOf.environment).toBe(snap.environment?.tree);
      // Dependency content read through the callbacks is evidence: it is among the reads.
      const envBlobs = host.callbacks.filter((c) => c.requestId === "env1" && c.method === "host/readBlob" && c.ok);
      expect(a.validAsOf.reads).toEqual([...new Set(envBlobs.map((c) => c.digest))].sort());
      expect(await host.shutdown()).toBe(0);
    } finally {
      fx.remove();
    }
  }, 240_000);

  it("refuses a bad command line with exit 64 and nothing on stdout", async () => {
    const host = new TestHost(ENTRY, { args: ["--scope", "everything"] });
    hosts.push(host);
    let out = "";
    host.child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    expect(await host.exited).toBe(64);
    expect(out).toBe("");
  });
});
