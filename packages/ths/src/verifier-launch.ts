import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { PLUGIN_BRANDS } from "@asp/contracts";
import type { Clock } from "@asp/evidence";
import {
  assertPluginPorts,
  checkPluginOptionsOffThread,
  checkVerifyResponse,
  type LoadedVerifier,
  PLUGIN_PORT_KEYS,
  PluginError,
  type PluginPorts,
  type Sandbox,
  type Verifier,
  type VerifyRequest,
  type VerifyResponse,
} from "@asp/plugin-host";
import { type CallFailure, ProviderConnection, ResponseError } from "@asp/protocol";
import { VERIFIER_FAILED, VERIFIER_METHODS } from "./verifier-child/wire.js";

/**
 * The child entry every out-of-process verifier runs in: `dist/verifier-child-bundle/main.mjs`, one
 * bundled file (this package's build makes it). Resolved from `src/` and from `dist/` alike.
 */
export const VERIFIER_CHILD_ENTRY = fileURLToPath(new URL("../dist/verifier-child-bundle/main.mjs", import.meta.url));
const CHILD_FOLDER = fileURLToPath(new URL("../dist/verifier-child-bundle/", import.meta.url)).replace(/\/$/, "");

/** How an out-of-process verifier was launched: frozen into the review binding / Guardian audit by its caller. */
export interface VerifierLaunch {
  /** The sandbox's reported mode (`isolated` under bubblewrap). Never a mode with direct write. */
  readonly mode: string;
  readonly mechanism: string;
  /** The sandbox plugin that confines it (its verified id and digest). */
  readonly sandbox: { readonly id: string; readonly digest: string };
  readonly directWrite: false;
  readonly reason?: string;
}

/** Something an out-of-process verifier tried that the host refused, or how it failed. */
export interface VerifierAttempt {
  /**
   * - `port_denied`: a callback of a port it was not granted (or a malformed one);
   * - `network_denied`: an HTTP request to anything but its granted endpoint;
   * - `failed`: its `init` or `verify` threw;
   * - `exited`, `timeout`, `cancelled`, `stream_fault`: the child died, overran, was cancelled, or broke its stream.
   */
  readonly kind: "port_denied" | "network_denied" | "failed" | "exited" | "timeout" | "cancelled" | "stream_fault";
  readonly detail: string;
  /** The host clock's ISO time of the attempt. */
  readonly at: string;
}

/** The one endpoint an out-of-process verifier may reach, through the host (trusted configuration). */
export interface VerifierNetwork {
  /** Requests go only to this origin, at or under this path (e.g. `https://api.openai.com/v1`). */
  readonly baseUrl: string;
  /**
   * The credential the host adds: the child's environment gets `env` set to a placeholder, and the
   * host replaces the placeholder in the request's headers with `value()` (read at each request,
   * never given to the child). When `value()` is undefined the variable is left unset.
   */
  readonly credential?: { readonly env: string; readonly value: () => string | undefined };
}

/** Options of {@link launchVerifier}. */
export interface LaunchVerifierOptions {
  /** The granted sandbox to launch through (it must implement `launch` and confine: no direct write). */
  readonly sandbox: Sandbox | null;
  /** The host ports it may be granted: clock, content and (optionally) checks. */
  readonly ports: PluginPorts;
  /** Folders the child must never see: the candidate repository, the store and its siblings. */
  readonly deny: readonly string[];
  readonly network?: VerifierNetwork;
  /** Deadline of the child's start (describe + init), ms (default 30,000). */
  readonly startTimeoutMs?: number;
  /**
   * Bound on checking the trusted options against the `optionsSchema` the child declares (default
   * 5000 ms): the check runs in a worker thread, since the schema's patterns are the plugin's.
   */
  readonly optionsCheckTimeoutMs?: number;
  /** Deadline of one `verify`, ms (default 600,000; a Guardian's own timeout aborts sooner through the signal). */
  readonly verifyTimeoutMs?: number;
  /** The largest framed message accepted from the child (default 16 MiB). */
  readonly maxMessageBytes?: number;
  /** Called for every recorded attempt as it happens. */
  readonly onAttempt?: (attempt: VerifierAttempt) => void;
}

/** A verifier running in its own sandboxed process. `close()` ends it. */
export interface LaunchedVerifier extends Verifier {
  readonly launch: VerifierLaunch;
  /** The attempts recorded so far, oldest first (the first 100; `onAttempt` sees every one). */
  attempts(): readonly VerifierAttempt[];
  /** How many attempts were recorded in all (`attempts()` keeps only the first 100). */
  attemptCount(): number;
  close(): Promise<void>;
}

const PLACEHOLDER = "asp-host-held-credential";
const MAX_HTTP_BODY = 4 * 1024 * 1024;
const MAX_HTTP_ANSWER = 8 * 1024 * 1024;
/** Requests to the endpoint in flight at once, and headers per request: more are refused. */
const MAX_HTTP_IN_FLIGHT = 4;
const MAX_HTTP_HEADERS = 64;
/** Port callbacks (content, checks) answered at once, and attempts kept per child. */
const MAX_CALLBACKS_IN_FLIGHT = 8;
const MAX_ATTEMPTS = 100;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
/** Request headers the child may not set (the host owns the connection). */
const DROPPED_HEADERS = new Set([
  "host",
  "content-length",
  "connection",
  "transfer-encoding",
  "cookie",
  "proxy-authorization",
]);

function unsandboxed(id: string, why: string): PluginError {
  return new PluginError(
    "ASP_PLUGIN_VERIFIER_UNSANDBOXED",
    `verifier ${id} is not run: ${why}. Add a sandbox plugin granted sandbox:bubblewrap (plugins/sandbox-bubblewrap) to the host configuration's "plugins" on a machine with bubblewrap`,
    { data: { id } },
  );
}

const OUTCOMES: readonly string[] = ["timeout", "unparseable", "provider_failed"];

/**
 * The coded failure of a call to the child. `data.kind` says how it failed; a plugin's own error
 * keeps its code (`data.plugin_code`) and the attempt outcome it names (`data.attempt_outcome`:
 * `timeout`, `unparseable` or `provider_failed`, a label only), and a call past its deadline is a
 * `timeout`, as an in-process verifier's would be.
 */
function failed(id: string, what: string, failure: CallFailure): PluginError {
  const d = (failure.kind === "response-error" ? failure.data : undefined) as
    | { code?: unknown; attempt_outcome?: unknown }
    | undefined;
  const code = typeof d?.code === "string" && /^[A-Z][A-Z0-9_]{0,63}$/.test(d.code) ? d.code : undefined;
  const outcome =
    failure.kind === "timeout"
      ? "timeout"
      : typeof d?.attempt_outcome === "string" && OUTCOMES.includes(d.attempt_outcome)
        ? d.attempt_outcome
        : undefined;
  return new PluginError("ASP_PLUGIN_VERIFIER_FAILED", `verifier ${id} ${what}: ${failure.detail}`.slice(0, 1000), {
    data: {
      id,
      kind: failure.kind === "response-error" ? "failed" : failure.kind,
      ...(code === undefined ? {} : { plugin_code: code }),
      ...(outcome === undefined ? {} : { attempt_outcome: outcome }),
    },
  });
}

function attemptKindOf(failure: CallFailure): VerifierAttempt["kind"] {
  switch (failure.kind) {
    case "response-error":
      return "failed";
    case "timeout":
    case "cancelled":
    case "exited":
      return failure.kind;
    default:
      return "stream_fault";
  }
}

function refusal(code: string, message: string): ResponseError<{ code: string }> {
  return new ResponseError(VERIFIER_FAILED - 1, message.slice(0, 500), { code });
}

/**
 * Whether `url` is at or under `base` (same origin, path prefix at a `/` boundary, no user info),
 * compared after WHATWG parsing (so `..` and `%2e%2e` segments are already resolved). A path
 * with an encoded `/`, `\` or `.` (`%2f`, `%5c`, `%2e`) is refused: a server that decodes it
 * after routing would see a path outside `base` (`/v1/..%2fadmin`).
 */
export function underBaseUrl(url: string, base: string): boolean {
  let u: URL;
  let b: URL;
  try {
    u = new URL(url);
    b = new URL(base);
  } catch {
    return false;
  }
  if (u.username !== "" || u.password !== "" || u.origin !== b.origin) return false;
  if (/%(?:2f|5c|2e)/i.test(u.pathname)) return false;
  const root = b.pathname.replace(/\/+$/, "");
  return u.pathname === root || u.pathname.startsWith(`${root}/`);
}

async function boundedText(response: Response, max: number): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    size += r.value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`the answer exceeds ${max} bytes`);
    }
    chunks.push(r.value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Launch a verified, granted verifier plugin in its own process through the granted sandbox
 * (issue 27 item 4, ADR 0011), and return it as a {@link Verifier} port.
 *
 * The child runs `dist/verifier-child-bundle/main.mjs` with only that folder, the plugin's verified copy
 * (`loaded.cached`) and the Node runtime visible (read-only), `deny` masked, no network namespace
 * and the sandbox's bounded `/tmp` as its scratch. It imports the plugin there; the host checks
 * the declaration it reports (id, capabilities within the signed manifest, only the verifier's
 * ports, options against its schema), then answers only the callbacks it was granted:
 * `host/content.read` and `host/checks.evaluate` through `ports`, `host/http.post` only to
 * `network.baseUrl`, with the credential added host-side. Every refused callback and every
 * failure is a {@link VerifierAttempt}; every answer is checked against the
 * `plugin-verify-response` schema.
 *
 * @throws PluginError `ASP_PLUGIN_VERIFIER_UNSANDBOXED` when there is no sandbox with `launch`,
 *   it throws, or its launch could write the worktree; `ASP_PLUGIN_VERIFIER_FAILED` when the child
 *   does not start (`data.kind`); `ASP_PLUGIN_LOAD_FAILED`, `ASP_PLUGIN_FORBIDDEN_PORT`,
 *   `ASP_PLUGIN_PORT_UNAVAILABLE`, `ASP_PLUGIN_BAD_OPTIONS` when what it declares is refused.
 *   `verify()` rejects with `ASP_PLUGIN_VERIFIER_FAILED` or `ASP_PLUGIN_BAD_OUTPUT`.
 * @example
 * ```ts
 * const loaded = await loadPlugins({ dirs, trustRoots, policy, verifierIsolation: "subprocess" });
 * const reviewer = await launchVerifier(loaded.verifiers[0], { sandbox, ports: { clock, content }, deny: [repo, store] });
 * try { await reviewer.verify({ kind: "review", subject }); } finally { await reviewer.close(); }
 * ```
 */
export async function launchVerifier(
  loaded: LoadedVerifier,
  options: LaunchVerifierOptions,
): Promise<LaunchedVerifier> {
  const id = loaded.plugin.id;
  const clock: Clock = options.ports.clock;
  const entry = loaded.entryPath ?? `${loaded.cached}/${loaded.plugin.entry}`;
  if (!existsSync(VERIFIER_CHILD_ENTRY)) {
    throw new PluginError(
      "ASP_PLUGIN_VERIFIER_FAILED",
      `the verifier child entry ${VERIFIER_CHILD_ENTRY} is missing: build @asp/ths (pnpm build)`,
      { data: { id, kind: "exited" } },
    );
  }
  const sandbox = options.sandbox;
  if (sandbox === null || typeof sandbox.launch !== "function") {
    throw unsandboxed(id, "no sandbox plugin with launch is granted, and a verifier never runs unconfined");
  }
  const credential = options.network?.credential;
  const secret = (): string | undefined => {
    const v = credential?.value();
    return typeof v === "string" && v !== "" ? v : undefined;
  };
  const env: Record<string, string> = {
    TMPDIR: "/tmp",
    ...(credential && secret() ? { [credential.env]: PLACEHOLDER } : {}),
  };
  let launched: Awaited<ReturnType<NonNullable<Sandbox["launch"]>>>;
  try {
    launched = await sandbox.launch({
      executable: process.execPath,
      args: [VERIFIER_CHILD_ENTRY],
      cwd: loaded.cached,
      env,
      readOnly: [loaded.cached, CHILD_FOLDER],
      deny: [...options.deny],
    });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw unsandboxed(id, `sandbox ${sandbox.id} refused the launch (${typeof code === "string" ? code : "error"})`);
  }
  if (launched.directWrite !== false) {
    throw unsandboxed(id, `sandbox ${sandbox.id} cannot confine it (${launched.reason ?? launched.mode})`);
  }
  const launch: VerifierLaunch = Object.freeze({
    mode: launched.mode,
    mechanism: launched.mechanism,
    sandbox: Object.freeze({ id: sandbox.id, digest: sandbox.digest }),
    directWrite: false as const,
    ...(launched.reason === undefined ? {} : { reason: launched.reason }),
  });

  // The first MAX_ATTEMPTS are kept (a child cannot grow the host's memory by being refused).
  const recorded: VerifierAttempt[] = [];
  let attemptCount = 0;
  const record = (kind: VerifierAttempt["kind"], detail: string): void => {
    const attempt = Object.freeze({ kind, detail: detail.slice(0, 500), at: clock.now().toISOString() });
    attemptCount += 1;
    if (recorded.length < MAX_ATTEMPTS) recorded.push(attempt);
    options.onAttempt?.(attempt);
  };
  // Callbacks of the ports (content, checks) being answered at once: more are refused.
  let answering = 0;
  const bounded = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    if (answering >= MAX_CALLBACKS_IN_FLIGHT) {
      record("port_denied", `${what}: more than ${MAX_CALLBACKS_IN_FLIGHT} callbacks at once`);
      throw refusal("ASP_PLUGIN_PORT_UNAVAILABLE", `at most ${MAX_CALLBACKS_IN_FLIGHT} callbacks at once`);
    }
    answering++;
    try {
      return await run();
    } finally {
      answering--;
    }
  };
  let closing = false;
  const inFlight = new Set<AbortController>();
  const abortInFlight = (): void => {
    for (const a of inFlight) a.abort();
  };
  const verifyTimeout = options.verifyTimeoutMs ?? 600_000;
  const conn = ProviderConnection.launch(
    { executable: launched.executable, args: [...launched.args], cwd: launched.cwd, env: { ...launched.env } },
    options.maxMessageBytes ?? 16 * 1024 * 1024,
    (exit) => {
      abortInFlight();
      if (!closing) {
        const how = exit.spawnError ?? (exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`);
        record("exited", `the verifier process exited (${how}); stderr: ${conn.stderr.slice(-300)}`);
      }
    },
    (fault) => {
      // A broken stream ends the child: nothing it sends after it can be trusted to frame.
      record("stream_fault", fault.detail);
      closing = true;
      conn.kill();
    },
  );

  // The ports it declared (checked below), answered host-side only when granted.
  let granted = new Set<string>();
  const rpc = conn.connection;
  rpc.onRequest(VERIFIER_METHODS.contentRead, async (params: { digest?: unknown }) => {
    if (!granted.has(PLUGIN_PORT_KEYS.content)) {
      record("port_denied", `host/content.read without the ${PLUGIN_PORT_KEYS.content} port`);
      throw refusal("ASP_PLUGIN_PORT_UNAVAILABLE", `${id} was not granted ${PLUGIN_PORT_KEYS.content}`);
    }
    const digest = params?.digest;
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      record("port_denied", "host/content.read of something that is not a sha256 digest");
      throw refusal("ASP_PLUGIN_BAD_OUTPUT", "content.read needs a sha256:<64 hex> digest");
    }
    return bounded("host/content.read", async () => {
      const bytes = await options.ports.content.read(digest as `sha256:${string}`);
      return bytes === null ? null : { base64: Buffer.from(bytes).toString("base64") };
    });
  });
  rpc.onRequest(VERIFIER_METHODS.checksEvaluate, async (params: unknown) => {
    const checks = options.ports.checks;
    if (!granted.has(PLUGIN_PORT_KEYS.checks) || checks === undefined) {
      record("port_denied", `host/checks.evaluate without the ${PLUGIN_PORT_KEYS.checks} port`);
      throw refusal("ASP_PLUGIN_PORT_UNAVAILABLE", `${id} was not granted ${PLUGIN_PORT_KEYS.checks}`);
    }
    const files = (params as { files?: unknown } | null)?.files;
    if (!Array.isArray(files)) {
      record("port_denied", "host/checks.evaluate without a files array");
      throw refusal("ASP_PLUGIN_BAD_OUTPUT", "checks.evaluate needs { files: [{ path, digest }] }");
    }
    return bounded("host/checks.evaluate", () => checks.evaluate({ files }));
  });
  rpc.onRequest(
    VERIFIER_METHODS.httpPost,
    async (
      params: { url?: unknown; method?: unknown; headers?: unknown; body?: unknown },
      token: { onCancellationRequested(listener: () => void): { dispose(): void } },
    ) => {
      const url = typeof params?.url === "string" ? params.url.slice(0, 4096) : "";
      const base = options.network?.baseUrl;
      if (base === undefined || !underBaseUrl(url, base)) {
        record(
          "network_denied",
          `HTTP to ${JSON.stringify(url.slice(0, 200))}: only the granted endpoint is reachable`,
        );
        throw refusal("ASP_PLUGIN_NETWORK_DENIED", `${id} may reach only its granted endpoint`);
      }
      const given = params.headers ?? {};
      if (
        params.method !== "POST" ||
        typeof params.body !== "string" ||
        params.body.length > MAX_HTTP_BODY ||
        typeof given !== "object" ||
        Array.isArray(given) ||
        Object.keys(given).length > MAX_HTTP_HEADERS
      ) {
        record(
          "network_denied",
          `HTTP ${String(params.method).slice(0, 10)} to the endpoint: only a POST of at most 4 MiB with at most ${MAX_HTTP_HEADERS} headers`,
        );
        throw refusal("ASP_PLUGIN_NETWORK_DENIED", "only a POST with a body of at most 4 MiB");
      }
      if (inFlight.size >= MAX_HTTP_IN_FLIGHT) {
        record("network_denied", `more than ${MAX_HTTP_IN_FLIGHT} requests to the endpoint at once`);
        throw refusal("ASP_PLUGIN_NETWORK_DENIED", `at most ${MAX_HTTP_IN_FLIGHT} requests at once`);
      }
      const headers: Record<string, string> = {};
      const key = secret();
      for (const [name, value] of Object.entries(given as Record<string, unknown>)) {
        const lower = name.toLowerCase();
        if (DROPPED_HEADERS.has(lower) || typeof value !== "string") continue;
        // The key goes only into the Authorization header: a placeholder anywhere else (a header the
        // endpoint might quote back) drops that header, so the key never reaches the child.
        if (value.includes(PLACEHOLDER)) {
          if (lower !== "authorization" || key === undefined) continue;
          headers[lower] = value.split(PLACEHOLDER).join(key);
        } else {
          headers[lower] = value;
        }
      }
      // Aborted by the child's cancel, the host's deadline, or the child's end (exit or close).
      const abort = new AbortController();
      inFlight.add(abort);
      const sub = token.onCancellationRequested(() => abort.abort());
      const deadline = setTimeout(() => abort.abort(), verifyTimeout);
      try {
        // What was checked is what is sent: the parsed form, never the child's raw string.
        const response = await fetch(new URL(url).href, {
          method: "POST",
          headers,
          body: params.body,
          signal: abort.signal,
          redirect: "manual",
        });
        const text = await boundedText(response, MAX_HTTP_ANSWER);
        // An endpoint that echoes the key back never hands it to the child.
        const body = key === undefined ? text : text.split(key).join(PLACEHOLDER);
        const type = response.headers.get("content-type");
        return { status: response.status, headers: type === null ? {} : { "content-type": type }, body };
      } catch (error) {
        const code = (error as { cause?: { code?: unknown } }).cause?.code;
        throw refusal(typeof code === "string" ? code : "fetch_failed", "the request to the endpoint failed");
      } finally {
        clearTimeout(deadline);
        inFlight.delete(abort);
        sub.dispose();
      }
    },
  );

  const start = options.startTimeoutMs ?? 30_000;
  const stop = (): void => {
    closing = true;
    conn.kill();
  };
  try {
    const described = await conn.call<{
      id?: unknown;
      capabilities?: unknown;
      optionsSchema?: unknown;
      deps?: unknown;
    }>(VERIFIER_METHODS.describe, { entry, brand: PLUGIN_BRANDS.verifier, now: clock.now().getTime() }, start);
    if (!described.ok) {
      record(attemptKindOf(described.failure), described.failure.detail);
      throw failed(id, "did not start", described.failure);
    }
    const d = described.value ?? {};
    if (d.id !== id) {
      throw new PluginError(
        "ASP_PLUGIN_LOAD_FAILED",
        `${id}: the declaration's id ${JSON.stringify(d.id)} is not the manifest's`,
        {
          data: { id },
        },
      );
    }
    const caps = Array.isArray(d.capabilities) ? (d.capabilities as string[]) : [];
    if (caps.length === 0 || caps.some((c) => !(loaded.plugin.capabilities as readonly string[]).includes(c))) {
      throw new PluginError(
        "ASP_PLUGIN_LOAD_FAILED",
        `${id}: the declaration claims capabilities its signed manifest does not declare`,
        {
          data: { id },
        },
      );
    }
    const deps: Record<string, { key: string }> = {};
    for (const [name, key] of Object.entries((d.deps ?? {}) as Record<string, unknown>))
      deps[name] = { key: String(key) };
    assertPluginPorts("verifier", id, deps);
    for (const { key } of Object.values(deps)) {
      if (key === PLUGIN_PORT_KEYS.checks && options.ports.checks === undefined) {
        throw new PluginError(
          "ASP_PLUGIN_PORT_UNAVAILABLE",
          `verifier ${id} asks for ${key}; this host does not supply it`,
          {
            data: { id, kind: "verifier", key },
          },
        );
      }
    }
    if (d.optionsSchema !== undefined) {
      // The child chose this schema: check it off this thread, under a deadline (a backtracking
      // pattern would otherwise stop every other run in the host).
      await checkPluginOptionsOffThread(id, d.optionsSchema, loaded.options, {
        timeoutMs: options.optionsCheckTimeoutMs ?? 5000,
      });
    }
    granted = new Set(Object.values(deps).map((r) => r.key));
    const init = await conn.call<null>(
      VERIFIER_METHODS.init,
      { options: loaded.options, ports: [...granted], now: clock.now().getTime() },
      start,
    );
    if (!init.ok) {
      record(attemptKindOf(init.failure), init.failure.detail);
      throw failed(id, "failed at init", init.failure);
    }
  } catch (error) {
    stop();
    throw error;
  }

  return Object.freeze({
    id,
    version: loaded.plugin.version,
    digest: loaded.evidence.digest,
    capabilities: loaded.plugin.capabilities,
    launch,
    attempts: () => [...recorded],
    attemptCount: () => attemptCount,
    verify: async (request: VerifyRequest): Promise<VerifyResponse> => {
      const { signal, ...plain } = request;
      const r = await conn.call<unknown>(
        VERIFIER_METHODS.verify,
        { request: plain, now: clock.now().getTime() },
        verifyTimeout,
        signal as AbortSignal | undefined,
      );
      if (!r.ok) {
        // A verify past its deadline or cancelled ends the child (it would go on calling back).
        if (r.failure.kind === "timeout" || r.failure.kind === "cancelled") {
          closing = true;
          conn.kill();
        }
        // The exit and stream handlers record their own; a failure of the call itself is recorded here.
        if (
          r.failure.kind !== "exited" &&
          r.failure.kind !== "oversize" &&
          r.failure.kind !== "framing" &&
          r.failure.kind !== "unparseable"
        ) {
          record(attemptKindOf(r.failure), r.failure.detail);
        }
        throw failed(id, "failed to verify", r.failure);
      }
      return checkVerifyResponse(id, request.kind, r.value);
    },
    close: async () => {
      closing = true;
      abortInFlight();
      await conn.shutdown(2000);
    },
  } satisfies LaunchedVerifier);
}
