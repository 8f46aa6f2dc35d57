import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AutoEvent,
  createAutoRunner,
  createRulesGuardian,
  createScratchWorkspace,
  createScriptedEngine,
  type Engine,
  type PermissionClassifier,
  runIdOf,
} from "@asp/auto-mode";
import type { RunIdentity } from "@asp/contracts";
import { createStageFlags, DEFAULT_BUDGETS } from "@asp/rollout";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { streamEventOf } from "../src/stream.js";
import { bearer, exampleHost, passingReviewer, secretOf } from "./helpers.js";

// Issue 28: the event stream of committed facts only (the contract's seven event types,
// permission_resolved, decisions and applies), as server-sent events over a real loopback socket,
// resumable from Last-Event-ID with no duplicate and no gap.

const folders: string[] = [];

let env: Awaited<ReturnType<typeof exampleHost>>;
let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  env = await exampleHost();
  // A short look-again interval keeps the test quick; nothing here waits on a deadline.
  app = await env.serve({ stream: { pollMs: 10 } });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  base = `http://127.0.0.1:${address.port}`;
}, 120_000);
afterAll(async () => {
  await env?.close();
  for (const d of folders.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Received {
  readonly id: string;
  readonly event: string;
  readonly data: { seq: number; type: string; data: Record<string, unknown> };
}

/**
 * Open the stream and collect events until `until` says stop (then the client disconnects).
 * Resolves with the events received, in order.
 */
async function collect(
  query: string,
  until: (received: readonly Received[]) => boolean,
  headers: Record<string, string> = {},
): Promise<Received[]> {
  const abort = new AbortController();
  const res = await fetch(`${base}/api/v1/events${query}`, {
    headers: { ...bearer("reader"), ...headers },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const received: Received[] = [];
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    while (!until(received)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
        const fields = Object.fromEntries(
          block
            .split("\n")
            .filter((l) => !l.startsWith(":") && l.includes(": "))
            .map((l) => [l.slice(0, l.indexOf(": ")), l.slice(l.indexOf(": ") + 2)]),
        );
        if (fields.data === undefined) continue;
        received.push({ id: String(fields.id), event: String(fields.event), data: JSON.parse(fields.data) });
        if (until(received)) break;
      }
    }
  } finally {
    abort.abort();
  }
  return received;
}

/** Writes under docs/ are `ask`; everything else is allowed. */
const askDocs: PermissionClassifier = {
  version: "stream-test-1",
  classify: (action) =>
    action.path?.startsWith("docs/") === true
      ? { outcome: "ask", reason: "docs/ needs approval", fenced: false }
      : { outcome: "allow", reason: "allowed", fenced: false },
};

/** One real Auto Run under Stage 7: a write under docs/ the rules Guardian allows, then a reviewed completion. */
async function guardedRun(run: RunIdentity): Promise<AutoEvent[]> {
  const dir = mkdtempSync(join(tmpdir(), "asp-stream-ws-"));
  folders.push(dir);
  const heard: AutoEvent[] = [];
  const engine: Engine = createScriptedEngine({
    actor: { actor_id: "agent", session_id: "s-1", fingerprint: "model-a;cfg-1" },
    steps: [
      { kind: "action", action: { tool: "write_file", arguments: { path: "docs/a.md", content: "hello\n" } } },
      { kind: "completion", payload: "Wrote docs/a.md.", artifacts: [], evidence: [] },
    ],
  });
  const runner = createAutoRunner({
    store: env.host.store,
    engine,
    reviewers: [passingReviewer()],
    flags: createStageFlags([
      "stage2_auto_run_storage",
      "stage4_review_completion_gate",
      "stage7_guardian_enforcement",
    ]),
    workspace: await createScratchWorkspace({ dir }),
    permissions: askDocs,
    guardian: createRulesGuardian({
      version: "rules-1",
      rules: [{ actionClass: "write_file", targets: ["docs/"], decision: "allow", risk: "low", rationale: "docs" }],
    }),
    onEvent: (e) => heard.push(e as AutoEvent),
  });
  const projection = await runner.run({
    run,
    selection: {
      preset: "off",
      result_review_mode: "review_only",
      approvals_reviewer: "auto_review",
      source: "frame",
      normalized: false,
    },
    budgets: DEFAULT_BUDGETS,
  });
  expect(projection.state).toBe("verified");
  return heard;
}

const RUN_A: RunIdentity = { root_frame_id: "stream", branch_id: "b", turn_id: "t", execution_id: "a" };
const RUN_B: RunIdentity = { ...RUN_A, execution_id: "b" };

describe("GET /api/v1/events (issue 28)", () => {
  it("streams a run live, exactly the events the runner heard after each commit, permission_resolved included; the terminal matches REST", async () => {
    // From the head before the run, so the test never depends on when the stream opened.
    const from = (await env.host.store.log.head())?.seq ?? 0;
    const live = collect(`?after=${from}`, (r) => r.some((e) => e.event === "auto_run_terminal"));
    const heard = await guardedRun(RUN_A);
    const received = await live;
    // The stream is the committed facts: every event the runner heard (after its commit), in the
    // same order and with the same content, and the permission audit events it committed beside them.
    const byId = new Map(received.map((e) => [String(e.data.data.event_id), e]));
    expect(heard.map((e) => byId.get(e.event_id)?.data.data)).toEqual(JSON.parse(JSON.stringify(heard)));
    const order = heard.map((e) => received.indexOf(byId.get(e.event_id) as Received));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(received.map((e) => e.event)).toEqual([
      "auto_run_started",
      "auto_audit_started",
      "auto_audit_completed",
      "permission_resolved",
      "candidate_ready",
      "auto_audit_started",
      "auto_audit_completed",
      "auto_run_terminal",
    ]);
    expect(received[1]?.data.data.subject_kind).toBe("permission_review");
    expect(received[3]?.data.data.audit_id).toBe(received[2]?.data.data.audit_id);
    expect(received.every((e) => e.id === String(e.data.seq))).toBe(true);
    const projection = (await (
      await fetch(`${base}/api/v1/auto-runs/${runIdOf(RUN_A)}`, { headers: bearer("reader") })
    ).json()) as { terminal: unknown };
    expect(received.at(-1)?.data.data.terminal).toEqual(projection.terminal);
  });

  it("a client that drops and reconnects with Last-Event-ID gets no duplicate and no gap; decisions are events too", async () => {
    await guardedRun(RUN_B);
    const gate = await fetch(`${base}/api/v1/repositories/demo/evaluate`, {
      method: "POST",
      headers: { ...bearer("evaluator"), "content-type": "application/json" },
      body: JSON.stringify({ callSite: "gate", base: "HEAD" }),
    });
    expect(gate.status).toBe(200);
    // What the committed facts stand for, read from the log itself.
    const facts = await env.host.store.log.list({});
    const expected: number[] = [];
    for (const f of facts) {
      const e = await streamEventOf(f, async (seq) => (seq > 1 ? env.host.store.log.read(seq - 1) : undefined));
      if (e !== null) expected.push(e.seq);
    }
    // One uninterrupted reader from the start sees exactly those.
    const all = await collect("?after=0", (r) => r.length >= expected.length);
    expect(all.map((e) => e.data.seq)).toEqual(expected);
    expect(all.map((e) => e.event)).toContain("decision");

    // Drop after five events, reconnect from the last id seen, twice.
    const first = await collect("?after=0", (r) => r.length === 5);
    const second = await collect("", (r) => r.length === 7, { "last-event-id": first.at(-1)?.id as string });
    const third = await collect("?after=0", (r) => r.length === all.length - 12, {
      "last-event-id": second.at(-1)?.id as string,
    });
    expect([...first, ...second, ...third].map((e) => e.data.seq)).toEqual(all.map((e) => e.data.seq));
  });

  it("run_id keeps one run's events; a bad Last-Event-ID is 400; a reader's token is needed", async () => {
    const one = await collect(`?after=0&run_id=${runIdOf(RUN_A)}`, (r) => r.at(-1)?.event === "auto_run_terminal");
    expect(one.every((e) => e.event !== "decision")).toBe(true);
    expect(one.length).toBeGreaterThan(0);
    for (const e of one) expect(e.data.data.run).toEqual(RUN_A);
    const bad = await fetch(`${base}/api/v1/events`, { headers: { ...bearer("reader"), "last-event-id": "x1" } });
    expect(bad.status).toBe(400);
    expect((await fetch(`${base}/api/v1/events`)).status).toBe(401);
    expect((await fetch(`${base}/api/v1/events`, { headers: bearer("admin") })).status).toBe(403);
    expect((await fetch(`${base}/api/v1/events`, { headers: { authorization: secretOf("reader") } })).status).toBe(401);
  });

  it("past maxStreams a new stream is 503 ASP_SERVER_BUSY; closing one frees its place", async () => {
    const server = await env.serve({ stream: { pollMs: 10, maxStreams: 3 } });
    await server.listen({ host: "127.0.0.1", port: 0 });
    const address = server.server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    const url = `http://127.0.0.1:${address.port}/api/v1/events`;
    const opened = await Promise.all(
      [1, 2, 3].map(async () => {
        const abort = new AbortController();
        const res = await fetch(url, { headers: bearer("reader"), signal: abort.signal });
        expect(res.status).toBe(200);
        return abort;
      }),
    );
    const busy = await fetch(url, { headers: bearer("reader") });
    expect(busy.status).toBe(503);
    expect(((await busy.json()) as { code: string }).code).toBe("ASP_SERVER_BUSY");
    for (const a of opened) a.abort();
    // The server notices each client going; then a stream opens again.
    let status = 503;
    for (let i = 0; i < 1000 && status === 503; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      const abort = new AbortController();
      const res = await fetch(url, { headers: bearer("reader"), signal: abort.signal });
      status = res.status;
      abort.abort();
    }
    expect(status).toBe(200);
  });

  it("closing the server ends every open stream", async () => {
    const server = await env.serve({ stream: { pollMs: 10 } });
    await server.listen({ host: "127.0.0.1", port: 0 });
    const address = server.server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    const res = await fetch(`http://127.0.0.1:${address.port}/api/v1/events`, { headers: bearer("reader") });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await server.close();
    let done = false;
    while (!done) done = (await reader.read()).done;
    expect(done).toBe(true);
  });
});
