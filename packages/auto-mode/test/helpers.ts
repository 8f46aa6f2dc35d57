import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ActionResult, RunIdentity, Verifier, VerifyResponse } from "@asp/contracts";
import { openStore, type Store } from "@asp/evidence";
import { type AutoModeSelection, createStageFlags } from "@asp/rollout";
import { afterEach } from "vitest";
import {
  type ActorIdentity,
  createRulesGuardian,
  type Engine,
  type EngineStep,
  type PermissionClassifier,
  type ReviewerPort,
} from "../src/index.js";

const FAKE = fileURLToPath(new URL("./fixtures/fake-reviewer.mjs", import.meta.url));

/** A real level store in a temp dir, and how to remove it. */
export async function tempStore(): Promise<{ store: Store; dir: string; cleanup: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "asp-auto-mode-"));
  const store = await openStore(dir);
  return {
    store,
    dir,
    cleanup: async () => {
      await store.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Call once per test file: returns `setup()`, a {@link tempStore} removed after each test. */
export function tempStores(): () => ReturnType<typeof tempStore> {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });
  return async () => {
    const t = await tempStore();
    cleanups.push(t.cleanup);
    return t;
  };
}

export const RUN: RunIdentity = {
  root_frame_id: "frame-1",
  branch_id: "branch-1",
  turn_id: "turn-1",
  execution_id: "exec-1",
};
export const PRODUCER: ActorIdentity = {
  actor_id: "agent-main",
  session_id: "session-main",
  fingerprint: "model-a;cfg-1",
};
export const REVIEW_ONLY: AutoModeSelection = {
  preset: "off",
  result_review_mode: "review_only",
  approvals_reviewer: "user",
  source: "frame",
  normalized: false,
};
export const FLAGS = createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]);

/** A valid completion step with one artifact and one evidence blob. */
export function completion(payload = "The answer is 42."): EngineStep {
  return {
    kind: "completion",
    payload,
    artifacts: [{ artifact_id: "result.csv", version_id: "v1", bytes: new TextEncoder().encode("x,y\n1,2\n") }],
    evidence: [{ name: "notes", bytes: new TextEncoder().encode("derivation") }],
  };
}

/** A verifier backed by a real subprocess running one `fake-*` behaviour. */
export function subprocessVerifier(mode: string): Verifier {
  return {
    verify(request) {
      return new Promise<VerifyResponse>((resolve, reject) => {
        const child = spawn(process.execPath, [FAKE, mode], { stdio: ["pipe", "pipe", "ignore"] });
        let out = "";
        child.stdout.on("data", (c: Buffer) => {
          out += c.toString("utf8");
        });
        request.signal?.addEventListener("abort", () => child.kill("SIGKILL"), { once: true });
        child.on("error", reject);
        child.on("close", (code) => {
          if (code !== 0) return reject(new Error(`reviewer exited ${code}`));
          // An answer that is not JSON reaches the host as it is: the parser, not the transport, refuses it.
          try {
            resolve(JSON.parse(out) as VerifyResponse);
          } catch {
            resolve(out as unknown as VerifyResponse);
          }
        });
        child.stdin.end(`${JSON.stringify({ subject: request.kind === "review" ? request.subject : null })}\n`);
      });
    },
  };
}

let sessions = 0;
/** A Reviewer port over a `fake-*` subprocess, independent of {@link PRODUCER} unless told otherwise. */
export function fakeReviewer(
  mode: string,
  identity: Partial<ActorIdentity> = {},
  coverage?: ReviewerPort["coverage"],
): ReviewerPort {
  sessions += 1;
  return {
    identity: { actor_id: `reviewer-${mode}`, session_id: `rs-${sessions}`, fingerprint: "model-b;cfg-1", ...identity },
    verifier: subprocessVerifier(mode),
    ...(coverage === undefined ? {} : { coverage }),
  };
}

/** Wrap a Reviewer so a test can count the inference calls it received. */
export function countingReviewer(reviewer: ReviewerPort): { port: ReviewerPort; calls: () => number } {
  let calls = 0;
  return {
    port: {
      ...reviewer,
      verifier: {
        verify: (r) => {
          calls += 1;
          return reviewer.verifier.verify(r);
        },
      },
    },
    calls: () => calls,
  };
}

/** A clock the test moves; the runner's deadline timers fire only when the test says so. */
export function manualTime(start = Date.parse("2026-12-02T00:00:00.000Z")) {
  let now = start;
  const pending: Array<{ fn: () => void; at: number }> = [];
  return {
    clock: { now: () => new Date(now) },
    timers: {
      setTimeout(fn: () => void, ms: number) {
        const t = { fn, at: now + ms };
        pending.push(t);
        return t;
      },
      clearTimeout(handle: unknown) {
        const i = pending.indexOf(handle as (typeof pending)[number]);
        if (i >= 0) pending.splice(i, 1);
      },
    },
    advance(ms: number) {
      now += ms;
      for (const t of pending.splice(0).sort((a, b) => a.at - b.at)) {
        if (t.at <= now) t.fn();
        else pending.push(t);
      }
    },
    armed: () => pending.length,
  };
}

/** An Engine whose steps come from a generator that sees the host's answers. */
export function engineOf(
  run: (results: ActionResult[]) => AsyncGenerator<EngineStep, void, ActionResult | undefined>,
): Engine {
  return {
    actor: PRODUCER,
    run() {
      const results: ActionResult[] = [];
      const inner = run(results);
      return {
        async next(value?: ActionResult) {
          if (value !== undefined) results.push(value);
          return inner.next(value);
        },
        async return() {
          return inner.return(undefined);
        },
      };
    },
  };
}

export const allowAll: PermissionClassifier = {
  classify: (action) =>
    action.tool.startsWith("run_command:") && action.tool !== "run_command:cat"
      ? { outcome: "ask", reason: "permissions.default is ask", fenced: false }
      : { outcome: "allow", reason: "permissions.rules[0] says allow", fenced: false },
};

/**
 * FAKE (fault injection): a tampered history, `input` with every fact of `kind` having its record
 * body patched by `patch(body)` (the fields it returns replace the body's).
 */
export function patchBodies<T extends { facts: ReadonlyArray<{ kind: string; record: unknown }> }>(
  input: T,
  kind: string,
  patch: (body: Record<string, unknown>) => Record<string, unknown>,
): T {
  return {
    ...input,
    facts: input.facts.map((f) => {
      if (f.kind !== kind) return f;
      const record = f.record as { body: Record<string, unknown> };
      return { ...f, record: { ...record, body: { ...record.body, ...patch(record.body) } } };
    }),
  };
}

/** Policy: writes under `docs/` and `secrets/` are `ask`, `keys/` is fenced (credential-shaped), the rest allowed. */
export const askDocs: PermissionClassifier = {
  version: "policy-test-1",
  classify: (action, { fence }) =>
    action.path?.startsWith("keys/") === true && fence
      ? { outcome: "ask", reason: "the credential-shaped file fence", fenced: true }
      : action.path?.startsWith("docs/") === true || action.path?.startsWith("secrets/") === true
        ? { outcome: "ask", reason: "permissions.rules[1] says ask", fenced: false }
        : { outcome: "allow", reason: "permissions.rules[0] says allow", fenced: false },
};

/** The rules Guardian for {@link askDocs}: allows writes under docs/, denies (recoverably) under secrets/. */
export const docsRules = createRulesGuardian({
  version: "test-1",
  rules: [
    { actionClass: "write_file", targets: ["docs/"], decision: "allow", risk: "low", rationale: "docs are safe" },
    {
      actionClass: "write_file",
      targets: ["secrets/"],
      decision: "deny",
      risk: "high",
      rationale: "write the note outside secrets/",
    },
  ],
});
