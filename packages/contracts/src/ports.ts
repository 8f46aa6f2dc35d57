import type {
  FindingSeverity,
  GuardianDecision,
  ReviewVerdict,
  RiskLevel,
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

/** One Reviewer finding. */
export interface ReviewFinding {
  readonly severity: FindingSeverity;
  readonly title: string;
  readonly detail?: string;
  readonly path?: string;
}

/** A Reviewer's answer. */
export interface ReviewResponse {
  readonly kind: "review";
  readonly verdict: ReviewVerdict;
  readonly findings: readonly ReviewFinding[];
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

/** What a sandbox is asked to stage: whole-file writes (null deletes) against a root. */
export interface StageRequest {
  readonly root: string;
  readonly writes: ReadonlyArray<{ readonly path: string; readonly content: Uint8Array | null }>;
  readonly signal?: AbortSignalLike;
}

/** What a sandbox achieved: the host reports this guarantee, never more. */
export interface StageResult {
  readonly applied: boolean;
  readonly guarantee: TransactionGuarantee;
  readonly detail?: string;
}

/** The sandbox port: what a sandbox plugin's `init` returns. */
export interface Sandbox {
  stage(request: StageRequest): Promise<StageResult>;
}
