import type { AbortSignalLike, ActionResult, EnginePortStep, EngineToolSpec, RunIdentity } from "@asp/contracts";
import type { EvidenceRef } from "@asp/evidence";
import { AutoModeError } from "./errors.js";
import type { codeFingerprint, modelFingerprint } from "./identity.js";

/** Who produced a candidate, or who reviews one: actor, session and model/configuration fingerprint. */
export interface ActorIdentity {
  readonly actor_id: string;
  readonly session_id: string;
  /**
   * Model and configuration identity, canonical so a producer's and a Reviewer's compare: a model
   * is `model:<endpoint host>/<model>` ({@link modelFingerprint}), deterministic code
   * `code:<id>@<digest>` ({@link codeFingerprint}).
   */
  readonly fingerprint: string;
}

/** An Artifact version a completion delivers: its bytes become an immutable blob. */
export interface CompletionArtifact {
  readonly artifact_id: string;
  readonly version_id: string;
  readonly bytes: Uint8Array;
}

/** Evidence a completion rests on: bytes the host stores, or a ref to what the store already holds. */
export type CompletionEvidence =
  | { readonly name: string; readonly bytes: Uint8Array }
  | { readonly name: string; readonly ref: EvidenceRef };

/**
 * What an Engine yields (the port's steps, `@asp/contracts` `EnginePortStep`, with completion
 * evidence that may also be a ref the store already holds). Only a `completion` can become a
 * candidate, and only when its snapshot freezes completely; prose, actions, turns, cancellation,
 * max-turn exhaustion and failures never do. After an `action` the runner passes the host's
 * {@link ActionResult} to the iterator's next `next()`.
 *
 * An Engine never runs a tool itself: `action` is a proposal the host canonicalizes, admits
 * through the budget ledger, classifies under deterministic policy and executes through its own
 * adapters. A step claiming a tool already ran (the retired `tool_result`) is an unmediated
 * action and ends the run at the safety boundary.
 */
export type EngineStep =
  | Exclude<EnginePortStep, { kind: "completion" }>
  | {
      readonly kind: "completion";
      /** The answer to deliver (the candidate payload). */
      readonly payload: string;
      readonly artifacts: ReadonlyArray<CompletionArtifact>;
      readonly evidence: ReadonlyArray<CompletionEvidence>;
    };

/** What an Engine is given for one run. */
export interface EngineParams {
  readonly run: RunIdentity;
  /** What the agent is asked to do (empty for scripted engines). */
  readonly task: string;
  /** The tools the host offers ({@link HOST_TOOLS} when a workspace is configured, else none). */
  readonly tools: ReadonlyArray<EngineToolSpec>;
  /** Aborted when the wall-time budget (or another stop) ends the run: stop at once. */
  readonly signal: AbortSignalLike;
}

/** An Engine's steps: an async iterator the runner reads one `next()` at a time (or any async iterable). */
export type EngineSteps = AsyncIterator<EngineStep, void, ActionResult | undefined> | AsyncIterable<EngineStep>;

/**
 * The Engine port: the agent that produces candidates, injected into the runner (constructor
 * parameter or DI token {@link AUTO_MODE_TOKENS}.Engine). Its `actor` is the producer identity the
 * run freezes for Reviewer independence: give it a canonical fingerprint
 * ({@link modelFingerprint} for a model, {@link codeFingerprint} for deterministic code).
 */
export interface Engine {
  readonly actor: ActorIdentity;
  run(params: EngineParams): EngineSteps;
}

/** A scripted engine's script: its producer identity and the steps it yields, in order. */
export interface EngineScript {
  readonly actor: ActorIdentity;
  readonly steps: ReadonlyArray<EngineStep>;
}

/**
 * A deterministic Engine for tests and the demo: yields the script's steps, in order, every run
 * (an `action` step's result is received and otherwise ignored).
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for a script without an actor or steps.
 * @example
 * ```ts
 * const engine = createScriptedEngine({
 *   actor: { actor_id: "agent", session_id: "s1", fingerprint: "model-a" },
 *   steps: [{ kind: "completion", payload: "42", artifacts: [], evidence: [] }],
 * });
 * ```
 */
export function createScriptedEngine(script: EngineScript): Engine {
  if (typeof script?.actor?.actor_id !== "string" || !Array.isArray(script.steps)) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a script needs an actor and steps", {
      data: { key: "script" },
    });
  }
  const steps = [...script.steps];
  const actor = { ...script.actor };
  return {
    actor,
    async *run() {
      for (const step of steps) yield step;
    },
  };
}

/** Dependency-injection tokens of the ports this package consumes (`Symbol.for`, so copies agree). */
export const AUTO_MODE_TOKENS = Object.freeze({
  /** The {@link Engine}. */
  Engine: Symbol.for("asp.auto-mode.Engine"),
  /** The Reviewers ({@link ReviewerPort}[]). */
  Reviewers: Symbol.for("asp.auto-mode.Reviewers"),
});
