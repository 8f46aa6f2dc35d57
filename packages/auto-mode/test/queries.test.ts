import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunIdentity } from "@asp/contracts";
import { digestBytes, type Store } from "@asp/evidence";
import { type AutoModeSelection, createStageFlags, DEFAULT_BUDGETS } from "@asp/rollout";
import { afterEach, describe, expect, it } from "vitest";
import {
  AUTO_FACT_KINDS,
  createAutoRunner,
  createScratchWorkspace,
  createScriptedEngine,
  listAutoRuns,
  listFrameAudits,
  readArtifactVersion,
  readRunFacts,
  runIdOf,
} from "../src/index.js";
import {
  askDocs,
  completion,
  docsRules,
  engineOf,
  fakeReviewer,
  PRODUCER,
  REVIEW_ONLY,
  RUN,
  tempStores,
} from "./helpers.js";

// The read-only queries behind the HTTP API's canonical Auto Mode routes:
// GET /api/v1/frames/{fid}/auto-audits and GET /api/v1/artifacts/versions/{version_id}.

const setup = tempStores();
const folders: string[] = [];
afterEach(() => {
  for (const d of folders.splice(0)) rmSync(d, { recursive: true, force: true });
});
const AUTO_REVIEW: AutoModeSelection = { ...REVIEW_ONLY, approvals_reviewer: "auto_review" };

/** One real run on `store`: a write under docs/ (an ask the rules Guardian allows), then a completion, reviewed. */
async function guardedRun(store: Store, run: RunIdentity): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "asp-queries-ws-"));
  folders.push(dir);
  const runner = createAutoRunner({
    store,
    engine: engineOf(async function* () {
      yield {
        kind: "action",
        action: { tool: "write_file", arguments: { path: "docs/a.md", content: `${run.root_frame_id}\n` } },
      };
      yield completion();
    }),
    reviewers: [fakeReviewer("fake-pass")],
    flags: createStageFlags([
      "stage2_auto_run_storage",
      "stage4_review_completion_gate",
      "stage7_guardian_enforcement",
    ]),
    workspace: await createScratchWorkspace({ dir }),
    permissions: askDocs,
    guardian: docsRules,
  });
  const projection = await runner.run({ run, selection: AUTO_REVIEW, budgets: DEFAULT_BUDGETS });
  expect(projection.problems).toEqual([]);
  expect(projection.state).toBe("verified");
}

describe("listFrameAudits", () => {
  it("AM.api.2: lists the committed audit events of one root frame only, newest first, by subject kind, paged without gap or repeat", async () => {
    const { store } = await setup();
    await guardedRun(store, RUN);
    await guardedRun(store, { ...RUN, root_frame_id: "frame-2" });
    await guardedRun(store, { ...RUN, execution_id: "exec-2" });

    // Every audit event committed for frame-1, straight from the run facts.
    const committed = [
      ...(await readRunFacts(store.log, runIdOf(RUN))),
      ...(await readRunFacts(store.log, runIdOf({ ...RUN, execution_id: "exec-2" }))),
    ]
      .filter((f) => f.kind === AUTO_FACT_KINDS.event)
      .filter((f) => /^auto_audit_/.test((f.record as { type: string }).type))
      .sort((a, b) => b.seq - a.seq);
    // Two runs, each one permission audit and one result audit, each started and completed.
    expect(committed).toHaveLength(8);

    const all = await listFrameAudits(store.log, "frame-1", { limit: 500 });
    expect(all.root_frame_id).toBe("frame-1");
    expect(all.audits.map((a) => a.seq)).toEqual(committed.map((f) => f.seq));
    expect(all.audits.every((a) => (a.event.run as RunIdentity).root_frame_id === "frame-1")).toBe(true);
    expect(all.next).toBeNull();

    const permission = await listFrameAudits(store.log, "frame-1", { subjectKind: "permission_review" });
    expect(permission.audits.map((a) => a.event.type)).toEqual([
      "auto_audit_completed",
      "auto_audit_started",
      "auto_audit_completed",
      "auto_audit_started",
    ]);
    expect(permission.audits.every((a) => a.event.subject_entity_kind === "approval_action")).toBe(true);
    const result = await listFrameAudits(store.log, "frame-1", { subjectKind: "result_review" });
    expect(result.audits).toHaveLength(4);
    expect(result.audits.every((a) => a.event.subject_entity_kind === "candidate_evidence_snapshot")).toBe(true);
    // A completion is the event as committed: the assessment and its digest ride with it.
    const done = result.audits.find((a) => a.event.type === "auto_audit_completed");
    expect(done?.event).toHaveProperty("assessment_digest");

    // Pages of 3 cover the same rows exactly once, in order.
    const paged: number[] = [];
    let before: number | undefined;
    for (let i = 0; i < 5; i += 1) {
      const page = await listFrameAudits(store.log, "frame-1", {
        limit: 3,
        ...(before === undefined ? {} : { before }),
      });
      paged.push(...page.audits.map((a) => a.seq));
      if (page.next === null) break;
      before = page.next;
    }
    expect(paged).toEqual(committed.map((f) => f.seq));

    expect((await listFrameAudits(store.log, "frame-2")).audits).toHaveLength(4);
    expect((await listFrameAudits(store.log, "no-such-frame")).audits).toEqual([]);
  });

  it("a limit, cursor or subject kind out of range is refused with its field", async () => {
    const { store } = await setup();
    for (const [query, field] of [
      [{ limit: 0 }, "limit"],
      [{ limit: 501 }, "limit"],
      [{ before: 0 }, "before"],
      [{ subjectKind: "guardian_review" }, "subject_kind"],
    ] as const) {
      await expect(listFrameAudits(store.log, "f", query as never)).rejects.toMatchObject({
        code: "ASP_AUTO_MODE_INVALID_OPTION",
        data: { field },
      });
    }
  });
});

describe("listAutoRuns", () => {
  it("lists runs newest first from their committed start, by root frame, paged without gap or repeat", async () => {
    const { store } = await setup();
    const runs = [RUN, { ...RUN, root_frame_id: "frame-2" }, { ...RUN, execution_id: "exec-2" }];
    for (const run of runs) await guardedRun(store, run);
    const all = await listAutoRuns(store.log);
    expect(all.runs.map((r) => r.run_id)).toEqual([...runs].reverse().map((r) => runIdOf(r)));
    expect(all.runs[0]?.run).toEqual(runs[2]);
    expect(all.next).toBeNull();
    const frame1 = await listAutoRuns(store.log, { rootFrameId: "frame-1" });
    expect(frame1.runs.map((r) => r.run.execution_id)).toEqual(["exec-2", "exec-1"]);
    const first = await listAutoRuns(store.log, { limit: 2 });
    expect(first.runs).toHaveLength(2);
    const rest = await listAutoRuns(store.log, { limit: 2, before: first.next as number });
    expect([...first.runs, ...rest.runs].map((r) => r.seq)).toEqual(all.runs.map((r) => r.seq));
    expect(rest.next).toBeNull();
    await expect(listAutoRuns(store.log, { limit: 101 })).rejects.toMatchObject({ data: { field: "limit" } });
  });
});

describe("readArtifactVersion", () => {
  it("returns the frozen bytes a committed candidate names, verified, with the candidates that name them", async () => {
    const { store } = await setup();
    await guardedRun(store, RUN);
    const facts = await readRunFacts(store.log, runIdOf(RUN));
    const candidate = facts.find((f) => f.kind === AUTO_FACT_KINDS.candidate)?.record as {
      body: {
        candidate_id: string;
        artifact_versions: Array<{ artifact_id: string; version_id: string; checksum: string }>;
      };
    };
    // With a workspace the Artifacts are the host's own files: docs/a.md, version id from its digest.
    const [v] = candidate.body.artifact_versions;
    expect(v?.artifact_id).toBe("docs/a.md");
    const found = await readArtifactVersion(store, v?.version_id as string);
    expect(new TextDecoder().decode(found.bytes)).toBe("frame-1\n");
    expect(found.checksum).toBe(digestBytes(found.bytes));
    expect(found.sources).toEqual([
      { run_id: runIdOf(RUN), candidate_id: candidate.body.candidate_id, seq: expect.any(Number) },
    ]);
    await expect(readArtifactVersion(store, "nope")).rejects.toThrowWithCode("ASP_AUTO_MODE_VERSION_NOT_FOUND");
  });

  it("one version id an Engine gave two different byte strings is refused, never guessed", async () => {
    const { store } = await setup();
    const flags = createStageFlags(["stage2_auto_run_storage"]);
    const off: AutoModeSelection = { ...REVIEW_ONLY, result_review_mode: "off" };
    for (const [execution, text] of [
      ["exec-a", "one\n"],
      ["exec-b", "two\n"],
    ] as const) {
      const runner = createAutoRunner({
        store,
        engine: createScriptedEngine({
          actor: PRODUCER,
          steps: [
            {
              kind: "completion",
              payload: "done",
              artifacts: [{ artifact_id: "out.txt", version_id: "v1", bytes: new TextEncoder().encode(text) }],
              evidence: [],
            },
          ],
        }),
        reviewers: [],
        flags,
      });
      await runner.run({ run: { ...RUN, execution_id: execution }, selection: off });
    }
    await expect(readArtifactVersion(store, "v1")).rejects.toMatchObject({
      code: "ASP_AUTO_MODE_VERSION_AMBIGUOUS",
      data: { version_id: "v1", checksums: [expect.stringMatching(/^sha256:/), expect.stringMatching(/^sha256:/)] },
    });
  });
});
