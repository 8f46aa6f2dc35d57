// The built provider as a real subprocess over the real protocol (LSP-framed JSON-RPC on stdio).
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type EditPlan, validateEditPlan } from "@asp/contracts";
import { blobDigest, builtEntry, MemoryRepo, RpcError, TestHost } from "@asp/sdk/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
const FILES: Record<string, string> = {
  "README.md": "# demo\n",
  "src/a.ts": "export const a = 1;\nexport const b = 2;\n",
  "src/dup.ts": "x = 1;\nx = 1;\n",
};
const memory = new MemoryRepo();
const baseline = memory.tree(FILES);
const digest = (p: string) => blobDigest(FILES[p] as string);

/** Every operation kind, as intents. */
const INTENTS = [
  { kind: "replace", arguments: { path: "src/a.ts", oldText: "a = 1", newText: "a = 10" } },
  {
    kind: "multi_replace",
    arguments: {
      path: "src/a.ts",
      edits: [
        { oldText: "a = 1", newText: "a = 3" },
        { oldText: "b = 2", newText: "b = 4" },
      ],
    },
  },
  {
    kind: "search_replace",
    arguments: { path: "src/dup.ts", pattern: "x = (\\d)", flags: "g", replacement: "y = $1" },
  },
  { kind: "create", arguments: { path: "src/new.ts", content: "export {};\n" } },
  { kind: "rename", arguments: { from: "README.md", to: "docs/README.md" } },
  { kind: "delete", arguments: { path: "src/dup.ts" } },
  {
    kind: "plan",
    arguments: {
      operations: [
        { op: "create", path: "n.ts", content: "1" },
        { op: "delete", path: "README.md" },
      ],
    },
  },
] as const;

let entry: string;
let provider: TestHost;
let requests = 0;
const propose = (p: TestHost, intent: unknown, requestId = `req-${++requests}`) =>
  p.request<EditPlan>("edit/propose", { requestId, baseline, intent, deadlineMs: 10_000 });

beforeAll(async () => {
  entry = builtEntry(PKG);
  provider = new TestHost(entry, { repo: memory });
  await provider.initialize();
}, 120_000);
afterAll(() => provider.kill());

describe("provider-text-edit over the protocol", () => {
  it("declares the edit capability only, with no diagnostic source", async () => {
    const own = new TestHost(entry, { repo: memory });
    const init = await own.initialize();
    expect(init).toMatchObject({
      provider: { id: "asp.provider-text-edit", version: "0.1.0" },
      diagnosticSources: [],
      capabilities: ["edit"],
    });
    expect(await own.shutdown()).toBe(0);
  });

  it("answers check/assess with status unsupported (a capability gap, not an error)", async () => {
    const a = await provider.request<{ status: string }>("check/assess", {
      requestId: "assess-1",
      callSite: "gate",
      baseline,
      changeset: null,
      requirements: [],
      deadlineMs: 5000,
    });
    expect(a.status).toBe("unsupported");
  });

  describe("when asked for each operation kind", () => {
    it.each(INTENTS.map((i) => [i.kind, i] as const))(
      "%s: a schema-valid EditPlan bound to the baseline",
      async (_k, intent) => {
        const requestId = `req-${++requests}`;
        const plan = await propose(provider, intent, requestId);
        const r = validateEditPlan(plan);
        expect(r.ok ? [] : r.errors).toEqual([]);
        expect(plan.provider).toEqual({ id: "asp.provider-text-edit", version: "0.1.0" });
        // host §5/§6: bound to the request's baseline and exactly the blobs it read.
        expect(plan.validAsOf.baseline).toBe(baseline);
        expect(plan.validAsOf.changeset).toBeNull();
        expect(plan.validAsOf.reads).toEqual([...(provider.served.get(requestId) ?? [])].sort());
        for (const pre of plan.preconditions) {
          expect(pre.blob).toBe(FILES[pre.path] === undefined ? "absent" : digest(pre.path));
        }
      },
    );
    it("gives each proposal its own id", async () => {
      const a = await propose(provider, INTENTS[0]);
      const b = await propose(provider, INTENTS[0]);
      expect(a.proposalId).not.toBe(b.proposalId);
    });
  });

  describe("when the intent must be refused", () => {
    it.each([
      ["a path escaping the tree", { kind: "delete", arguments: { path: "../x" } }, "ASP_TEXT_EDIT_PATH_ESCAPES"],
      [
        "oldText not found",
        { kind: "replace", arguments: { path: "src/a.ts", oldText: "zzz", newText: "" } },
        "ASP_TEXT_EDIT_TEXT_NOT_FOUND",
      ],
      [
        "an ambiguous match",
        { kind: "replace", arguments: { path: "src/dup.ts", oldText: "x = 1", newText: "y" } },
        "ASP_TEXT_EDIT_AMBIGUOUS",
      ],
      [
        "a create over an existing file",
        { kind: "create", arguments: { path: "README.md", content: "" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a rename onto an existing path",
        { kind: "rename", arguments: { from: "src/a.ts", to: "src/dup.ts" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      ["an unknown intent", { kind: "shell", arguments: { command: "rm -rf /" } }, "ASP_TEXT_EDIT_UNKNOWN_INTENT"],
    ])("answers %s with a JSON-RPC error naming the code, and no plan", async (_why, intent, code) => {
      const error = await propose(provider, intent).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RpcError);
      expect((error as RpcError).message).toContain(code);
    });
  });

  describe("it never writes", () => {
    it("plans every operation kind with no file-system write permission, in a read-only folder that stays unchanged", async () => {
      const repo = mkdtempSync(join(tmpdir(), "asp-text-edit-"));
      for (const [path, content] of Object.entries(FILES)) {
        mkdirSync(dirname(join(repo, path)), { recursive: true });
        writeFileSync(join(repo, path), content);
      }
      const snapshot = (): string[] => {
        const out: string[] = [];
        const walk = (d: string) => {
          for (const e of readdirSync(d).sort()) {
            const p = join(d, e);
            if (statSync(p).isDirectory()) walk(p);
            else out.push(`${p}:${readFileSync(p, "utf8")}:${statSync(p).mtimeMs}`);
          }
        };
        walk(repo);
        return out;
      };
      const before = snapshot();
      const dirs = [repo, join(repo, "src")];
      for (const d of dirs) chmodSync(d, 0o555);
      // Node's permission model: reads allowed, every file-system write denied to the process.
      const jailed = new TestHost(entry, {
        repo: memory,
        nodeArgs: ["--experimental-permission", "--allow-fs-read=*"],
        cwd: repo,
      });
      try {
        await jailed.initialize();
        for (const intent of INTENTS) {
          const plan = await propose(jailed, intent);
          expect(validateEditPlan(plan).ok).toBe(true);
        }
        expect(await jailed.shutdown()).toBe(0);
        expect(jailed.stderr).not.toMatch(/ERR_ACCESS_DENIED/);
      } finally {
        jailed.kill();
        for (const d of dirs) chmodSync(d, 0o755);
      }
      expect(snapshot()).toEqual(before);
      rmSync(repo, { recursive: true, force: true });
    });

    it("has no write path in its source: no file-system, child-process or network module", () => {
      const src = join(PKG, "src");
      for (const f of readdirSync(src).filter((n) => n.endsWith(".ts"))) {
        const text = readFileSync(join(src, f), "utf8");
        expect(text, f).not.toMatch(/from\s+"node:(fs|fs\/promises|child_process|net|http|https)"/);
        expect(text, f).not.toMatch(/\b(writeFile|appendFile|createWriteStream|spawn|exec)\w*\(/);
      }
    });
  });
});
