import type { InjectionToken } from "@asp/contracts";
import { type ActivePolicy, type PolicyOrigin, parsePolicy } from "./parse.js";

/** Policy text as a trusted source produced it, with where it came from. */
export interface PolicyText {
  readonly text: string;
  readonly origin: PolicyOrigin;
}

/**
 * Where trusted policy comes from (DESIGN §3 `TOKENS.PolicySource`): a file path the composing
 * host names, or a base-branch revision read through git (`@asp/policy/node` has both).
 * Repository content of the changeset under evaluation is never a policy source by itself.
 */
export interface PolicySource {
  /** Read the policy text. Rejects with `ASP_POLICY_SOURCE_UNREADABLE` when it cannot. */
  read(): Promise<PolicyText>;
}

/**
 * Read a source and activate its policy: nothing partial is activated.
 *
 * @throws PolicyError `ASP_POLICY_SOURCE_UNREADABLE` from the source, or any {@link parsePolicy} code.
 * @example
 * ```ts
 * import { createGitPolicySource } from "@asp/policy/node";
 * const base = await loadPolicy(createGitPolicySource({ repository: "/repo", revision: "main", path: "asp.policy.json" }));
 * ```
 */
export async function loadPolicy(source: PolicySource): Promise<ActivePolicy> {
  const { text, origin } = await source.read();
  const where =
    origin.kind === "file"
      ? `policy ${origin.path}`
      : origin.kind === "git"
        ? `policy ${origin.revision}:${origin.path}`
        : "policy";
  return parsePolicy(text, { origin, what: where });
}

/**
 * DI tokens of the seams this package owns (DESIGN §3 `TOKENS.PolicySource`). `Symbol.for` keys,
 * so two copies of the package agree. A composing host registers the base-branch or file source
 * of its trusted policy under `PolicySource`.
 */
export const POLICY_TOKENS = {
  PolicySource: Symbol.for("asp.policy.PolicySource") as InjectionToken<PolicySource>,
} as const;
