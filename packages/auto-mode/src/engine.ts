import type { AbortSignalLike, RunIdentity } from "@asp/contracts";
import type { EvidenceRef } from "@asp/evidence";
import { AutoModeError } from "./errors.js";

/** Who produced a candidate, or who reviews one: actor, session and model/configuration fingerprint. */
export interface ActorIdentity {
  readonly actor_id: string;
  readonly session_id: string;
  /** Model and configuration identity (e.g. `model=gpt-x;temp=0;prompt=v3`). */
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
 * What an Engine yields. Only a `completion` can become a candidate, and only when its snapshot
 * freezes completely; prose, tool results, cancellation and max-turn exhaustion never do.
 */
export type EngineStep =
  | { readonly kind: "prose"; readonly text: string }
  | { readonly kind: "tool_result"; readonly tool: string; readonly output: string }
  | { readonly kind: "cancelled" }
  | { readonly kind: "max_turns"; readonly turns: number }
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
  readonly signal?: AbortSignalLike;
}

/**
 * The Engine port: the agent that produces candidates, injected into the runner (constructor
 * parameter or DI token {@link AUTO_MODE_TOKENS}.Engine). Its `actor` is the producer identity the
 * run freezes for Reviewer independence.
 */
export interface Engine {
  readonly actor: ActorIdentity;
  run(params: EngineParams): AsyncIterable<EngineStep>;
}

/** A scripted engine's script: its producer identity and the steps it yields, in order. */
export interface EngineScript {
  readonly actor: ActorIdentity;
  readonly steps: ReadonlyArray<EngineStep>;
}

/**
 * A deterministic Engine for tests and the demo: yields the script's steps, in order, every run.
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
