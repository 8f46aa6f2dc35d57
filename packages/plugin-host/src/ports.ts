import { type EnginePortStep, type PluginKind, validate } from "@asp/contracts";
import type { Clock, Digest } from "@asp/evidence";
import { PluginError } from "./errors.js";
import type {
  DependencyRefLike,
  HostChecks,
  HostChecksParams,
  LaunchResult,
  RecoverResult,
  StageResult,
  VerifyResponse,
} from "./types.js";

/**
 * Read-only content by digest: the one view of the store a plugin gets (never the object store,
 * the fact log or any other host object).
 */
export interface ContentReader {
  /** The bytes of blob `digest`, or `null` when the store has no such blob. */
  read(digest: Digest): Promise<Uint8Array | null>;
}

/**
 * The host services in-process plugins may depend on, supplied by the composing host to
 * {@link registerPlugins}. Each kind receives only its own subset ({@link PLUGIN_PORT_KEYS}),
 * never the DI container.
 */
export interface PluginPorts {
  /** The host's clock (`asp.plugin.Clock`): verifiers, sandboxes and engines. */
  readonly clock: Clock;
  /** Blob reads by digest (`asp.plugin.ContentReader`): verifiers only. */
  readonly content: ContentReader;
  /**
   * The host's own gate evaluation of a candidate's files (`asp.plugin.HostChecks`): verifiers
   * only, and only where the composing host supplies it (a verifier asking for it otherwise is
   * refused at init, `ASP_PLUGIN_PORT_UNAVAILABLE`).
   */
  readonly checks?: HostChecks;
}

/** The `key` a plugin names in `createDependencyRef(key)` for each port. */
export const PLUGIN_PORT_KEYS = Object.freeze({
  clock: "asp.plugin.Clock",
  content: "asp.plugin.ContentReader",
  checks: "asp.plugin.HostChecks",
} as const);

type PortName = keyof typeof PLUGIN_PORT_KEYS;
/** The plugin kinds the host imports in-process. */
export type InProcessKind = Exclude<PluginKind, "provider">;

/**
 * Which ports each in-process kind may ask for. A verifier judges content at a time; a sandbox
 * is handed the writes to stage in its request, so it needs only the clock; an engine only
 * proposes actions (the host runs them and hands back their results), so it reaches neither the
 * store nor the filesystem through the host: the clock only.
 */
const PORTS_OF: { readonly [K in InProcessKind]: readonly PortName[] } = {
  verifier: ["clock", "content", "checks"],
  sandbox: ["clock"],
  engine: ["clock"],
};

function portNamed(kind: InProcessKind, key: string): PortName | undefined {
  return PORTS_OF[kind].find((name) => PLUGIN_PORT_KEYS[name] === key);
}

/**
 * Check that every dependency an in-process plugin declared is a port of its kind.
 *
 * @throws PluginError `ASP_PLUGIN_FORBIDDEN_PORT` naming the first key that is not (for example
 *   `asp.ths.LaunchEnv` or `asp.evidence.FactLog`: host internals are never resolvable).
 */
export function assertPluginPorts(
  kind: InProcessKind,
  id: string,
  deps: Readonly<Record<string, DependencyRefLike>>,
): void {
  for (const [name, ref] of Object.entries(deps)) {
    if (portNamed(kind, ref.key) === undefined) {
      throw new PluginError(
        "ASP_PLUGIN_FORBIDDEN_PORT",
        `${kind} ${id} asks for ${JSON.stringify(ref.key).slice(0, 200)} (as ${JSON.stringify(name).slice(0, 100)}); a ${kind} may only depend on ${PORTS_OF[kind].map((p) => PLUGIN_PORT_KEYS[p]).join(", ")}`,
        { data: { id, kind, key: ref.key.slice(0, 200), allowed: PORTS_OF[kind].map((p) => PLUGIN_PORT_KEYS[p]) } },
      );
    }
  }
}

/**
 * The dependencies handed to a plugin's `init`: for each declared name, an attenuated copy of
 * the port (only its method, bound to the host's implementation), so the plugin cannot reach
 * whatever object implements it.
 *
 * @throws PluginError `ASP_PLUGIN_FORBIDDEN_PORT` (see {@link assertPluginPorts});
 *   `ASP_PLUGIN_PORT_UNAVAILABLE` when it asks for an optional port (`checks`) the host does not supply.
 */
export function portsFor(
  kind: InProcessKind,
  id: string,
  deps: Readonly<Record<string, DependencyRefLike>>,
  ports: PluginPorts,
): Record<string, unknown> {
  assertPluginPorts(kind, id, deps);
  const checks = ports.checks;
  const attenuated: { readonly [P in PortName]: unknown } = {
    clock: Object.freeze({ now: () => new Date(ports.clock.now().getTime()) }),
    content: Object.freeze({ read: (digest: Digest) => ports.content.read(digest) }),
    checks:
      checks === undefined
        ? undefined
        : Object.freeze({ evaluate: (params: HostChecksParams) => checks.evaluate(params) }),
  };
  const out: Record<string, unknown> = {};
  for (const [name, ref] of Object.entries(deps)) {
    const port = portNamed(kind, ref.key) as PortName;
    // Fail closed at init: a verifier that needs the host's checks must never run without them.
    if (attenuated[port] === undefined) {
      throw new PluginError(
        "ASP_PLUGIN_PORT_UNAVAILABLE",
        `${kind} ${id} asks for ${PLUGIN_PORT_KEYS[port]} (as ${JSON.stringify(name).slice(0, 100)}); this host does not supply it`,
        { data: { id, kind, key: PLUGIN_PORT_KEYS[port] } },
      );
    }
    out[name] = attenuated[port];
  }
  return Object.freeze(out);
}

function badOutput(id: string, what: string, detail: string): PluginError {
  return new PluginError("ASP_PLUGIN_BAD_OUTPUT", `${id} returned an invalid ${what}: ${detail}`, {
    data: { id, what },
  });
}

/**
 * A verifier's answer, validated against the contracts `plugin-verify-response` schema (closed:
 * unknown fields, such as a host-owned `decision` in a review, are refused).
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OUTPUT` when it does not validate, or answers a request
 *   of another kind.
 */
export function checkVerifyResponse(id: string, requestKind: string, value: unknown): VerifyResponse {
  const r = validate("plugin-verify-response", value);
  if (!r.ok) {
    const first = r.errors[0];
    throw badOutput(id, "verify response", `${first?.pointer || "/"} ${first?.message ?? ""}`);
  }
  if (r.value.kind !== requestKind) {
    throw badOutput(id, "verify response", `a ${r.value.kind} answer to a ${requestKind} request`);
  }
  return r.value;
}

/**
 * Which granted sandbox capabilities can back each transaction guarantee (host §3, §6: the host
 * never reports a guarantee stronger than it can enforce). A guarantee not listed needs none.
 */
const GUARANTEE_NEEDS: Readonly<Partial<Record<StageResult["guarantee"], readonly string[]>>> = {
  workspace_transactional: ["sandbox:staged_snapshot", "sandbox:bubblewrap"],
  staged_snapshot: ["sandbox:staged_snapshot"],
};

/**
 * A sandbox's stage result, validated against the contracts `plugin-stage-result` schema, with
 * its reported guarantee checked against the capabilities the policy granted it.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OUTPUT` when it does not validate, or reports a guarantee
 *   none of its granted capabilities can back.
 */
export function checkStageResult(id: string, granted: readonly string[], value: unknown): StageResult {
  const r = validate("plugin-stage-result", value);
  if (!r.ok) {
    const first = r.errors[0];
    throw badOutput(id, "stage result", `${first?.pointer || "/"} ${first?.message ?? ""}`);
  }
  const needs = GUARANTEE_NEEDS[r.value.guarantee];
  if (needs !== undefined && !needs.some((c) => granted.includes(c))) {
    throw badOutput(id, "stage result", `guarantee ${r.value.guarantee} needs one of ${needs.join(", ")} granted`);
  }
  return r.value;
}

/**
 * Which granted sandbox capabilities can back each assurance mode a launch reports (host §3: a
 * provider is `isolated` only under an OS mechanism the policy granted). A mode not listed needs none.
 */
const MODE_NEEDS: Readonly<Partial<Record<LaunchResult["mode"], readonly string[]>>> = {
  isolated: ["sandbox:bubblewrap"],
  "mediated-write": ["sandbox:bubblewrap"],
};

/**
 * A sandbox's launch result, validated against the contracts `plugin-launch-result` schema, with
 * its reported mode checked against the capabilities the policy granted it. A launch that claims
 * more than `gated` while the process can write the worktree is refused too.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OUTPUT` when it does not validate, reports a mode none of
 *   its granted capabilities can back, or claims mediation with direct write.
 */
export function checkLaunchResult(id: string, granted: readonly string[], value: unknown): LaunchResult {
  const r = validate("plugin-launch-result", value);
  if (!r.ok) {
    const first = r.errors[0];
    throw badOutput(id, "launch result", `${first?.pointer || "/"} ${first?.message ?? ""}`);
  }
  const needs = MODE_NEEDS[r.value.mode];
  if (needs !== undefined && !needs.some((c) => granted.includes(c))) {
    throw badOutput(id, "launch result", `mode ${r.value.mode} needs one of ${needs.join(", ")} granted`);
  }
  if (needs !== undefined && r.value.directWrite) {
    throw badOutput(id, "launch result", `mode ${r.value.mode} with direct write to the worktree`);
  }
  return r.value;
}

/**
 * A sandbox's recover result, validated against the contracts `plugin-recover-result` schema.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OUTPUT` when it does not validate.
 */
export function checkRecoverResult(id: string, value: unknown): RecoverResult {
  const r = validate("plugin-recover-result", value);
  if (!r.ok) {
    const first = r.errors[0];
    throw badOutput(id, "recover result", `${first?.pointer || "/"} ${first?.message ?? ""}`);
  }
  return r.value;
}

// Bounds of an engine step: generous for real models, small enough that one step cannot flood the
// host's records.
const MAX_TEXT = 1024 * 1024;
const MAX_NAME = 256;
const MAX_ITEMS = 1024;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const isText = (v: unknown, max: number, min = 0): boolean =>
  typeof v === "string" && v.length >= min && v.length <= max;

/** The first key of `value` outside `allowed`, or null (steps are closed shapes, like the schemas). */
function extraKey(value: Record<string, unknown>, allowed: readonly string[]): string | null {
  return Object.keys(value).find((k) => !allowed.includes(k)) ?? null;
}

/** True when `value` is plain JSON data: what a tool's arguments must be for the host to digest them. */
function isJson(value: unknown, depth = 0): boolean {
  if (depth > 64) return false;
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.length <= 100_000 && value.every((v) => isJson(v, depth + 1));
  if (!isRecord(value) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  return Object.values(value).every((v) => isJson(v, depth + 1));
}

/** Why `step` is not an {@link EnginePortStep}, or null when it is one. */
function engineStepProblem(step: unknown): string | null {
  if (!isRecord(step)) return "a step must be an object";
  const closed = (allowed: string[]): string | null => {
    const extra = extraKey(step, ["kind", ...allowed]);
    return extra === null ? null : `/${extra.slice(0, 100)} is not a field of a ${String(step.kind)} step`;
  };
  switch (step.kind) {
    case "prose":
      return closed(["text"]) ?? (isText(step.text, MAX_TEXT) ? null : "/text must be a string of at most 1 MiB");
    case "action": {
      const a = step.action;
      if (!isRecord(a)) return closed(["action"]) ?? "/action must be an object";
      const extra = extraKey(a, ["tool", "arguments", "call_id"]);
      if (extra !== null) return `/action/${extra.slice(0, 100)} is not a field of an action`;
      if (!isText(a.tool, MAX_NAME, 1)) return "/action/tool must be a non-empty name";
      if (!isRecord(a.arguments) || !isJson(a.arguments)) return "/action/arguments must be a JSON object";
      if (a.call_id !== undefined && !isText(a.call_id, MAX_NAME)) return "/action/call_id must be a short string";
      return closed(["action"]);
    }
    case "turn": {
      const u = step.usage;
      if (!isRecord(u) || extraKey(u, ["input_tokens", "output_tokens"]) !== null) {
        return closed(["usage"]) ?? "/usage must be { input_tokens, output_tokens }";
      }
      if (!isCount(u.input_tokens) || !isCount(u.output_tokens)) return "/usage counts must be integers >= 0";
      return closed(["usage"]);
    }
    case "cancelled":
      return closed([]);
    case "max_turns":
      return closed(["turns"]) ?? (isCount(step.turns) ? null : "/turns must be an integer >= 0");
    case "failed":
      if (typeof step.code !== "string" || !/^[A-Z][A-Z0-9_]{0,127}$/.test(step.code)) {
        return "/code must be a SCREAMING_SNAKE code";
      }
      if (typeof step.outcome !== "string" || !/^[a-z][a-z0-9_]{0,63}$/.test(step.outcome)) {
        return "/outcome must be a snake_case attempt outcome";
      }
      return closed(["code", "outcome", "message"]) ?? (isText(step.message, 4096) ? null : "/message too long");
    case "completion": {
      if (!isText(step.payload, MAX_TEXT)) return "/payload must be a string of at most 1 MiB";
      const arts = step.artifacts;
      if (!Array.isArray(arts) || arts.length > MAX_ITEMS) return "/artifacts must be an array";
      for (const [i, art] of arts.entries()) {
        if (
          !isRecord(art) ||
          extraKey(art, ["artifact_id", "version_id", "bytes"]) !== null ||
          !isText(art.artifact_id, MAX_NAME, 1) ||
          !isText(art.version_id, MAX_NAME, 1) ||
          !((art as { bytes?: unknown }).bytes instanceof Uint8Array)
        ) {
          return `/artifacts/${i} must be { artifact_id, version_id, bytes: Uint8Array }`;
        }
      }
      const ev = step.evidence;
      if (!Array.isArray(ev) || ev.length > MAX_ITEMS) return "/evidence must be an array";
      for (const [i, e] of ev.entries()) {
        if (
          !isRecord(e) ||
          extraKey(e, ["name", "bytes"]) !== null ||
          !isText(e.name, MAX_NAME, 1) ||
          !((e as { bytes?: unknown }).bytes instanceof Uint8Array)
        ) {
          return `/evidence/${i} must be { name, bytes: Uint8Array }`;
        }
      }
      return closed(["payload", "artifacts", "evidence"]);
    }
    default:
      return `/kind ${JSON.stringify(String(step.kind)).slice(0, 60)} is not an engine step`;
  }
}

/**
 * An engine's step, checked against the contracts `EnginePortStep` shape (closed: an unknown
 * field, such as a host-owned `decision` or `action_digest` on an action, is refused; an action's
 * arguments must be plain JSON the host can digest).
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OUTPUT` when it is not one.
 */
export function checkEngineStep(id: string, value: unknown): EnginePortStep {
  const problem = engineStepProblem(value);
  if (problem !== null) throw badOutput(id, "engine step", problem);
  return value as EnginePortStep;
}
