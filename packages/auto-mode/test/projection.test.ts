import type { AutoRun, Candidate, TerminalRecord } from "@asp/contracts";
import { type Digest, type FactEntry, type FrozenSnapshot, readSnapshot, type Store } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AUTO_FACT_KINDS,
  type AutoRunProjection,
  buildTerminalRecord,
  commitTransition,
  createAutoRunner,
  createScriptedEngine,
  loadAutoRunProjection,
  type ProjectionFact,
  projectAutoRun,
  readRunFacts,
  runIdOf,
} from "../src/index.js";
import { completion, FLAGS, fakeReviewer, PRODUCER, REVIEW_ONLY, RUN, tempStore } from "./helpers.js";

interface Fixture {
  store: Store;
  facts: FactEntry[];
  projection: AutoRunProjection;
  verified: Record<string, FrozenSnapshot | null>;
  payloads: Record<string, boolean>;
}

const cleanups: Array<() => Promise<void>> = [];
const fixtures: Record<"pass" | "issues", Fixture> = {} as never;
const RUN_ID = runIdOf(RUN);

async function fixture(mode: string, flags = FLAGS): Promise<Fixture> {
  const t = await tempStore();
  cleanups.push(t.cleanup);
  const projection = await createAutoRunner({
    store: t.store,
    engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
    reviewers: [fakeReviewer(mode)],
    flags,
  }).run({ run: RUN, selection: REVIEW_ONLY });
  const facts = await readRunFacts(t.store.log, RUN_ID);
  // From the facts: a run that ended at the safety boundary projects no candidate.
  const found = facts.find((f) => f.kind === AUTO_FACT_KINDS.candidate);
  if (found === undefined) throw new Error(`${mode}: no candidate committed`);
  const cand = (found.record as { body: Candidate }).body;
  return {
    store: t.store,
    facts,
    projection,
    verified: { [cand.snapshot_digest]: await readSnapshot(t.store, cand.snapshot_digest as Digest) },
    payloads: { [cand.payload_digest]: true },
  };
}

beforeAll(async () => {
  fixtures.pass = await fixture("fake-pass");
  fixtures.issues = await fixture("fake-issues");
}, 30_000);
afterAll(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const project = (
  f: Fixture,
  facts: ReadonlyArray<ProjectionFact>,
  over: Partial<{ verified: Record<string, FrozenSnapshot | null>; payloads: Record<string, boolean> }> = {},
) =>
  projectAutoRun({
    runId: RUN_ID,
    facts,
    snapshots: over.verified ?? f.verified,
    payloadsVerified: over.payloads ?? f.payloads,
  });

/** Edit the last fact of `kind` (its record body, or the event itself). */
function edit(
  facts: FactEntry[],
  kind: string,
  fn: (body: Record<string, unknown>) => void,
  which: "last" | "first" = "last",
): ProjectionFact[] {
  const out = clone(facts) as ProjectionFact[];
  const matches = out.filter((f) => f.kind === kind);
  const target = which === "last" ? matches[matches.length - 1] : matches[0];
  if (target === undefined) throw new Error(`no ${kind} fact`);
  const rec = target.record as { body?: Record<string, unknown> } & Record<string, unknown>;
  fn(kind === AUTO_FACT_KINDS.event ? rec : (rec.body as Record<string, unknown>));
  return out;
}
/** A tamper: set `path` (dotted) in the body of the last (or first) fact of `kind`. */
const set =
  (kind: string, path: string, value: unknown, which: "last" | "first" = "last") =>
  (f: Fixture): ProjectionFact[] =>
    edit(
      f.facts,
      kind,
      (b) => {
        const keys = path.split(".");
        const last = keys.pop() as string;
        const target = keys.reduce((o, k) => o[k] as Record<string, unknown>, b);
        target[last] = value;
      },
      which,
    );
const editEvent = (facts: FactEntry[], type: string, fn: (e: Record<string, unknown>) => void): ProjectionFact[] => {
  const out = clone(facts) as ProjectionFact[];
  const ev = out.find((f) => f.kind === AUTO_FACT_KINDS.event && (f.record as { type: string }).type === type);
  if (ev === undefined) throw new Error(`no ${type}`);
  fn(ev.record as Record<string, unknown>);
  return out;
};
const expectFailClosed = (p: AutoRunProjection) => {
  expect(p.terminal_reason).toBe("safety_boundary");
  expect(p.state).toBeNull();
  expect(p.user_truth).toBe("Failed · Safety boundary");
  expect(p.problems.length).toBeGreaterThan(0);
};

describe("projectAutoRun", () => {
  it("AM.portable.1 AM.durable.2: one projection from durable records; reopening in another handle gives the same answer", async () => {
    const f = fixtures.pass;
    expect(f.projection.state).toBe("verified");
    expect(project(f, f.facts)).toEqual(f.projection);
    expect(await loadAutoRunProjection(f.store, RUN_ID)).toEqual(f.projection);
  });

  describe("when a durable record is tampered with (tamper test: each kind)", () => {
    const cases: Array<[string, "pass" | "issues", (f: Fixture) => ProjectionFact[]]> = [
      ["run: frozen selection edited", "pass", set(AUTO_FACT_KINDS.run, "selection.result_review_mode", "off")],
      ["run: candidate pointer moved", "pass", set(AUTO_FACT_KINDS.run, "candidate_id", "candidate:other")],
      [
        "run: independence policy relaxed",
        "pass",
        set(AUTO_FACT_KINDS.run, "independence.policy", "same_fingerprint_allowed"),
      ],
      [
        "candidate: payload digest swapped",
        "pass",
        set(AUTO_FACT_KINDS.candidate, "payload_digest", `sha256:${"1".repeat(64)}`, "first"),
      ],
      [
        "candidate: producer swapped",
        "pass",
        set(AUTO_FACT_KINDS.candidate, "producer.fingerprint", "model-z", "first"),
      ],
      [
        "snapshot: a ref dropped",
        "pass",
        (f) => edit(f.facts, AUTO_FACT_KINDS.snapshot, (b) => void (b.refs as unknown[]).pop()),
      ],
      ["snapshot: digest edited", "pass", set(AUTO_FACT_KINDS.snapshot, "digest", `sha256:${"2".repeat(64)}`)],
      [
        "review run: reviewer rewritten to the producer (self-review)",
        "pass",
        set(AUTO_FACT_KINDS.review, "reviewer", { ...PRODUCER }),
      ],
      [
        "review run: bound to another snapshot",
        "pass",
        set(AUTO_FACT_KINDS.review, "snapshot_digest", `sha256:${"3".repeat(64)}`),
      ],
      ["review run: issues verdict flipped to pass", "issues", set(AUTO_FACT_KINDS.review, "verdict", "pass")],
      ["finding: claim edited", "issues", set(AUTO_FACT_KINDS.finding, "claim", "nothing is wrong")],
      ["finding: marked resolved", "issues", set(AUTO_FACT_KINDS.finding, "status", "resolved")],
      [
        "finding: severity lowered",
        "issues",
        (f) => edit(f.facts, AUTO_FACT_KINDS.finding, (b) => Object.assign(b, { severity: "info", material: false })),
      ],
      ["terminal: counters edited", "pass", set(AUTO_FACT_KINDS.terminal, "counters.review_attempts", 0)],
      ["ledger: limits loosened", "pass", set(AUTO_FACT_KINDS.ledger, "limits.max_review_rounds", 99)],
      [
        "event: assessment edited (does not re-hash)",
        "pass",
        (f) =>
          editEvent(f.facts, "auto_audit_completed", (e) => {
            (e.assessment as Record<string, unknown>).rationale = "forged";
          }),
      ],
      [
        "event: audit request digest swapped",
        "pass",
        (f) =>
          editEvent(f.facts, "auto_audit_started", (e) => {
            e.audit_request_digest = `sha256:${"4".repeat(64)}`;
          }),
      ],
      [
        "event: candidate_ready names another snapshot",
        "pass",
        (f) =>
          editEvent(f.facts, "candidate_ready", (e) => {
            e.snapshot_digest = `sha256:${"5".repeat(64)}`;
          }),
      ],
      [
        "event: subject pairing crossed",
        "pass",
        (f) =>
          editEvent(f.facts, "auto_audit_started", (e) => {
            e.subject_entity_kind = "approval_action";
          }),
      ],
      [
        "audit row missing: auto_audit_completed deleted",
        "pass",
        (f) => f.facts.filter((x) => (x.record as { type?: string }).type !== "auto_audit_completed"),
      ],
      [
        "audit row missing: terminal event deleted",
        "issues",
        (f) => f.facts.filter((x) => (x.record as { type?: string }).type !== "auto_run_terminal"),
      ],
      [
        "record missing: the promotion deleted",
        "pass",
        (f) =>
          f.facts.filter(
            (x) =>
              !(
                x.kind === AUTO_FACT_KINDS.candidate &&
                (x.record as { body: Candidate }).body.review_status === "verified"
              ),
          ),
      ],
      [
        "record missing: the snapshot deleted",
        "pass",
        (f) => f.facts.filter((x) => x.kind !== AUTO_FACT_KINDS.snapshot),
      ],
      ["unknown fact kind", "pass", (f) => [...f.facts, { seq: 999, kind: "auto.guess", record: {} }]],
    ];
    it.each(cases)(
      "AM.durable.3 AM.durable.4: %s -> safety_boundary, never Verified or Unavailable",
      (_n, which, tamper) => {
        const f = fixtures[which];
        expectFailClosed(project(f, tamper(f)));
      },
    );

    it("AM.durable.3: a snapshot or payload that does not re-hash -> safety_boundary", () => {
      const f = fixtures.pass;
      expectFailClosed(project(f, f.facts, { verified: {} }));
      expectFailClosed(project(f, f.facts, { payloads: {} }));
    });

    it("AM.durable.3: an object deleted from the real store -> safety_boundary on load", async () => {
      const t = await tempStore();
      cleanups.push(t.cleanup);
      await createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-pass")],
        flags: FLAGS,
      }).run({ run: RUN, selection: REVIEW_ONLY });
      // The same records over an object store that lost the snapshot's evidence blob.
      const lossy = {
        log: t.store.log,
        objects: {
          ...t.store.objects,
          readBlob: async () => {
            throw Object.assign(new Error("gone"), { code: "ASP_EVIDENCE_NOT_FOUND" });
          },
          has: async () => false,
        },
      } as unknown as Store;
      expectFailClosed(await loadAutoRunProjection(lossy, RUN_ID));
    });

    it("AM.durable.3 AM.durable.4: a writer with store access appends a forged verified terminal to an issues run -> safety_boundary", async () => {
      const t = await tempStore();
      cleanups.push(t.cleanup);
      const p = await createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-issues")],
        flags: FLAGS,
      }).run({ run: RUN, selection: REVIEW_ONLY });
      expect(p.state).toBe("completed_with_issues");
      const cand = p.candidate as Candidate;
      const eventId = "event:forged";
      const at = new Date().toISOString();
      const terminal = buildTerminalRecord(
        { run: RUN, counters: (p.terminal as TerminalRecord).counters, event_id: eventId, committed_at: at },
        { kind: "verified", candidate: cand },
      );
      const facts = await readRunFacts(t.store.log, RUN_ID);
      const lastRun = [...facts].reverse().find((x) => x.kind === AUTO_FACT_KINDS.run)?.record as { body: AutoRun };
      const ledger = [...facts].reverse().find((x) => x.kind === AUTO_FACT_KINDS.ledger)?.record as { body: unknown };
      // Schema-valid records and event, committed through the real fact log (the chain verifies).
      await commitTransition(t.store.log, RUN_ID, {
        event: { event_id: eventId, type: "auto_run_terminal", run: RUN, committed_at: at, terminal },
        records: [
          { kind: "candidate", record: { ...cand, review_status: "verified" } },
          { kind: "terminal", record: terminal },
          { kind: "run", record: { ...lastRun.body, state: "verified", terminal_reason: null } },
          { kind: "ledger", record: ledger.body },
        ],
      });
      expect((await t.store.log.verify()).ok).toBe(true);
      expectFailClosed(await loadAutoRunProjection(t.store, RUN_ID));
    });

    it("AM.durable.3: a fact log that does not verify -> safety_boundary", async () => {
      const broken = {
        log: {
          list: async () => {
            throw Object.assign(new Error("chain"), { code: "ASP_EVIDENCE_CHAIN_BROKEN" });
          },
        },
        objects: fixtures.pass.store.objects,
      } as unknown as Store;
      expectFailClosed(await loadAutoRunProjection(broken, RUN_ID));
    });
  });

  describe("AM.states.3 AM.states.7 AM.states.8: the state machine: entry conditions and forbidden entries", () => {
    /** Rewrite a fixture's terminal consistently (record, event, run record, ledger), so only the entry condition can object. */
    function forgeTerminal(
      f: Fixture,
      outcome: Parameters<typeof buildTerminalRecord>[1],
      promote: boolean,
    ): ProjectionFact[] {
      const facts = clone(f.facts) as ProjectionFact[];
      const termFact = facts.find((x) => x.kind === AUTO_FACT_KINDS.terminal) as ProjectionFact;
      const old = (termFact.record as { body: TerminalRecord }).body;
      const rec = buildTerminalRecord(
        { run: old.run, counters: old.counters, event_id: old.event_id, committed_at: old.committed_at },
        outcome,
      );
      (termFact.record as { body: TerminalRecord }).body = rec;
      for (const x of facts) {
        const r = x.record as { event_id?: string; type?: string; body?: AutoRun };
        if (x.kind === AUTO_FACT_KINDS.event && r.event_id === old.event_id)
          (x.record as { terminal: TerminalRecord }).terminal = rec;
        if (x.kind === AUTO_FACT_KINDS.run && r.event_id === old.event_id)
          Object.assign(r.body as AutoRun, { state: rec.state, terminal_reason: rec.terminal_reason });
      }
      const promoted = facts.filter(
        (x) =>
          x.kind === AUTO_FACT_KINDS.candidate && (x.record as { body: Candidate }).body.review_status === "verified",
      );
      let out = facts.filter((x) => !promoted.includes(x));
      if (promote && promoted.length === 0) {
        const cand = clone(facts.find((x) => x.kind === AUTO_FACT_KINDS.candidate) as ProjectionFact);
        Object.assign(cand.record as { body: Candidate; event_id: string }, { event_id: old.event_id });
        (cand.record as { body: Candidate }).body.review_status = "verified";
        out = [...out, { ...cand, seq: termFact.seq - 0.5 }];
      } else if (promote) out = facts;
      return out;
    }
    const candidateId = (f: Fixture) => (f.projection.candidate as Candidate).candidate_id;

    it("AM.states.3: entered with every required fact", () => {
      expect(project(fixtures.pass, fixtures.pass.facts).state).toBe("verified");
    });
    it("AM.states.3 AM.durable.4: an issues verdict with an open material finding cannot be relabelled verified", () => {
      const f = fixtures.issues;
      expectFailClosed(
        project(f, forgeTerminal(f, { kind: "verified", candidate: f.projection.candidate as Candidate }, true)),
      );
    });
    it("AM.states.3: a verified terminal without the compare-and-swap promotion", () => {
      const f = fixtures.pass;
      expectFailClosed(
        project(f, forgeTerminal(f, { kind: "verified", candidate: f.projection.candidate as Candidate }, false)),
      );
    });
    it("AM.states.7: entered from an issues verdict", () => {
      expect(project(fixtures.issues, fixtures.issues.facts).state).toBe("completed_with_issues");
    });
    it("AM.states.7: not from a pass", () => {
      const f = fixtures.pass;
      const forged = forgeTerminal(
        f,
        { kind: "issues", candidateId: candidateId(f), stop: "review_only", unresolved: ["finding:x"] },
        false,
      );
      expectFailClosed(project(f, forged));
    });
    it.each(["reviewer_independence_unavailable", "evidence_incomplete", "no_admissible_verdict"] as const)(
      "AM.states.8 AM.states.9: a run with a durable verdict cannot be relabelled review_unavailable(%s)",
      (reason) => {
        for (const f of [fixtures.pass, fixtures.issues]) {
          expectFailClosed(
            project(f, forgeTerminal(f, { kind: "unavailable", candidateId: candidateId(f), reason }, false)),
          );
        }
      },
    );
    it("AM.states.2: a candidate committed without its candidate_ready is not a candidate", () => {
      const f = fixtures.pass;
      expectFailClosed(
        project(
          f,
          f.facts.filter((x) => (x.record as { type?: string }).type !== "candidate_ready"),
        ),
      );
    });
  });

  describe("crashes and event orders (property)", () => {
    /** The transitions of a fixture: groups of facts committed by one append, in commit order. */
    const transitions = (facts: FactEntry[]): ProjectionFact[][] => {
      const groups = new Map<string, ProjectionFact[]>();
      for (const x of facts) {
        const id = (x.record as { event_id: string }).event_id;
        groups.set(id, [...(groups.get(id) ?? []), x]);
      }
      return [...groups.values()];
    };

    it("AM.durable.3: the projection is total: arbitrary facts never throw and never project Verified", () => {
      const kinds = Object.values(AUTO_FACT_KINDS);
      const f = fixtures.pass;
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              kind: fc.constantFrom(...kinds),
              record: fc.oneof(fc.anything(), fc.record({ event_id: fc.string(), body: fc.anything() })),
            }),
            { maxLength: 12 },
          ),
          fc.subarray(f.facts),
          (junk, real) => {
            const facts = [...real, ...junk].map((x, i) => ({ ...x, seq: i + 1 })) as ProjectionFact[];
            const p = project(f, facts);
            expect(p.state === "verified" && junk.length > 0).toBe(false);
            return true;
          },
        ),
        { numRuns: 200 },
      );
    });

    it("AM.durable.1 AM.portable.1: a crash after any transition projects the last committed state, never Verified early", () => {
      const f = fixtures.pass;
      const ts = transitions(f.facts);
      for (let n = 1; n <= ts.length; n++) {
        const p = project(f, ts.slice(0, n).flat());
        expect(p.problems).toEqual([]);
        expect(p.state === "verified").toBe(n === ts.length);
      }
    });

    it("AM.durable.1 AM.states.3: no order, subset or torn batch of the facts reaches Verified without all required facts in order", () => {
      for (const which of ["pass", "issues"] as const) {
        const f = fixtures[which];
        const ts = transitions(f.facts);
        fc.assert(
          fc.property(
            fc.shuffledSubarray(
              ts.map((_, i) => i),
              { minLength: 1 },
            ),
            fc.boolean(),
            fc.nat(),
            (order, tear, cut) => {
              let facts = order.flatMap((i) => ts[i] as ProjectionFact[]);
              if (tear) facts = facts.slice(0, cut % (facts.length + 1)); // a crash inside a batch
              const reseq = facts.map((x, i) => ({ ...x, seq: i + 1 }));
              const p = project(f, reseq);
              if (p.state === "verified") {
                // Verified only from the complete, ordered record set of a pass.
                expect(which).toBe("pass");
                expect(order).toEqual(ts.map((_, i) => i));
                expect(tear ? cut % (reseq.length + 1) : reseq.length).toBe(f.facts.length);
              }
              return true;
            },
          ),
          { numRuns: 300 },
        );
        // Every permutation of the whole record set, too (the subset generator rarely draws one).
        fc.assert(
          fc.property(
            fc.shuffledSubarray(
              ts.map((_, i) => i),
              { minLength: ts.length, maxLength: ts.length },
            ),
            (order) => {
              const facts = order.flatMap((i) => ts[i] as ProjectionFact[]).map((x, i) => ({ ...x, seq: i + 1 }));
              const p = project(f, facts);
              if (p.state === "verified") expect(order).toEqual(ts.map((_, i) => i));
              return true;
            },
          ),
          { numRuns: 200 },
        );
      }
    });
  });

  describe("when the stages or a finding's status are tampered with (issue 14 items 7 and 2)", () => {
    const extra: Record<"shadow" | "passMaterial", Fixture> = {} as never;
    beforeAll(async () => {
      extra.shadow = await fixture(
        "fake-issues",
        createStageFlags(["stage2_auto_run_storage", "stage3_scientific_review_shadow"]),
      );
      extra.passMaterial = await fixture("fake-pass-material");
    }, 30_000);
    const S = AUTO_FACT_KINDS.stages;
    const shadowFlags = {
      stage2_auto_run_storage: true,
      stage3_scientific_review_shadow: true,
      stage4_review_completion_gate: false,
    };
    const gateFlags = { ...shadowFlags, stage4_review_completion_gate: true };

    it("AM.stage3.1: the shadow fixture projects a provisional candidate with its shadow verdict", () => {
      const p = project(extra.shadow, extra.shadow.facts);
      expect(p.problems).toEqual([]);
      expect(p.result_review).toBe("shadow");
      expect(p.state).toBe("candidate");
      expect(p.shadow?.verdict).toBe("issues");
    });

    const cases: Array<[string, () => ProjectionFact[], "pass" | "issues" | "shadow"]> = [
      ["stages: record removed", () => fixtures.pass.facts.filter((f) => f.kind !== S), "pass"],
      [
        "stages: result_review says shadow, flags say gate",
        () => set(S, "result_review", "shadow")(fixtures.pass),
        "pass",
      ],
      [
        "stages: a verified run relabelled shadow (flags and result_review agree)",
        () => edit(fixtures.pass.facts, S, (b) => Object.assign(b, { flags: shadowFlags, result_review: "shadow" })),
        "pass",
      ],
      [
        "stages: a shadow run relabelled gate (its audits are marked shadow)",
        () => edit(extra.shadow.facts, S, (b) => Object.assign(b, { flags: gateFlags, result_review: "gate" })),
        "shadow",
      ],
      [
        "stages: Stage 2 off",
        () =>
          edit(fixtures.pass.facts, S, (b) =>
            Object.assign(b, { flags: { ...gateFlags, stage2_auto_run_storage: false } }),
          ),
        "pass",
      ],
      [
        "stages: result review off, yet a review run",
        () =>
          edit(fixtures.issues.facts, S, (b) =>
            Object.assign(b, {
              flags: { ...gateFlags, stage3_scientific_review_shadow: false, stage4_review_completion_gate: false },
              result_review: "off",
            }),
          ),
        "issues",
      ],
      [
        "finding: claimed without a Repair Run",
        () => set(AUTO_FACT_KINDS.finding, "status", "claimed")(fixtures.issues),
        "issues",
      ],
      [
        "finding: unaddressed without a Repair round",
        () => set(AUTO_FACT_KINDS.finding, "status", "unaddressed")(fixtures.issues),
        "issues",
      ],
      [
        "finding: resolved without a newer pass",
        () => set(AUTO_FACT_KINDS.finding, "status", "resolved")(fixtures.issues),
        "issues",
      ],
      [
        "finding: a shadow finding claimed",
        () => set(AUTO_FACT_KINDS.finding, "status", "claimed")(extra.shadow),
        "shadow",
      ],
    ];
    it.each(cases)("AM.durable.3 AM.durable.4: %s projects the safety boundary", (_n, tamper, which) => {
      const f = which === "shadow" ? extra.shadow : fixtures[which];
      expectFailClosed(project(f, tamper()));
    });

    it("AM.states.3 AM.durable.4: a forged Verified whose material finding was relabelled resolved fails closed", () => {
      // The attack: a pass beside a major finding (which ended at the safety boundary), its
      // terminal batch swapped for a genuine verified terminal of the same candidate, and the
      // finding relabelled `resolved` so it no longer looks blocking.
      const pm = extra.passMaterial;
      const lastEvent = [...pm.facts].reverse().find((f) => f.kind === AUTO_FACT_KINDS.event);
      const endId = (lastEvent?.record as { event_id?: string } | undefined)?.event_id;
      const idOf = (f: ProjectionFact) =>
        f.kind === AUTO_FACT_KINDS.event
          ? (f.record as { event_id: string }).event_id
          : (f.record as { event_id: string }).event_id;
      const kept = clone(pm.facts).filter((f) => idOf(f) !== endId) as ProjectionFact[];
      const passEnd = [...fixtures.pass.facts].reverse().find((f) => f.kind === AUTO_FACT_KINDS.event);
      const passEndId = (passEnd?.record as { event_id?: string } | undefined)?.event_id;
      const candidate = kept.find((f) => f.kind === AUTO_FACT_KINDS.candidate);
      const createdAt = (candidate?.record as { body?: { created_at?: string } } | undefined)?.body?.created_at;
      let seq = Math.max(...kept.map((f) => f.seq));
      const swapped = clone(fixtures.pass.facts)
        .filter((f) => idOf(f) === passEndId)
        .map((f) => {
          seq += 1;
          const body = (f.record as { body?: Record<string, unknown> }).body;
          if (f.kind === AUTO_FACT_KINDS.candidate && body !== undefined) body.created_at = createdAt;
          return { ...f, seq } as ProjectionFact;
        });
      const forged = (status: string) =>
        [...kept, ...swapped].map((f) =>
          f.kind === AUTO_FACT_KINDS.finding
            ? { ...f, record: { ...(f.record as object), body: { ...(f.record as { body: object }).body, status } } }
            : f,
        );
      expectFailClosed(project(pm, forged("open")));
      const p = project(pm, forged("resolved"));
      expect(p.state).not.toBe("verified");
      expectFailClosed(p);
      expect(p.problems.some((x) => x.includes("without its durable cause"))).toBe(true);
    });
  });
});
