import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import { AspError, type Assessment, PROTOCOL_VERSION, validateAssessment } from "@asp/contracts";
import {
  CancellationTokenSource,
  createStreamConnection,
  METHODS,
  type MessageConnection,
  PROTOCOL_ERRORS,
} from "@asp/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { defineProvider, isProviderDefinition, type ProviderSpec } from "../src/index.js";

const sha = (s: string): string => `sha256:${createHash("sha256").update(s).digest("hex")}`;
const FILE = "const x = 1; // TODO tidy\n";
const BLOB = sha(FILE);
const BASE = sha("base-tree");
const AFTER = sha("after-tree");

interface Harness {
  client: MessageConnection;
  reads: string[];
  closed: Promise<number>;
}

const open: Array<() => void> = [];
afterEach(() => {
  for (const close of open.splice(0)) close();
});

/** A provider served in-process over streams, with a tiny host serving one blob. */
async function start(spec: ProviderSpec, opts: { holdReads?: boolean } = {}): Promise<Harness> {
  const toProvider = new PassThrough();
  const toHost = new PassThrough();
  const session = defineProvider(spec).listen({ input: toProvider, output: toHost });
  const client = createStreamConnection(toHost, toProvider);
  const reads: string[] = [];
  client.onRequest(METHODS.readBlob, (p: { requestId: string; digest: string }) => {
    reads.push(p.digest);
    if (opts.holdReads) return new Promise(() => {});
    const bytes = Buffer.from(FILE);
    return { digest: p.digest, size: bytes.length, base64: bytes.toString("base64") };
  });
  client.listen();
  open.push(() => {
    session.dispose();
    client.dispose();
  });
  await client.sendRequest(METHODS.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    host: { name: "test-host", version: "1.0.0" },
    processId: null,
  });
  client.sendNotification(METHODS.initialized, { grants: [] });
  return { client, reads, closed: session.closed };
}

const assessParams = (requestId = "r1") => ({
  requestId,
  callSite: "gate",
  baseline: BASE,
  changeset: {
    digest: sha("cs"),
    base: BASE,
    after: AFTER,
    changes: [{ path: "src/x.ts", kind: "modified", before: sha("old"), after: BLOB }],
  },
  requirements: [],
  deadlineMs: 5000,
});

const todo: ProviderSpec = {
  initialize: { provider: { id: "todo", version: "1.0.0" }, diagnosticSources: ["todo"] },
  async assess(ctx) {
    const diagnostics = [];
    for (const c of ctx.changes) {
      if (c.after !== null && (await ctx.readText(c.after)).includes("TODO")) {
        diagnostics.push({
          source: "todo",
          code: "todo/found",
          severity: "warning" as const,
          message: "TODO left in the change",
          fingerprint: c.path,
        });
      }
    }
    return { diagnostics };
  },
};

describe("defineProvider", () => {
  it("is inert until listen() and branded", () => {
    const def = defineProvider(todo);
    expect(isProviderDefinition(def)).toBe(true);
    expect(def.$$type).toBe("@asp/ProviderDefinition");
  });

  it("rejects a definition without assess", () => {
    expect(() => defineProvider({ initialize: todo.initialize } as unknown as ProviderSpec)).toThrowWithCode(
      "ASP_SDK_INVALID_DEFINITION",
    );
  });

  describe("when the host asks for an assessment", () => {
    it("answers initialize with identity, sources and derived capabilities", async () => {
      const toProvider = new PassThrough();
      const toHost = new PassThrough();
      const session = defineProvider({ ...todo, inspect: async () => ({ results: [] }) }).listen({
        input: toProvider,
        output: toHost,
      });
      const client = createStreamConnection(toHost, toProvider);
      client.listen();
      open.push(() => {
        session.dispose();
        client.dispose();
      });
      const result = await client.sendRequest(METHODS.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        host: { name: "h", version: "1.0.0" },
        processId: null,
      });
      expect(result).toEqual({
        protocolVersion: PROTOCOL_VERSION,
        provider: { id: "todo", version: "1.0.0" },
        diagnosticSources: ["todo"],
        capabilities: ["check", "inspect"],
      });
    });

    // host §5: the answer echoes the baseline, the changeset and every blob read through callbacks.
    it("H5.1 reads through host/readBlob and fills validAsOf itself", async () => {
      const h = await start(todo);
      const a = (await h.client.sendRequest(METHODS.checkAssess, assessParams())) as Assessment;
      expect(validateAssessment(a).ok).toBe(true);
      expect(h.reads).toEqual([BLOB]);
      expect(a.validAsOf).toEqual({ baseline: BASE, changeset: sha("cs"), reads: [BLOB] });
      expect(a.status).toBe("complete");
      expect(a.diagnostics.map((d) => d.code)).toEqual(["todo/found"]);
    });

    // host §1: a host-owned field can never leave the provider.
    it("H1.2 turns a result carrying a host-owned field into status error", async () => {
      const h = await start({
        ...todo,
        assess: () =>
          ({
            diagnostics: [
              {
                source: "todo",
                code: "todo/x",
                severity: "error",
                message: "m",
                fingerprint: "f",
                data: { decision: "allow" },
              },
            ],
          }) as never,
      });
      const a = (await h.client.sendRequest(METHODS.checkAssess, assessParams())) as Assessment;
      expect(a.status).toBe("error");
      expect(a.error?.code).toBe("ASP_SDK_INVALID_RESULT");
      expect(a.diagnostics).toEqual([]);
    });

    it("drops unknown top-level fields of a handler result", async () => {
      const h = await start({ ...todo, assess: () => ({ diagnostics: [], verdict: "pass" }) as never });
      const a = (await h.client.sendRequest(METHODS.checkAssess, assessParams())) as Record<string, unknown>;
      expect(a.verdict).toBeUndefined();
      expect(a.status).toBe("complete");
    });

    it("reports a throwing handler as status error with its code", async () => {
      const h = await start({
        ...todo,
        assess: () => {
          throw new Error("boom");
        },
      });
      const a = (await h.client.sendRequest(METHODS.checkAssess, assessParams())) as Assessment;
      expect(a.status).toBe("error");
      expect(a.error).toEqual({ code: "ASP_SDK_HANDLER_FAILED", message: "boom" });
    });

    it("answers $/cancelRequest with RequestCancelled even when the handler waits", async () => {
      const h = await start(todo, { holdReads: true });
      const source = new CancellationTokenSource();
      const pending = h.client.sendRequest(METHODS.checkAssess, assessParams(), source.token);
      while (h.reads.length === 0) await new Promise((r) => setTimeout(r, 5));
      source.cancel();
      await expect(pending).rejects.toMatchObject({ code: PROTOCOL_ERRORS.requestCancelled });
    });

    it("answers unsupported for inspect/query when no handler exists", async () => {
      const h = await start(todo);
      await expect(
        h.client.sendRequest(METHODS.inspectQuery, {
          requestId: "q",
          baseline: BASE,
          changeset: null,
          query: { kind: "impact" },
          deadlineMs: 1000,
        }),
      ).rejects.toMatchObject({ code: PROTOCOL_ERRORS.unsupported });
    });

    it("answers MethodNotFound for an unknown method and keeps serving", async () => {
      const h = await start(todo);
      await expect(h.client.sendRequest("asp/unknown", {})).rejects.toMatchObject({ code: -32601 });
      const a = (await h.client.sendRequest(METHODS.checkAssess, assessParams("r2"))) as Assessment;
      expect(a.requestId).toBe("r2");
    });

    it("rejects invalid params with InvalidParams", async () => {
      const h = await start(todo);
      await expect(h.client.sendRequest(METHODS.checkAssess, { requestId: "x" })).rejects.toMatchObject({
        code: -32602,
      });
    });
  });

  describe("when the host shuts down", () => {
    it("ends with 0 after shutdown + exit", async () => {
      const h = await start(todo);
      expect(await h.client.sendRequest(METHODS.shutdown)).toBeNull();
      await h.client.sendNotification(METHODS.exit);
      expect(await h.closed).toBe(0);
    });

    it("ends with 1 on exit without shutdown", async () => {
      const h = await start(todo);
      await h.client.sendNotification(METHODS.exit);
      expect(await h.closed).toBe(1);
    });
  });

  describe("edit/propose", () => {
    it("H6.1 binds the plan to the baseline and fills provider and proposalId", async () => {
      const h = await start({
        ...todo,
        propose: async (ctx) => {
          await ctx.readBlob(BLOB);
          return {
            preconditions: [{ path: "src/x.ts", blob: BLOB }],
            operations: [{ op: "replace", path: "src/x.ts", oldText: "TODO", newText: "DONE" }],
          };
        },
      });
      const plan = (await h.client.sendRequest(METHODS.editPropose, {
        requestId: "p1",
        baseline: BASE,
        intent: { kind: "fix" },
        deadlineMs: 1000,
      })) as { validAsOf: unknown; provider: unknown; proposalId: string };
      expect(plan.validAsOf).toEqual({ baseline: BASE, changeset: null, reads: [BLOB] });
      expect(plan.provider).toEqual({ id: "todo", version: "1.0.0" });
      expect(plan.proposalId).toMatch(/\S/);
    });

    it("sends a refusal thrown as an AspError with its stable code in the error data", async () => {
      const h = await start({
        ...todo,
        propose: async () => {
          throw new AspError("ASP_TEXT_EDIT_NOT_FOUND", "oldText does not occur in src/x.ts", {
            data: { path: "src/x.ts" },
          });
        },
      });
      const refused = h.client.sendRequest(METHODS.editPropose, {
        requestId: "p2",
        baseline: BASE,
        intent: { kind: "replace" },
        deadlineMs: 1000,
      });
      await expect(refused).rejects.toMatchObject({
        code: -32603,
        message: "oldText does not occur in src/x.ts",
        data: { code: "ASP_TEXT_EDIT_NOT_FOUND", data: { path: "src/x.ts" } },
      });
    });
  });
});
