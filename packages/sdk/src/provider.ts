import { createHash, randomUUID } from "node:crypto";
import {
  type Assessment,
  type AssessmentStatus,
  type AssessParams,
  type CapabilityFamily,
  type Diagnostic,
  type EditPlan,
  type InitializedParams,
  type InitializeParams,
  type InitializeResult,
  type InspectParams,
  type InspectResult,
  isAspError,
  PLUGIN_BRANDS,
  PROTOCOL_VERSION,
  type ProposeParams,
  type ReadBlobResult,
  type ReadTreeResult,
  validate,
  validateAssessment,
  validateEditPlan,
} from "@asp/contracts";
import { type CancellationToken, createStreamConnection, METHODS, PROTOCOL_ERRORS, ResponseError } from "@asp/protocol";
import { messageOf, SdkError } from "./errors.js";

const PROVIDER_BRAND = PLUGIN_BRANDS.provider;

/** Who the provider is, as answered to `initialize`. Capabilities default to what the handlers cover. */
export interface ProviderInfo {
  readonly provider: { readonly id: string; readonly version: string };
  /** Every diagnostic source this provider may report; anything else is rejected by the host. */
  readonly diagnosticSources: readonly string[];
  /** Defaults to `check`, plus `inspect` / `edit` when those handlers exist. */
  readonly capabilities?: readonly CapabilityFamily[];
  /** Defaults to the `PROTOCOL_VERSION` of `@asp/contracts`. */
  readonly protocolVersion?: string;
}

/** An entry of a tree read through `host/readTree`. */
export type TreeEntryInfo = ReadTreeResult["entries"][number];

/** One file or link of the baseline, with its full path. */
export interface FileInfo {
  readonly path: string;
  readonly mode: TreeEntryInfo["mode"];
  readonly digest: string;
}

/** What every handler gets: the request's identity, a cancellation signal and the content API. */
export interface RequestContext {
  readonly requestId: string;
  /** The tree id the answer is bound to. */
  readonly baseline: string;
  /** Aborted on `$/cancelRequest` or when `deadlineMs` passes. */
  readonly signal: AbortSignal;
  /** Requirements trusted policy granted this provider (from `initialized`). */
  readonly grants: InitializedParams["grants"];
  /**
   * The request's dependency environment, or null when the host declares none: a tree laid out
   * at repository paths holding only the dependency roots (such as `node_modules`), read through
   * the same callbacks as the baseline. Its id lands in the answer's `validAsOf.environment`.
   */
  readonly environment: { readonly tree: string; readonly roots: readonly string[] } | null;
  /**
   * The bytes of a blob, read through `host/readBlob` (never from disk) and checked against the
   * digest. Every digest read this way lands in the answer's `validAsOf.reads`.
   * @throws SdkError `ASP_SDK_CALLBACK_FAILED`, `ASP_SDK_BAD_BLOB`, `ASP_SDK_CANCELLED`.
   */
  readBlob(digest: string): Promise<Uint8Array>;
  /** {@link RequestContext.readBlob} decoded as UTF-8. */
  readText(digest: string): Promise<string>;
  /**
   * The direct entries of a tree, through `host/readTree`.
   * @throws SdkError `ASP_SDK_CALLBACK_FAILED`, `ASP_SDK_CANCELLED`.
   */
  readTree(digest: string): Promise<readonly TreeEntryInfo[]>;
  /** Every file and link under `tree` (default: the baseline), walked through `host/readTree`. */
  listFiles(tree?: string): Promise<FileInfo[]>;
}

/** A changed path of the request's changeset. */
export type ChangedPath = NonNullable<AssessParams["changeset"]>["changes"][number];

/** Context of `check/assess`. */
export interface AssessContext extends RequestContext {
  readonly params: AssessParams;
  readonly callSite: AssessParams["callSite"];
  readonly changeset: AssessParams["changeset"];
  readonly requirements: readonly string[];
  readonly deadlineMs: number;
  /** The changed paths (empty for a whole-baseline assessment). */
  readonly changes: readonly ChangedPath[];
}

/** Context of `inspect/query`. */
export interface InspectContext extends RequestContext {
  readonly params: InspectParams;
  readonly query: InspectParams["query"];
}

/** Context of `edit/propose`. */
export interface ProposeContext extends RequestContext {
  readonly params: ProposeParams;
  readonly intent: ProposeParams["intent"];
}

/**
 * What an assess handler returns: provider-owned fields only. The SDK adds `provider`,
 * `requestId` and `validAsOf` itself; anything host-owned (a decision, verdict, grant,
 * assurance mode ...) cannot be expressed here and is refused at run time too.
 */
export interface AssessOutcome {
  /** Defaults to `complete`. `unsupported` is a capability gap, `error` a failed attempt. */
  readonly status?: AssessmentStatus;
  readonly diagnostics?: readonly Diagnostic[];
  readonly coverage?: Assessment["coverage"];
  /** The tool (and version) that answered, e.g. the compiler the provider chose for this project. */
  readonly tool?: Assessment["tool"];
  /** Required when `status` is `error`. */
  readonly error?: { readonly code: string; readonly message: string };
}

/** What an inspect handler returns. */
export interface InspectOutcome {
  readonly status?: InspectResult["status"];
  readonly results: InspectResult["results"];
  readonly error?: { readonly code: string; readonly message: string };
}

/** What a propose handler returns: a structured edit with preconditions; the SDK binds it. */
export interface ProposeOutcome {
  readonly description?: string;
  readonly preconditions: EditPlan["preconditions"];
  readonly operations: EditPlan["operations"];
}

/** The handlers of a provider. */
export interface ProviderSpec {
  /** Identity and declared sources, or a function of the host's `initialize` params returning them. */
  readonly initialize: ProviderInfo | ((params: InitializeParams) => ProviderInfo | Promise<ProviderInfo>);
  readonly assess: (ctx: AssessContext) => AssessOutcome | Promise<AssessOutcome>;
  readonly inspect?: (ctx: InspectContext) => InspectOutcome | Promise<InspectOutcome>;
  readonly propose?: (ctx: ProposeContext) => ProposeOutcome | Promise<ProposeOutcome>;
}

/** Where a provider speaks the protocol; stdio by default. */
export interface ListenOptions {
  readonly input?: NodeJS.ReadableStream;
  readonly output?: NodeJS.WritableStream;
  /** Call `process.exit` when the session ends (default: true when listening on stdio). */
  readonly exitProcess?: boolean;
}

/** A running provider session. */
export interface ProviderSession {
  /** Resolves with the exit code: 0 after `shutdown` + `exit`, 1 when the host went away without `shutdown`. */
  readonly closed: Promise<number>;
  /** End the session now. */
  dispose(): void;
}

/** A provider made with {@link defineProvider}: inert until {@link ProviderDefinition.listen}. */
export interface ProviderDefinition {
  readonly $$type: typeof PROVIDER_BRAND;
  readonly version: 1;
  readonly spec: ProviderSpec;
  /** Serve the protocol (stdio unless told otherwise). */
  listen(options?: ListenOptions): ProviderSession;
}

/** True for a {@link ProviderDefinition}, including one made by another copy of the SDK. */
export function isProviderDefinition(value: unknown): value is ProviderDefinition {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { $$type?: unknown }).$$type === PROVIDER_BRAND &&
    typeof (value as { listen?: unknown }).listen === "function"
  );
}

/**
 * Define a check provider (optionally inspect and edit). Nothing runs until `.listen()`; the
 * SDK handles framing, `initialize`, grants, content callbacks, `validAsOf`, cancellation,
 * deadlines, `shutdown` / `exit` and result validation.
 *
 * @throws SdkError `ASP_SDK_INVALID_DEFINITION` when a handler is missing or not a function.
 * @example
 * ```ts
 * defineProvider({
 *   initialize: { provider: { id: "todo", version: "1.0.0" }, diagnosticSources: ["todo"] },
 *   async assess(ctx) {
 *     const diagnostics = [];
 *     for (const c of ctx.changes) if (c.after && (await ctx.readText(c.after)).includes("TODO"))
 *       diagnostics.push({ source: "todo", code: "todo/found", severity: "warning", message: "TODO left", fingerprint: c.path });
 *     return { diagnostics };
 *   },
 * }).listen();
 * ```
 */
export function defineProvider(spec: ProviderSpec): ProviderDefinition {
  if (typeof spec !== "object" || spec === null) {
    throw new SdkError("ASP_SDK_INVALID_DEFINITION", "defineProvider needs an object with initialize and assess");
  }
  if (typeof spec.assess !== "function") {
    throw new SdkError("ASP_SDK_INVALID_DEFINITION", "defineProvider: assess must be a function", {
      data: { field: "assess" },
    });
  }
  if (typeof spec.initialize !== "function" && (typeof spec.initialize !== "object" || spec.initialize === null)) {
    throw new SdkError("ASP_SDK_INVALID_DEFINITION", "defineProvider: initialize must be an object or a function", {
      data: { field: "initialize" },
    });
  }
  for (const field of ["inspect", "propose"] as const) {
    if (spec[field] !== undefined && typeof spec[field] !== "function") {
      throw new SdkError("ASP_SDK_INVALID_DEFINITION", `defineProvider: ${field} must be a function`, {
        data: { field },
      });
    }
  }
  const definition: ProviderDefinition = {
    $$type: PROVIDER_BRAND,
    version: 1,
    spec,
    listen: (options = {}) => serve(spec, options),
  };
  return Object.freeze(definition);
}

function capabilitiesOf(spec: ProviderSpec, info: ProviderInfo): CapabilityFamily[] {
  if (info.capabilities !== undefined) return [...info.capabilities];
  const caps: CapabilityFamily[] = ["check"];
  if (spec.inspect) caps.push("inspect");
  if (spec.propose) caps.push("edit");
  return caps;
}

/**
 * Run an author's handler; an AspError it throws (a refused intent, a bad query) reaches the
 * host as a JSON-RPC error whose `data` carries the stable `code` and `data`, so the host can
 * tell refusals apart by code rather than by message text.
 */
async function withErrorCode<T>(handler: () => Promise<T> | T): Promise<T> {
  try {
    return await handler();
  } catch (error) {
    if (error instanceof ResponseError || !isAspError(error)) throw error;
    throw new ResponseError(PROTOCOL_ERRORS.internalError, error.message, {
      code: error.code,
      data: error.data ?? null,
    });
  }
}

const cancelledError = (): ResponseError<undefined> =>
  new ResponseError(PROTOCOL_ERRORS.requestCancelled, "request cancelled by the host");

function serve(spec: ProviderSpec, options: ListenOptions): ProviderSession {
  const onStdio = options.input === undefined && options.output === undefined;
  const exitProcess = options.exitProcess ?? onStdio;
  const connection = createStreamConnection(options.input ?? process.stdin, options.output ?? process.stdout);
  let info: InitializeResult | null = null;
  let grants: InitializedParams["grants"] = [];
  let shutdownRequested = false;
  let done = false;
  let resolveClosed: (code: number) => void = () => {};
  const closed = new Promise<number>((resolve) => {
    resolveClosed = resolve;
  });

  const finish = (code: number): void => {
    if (done) return;
    done = true;
    resolveClosed(code);
    connection.dispose();
    if (exitProcess) {
      // Let the last response flush before the process goes.
      setImmediate(() => process.exit(code));
    }
  };

  const requireInit = (): InitializeResult => {
    if (info === null) throw new ResponseError(PROTOCOL_ERRORS.invalidRequest, "initialize has not been called");
    if (shutdownRequested) throw new ResponseError(PROTOCOL_ERRORS.invalidRequest, "the session is shutting down");
    return info;
  };

  const checkParams = <T>(schema: Parameters<typeof validate>[0], params: unknown): T => {
    const r = validate(schema, params);
    if (!r.ok) {
      const first = r.errors[0];
      throw new ResponseError(
        PROTOCOL_ERRORS.invalidParams,
        `invalid params: ${first?.pointer || "/"} ${first?.message ?? ""}`,
      );
    }
    return r.value as T;
  };

  connection.onRequest(METHODS.initialize, async (params: unknown) => {
    const p = checkParams<InitializeParams>("protocol-initialize-params", params);
    const given = typeof spec.initialize === "function" ? await spec.initialize(p) : spec.initialize;
    const result: InitializeResult = {
      protocolVersion: given.protocolVersion ?? PROTOCOL_VERSION,
      provider: { id: given.provider.id, version: given.provider.version },
      diagnosticSources: [...given.diagnosticSources],
      capabilities: capabilitiesOf(spec, given),
    };
    const r = validate("protocol-initialize-result", result);
    if (!r.ok) {
      const first = r.errors[0];
      throw new ResponseError(
        PROTOCOL_ERRORS.internalError,
        `the provider's initialize answer is invalid: ${first?.pointer || "/"} ${first?.message ?? ""}`,
      );
    }
    info = result;
    return result;
  });

  connection.onNotification(METHODS.initialized, (params: unknown) => {
    const r = validate("protocol-initialized-params", params);
    if (r.ok) grants = r.value.grants;
  });

  /** Run one request: abort signal from cancellation and deadline, callbacks, read tracking. */
  const run = async <R>(
    requestId: string,
    baseline: string,
    environment: RequestContext["environment"] | undefined,
    deadlineMs: number,
    token: CancellationToken,
    body: (ctx: RequestContext, reads: Set<string>) => Promise<R>,
  ): Promise<R> => {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new SdkError("ASP_SDK_CANCELLED", `deadline of ${deadlineMs} ms passed`)),
      deadlineMs,
    );
    timer.unref?.();
    let rejectCancelled: (e: unknown) => void = () => {};
    const cancelled = new Promise<never>((_, reject) => {
      rejectCancelled = reject;
    });
    cancelled.catch(() => {});
    const sub = token.onCancellationRequested(() => {
      controller.abort(new SdkError("ASP_SDK_CANCELLED", "request cancelled by the host"));
      rejectCancelled(cancelledError());
    });
    const reads = new Set<string>();
    const guard = (): void => {
      if (controller.signal.aborted) {
        throw new SdkError("ASP_SDK_CANCELLED", "the request was cancelled or passed its deadline");
      }
    };
    const readBlob = async (digest: string): Promise<Uint8Array> => {
      guard();
      let result: unknown;
      try {
        result = await connection.sendRequest(METHODS.readBlob, { requestId, digest });
      } catch (error) {
        throw new SdkError("ASP_SDK_CALLBACK_FAILED", `host/readBlob ${digest} failed: ${messageOf(error)}`, {
          cause: error,
          data: { digest },
        });
      }
      const r = validate("protocol-read-blob-result", result);
      if (!r.ok) throw new SdkError("ASP_SDK_BAD_BLOB", `host/readBlob ${digest} answered with a malformed result`);
      const blob: ReadBlobResult = r.value;
      const bytes = Buffer.from(blob.base64, "base64");
      const actual = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
      if (actual !== digest) {
        throw new SdkError("ASP_SDK_BAD_BLOB", `host/readBlob ${digest} returned bytes with digest ${actual}`, {
          data: { digest, actual },
        });
      }
      reads.add(digest);
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    };
    const readTree = async (digest: string): Promise<readonly TreeEntryInfo[]> => {
      guard();
      let result: unknown;
      try {
        result = await connection.sendRequest(METHODS.readTree, { requestId, digest });
      } catch (error) {
        throw new SdkError("ASP_SDK_CALLBACK_FAILED", `host/readTree ${digest} failed: ${messageOf(error)}`, {
          cause: error,
          data: { digest },
        });
      }
      const r = validate("protocol-read-tree-result", result);
      if (!r.ok)
        throw new SdkError("ASP_SDK_CALLBACK_FAILED", `host/readTree ${digest} answered with a malformed result`);
      return r.value.entries;
    };
    const listFiles = async (tree: string = baseline): Promise<FileInfo[]> => {
      const out: FileInfo[] = [];
      const walk = async (digest: string, prefix: string): Promise<void> => {
        for (const e of await readTree(digest)) {
          const path = prefix === "" ? e.name : `${prefix}/${e.name}`;
          if (e.mode === "040000") await walk(e.digest, path);
          else out.push({ path, mode: e.mode, digest: e.digest });
        }
      };
      await walk(tree, "");
      return out;
    };
    const ctx: RequestContext = {
      requestId,
      baseline,
      environment: environment ?? null,
      signal: controller.signal,
      grants,
      readBlob,
      readText: async (digest) => new TextDecoder().decode(await readBlob(digest)),
      readTree,
      listFiles,
    };
    try {
      return await Promise.race([body(ctx, reads), cancelled]);
    } catch (error) {
      if (token.isCancellationRequested) throw cancelledError();
      throw error;
    } finally {
      clearTimeout(timer);
      sub.dispose();
    }
  };

  connection.onRequest(METHODS.checkAssess, (params: unknown, token: CancellationToken) => {
    const init = requireInit();
    const p = checkParams<AssessParams>("protocol-assess-params", params);
    const started = performance.now();
    return run(
      p.requestId,
      p.baseline,
      p.environment,
      p.deadlineMs,
      token,
      async (base, reads): Promise<Assessment> => {
        const ctx: AssessContext = {
          ...base,
          params: p,
          callSite: p.callSite,
          changeset: p.changeset,
          requirements: p.requirements,
          deadlineMs: p.deadlineMs,
          changes: p.changeset?.changes ?? [],
        };
        const validAsOf = () => boundTo(p.baseline, p.changeset?.digest ?? null, p.environment, reads);
        const failed = (code: string, message: string): Assessment => ({
          provider: init.provider,
          requestId: p.requestId,
          status: "error",
          validAsOf: validAsOf(),
          diagnostics: [],
          error: { code, message: message.slice(0, 10_000) },
        });
        let outcome: AssessOutcome;
        try {
          outcome = await spec.assess(ctx);
        } catch (error) {
          if (base.signal.aborted && !token.isCancellationRequested) {
            // Deadline passed and the handler stopped: an honest partial answer.
            return {
              provider: init.provider,
              requestId: p.requestId,
              status: "incomplete",
              validAsOf: validAsOf(),
              diagnostics: [],
            };
          }
          if (token.isCancellationRequested) throw error;
          return failed(isAspError(error) ? error.code : "ASP_SDK_HANDLER_FAILED", messageOf(error));
        }
        const status = outcome?.status ?? "complete";
        const assessment: Record<string, unknown> = {
          provider: init.provider,
          requestId: p.requestId,
          status,
          validAsOf: validAsOf(),
          diagnostics: outcome?.diagnostics ?? [],
          metrics: { durationMs: Math.round((performance.now() - started) * 1000) / 1000 },
        };
        if (outcome?.coverage !== undefined) assessment.coverage = outcome.coverage;
        if (outcome?.tool !== undefined) assessment.tool = outcome.tool;
        if (outcome?.error !== undefined) assessment.error = outcome.error;
        else if (status === "error") assessment.error = { code: "ASP_SDK_HANDLER_FAILED", message: "status error" };
        const checked = validateAssessment(assessment);
        if (!checked.ok) {
          const first = checked.errors[0];
          return failed(
            "ASP_SDK_INVALID_RESULT",
            `the provider's assessment is invalid: ${first?.pointer || "/"} ${first?.message ?? ""}`,
          );
        }
        return checked.value;
      },
    );
  });

  connection.onRequest(METHODS.inspectQuery, (params: unknown, token: CancellationToken) => {
    const init = requireInit();
    const inspect = spec.inspect;
    if (inspect === undefined) throw new ResponseError(PROTOCOL_ERRORS.unsupported, "inspect/query is not supported");
    const p = checkParams<InspectParams>("protocol-inspect-params", params);
    return run(
      p.requestId,
      p.baseline,
      p.environment,
      p.deadlineMs,
      token,
      async (base, reads): Promise<InspectResult> => {
        const outcome = await withErrorCode(() => inspect({ ...base, params: p, query: p.query }));
        const result: Record<string, unknown> = {
          provider: init.provider,
          requestId: p.requestId,
          status: outcome.status ?? "complete",
          validAsOf: boundTo(p.baseline, p.changeset?.digest ?? null, p.environment, reads),
          results: outcome.results,
        };
        if (outcome.error !== undefined) result.error = outcome.error;
        return validOrInternalError(validate("protocol-inspect-result", result), "inspect result");
      },
    );
  });

  connection.onRequest(METHODS.editPropose, (params: unknown, token: CancellationToken) => {
    const init = requireInit();
    const propose = spec.propose;
    if (propose === undefined) throw new ResponseError(PROTOCOL_ERRORS.unsupported, "edit/propose is not supported");
    const p = checkParams<ProposeParams>("protocol-propose-params", params);
    return run(p.requestId, p.baseline, p.environment, p.deadlineMs, token, async (base, reads): Promise<EditPlan> => {
      const outcome = await withErrorCode(() => propose({ ...base, params: p, intent: p.intent }));
      const plan: Record<string, unknown> = {
        proposalId: randomUUID(),
        provider: init.provider,
        validAsOf: boundTo(p.baseline, null, p.environment, reads),
        preconditions: outcome.preconditions,
        operations: outcome.operations,
      };
      if (outcome.description !== undefined) plan.description = outcome.description;
      return validOrInternalError(validateEditPlan(plan), "edit plan");
    });
  });

  connection.onRequest(METHODS.shutdown, () => {
    shutdownRequested = true;
    return null;
  });
  connection.onNotification(METHODS.exit, () => finish(shutdownRequested ? 0 : 1));
  connection.onClose(() => finish(shutdownRequested ? 0 : 1));
  connection.listen();
  return { closed, dispose: () => finish(shutdownRequested ? 0 : 1) };
}

/** The `validAsOf` of an answer: the request's baseline, changeset and environment, and the blobs read. */
function boundTo(
  baseline: string,
  changeset: string | null,
  environment: { readonly tree: string } | undefined,
  reads: ReadonlySet<string>,
): { baseline: string; changeset: string | null; reads: string[]; environment?: string } {
  const bound: { baseline: string; changeset: string | null; reads: string[]; environment?: string } = {
    baseline,
    changeset,
    reads: [...reads].sort(),
  };
  if (environment !== undefined) bound.environment = environment.tree;
  return bound;
}

/** The validated value, or an internal error naming the first problem of the provider's own answer. */
function validOrInternalError<T>(
  r:
    | { readonly ok: true; readonly value: T }
    | { readonly ok: false; readonly errors: readonly { pointer: string; message: string }[] },
  what: string,
): T {
  if (r.ok) return r.value;
  const first = r.errors[0];
  throw new ResponseError(
    PROTOCOL_ERRORS.internalError,
    `the provider's ${what} is invalid: ${first?.pointer || "/"} ${first?.message ?? ""}`,
  );
}
