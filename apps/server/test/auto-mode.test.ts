import { createAutoRunner, createScriptedEngine, loadAutoRunProjection, runIdOf } from "@asp/auto-mode";
import type { RunIdentity } from "@asp/contracts";
import { digestBytes } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SERVER_ROUTES } from "../src/index.js";
import { bearer, exampleHost, passingReviewer } from "./helpers.js";

// The Auto Mode contract's canonical routes (issue 28): GET/PATCH /api/v1/frames/{fid}/auto-mode,
// GET /api/v1/frames/{fid}/auto-audits, GET /api/v1/artifacts/versions/{version_id}; and a run's
// projection beside them. Every answer is read from the host's verified store.

const STAGE2_ON = { stages: { stage2_auto_run_storage: true } };

let env: Awaited<ReturnType<typeof exampleHost>>;
/** Every stage off (no `autoMode`). */
let off: FastifyInstance;
/** Stage 2 on in the deployment configuration, a wall-time ceiling of 600 s from the environment. */
let on: FastifyInstance;

beforeAll(async () => {
  env = await exampleHost();
  off = await env.serve();
  on = await env.serve({
    autoMode: {
      deployment: STAGE2_ON,
      deploymentOrigin: "/etc/asp/host.json",
      env: { OPENAI4S_AUTO_WALL_TIME_S: "600" },
    },
  });
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const get = (app: FastifyInstance, url: string, token = "reader") =>
  app.inject({ method: "GET", url, headers: bearer(token) });
const patch = (
  app: FastifyInstance,
  fid: string,
  body: unknown,
  headers: Record<string, string> = {},
  token = "admin",
) =>
  app.inject({
    method: "PATCH",
    url: `/api/v1/frames/${fid}/auto-mode`,
    headers: { ...bearer(token), "content-type": "application/merge-patch+json", ...headers },
    payload: typeof body === "string" ? body : JSON.stringify(body),
  });

describe("the canonical Auto Mode routes", () => {
  it("AM.api.1: under /api/v1/frames the only routes are GET/PATCH …/auto-mode and GET …/auto-audits; unversioned and alias paths are 404", async () => {
    const frames = SERVER_ROUTES.filter((r) => r.path.startsWith("/api/v1/frames/")).map(
      (r) => `${r.method} ${r.path}`,
    );
    expect(frames.sort()).toEqual([
      "GET /api/v1/frames/:fid/auto-audits",
      "GET /api/v1/frames/:fid/auto-mode",
      "PATCH /api/v1/frames/:fid/auto-mode",
    ]);
    expect(SERVER_ROUTES.filter((r) => r.path.includes("artifacts")).map((r) => `${r.method} ${r.path}`)).toEqual([
      "GET /api/v1/artifacts/versions/:version_id",
    ]);
    for (const url of [
      "/frames/f1/auto-mode",
      "/api/frames/f1/auto-mode",
      "/api/v2/frames/f1/auto-mode",
      "/api/v1/frame/f1/auto-mode",
      "/api/v1/frames/f1/automode",
      "/api/v1/frames/f1/auto_mode",
      "/api/v1/frames/f1/auto-mode/",
      "/api/v1/frames/f1/audits",
      "/api/v1/frames/f1/auto-audit",
      "/api/v1/frames/f1/guardian-audits",
      "/api/v1/frames/f1/review-audits",
      "/api/v1/artifacts/v1",
      "/api/v1/artifact/versions/v1",
      "/artifacts/versions/v1",
    ]) {
      const res = await get(off, url, "admin");
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code, url).toBe("ASP_SERVER_NOT_FOUND");
    }
    // PUT and POST are not PATCH: no other method edits a frame.
    for (const method of ["PUT", "POST", "DELETE"] as const) {
      const res = await on.inject({
        method,
        url: "/api/v1/frames/f1/auto-mode",
        headers: bearer("admin"),
        payload: {},
      });
      expect(res.statusCode, method).toBe(404);
    }
  });

  it('GET a frame never configured: no settings, version "0", and the configuration it resolves to (every stage off)', async () => {
    const res = await get(off, "/api/v1/frames/never-seen/auto-mode");
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"0"');
    const body = res.json();
    expect(body).toMatchObject({ root_frame_id: "never-seen", settings: {}, stored: null, problem: null });
    expect(body.effective.stages.stage2_auto_run_storage).toMatchObject({ enabled: false });
    expect(body.effective.selection.preset.value).toBe("off");
    // A frame id outside the grammar is refused before anything is read.
    const bad = await get(off, `/api/v1/frames/${encodeURIComponent("../x")}/auto-mode`);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe("ASP_SERVER_BAD_REQUEST");
  });

  it("PATCH is refused while stage2_auto_run_storage is off (409), and nothing is stored", async () => {
    const res = await patch(off, "f-off", { preset: "on" });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe("ASP_ROLLOUT_STAGE_DISABLED");
    expect(res.json().message).toContain("stage2_auto_run_storage");
    expect((await get(off, "/api/v1/frames/f-off/auto-mode")).json().stored).toBeNull();
  });

  it("PATCH merges (RFC 7396), stores durably, resolves under the deployment and environment; budgets only tighten", async () => {
    const first = await patch(on, "f1", { preset: "on", budgets: { wall_time_s: 300, max_review_rounds: 1 } });
    expect(first.statusCode, first.body).toBe(200);
    const v1 = first.headers.etag as string;
    expect(v1).toMatch(/^"\d+"$/);
    expect(first.json().settings).toEqual({ preset: "on", budgets: { wall_time_s: 300, max_review_rounds: 1 } });
    expect(first.json().effective.selection.preset).toMatchObject({ value: "on" });
    expect(first.json().effective.budgets.wall_time_s).toMatchObject({ value: 300 });

    // null removes a key; an object merges into budgets.
    const second = await patch(on, "f1", { preset: null, budgets: { max_review_rounds: null } }, { "if-match": v1 });
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json().settings).toEqual({ budgets: { wall_time_s: 300 } });
    expect(second.headers.etag).not.toBe(v1);

    // A stale If-Match is 412 and changes nothing.
    const stale = await patch(on, "f1", { preset: "on" }, { "if-match": v1 });
    expect(stale.statusCode).toBe(412);
    expect(stale.json().code).toBe("ASP_SERVER_PRECONDITION_FAILED");

    // Looser than the environment's 600 s ceiling: refused, with the rollout's code.
    const loose = await patch(on, "f1", { budgets: { wall_time_s: 601 } });
    expect(loose.statusCode).toBe(400);
    expect(loose.json().code).toBe("ASP_ROLLOUT_BUDGET_LOOSENED");
    // Stage flags are trusted deployment configuration only, never a frame's.
    const stages = await patch(on, "f1", { stages: { stage3_scientific_review_shadow: true } });
    expect(stages.statusCode).toBe(400);
    expect(stages.json().code).toBe("ASP_ROLLOUT_KEY_NOT_ALLOWED");
    const unknown = await patch(on, "f1", { preset: "turbo" });
    expect(unknown.json().code).toBe("ASP_ROLLOUT_UNKNOWN_VALUE");
    // Not a JSON object; not JSON; not a JSON media type.
    for (const body of ["[1]", '"on"']) expect((await patch(on, "f1", body)).statusCode, body).toBe(400);
    expect((await patch(on, "f1", "{", {})).statusCode).toBe(400);
    expect((await patch(on, "f1", "preset=on", { "content-type": "text/plain" })).statusCode).toBe(415);
    // Only an admin token edits a frame.
    expect((await patch(on, "f1", { preset: "on" }, {}, "reader")).statusCode).toBe(403);

    // What was stored survives every refusal, and a second server over the same store reads it.
    const again = await env.serve({ autoMode: { deployment: STAGE2_ON } });
    const view = await get(again, "/api/v1/frames/f1/auto-mode");
    expect(view.json().settings).toEqual({ budgets: { wall_time_s: 300 } });
    expect(view.headers.etag).toBe(second.headers.etag);
    expect(view.json().effective.budgets.wall_time_s.source).toMatchObject({ kind: "frame" });
  });

  it("a merge patch is for PATCH routes only: on POST …/evaluate it is 415", async () => {
    const res = await on.inject({
      method: "POST",
      url: "/api/v1/repositories/demo/evaluate",
      headers: { ...bearer("evaluator"), "content-type": "application/merge-patch+json" },
      payload: JSON.stringify({ callSite: "interactive" }),
    });
    expect(res.statusCode).toBe(415);
    expect(res.json().code).toBe("ASP_SERVER_UNSUPPORTED_MEDIA_TYPE");
  });

  describe("over a committed Auto Run", () => {
    const run: RunIdentity = { root_frame_id: "frame-a", branch_id: "b", turn_id: "t", execution_id: "e" };
    const text = "x,y\n1,2\n";
    let runId: string;

    beforeAll(async () => {
      const runner = createAutoRunner({
        store: env.host.store,
        engine: createScriptedEngine({
          actor: { actor_id: "agent", session_id: "s-1", fingerprint: "model-a;cfg-1" },
          steps: [
            {
              kind: "completion",
              payload: "The table is attached.",
              artifacts: [
                { artifact_id: "out/table.csv", version_id: "v-table-1", bytes: new TextEncoder().encode(text) },
              ],
              evidence: [],
            },
          ],
        }),
        reviewers: [passingReviewer()],
        flags: createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]),
      });
      const projection = await runner.run({
        run,
        selection: {
          preset: "off",
          result_review_mode: "review_only",
          approvals_reviewer: "user",
          source: "frame",
          normalized: false,
        },
      });
      expect(projection.state).toBe("verified");
      runId = runIdOf(run);
    }, 60_000);

    it("GET …/auto-audits lists the frame's committed audit events, filtered by subject_kind and paged", async () => {
      const res = await get(on, "/api/v1/frames/frame-a/auto-audits");
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.audits.map((a: { event: { type: string } }) => a.event.type)).toEqual([
        "auto_audit_completed",
        "auto_audit_started",
      ]);
      expect(body.audits[0].event).toMatchObject({ run, subject_kind: "result_review" });
      expect(body.next).toBeNull();
      const page = await get(on, "/api/v1/frames/frame-a/auto-audits?limit=1");
      expect(page.json().audits).toHaveLength(1);
      const rest = await get(on, `/api/v1/frames/frame-a/auto-audits?limit=1&before=${page.json().next}`);
      expect(rest.json().audits[0].event.type).toBe("auto_audit_started");
      expect(
        (await get(on, "/api/v1/frames/frame-a/auto-audits?subject_kind=permission_review")).json().audits,
      ).toEqual([]);
      expect((await get(on, "/api/v1/frames/other/auto-audits")).json().audits).toEqual([]);
      for (const q of ["subject_kind=guardian", "limit=0", "limit=501", "before=0", "other=1"]) {
        const bad = await get(on, `/api/v1/frames/frame-a/auto-audits?${q}`);
        expect(bad.statusCode, q).toBe(400);
      }
    });

    it("GET …/artifacts/versions/{version_id} serves the frozen bytes with checksum headers, as a download", async () => {
      const res = await get(on, "/api/v1/artifacts/versions/v-table-1");
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe(text);
      const checksum = digestBytes(new TextEncoder().encode(text));
      expect(res.headers["x-asp-checksum"]).toBe(checksum);
      expect(res.headers.etag).toBe(`"${checksum}"`);
      expect(res.headers["repr-digest"]).toBe(`sha-256=:${Buffer.from(checksum.slice(7), "hex").toString("base64")}:`);
      expect(res.headers["content-type"]).toBe("application/octet-stream");
      expect(res.headers["content-disposition"]).toBe("attachment");
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
      expect(res.headers["x-asp-artifact-id"]).toBe(encodeURIComponent("out/table.csv"));
      const missing = await get(on, "/api/v1/artifacts/versions/v-none");
      expect(missing.statusCode).toBe(404);
      expect(missing.json().code).toBe("ASP_AUTO_MODE_VERSION_NOT_FOUND");
    });

    it("GET /api/v1/auto-runs lists runs newest first with the label their projection gives, by root frame", async () => {
      const res = await get(on, "/api/v1/auto-runs?root_frame_id=frame-a");
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        runs: [
          {
            seq: expect.any(Number),
            at: expect.any(String),
            run_id: runId,
            run,
            state: "verified",
            terminal_reason: (await loadAutoRunProjection(env.host.store, runId)).terminal_reason,
            user_truth: "Verified",
            label: (await loadAutoRunProjection(env.host.store, runId)).label,
          },
        ],
        next: null,
      });
      expect((await get(on, "/api/v1/auto-runs?root_frame_id=other")).json().runs).toEqual([]);
      expect((await get(on, "/api/v1/auto-runs?limit=101")).statusCode).toBe(400);
    });

    it("AM.portable.1: GET /api/v1/auto-runs/{run_id} is the one projection from the durable records", async () => {
      const res = await get(on, `/api/v1/auto-runs/${runId}`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(JSON.parse(JSON.stringify(await loadAutoRunProjection(env.host.store, runId))));
      expect(res.json()).toMatchObject({ state: "verified", user_truth: "Verified" });
      const missing = await get(on, `/api/v1/auto-runs/sha256:${"0".repeat(64)}`);
      expect(missing.statusCode).toBe(404);
      expect(missing.json().code).toBe("ASP_SERVER_UNKNOWN_RUN");
      expect((await get(on, "/api/v1/auto-runs/not-a-digest")).statusCode).toBe(400);
    });
  });
});
