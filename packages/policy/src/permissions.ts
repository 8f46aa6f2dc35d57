import type { PermissionOutcome } from "@asp/contracts";
import picomatch from "picomatch";
import { policyError } from "./errors.js";
import { type ActivePolicy, type PolicyDocument, requireActive } from "./parse.js";

/** One deterministic permission rule (`permissions.rules[]`). */
export type PermissionRule = NonNullable<PolicyDocument["permissions"]>["rules"][number];

/** An Auto Mode action to classify. */
export interface PermissionAction {
  /** The tool name, e.g. `read_file`, `write_file`, `shell`, `fetch`. */
  readonly tool: string;
  /** The file the action touches, relative to the workspace (absolute paths are matched as given). */
  readonly path?: string;
  /** The network target, `host` or `host:port`. */
  readonly network?: string;
}

/** What {@link classifyAction} decided, and why. */
export interface PermissionDecision {
  readonly outcome: PermissionOutcome;
  /** The deciding rule, or `null` when the policy default (or the built-in `ask`) applied. */
  readonly rule: PermissionRule | null;
  readonly ruleIndex: number | null;
  /** True when the credential fence promoted an `allow` to `ask`. */
  readonly fenced: boolean;
  /** The fence glob that matched, when `fenced`. */
  readonly fence: string | null;
  readonly reason: string;
}

/**
 * Credential-shaped paths that always turn an `allow` into `ask`. A policy's
 * `permissions.credentialFence` adds to this list; it can never remove from it.
 */
export const DEFAULT_CREDENTIAL_FENCE: ReadonlyArray<string> = Object.freeze([
  ".env",
  ".env.*",
  "*.env",
  "*.pem",
  "*.key",
  "*.p12",
  "*.pfx",
  "id_rsa*",
  "id_dsa*",
  "id_ecdsa*",
  "id_ed25519*",
  "*credentials*",
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
  ".ssh/**",
  ".gnupg/**",
  ".aws/**",
  ".azure/**",
  ".config/gcloud/**",
  ".kube/**",
  ".docker/config.json",
]);

const STRICTNESS: Record<PermissionOutcome, number> = { allow: 0, ask: 1, deny: 2 };

interface Compiled {
  readonly rules: ReadonlyArray<{
    readonly rule: PermissionRule;
    readonly tool: (s: string) => boolean;
    readonly path: ((s: string) => boolean) | null;
    readonly network: ((s: string) => boolean) | null;
  }>;
  readonly fence: ReadonlyArray<{ readonly glob: string; readonly match: (s: string) => boolean }>;
  readonly defaultOutcome: PermissionOutcome;
}

// Compiled matchers per activated policy: the policy is frozen, so the cache can never go stale.
const compiledCache = new WeakMap<ActivePolicy, Compiled>();

function compile(policy: ActivePolicy): Compiled {
  const cached = compiledCache.get(policy);
  if (cached !== undefined) return cached;
  const permissions = policy.document.permissions;
  const fenceGlobs = [...new Set([...DEFAULT_CREDENTIAL_FENCE, ...(permissions?.credentialFence ?? [])])];
  const compiled: Compiled = {
    rules: (permissions?.rules ?? []).map((rule) => ({
      rule,
      tool: picomatch(rule.tool, { dot: true }),
      path: rule.path === undefined ? null : picomatch(rule.path, { dot: true }),
      network: rule.network === undefined ? null : picomatch(rule.network.toLowerCase(), { dot: true }),
    })),
    fence: fenceGlobs.map((glob) => ({ glob, match: picomatch(glob, { dot: true, nocase: true }) })),
    defaultOutcome: permissions?.default ?? "ask",
  };
  compiledCache.set(policy, compiled);
  return compiled;
}

/** Normalize `.` and `..` segments; `escapes` when the path climbs above its root. */
function normalizePath(path: string): { path: string; escapes: boolean } {
  const absolute = path.startsWith("/");
  const out: string[] = [];
  let escapes = false;
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length === 0) escapes = true;
      else out.pop();
    } else out.push(segment);
  }
  return { path: (absolute ? "/" : "") + out.join("/"), escapes: escapes || path.includes("\u0000") };
}

/** Every suffix of the path and every single segment: a fence glob may match anywhere. */
function fenceCandidates(path: string): string[] {
  const segments = path.split("/").filter((s) => s !== "");
  const out = new Set<string>();
  for (let i = 0; i < segments.length; i++) {
    out.add(segments.slice(i).join("/"));
    out.add(segments[i] as string);
  }
  return [...out];
}

/**
 * Classify an Auto Mode action under the policy's deterministic permission rules: `allow`,
 * `ask` (a Guardian or the user decides) or `deny`. Among the rules that match (tool glob, and
 * the path / network glob when the rule sets one), the most restrictive outcome wins; the first
 * such rule in document order is reported. No match: `permissions.default`, or `ask` when the
 * policy has no permissions section. Then the credential fence: an `allow` for a path matching
 * {@link DEFAULT_CREDENTIAL_FENCE} or `permissions.credentialFence` (case-insensitively, at any
 * depth) becomes `ask`; so does an `allow` for a path that climbs out of the workspace. The fence
 * never relaxes `ask` or `deny`. `options.fence: false` skips the fence (Auto Mode runs it only
 * under Stage 7); the climb-out promotion always applies.
 *
 * @throws PolicyError `ASP_POLICY_INVALID_ACTION` when `tool` is empty or `path` / `network` is
 *   not a non-empty string; `ASP_POLICY_NOT_ACTIVE` when `policy` is not an {@link ActivePolicy}.
 * @example
 * ```ts
 * classifyAction(policy, { tool: "read_file", path: "src/index.ts" }).outcome; // "allow"
 * classifyAction(policy, { tool: "read_file", path: "src/.env" });              // ask, fenced by ".env"
 * ```
 */
export function classifyAction(
  policy: ActivePolicy,
  action: PermissionAction,
  options: { readonly fence?: boolean } = {},
): PermissionDecision {
  const active = requireActive(policy, "policy");
  const tool: unknown = action.tool;
  if (typeof tool !== "string" || tool.trim() === "") {
    throw policyError("ASP_POLICY_INVALID_ACTION", "an action needs a non-empty tool name", { pointer: "/tool" });
  }
  for (const key of ["path", "network"] as const) {
    const v: unknown = action[key];
    if (v !== undefined && (typeof v !== "string" || v === "")) {
      throw policyError("ASP_POLICY_INVALID_ACTION", `an action's ${key} must be a non-empty string`, {
        pointer: `/${key}`,
      });
    }
  }
  const compiled = compile(active);
  const normalized = action.path === undefined ? null : normalizePath(action.path);
  const network = action.network?.toLowerCase();
  let best: { index: number; rule: PermissionRule; outcome: PermissionOutcome } | null = null;
  compiled.rules.forEach((c, index) => {
    if (!c.tool(tool)) return;
    if (c.path !== null && (normalized === null || normalized.escapes || !c.path(normalized.path))) return;
    if (c.network !== null && (network === undefined || !c.network(network))) return;
    if (best === null || STRICTNESS[c.rule.outcome] > STRICTNESS[best.outcome]) {
      best = { index, rule: c.rule, outcome: c.rule.outcome };
    }
  });
  const chosen = best as { index: number; rule: PermissionRule; outcome: PermissionOutcome } | null;
  const outcome = chosen?.outcome ?? compiled.defaultOutcome;
  const base = {
    rule: chosen?.rule ?? null,
    ruleIndex: chosen?.index ?? null,
  };
  const why =
    chosen === null
      ? active.document.permissions === undefined
        ? "no permissions section: the built-in default is ask"
        : `no rule matched: permissions.default is ${outcome}`
      : `permissions.rules[${chosen.index}] says ${outcome}`;
  if (outcome === "allow" && normalized !== null) {
    if (normalized.escapes) {
      // A path that climbs out of the workspace is never an allow, fence or not.
      return { outcome: "ask", ...base, fenced: true, fence: null, reason: `${why}; the path leaves the workspace` };
    }
    const candidates = fenceCandidates(normalized.path);
    // The credential-shaped file fence is Stage 7's control: a caller outside it passes fence: false.
    const hit = options.fence === false ? undefined : compiled.fence.find((f) => candidates.some((c) => f.match(c)));
    if (hit !== undefined) {
      return {
        outcome: "ask",
        ...base,
        fenced: true,
        fence: hit.glob,
        reason: `${why}; promoted to ask by the credential fence (${hit.glob})`,
      };
    }
  }
  return { outcome, ...base, fenced: false, fence: null, reason: why };
}
