import { type PluginKind, validate } from "@asp/contracts";
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
  /** The host's clock (`asp.plugin.Clock`): verifiers and sandboxes. */
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
type InProcessKind = Exclude<PluginKind, "provider">;

/**
 * Which ports each in-process kind may ask for. A verifier judges content at a time; a sandbox
 * is handed the writes to stage in its request, so it needs only the clock.
 */
const PORTS_OF: { readonly [K in InProcessKind]: readonly PortName[] } = {
  verifier: ["clock", "content", "checks"],
  sandbox: ["clock"],
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
