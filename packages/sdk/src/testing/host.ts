import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync } from "node:fs";
import {
  type Assessment,
  type AssessParams,
  type EditPlan,
  type InitializedParams,
  type InitializeResult,
  type InspectParams,
  type InspectResult,
  PROTOCOL_VERSION,
  type ProposeParams,
} from "@asp/contracts";
import { METHODS, PROTOCOL_ERRORS, ProviderConnection, ResponseError } from "@asp/protocol";
import { messageOf, SdkError } from "../errors.js";
import { MemoryRepo } from "./memory-repo.js";

/** How to launch the provider under test. */
export interface TestHostOptions {
  /** Where `host/readBlob` / `host/readTree` are served from (default: an empty {@link MemoryRepo}). */
  readonly repo?: MemoryRepo;
  /** Arguments after the entry (the provider's own command line). */
  readonly args?: readonly string[];
  /** Arguments to `node` before the entry, e.g. `["--experimental-permission", "--allow-fs-read=*"]`. */
  readonly nodeArgs?: readonly string[];
  /** Working folder of the process (default: the current one). */
  readonly cwd?: string;
  /** Environment of the process (default: only `PATH`, so nothing leaks in from the test run). */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * The largest framed answer accepted, judged on its `Content-Length` like the host does
   * (default: the host's default bound, 4 MiB). A larger one fails its request.
   */
  readonly maxResponseBytes?: number;
  /** How long one request may take before it fails and `$/cancelRequest` is sent (default 120 s). */
  readonly requestTimeoutMs?: number;
}

/** One `host/readBlob` or `host/readTree` callback the provider made. */
export interface HostCallback {
  readonly method: "host/readBlob" | "host/readTree";
  readonly requestId: string;
  readonly digest: string;
  /** False when the host refused it (unknown request, outside the request's trees, refused blob). */
  readonly ok: boolean;
}

/** A JSON-RPC error answer of the provider. */
export class RpcError extends Error {
  constructor(
    /** The JSON-RPC error code. */
    readonly code: number,
    message: string,
    /** The error's `data` (for an `AspError` thrown by a handler: `{ code, data }`). */
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

/** `check/assess` params; `requestId`, `callSite` (`gate`), `changeset` (none), `requirements` and `deadlineMs` have defaults. */
export type AssessInput = Pick<AssessParams, "baseline"> & Partial<Omit<AssessParams, "baseline">>;
/** `inspect/query` params; `requestId`, `changeset` (none) and `deadlineMs` have defaults. */
export type QueryInput = Pick<InspectParams, "baseline" | "query"> & Partial<Omit<InspectParams, "baseline" | "query">>;
/** `edit/propose` params; `requestId` and `deadlineMs` have defaults. */
export type ProposeInput = Pick<ProposeParams, "baseline" | "intent"> &
  Partial<Omit<ProposeParams, "baseline" | "intent">>;

const DEFAULT_DEADLINE_MS = 30_000;
/** The host's default `budgets.maxResponseBytes`, so a test sees what a default host refuses. */
const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;

/**
 * A test host for a built provider: launches `node <entry>` as a real subprocess, speaks
 * LSP-framed JSON-RPC over its stdio through the host's own connection (`@asp/protocol`
 * `ProviderConnection`: the same framing and response-size bound), and serves `host/readBlob` /
 * `host/readTree` from a {@link MemoryRepo}, bound to the request like a real host: only for a
 * `requestId` it sent, and only objects reachable from that request's baseline or changeset
 * trees. It records every callback, the blobs served per request, and every byte written to
 * stdout (to check that nothing secret is ever sent).
 *
 * @example
 * ```ts
 * const host = new TestHost("dist/main.js");
 * await host.initialize();
 * const cs = host.repo.changeset({ "a.ts": "x\n" }, { "a.ts": "x // TODO\n" });
 * const assessment = await host.assess({ baseline: cs.after, changeset: cs });
 * expect(assessment.validAsOf.reads).toEqual(host.reads(assessment.requestId));
 * expect(await host.shutdown()).toBe(0);
 * ```
 */
export class TestHost {
  /** The provider process. */
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>;
  /** What `host/readBlob` / `host/readTree` serve. */
  readonly repo: MemoryRepo;
  readonly #callbacks: HostCallback[] = [];
  readonly #served = new Map<string, Set<string>>();
  readonly #stdout: Buffer[] = [];
  #stderr = "";
  readonly #conn: ProviderConnection;
  readonly #timeoutMs: number;
  /** The trees each request may read from. */
  readonly #roots = new Map<string, readonly string[]>();
  /** Trees and blobs reachable from each request's roots, computed on first use. */
  readonly #reachable = new Map<string, { trees: Set<string>; blobs: Set<string> }>();
  #requests = 0;

  /**
   * Launch `node [nodeArgs] <entry> [args]`.
   * @throws Error when `entry` does not exist (build the provider first, or use {@link builtEntry}).
   */
  constructor(entry: string, options: TestHostOptions = {}) {
    if (!existsSync(entry)) throw new Error(`${entry} is missing: build the provider first`);
    this.repo = options.repo ?? new MemoryRepo();
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(options.env ?? { PATH: process.env.PATH ?? "" }))
      if (v !== undefined) env[k] = v;
    let resolveExited: (code: number | null) => void = () => {};
    this.exited = new Promise((resolve) => {
      resolveExited = resolve;
    });
    this.#conn = ProviderConnection.launch(
      {
        executable: process.execPath,
        args: [...(options.nodeArgs ?? []), entry, ...(options.args ?? [])],
        cwd: options.cwd ?? process.cwd(),
        env,
      },
      options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      (info) => resolveExited(info.code),
    );
    // stdio is "pipe": the streams exist.
    this.child = this.#conn.child as ChildProcessWithoutNullStreams;
    this.child.stderr.on("data", (chunk: Buffer) => {
      this.#stderr += chunk.toString("utf8");
    });
    this.child.stdout.on("data", (chunk: Buffer) => this.#stdout.push(chunk));
    const connection = this.#conn.connection;
    connection.onRequest(METHODS.readBlob, (params: { requestId?: string; digest?: string }) =>
      this.#callback("host/readBlob", params, (digest) => {
        const bytes = Buffer.from(this.repo.readBlob(digest));
        const requestId = params.requestId ?? "";
        const set = this.#served.get(requestId) ?? new Set<string>();
        this.#served.set(requestId, set.add(digest));
        return { digest, size: bytes.length, base64: bytes.toString("base64") };
      }),
    );
    connection.onRequest(METHODS.readTree, (params: { requestId?: string; digest?: string }) =>
      this.#callback("host/readTree", params, (digest) => ({ digest, entries: this.repo.readTree(digest) })),
    );
  }

  /** Every callback so far, in order, including refused ones. */
  get callbacks(): readonly HostCallback[] {
    return this.#callbacks;
  }

  /** Blob digests served (successfully) per `requestId`. */
  get served(): ReadonlyMap<string, ReadonlySet<string>> {
    return this.#served;
  }

  /** Everything the provider wrote to stderr so far. */
  get stderr(): string {
    return this.#stderr;
  }

  /** Everything the provider wrote to stdout so far (the raw wire, headers included), as text. */
  output(): string {
    return Buffer.concat(this.#stdout).toString("utf8");
  }

  /** The blobs served for `requestId`, sorted: what its answer's `validAsOf.reads` must list. */
  reads(requestId: string): string[] {
    return [...(this.#served.get(requestId) ?? [])].sort();
  }

  #callback<R>(
    method: HostCallback["method"],
    params: { requestId?: string; digest?: string },
    serve: (digest: string) => R,
  ): R {
    const requestId = params.requestId ?? "";
    const digest = params.digest ?? "";
    const record = (ok: boolean): void => {
      this.#callbacks.push({ method, requestId, digest, ok });
    };
    if (!this.#roots.has(requestId)) {
      record(false);
      throw new ResponseError(PROTOCOL_ERRORS.unknownRequest, `no request ${requestId}`);
    }
    const reachable = this.#reachableFrom(requestId);
    if (!(method === "host/readTree" ? reachable.trees : reachable.blobs).has(digest)) {
      record(false);
      throw new ResponseError(
        PROTOCOL_ERRORS.outOfBaseline,
        `${digest} is not a ${method === "host/readTree" ? "tree" : "blob"} of this request's baseline`,
      );
    }
    try {
      const result = serve(digest);
      record(true);
      return result;
    } catch (error) {
      record(false);
      throw new ResponseError(PROTOCOL_ERRORS.outOfBaseline, messageOf(error));
    }
  }

  #reachableFrom(requestId: string): { trees: Set<string>; blobs: Set<string> } {
    const cached = this.#reachable.get(requestId);
    if (cached !== undefined) return cached;
    const trees = new Set<string>();
    const blobs = new Set<string>();
    const walk = (digest: string): void => {
      if (trees.has(digest)) return;
      trees.add(digest);
      for (const e of this.repo.trees.get(digest) ?? []) {
        if (e.mode === "040000") walk(e.digest);
        else blobs.add(e.digest);
      }
    };
    for (const root of this.#roots.get(requestId) ?? []) walk(root);
    this.#reachable.set(requestId, { trees, blobs });
    return { trees, blobs };
  }

  /**
   * Send a request and await its answer. A request with a `requestId` and a `baseline` opens
   * the callback scope of that id: its baseline, its changeset's base and after trees, and its
   * environment tree.
   * @throws RpcError when the provider answers with an error; SdkError `ASP_SDK_CONNECTION_FAILED`
   *   when no answer came (the process has gone, the answer was over `maxResponseBytes` or not
   *   framed, or the request timed out; `data.kind` says which).
   */
  async request<T = unknown>(method: string, params?: unknown): Promise<T> {
    if (typeof params === "object" && params !== null) {
      const p = params as {
        requestId?: unknown;
        baseline?: unknown;
        changeset?: { base?: unknown; after?: unknown };
        environment?: { tree?: unknown };
      };
      if (typeof p.requestId === "string" && typeof p.baseline === "string") {
        // The request's environment tree is served like its baseline (the host does the same).
        const roots = [p.baseline, p.changeset?.base, p.changeset?.after, p.environment?.tree].filter(
          (r) => typeof r === "string",
        );
        this.#roots.set(p.requestId, roots);
        this.#reachable.delete(p.requestId);
      }
    }
    const r = await this.#conn.call<T>(method, params, this.#timeoutMs);
    if (r.ok) return r.value;
    if (r.failure.kind === "response-error")
      throw new RpcError(r.failure.code ?? PROTOCOL_ERRORS.internalError, r.failure.detail, r.failure.data);
    throw new SdkError("ASP_SDK_CONNECTION_FAILED", `${method}: ${r.failure.detail}`, {
      data: { method, kind: r.failure.kind },
    });
  }

  /** Send a notification (ignored once the process has gone). */
  notify(method: string, params?: unknown): void {
    this.#conn.notify(method, params);
  }

  /** `initialize` + `initialized` (with `grants`, default none); returns the initialize result. */
  async initialize(grants: InitializedParams["grants"] = []): Promise<InitializeResult> {
    const result = await this.request<InitializeResult>(METHODS.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      host: { name: "test-host", version: "1.0.0" },
      processId: process.pid,
    });
    this.notify(METHODS.initialized, { grants });
    return result;
  }

  /** Send `method` with `params` over `defaults`, a default deadline and a fresh `requestId`. */
  #send<T>(method: string, defaults: object, params: { readonly requestId?: string }): Promise<T> {
    const requestId = params.requestId ?? `req-${++this.#requests}`;
    return this.request<T>(method, { deadlineMs: DEFAULT_DEADLINE_MS, ...defaults, ...params, requestId });
  }

  /** `check/assess`, with defaults for everything but the baseline. */
  assess(params: AssessInput): Promise<Assessment> {
    return this.#send(METHODS.checkAssess, { callSite: "gate", changeset: null, requirements: [] }, params);
  }

  /** `inspect/query`, with defaults for everything but the baseline and the query. */
  query(params: QueryInput): Promise<InspectResult> {
    return this.#send(METHODS.inspectQuery, { changeset: null }, params);
  }

  /** `edit/propose`, with defaults for everything but the baseline and the intent. */
  propose(params: ProposeInput): Promise<EditPlan> {
    return this.#send(METHODS.editPropose, {}, params);
  }

  /** `shutdown` + `exit`; resolves with the exit code (0 for a well-behaved provider). */
  async shutdown(): Promise<number | null> {
    await this.request(METHODS.shutdown);
    this.notify(METHODS.exit);
    return this.exited;
  }

  /** Kill the process (SIGKILL) unless it has already exited. */
  kill(): void {
    this.#conn.kill();
  }
}
