import type {
  AssuranceMode,
  Decision,
  FindingSeverity,
  GuardianDecision,
  ReviewVerdict,
  RiskLevel,
  Severity,
  TransactionGuarantee,
} from "./vocabularies.js";

/**
 * The `$$type` brands of the values a plugin and the host exchange, declared once: `@asp/sdk`
 * stamps them, `@asp/plugin-host` checks them (it may not import the SDK, DESIGN §2), and a
 * plugin bundling its own copy of the SDK still matches (STYLE §6: never `instanceof`).
 */
export const PLUGIN_BRANDS = Object.freeze({
  /** The default export of a verifier plugin's entry (`defineVerifier`). */
  verifier: "@asp/VerifierPlugin",
  /** The default export of a sandbox plugin's entry (`defineSandbox`). */
  sandbox: "@asp/SandboxPlugin",
  /** A typed dependency reference (`createDependencyRef`). */
  dependencyRef: "@asp/DependencyRef",
  /** A provider made with `defineProvider`. */
  provider: "@asp/ProviderDefinition",
  /** The default export of an engine plugin's entry (`defineEngine`). */
  engine: "@asp/EnginePlugin",
} as const);

/** One of {@link PLUGIN_BRANDS}. */
export type PluginBrand = (typeof PLUGIN_BRANDS)[keyof typeof PLUGIN_BRANDS];

/**
 * The part of an `AbortSignal` a port request carries. Structural, so this runtime-free
 * package needs no DOM or Node types; a real `AbortSignal` is one.
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { readonly once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** A Reviewer's input: what to judge (shape owned by the Auto Mode engine). */
export interface ReviewRequest {
  readonly kind: "review";
  readonly subject: unknown;
  readonly signal?: AbortSignalLike;
}

/** A Guardian's input: one permission request that deterministic policy marked `ask`. */
export interface GuardianRequest {
  readonly kind: "guardian";
  readonly actionDigest: string;
  readonly actionClass: string;
  readonly subject: unknown;
  readonly signal?: AbortSignalLike;
}

/** A verifier's request. */
export type VerifyRequest = ReviewRequest | GuardianRequest;

/**
 * One Reviewer finding. Its content (`severity`, `category`, `claim`, `evidence_refs`) is what the
 * host fingerprints, so a finding that survives a repair round is recognised; `title`, `detail` and
 * `path` are for display.
 */
export interface ReviewFinding {
  readonly severity: FindingSeverity;
  /** A short, stable class of problem (e.g. `correctness`, `unsupported_claim`). */
  readonly category: string;
  /** What the Reviewer asserts is wrong, in one statement. */
  readonly claim: string;
  /** Names of the Evidence Snapshot refs the claim rests on (each must resolve in the reviewed snapshot). */
  readonly evidence_refs: readonly string[];
  readonly title: string;
  readonly detail?: string;
  readonly path?: string;
}

/** A Reviewer's answer. */
export interface ReviewResponse {
  readonly kind: "review";
  readonly verdict: ReviewVerdict;
  readonly findings: readonly ReviewFinding[];
  /**
   * The tokens this answer cost, as the model endpoint reported them. Auto Mode spends them from
   * the run's extra-token budget (ADR 0009: review is one of the later turns the 1.5x bounds).
   */
  readonly usage?: EngineUsage;
}

/** A Guardian's answer (the host binds it to the action digest and records it). */
export interface GuardianResponse {
  readonly kind: "guardian";
  readonly decision: GuardianDecision;
  readonly risk: RiskLevel;
  readonly recoverable: boolean;
  readonly rationale: string;
}

/** A verifier's answer. */
export type VerifyResponse = ReviewResponse | GuardianResponse;

/** The verifier port (Reviewer and/or Guardian): what a verifier plugin's `init` returns. */
export interface Verifier {
  verify(request: VerifyRequest): Promise<VerifyResponse>;
}

/**
 * A tool the host offers an agent Engine: what the model is told it may call. The host alone runs
 * it (through its own adapters, under deterministic policy); the Engine only proposes.
 */
export interface EngineToolSpec {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the tool's arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>;
}

/**
 * An action an Engine proposes (a model's tool call). The host computes its canonical digest,
 * classifies it under trusted policy and runs it itself; nothing has run when it is proposed.
 */
export interface ProposedAction {
  /** The tool name, one of the offered {@link EngineToolSpec} names (anything else is refused). */
  readonly tool: string;
  /** The tool's arguments (a JSON object). */
  readonly arguments: Readonly<Record<string, unknown>>;
  /** The Engine's own id for the call (e.g. the model's tool-call id), echoed to it; not part of the digest. */
  readonly call_id?: string;
}

/**
 * The host's answer to a proposed action, passed back as the value of the Engine iterator's next
 * `next()`: executed (with the output the model may read) or refused (nothing ran).
 */
export type ActionResult =
  | { readonly status: "executed"; readonly action_digest: string; readonly output: string }
  | {
      readonly status: "refused";
      readonly action_digest: string | null;
      readonly code: string;
      readonly reason: string;
    };

/** Token usage of one model turn. */
export interface EngineUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/** An Artifact version a completion delivers. */
export interface EngineArtifact {
  readonly artifact_id: string;
  readonly version_id: string;
  readonly bytes: Uint8Array;
}

/**
 * What an Engine yields. Only a `completion` can become a candidate; prose, actions, turns,
 * cancellation, max-turn exhaustion and failures never do. After an `action` the host passes the
 * {@link ActionResult} to the iterator's next `next()`; after every other step, `undefined`.
 */
export type EngineStep =
  | { readonly kind: "prose"; readonly text: string }
  | { readonly kind: "action"; readonly action: ProposedAction }
  /** One model turn ended: the host counts the turn and its tokens before it admits the next. */
  | { readonly kind: "turn"; readonly usage: EngineUsage }
  | { readonly kind: "cancelled" }
  | { readonly kind: "max_turns"; readonly turns: number }
  /** A coded Engine failure (an ordinary Agent failure), with its attempt outcome (`timeout`, `provider_error`, `parse_error`, ...). */
  | { readonly kind: "failed"; readonly code: string; readonly outcome: string; readonly message: string }
  | {
      readonly kind: "completion";
      /** The answer to deliver (the candidate payload). */
      readonly payload: string;
      readonly artifacts: ReadonlyArray<EngineArtifact>;
      readonly evidence: ReadonlyArray<{ readonly name: string; readonly bytes: Uint8Array }>;
    };

/** What an Engine is given for one run. */
export interface EngineRunParams {
  /** The run identity (root_frame_id, branch_id, turn_id, execution_id). */
  readonly run: Readonly<Record<string, string>>;
  /** What the agent is asked to do. */
  readonly task: string;
  /** The tools the host offers; proposing any other is refused. */
  readonly tools: ReadonlyArray<EngineToolSpec>;
  /** Aborted when the run's wall time or another budget ends it: stop at once, yield nothing more. */
  readonly signal: AbortSignalLike;
}

/** The Engine port: what an engine plugin's `init` returns. Its steps are read one `next()` at a time. */
export interface EnginePort {
  run(params: EngineRunParams): AsyncIterator<EngineStep, void, ActionResult | undefined>;
}

/**
 * A provider launch a sandbox is asked to confine (issue 13): the host's structured launch
 * (absolute executable, argv, trusted cwd, minimal environment) plus what the provider may and
 * may not see. A sandbox answers with the launch the host spawns instead ({@link LaunchResult}).
 */
export interface LaunchRequest {
  readonly executable: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** Absolute folders holding the provider's verified code (its read-only copy or measured root): bind read-only. */
  readonly readOnly: readonly string[];
  /** Absolute folders the provider must never see (the candidate repository, the store and its siblings). */
  readonly deny: readonly string[];
}

/**
 * What a sandbox made of a {@link LaunchRequest}: the process the host spawns, and the isolation
 * that process really runs under. The host records `mode` per provider in the envelope and the
 * receipt, checked against the sandbox's grant (only `sandbox:bubblewrap` can back `isolated`).
 */
export interface LaunchResult {
  readonly executable: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** The assurance this launch enforces; lower than the sandbox can give when its mechanism is unavailable. */
  readonly mode: AssuranceMode;
  /** The mechanism, for people (e.g. `bubblewrap 0.8.0: user, pid, ipc, net namespaces; no worktree`). */
  readonly mechanism: string;
  /** True when the launched process can still write the real worktree. */
  readonly directWrite: boolean;
  /** Why the mode is lower than the sandbox's best (e.g. `bwrap not found on PATH`). */
  readonly reason?: string;
}

/** What a sandbox is asked to stage: whole-file writes (null deletes) against a root. */
export interface StageRequest {
  readonly root: string;
  readonly writes: ReadonlyArray<{
    readonly path: string;
    readonly content: Uint8Array | null;
    readonly mode?: "100644" | "100755";
    /**
     * What the path must hold on disk before it is replaced: its precondition in the tree the host
     * judged (`sha256:` of the bytes, or of a link's target, and the mode), or null for absent on
     * disk. A sandbox checks it without following links right before its commit point and publishes
     * nothing when it differs. Absent: not checked.
     */
    readonly before?: { readonly digest: string; readonly mode: "100644" | "100755" | "120000" | "040000" } | null;
  }>;
  /**
   * A host-owned folder for this repository's apply journal (outside the worktree); the same
   * folder is handed to {@link Sandbox.recover} on the next start. Absent: the sandbox keeps no journal.
   */
  readonly journalDir?: string;
  readonly signal?: AbortSignalLike;
}

/** What a sandbox achieved: the host reports this guarantee, never more. */
export interface StageResult {
  readonly applied: boolean;
  readonly guarantee: TransactionGuarantee;
  readonly detail?: string;
}

/** Finish or undo an interrupted stage after a crash, from its journal. */
export interface RecoverRequest {
  readonly root: string;
  readonly journalDir: string;
}

/** What recovery did: nothing to do, the interrupted apply rolled back to B, or rolled forward to B'. */
export interface RecoverResult {
  readonly outcome: "none" | "rolled_back" | "rolled_forward";
  readonly detail?: string;
}

/**
 * The sandbox port: what a sandbox plugin's `init` returns. A sandbox implements at least one of
 * `launch` (confine a provider process), `stage` (publish an apply) and `recover` (finish or undo
 * an interrupted stage).
 */
export interface Sandbox {
  launch?(request: LaunchRequest): Promise<LaunchResult>;
  stage?(request: StageRequest): Promise<StageResult>;
  recover?(request: RecoverRequest): Promise<RecoverResult>;
}

/** One file of a candidate for {@link HostChecks.evaluate}: a repository-relative path and a blob the store holds. */
export interface HostChecksFile {
  /** Repository-relative, `/`-separated; absolute, `..`, `.git` or non-normalized paths are refused. */
  readonly path: string;
  /** The blob digest (`sha256:...`) of the file's bytes, already in the host's object store. */
  readonly digest: string;
}

/**
 * What a verifier asks the host's checks: the files to lay over the repository's trusted base, and
 * the base's files the candidate removes (so the judged after-state is the candidate's whole
 * change, not the base with a file the candidate deleted still in it).
 */
export interface HostChecksParams {
  readonly files: readonly HostChecksFile[];
  /**
   * Repository-relative paths removed from the base (same path rules as `files`; never also in
   * `files`). A path the base does not hold is nothing to remove; a folder is refused.
   */
  readonly deleted?: readonly string[];
}

/** One gating finding of a host-checks evaluation, as the host decided it (never as a provider claimed it). */
export interface HostChecksFinding {
  /** The check provider that reported it (host-authenticated). */
  readonly provider: string;
  readonly path?: string;
  /** 1-based line, when the diagnostic has a range. */
  readonly line?: number;
  /** The host's effective severity. */
  readonly severity: Severity;
  readonly code: string;
  readonly message: string;
}

/** The host's answer: its decision over the hypothetical after-tree, the durable receipt, the gating findings. */
export interface HostChecksResult {
  readonly decision: Decision;
  /** The audit receipt the evaluation wrote before answering. */
  readonly receipt_id: string;
  readonly findings: readonly HostChecksFinding[];
}

/**
 * The `asp.plugin.HostChecks` port (verifiers only): the host runs its own granted check
 * providers over the candidate's files laid over the repository's trusted base, decides, and
 * writes a receipt. Deterministic: the same files over the same base give the same decision.
 */
export interface HostChecks {
  /**
   * Evaluate `params.files` over the trusted base.
   * @throws an `ASP_*` coded error when a path is refused or a blob is missing (never evaluated).
   */
  evaluate(params: HostChecksParams): Promise<HostChecksResult>;
}
