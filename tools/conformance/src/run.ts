import {
  type Assessment,
  findHostOwnedFields,
  type InitializeResult,
  PROTOCOL_VERSION,
  validate,
} from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";
import {
  CancellationTokenSource,
  type ExitInfo,
  METHODS,
  type MessageConnection,
  PROTOCOL_ERRORS,
  ProviderConnection,
  ResponseError,
} from "@asp/protocol";
import { CHECKS, type CheckId, SUITE_VERSION } from "./checks.js";
import { ConformanceError } from "./errors.js";
import { buildFixtureTree, type FixtureTree } from "./fixture-tree.js";

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** The provider command: executable then arguments (structured argv, never a shell string). */
  readonly command: readonly string[];
  readonly cwd?: string;
  /** Environment of the provider; default: only PATH. */
  readonly env?: Readonly<Record<string, string>>;
  /** Bound of each step after start-up (assess, unknown method, shutdown), default 5000 ms. */
  readonly timeoutMs?: number;
  /** Bound of launch + `initialize` (a cold Node start on a busy machine is slow), default 15000 ms. */
  readonly startupTimeoutMs?: number;
  /** How soon after `$/cancelRequest` an answer must arrive, default 1000 ms. */
  readonly cancelBoundMs?: number;
  /**
   * Largest acceptable message from the provider, default 1 MiB. Judged exactly as the host
   * judges it: on the framed `Content-Length`, before parsing (`@asp/protocol`).
   */
  readonly maxResponseBytes?: number;
  /** Callbacks one request may make, default 256. */
  readonly maxCallbacksPerRequest?: number;
  /** What was tested, e.g. the plugin's tree digest; bound into the conformance digest. */
  readonly subjectDigest?: string;
}

/** Outcome of one check. */
export interface ConformanceCheck {
  readonly id: CheckId;
  readonly title: string;
  readonly status: "pass" | "fail" | "skip";
  readonly detail: string;
}

/** The report of one run: per-check results and the digest to record as conformance evidence. */
export interface ConformanceReport {
  readonly $$type: "@asp/ConformanceReport";
  readonly version: 1;
  readonly suite: string;
  readonly command: readonly string[];
  readonly provider: { readonly id: string; readonly version: string } | null;
  readonly subjectDigest: string | null;
  readonly checks: readonly ConformanceCheck[];
  /** True when no check failed or was skipped. */
  readonly passed: boolean;
  /** `sha256:` of the canonical {suite, provider, subjectDigest, [id, status]...}: equal runs, equal digests. */
  readonly digest: Digest;
  readonly durationMs: number;
}

/** True for a {@link ConformanceReport}, including one from another copy of this package. */
export function isConformanceReport(value: unknown): value is ConformanceReport {
  return (
    typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === "@asp/ConformanceReport"
  );
}

class StepTimeout extends Error {}

function within<T>(promise: Promise<T>, ms: number, what: string, broken?: Promise<never>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    ...(broken === undefined ? [] : [broken]),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StepTimeout(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const describeError = (e: unknown): string =>
  e instanceof ResponseError ? `JSON-RPC error ${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e);

interface RequestTrack {
  served: Set<string>;
  outside: string[];
  callbacks: number;
  hold: boolean;
  firstCallback: Promise<void>;
  signalFirst: () => void;
}

/**
 * Launch a provider command and run the protocol suite against it, acting as the host: the
 * kit serves `host/readBlob` / `host/readTree` from a small synthetic tree and checks every
 * answer. Never throws for a misbehaving provider: every fault is a failed check in the report.
 *
 * @throws ConformanceError `ASP_CONFORMANCE_BAD_OPTIONS` for an empty command or a bound below 1.
 * @example
 * ```ts
 * const report = await runConformance({ command: [process.execPath, "plugin/main.mjs"] });
 * if (!report.passed) process.exitCode = 1;
 * ```
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const [exe, ...args] = options.command;
  if (exe === undefined || exe === "") {
    throw new ConformanceError(
      "ASP_CONFORMANCE_BAD_OPTIONS",
      "give the provider command to test (executable and arguments)",
    );
  }
  const timeoutMs = options.timeoutMs ?? 5000;
  const startupTimeoutMs = options.startupTimeoutMs ?? Math.max(timeoutMs, 15_000);
  const cancelBoundMs = options.cancelBoundMs ?? 1000;
  const maxResponseBytes = options.maxResponseBytes ?? 1024 * 1024;
  const maxCallbacks = options.maxCallbacksPerRequest ?? 256;
  for (const [name, v] of Object.entries({
    timeoutMs,
    startupTimeoutMs,
    cancelBoundMs,
    maxResponseBytes,
    maxCallbacks,
  })) {
    if (!Number.isInteger(v) || v < 1) {
      throw new ConformanceError("ASP_CONFORMANCE_BAD_OPTIONS", `${name} must be a positive integer`, {
        data: { option: name },
      });
    }
  }
  const started = performance.now();
  const results = new Map<CheckId, { status: "pass" | "fail" | "skip"; detail: string }>();
  const set = (id: CheckId, ok: boolean, detail: string): void => {
    if (results.get(id)?.status === "fail") return; // the first failure names the fault
    results.set(id, { status: ok ? "pass" : "fail", detail });
  };
  const fixture = await buildFixtureTree();

  let exited: ExitInfo | null = null;
  let head = Buffer.alloc(0);
  const transportErrors: string[] = [];
  // Rejects when the session is over for good: the provider exited, or stdout is not framed.
  let breakSession: (reason: Error) => void = () => {};
  const broken = new Promise<never>((_, reject) => {
    breakSession = reject;
  });
  broken.catch(() => {});
  let resolveExit: () => void = () => {};
  const exitPromise = new Promise<void>((resolve) => {
    resolveExit = resolve;
  });
  // The host's own connection: the same spawn (structured argv, no shell) and the same
  // frame-size guard, so an answer is judged by its framed size exactly as the host judges it.
  const conn = ProviderConnection.launch(
    { executable: exe, args, cwd: options.cwd ?? process.cwd(), env: options.env ?? { PATH: process.env.PATH ?? "" } },
    maxResponseBytes,
    (info) => {
      exited = info;
      resolveExit();
      breakSession(new Error("exited"));
    },
    (fault) => {
      if (fault.kind === "oversize") {
        set("response-size", false, `${fault.detail} (framed Content-Length, as the host measures it)`);
        return;
      }
      transportErrors.push(fault.detail);
      breakSession(new Error(`transport error: ${fault.detail}`));
    },
  );
  conn.child.stdout?.on("data", (chunk: Buffer) => {
    if (head.length >= 64) return;
    head = Buffer.concat([head, chunk]).subarray(0, 64);
    if (head.length >= 15 && !/^content-(length|type):/i.test(head.toString("latin1"))) {
      breakSession(new Error(`non-protocol bytes on stdout: ${JSON.stringify(head.toString("utf8").slice(0, 40))}`));
    }
  });
  const connection: MessageConnection = conn.connection;
  /** One request through the host's call path: a JSON-RPC error rejects as a `ResponseError`. */
  const request = async (method: string, params: unknown, ms: number, what: string): Promise<unknown> => {
    const r = await Promise.race([conn.call<unknown>(method, params ?? null, ms), broken]);
    if (r.ok) return r.value;
    const f = r.failure;
    if (f.kind === "response-error") throw new ResponseError(f.code ?? PROTOCOL_ERRORS.internalError, f.detail, f.data);
    if (f.kind === "timeout") throw new StepTimeout(`${what} did not answer within ${ms} ms`);
    throw new Error(f.kind === "oversize" ? `${what}: ${f.detail}` : f.detail);
  };

  const tracks = new Map<string, RequestTrack>();
  const foreign: string[] = [];
  const track = (requestId: string, hold = false): RequestTrack => {
    let signalFirst: () => void = () => {};
    const firstCallback = new Promise<void>((r) => {
      signalFirst = r;
    });
    const t: RequestTrack = { served: new Set(), outside: [], callbacks: 0, hold, firstCallback, signalFirst };
    tracks.set(requestId, t);
    return t;
  };
  const never = new Promise<never>(() => {});
  const callback =
    (kind: "blob" | "tree") =>
    (params: unknown): Promise<unknown> | unknown => {
      const p = params as { requestId?: unknown; digest?: unknown } | null;
      const requestId = typeof p?.requestId === "string" ? p.requestId : "";
      const t = tracks.get(requestId);
      if (t === undefined) {
        foreign.push(requestId);
        throw new ResponseError(PROTOCOL_ERRORS.unknownRequest, `no live request ${JSON.stringify(requestId)}`);
      }
      t.callbacks++;
      t.signalFirst();
      if (t.callbacks > maxCallbacks) {
        throw new ResponseError(PROTOCOL_ERRORS.callbackBudgetExceeded, `more than ${maxCallbacks} callbacks`);
      }
      if (t.hold) return never;
      const d = typeof p?.digest === "string" ? p.digest : "";
      const object = fixture.objects.get(d);
      if (object === undefined || object.kind !== kind) {
        t.outside.push(d);
        throw new ResponseError(PROTOCOL_ERRORS.outOfBaseline, `${d} is not a ${kind} of the request's baseline`);
      }
      if (object.kind === "blob") {
        t.served.add(d);
        const buf = Buffer.from(object.bytes);
        return { digest: d, size: buf.length, base64: buf.toString("base64") };
      }
      return { digest: d, entries: object.entries };
    };
  connection.onRequest(METHODS.readBlob, callback("blob"));
  connection.onRequest(METHODS.readTree, callback("tree"));

  const alive = (): boolean => exited === null;
  const gone = (): string => {
    const e = exited as ExitInfo | null;
    if (e === null) return "";
    if (e.spawnError !== undefined) return `cannot launch: ${e.spawnError}`;
    const stderr = conn.stderr;
    return `the provider exited (code ${e.code}, signal ${e.signal})${stderr ? `: ${firstError(stderr)}` : ""}`;
  };

  let provider: InitializeResult | null = null;
  try {
    // ---------------------------------------------------------------- initialize
    try {
      const raw = await request(
        METHODS.initialize,
        {
          protocolVersion: PROTOCOL_VERSION,
          host: { name: "asp-conformance", version: "1.0.0" },
          processId: process.pid,
        },
        startupTimeoutMs,
        "initialize",
      );
      const r = validate("protocol-initialize-result", raw);
      if (!r.ok) {
        const first = r.errors[0];
        set("initialize", false, `invalid initialize result: ${first?.pointer || "/"} ${first?.message ?? ""}`);
        const v = (raw as { protocolVersion?: unknown } | null)?.protocolVersion;
        if (typeof v === "string") checkVersion(v, set);
      } else {
        provider = r.value;
        set(
          "initialize",
          true,
          `${provider.provider.id}@${provider.provider.version}, sources ${provider.diagnosticSources.join(", ") || "(none)"}`,
        );
        checkVersion(provider.protocolVersion, set);
      }
    } catch (error) {
      await Promise.race([exitPromise, new Promise((r) => setTimeout(r, 50))]);
      set("initialize", false, alive() ? describeError(error) : gone());
    }
    if (provider === null || results.get("protocol-version")?.status === "fail") {
      return finish(options, results, provider, started, "skipped: initialize failed", conn, transportErrors, head);
    }
    const declared = new Set(provider.diagnosticSources);
    conn.notify(METHODS.initialized, {
      grants: [{ requirement: "conformance", callSites: ["gate"], sources: [...declared] }],
    });

    // ---------------------------------------------------------------- check/assess
    const params = (requestId: string) => ({
      requestId,
      callSite: "gate",
      baseline: fixture.base,
      changeset: {
        digest: fixture.changeset.digest,
        base: fixture.changeset.base,
        after: fixture.changeset.after,
        changes: fixture.changeset.changes.map((c) => ({
          path: c.path,
          kind: c.kind,
          before: c.before?.digest ?? null,
          after: c.after?.digest ?? null,
        })),
      },
      requirements: ["conformance"],
      deadlineMs: timeoutMs,
    });
    const t1 = track("conformance-assess");
    let answer: unknown;
    let assessFailed: string | null = null;
    try {
      answer = await request(METHODS.checkAssess, params("conformance-assess"), timeoutMs, "check/assess");
    } catch (error) {
      assessFailed = alive() ? describeError(error) : gone();
      if (!(error instanceof ResponseError)) set("assess-deadline", false, assessFailed);
      if (error instanceof ResponseError) {
        const label = error.code === PROTOCOL_ERRORS.unsupported ? "unsupported" : "error";
        set("assess-status", false, `answered with a JSON-RPC ${label} (${error.code}) instead of an Assessment`);
      }
    }
    if (assessFailed !== null) {
      set("assess-shape", false, assessFailed);
      // Callback faults are observed whether or not an answer came.
      if (t1.callbacks > maxCallbacks)
        set("callback-budget", false, `${t1.callbacks} callbacks (bound ${maxCallbacks})`);
      if (t1.outside.length > 0) {
        set("reads-in-baseline", false, `read outside the baseline: ${t1.outside.slice(0, 3).join(", ")}`);
      }
    } else {
      set("assess-deadline", true, "answered in time");
      const framed = { largest: conn.largestFrameBytes, max: maxResponseBytes };
      checkAssessment(answer, provider, declared, fixture, t1, foreign, { framed, maxCallbacks }, set);
    }

    // ---------------------------------------------------------------- cancellation
    if (alive())
      await checkCancellation(
        connection,
        params("conformance-cancel"),
        track("conformance-cancel", true),
        cancelBoundMs,
        set,
        alive,
        gone,
      );
    else set("cancellation", false, gone());

    // ---------------------------------------------------------------- unknown method
    if (alive()) {
      try {
        const r = await request("asp/conformance.unknownMethod", { probe: true }, timeoutMs, "an unknown method");
        set("unknown-method", false, `answered an unknown method with a result: ${JSON.stringify(r)?.slice(0, 200)}`);
      } catch (error) {
        if (error instanceof ResponseError) {
          conn.notify("asp/conformance.unknownNotification", { probe: true });
          await new Promise((r) => setTimeout(r, 50));
          set(
            "unknown-method",
            alive(),
            alive() ? `error ${error.code} (${error.message})` : `exited after an unknown notification: ${gone()}`,
          );
        } else set("unknown-method", false, alive() ? describeError(error) : gone());
      }
    } else set("unknown-method", false, gone());

    // ---------------------------------------------------------------- shutdown
    if (alive()) {
      try {
        const r = await request(METHODS.shutdown, null, timeoutMs, "shutdown");
        if (r !== null && r !== undefined)
          set("shutdown", false, `shutdown answered ${JSON.stringify(r).slice(0, 100)}, not null`);
        conn.notify(METHODS.exit, undefined);
        await within(exitPromise, timeoutMs, "exit");
        const e = exited as ExitInfo | null;
        set("shutdown", e?.code === 0, e?.code === 0 ? "exit code 0" : `exit code ${e?.code}, signal ${e?.signal}`);
      } catch (error) {
        set("shutdown", false, alive() ? describeError(error) : gone());
      }
    } else set("shutdown", false, gone());
    return finish(options, results, provider, started, "", conn, transportErrors, head);
  } catch (error) {
    return finish(options, results, provider, started, `skipped: ${describeError(error)}`, conn, transportErrors, head);
  }
}

/** The most telling stderr line (the first error message), on one line. */
function firstError(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  const line = lines.find((l) => /error/i.test(l) && !l.startsWith("at ")) ?? lines[0] ?? "";
  return line.slice(0, 300);
}

type Setter = (id: CheckId, ok: boolean, detail: string) => void;

function checkVersion(version: string, set: Setter): void {
  const major = (v: string) => v.split(".")[0];
  const ok = major(version) === major(PROTOCOL_VERSION);
  set(
    "protocol-version",
    ok,
    ok ? `${version} (host ${PROTOCOL_VERSION})` : `speaks ${version}, host speaks ${PROTOCOL_VERSION}`,
  );
}

function checkAssessment(
  answer: unknown,
  init: InitializeResult,
  declared: ReadonlySet<string>,
  fixture: FixtureTree,
  t: RequestTrack,
  foreign: readonly string[],
  bounds: { framed: { largest: number; max: number }; maxCallbacks: number },
  set: Setter,
): void {
  // The framed Content-Length, as the host's frame guard measures it (an oversize answer never
  // gets here: it fails its call, and the stream fault fails this check).
  const { largest, max } = bounds.framed;
  set("response-size", largest <= max, `largest message ${largest} bytes framed (bound ${max})`);
  set("callback-budget", t.callbacks <= bounds.maxCallbacks, `${t.callbacks} callbacks (bound ${bounds.maxCallbacks})`);
  set(
    "reads-in-baseline",
    t.outside.length === 0,
    t.outside.length === 0
      ? "every read was inside the request's trees"
      : `read outside the baseline: ${t.outside.slice(0, 3).join(", ")}`,
  );
  const hits = findHostOwnedFields(answer);
  set(
    "host-owned-fields",
    hits.length === 0,
    hits.length === 0
      ? "none"
      : `host-owned ${hits
          .map((h) => `${h.field} at ${h.pointer}`)
          .slice(0, 5)
          .join(", ")}`,
  );
  const r = validate("assessment", answer);
  if (!r.ok) {
    const first = r.errors[0];
    set("assess-shape", false, `invalid Assessment: ${first?.pointer || "/"} ${first?.message ?? ""}`);
  }
  if (typeof answer !== "object" || answer === null) return;
  const a = answer as Partial<Assessment>;
  if (r.ok) {
    const sameProvider = a.provider?.id === init.provider.id && a.provider?.version === init.provider.version;
    set(
      "assess-shape",
      a.requestId === "conformance-assess" && sameProvider,
      a.requestId !== "conformance-assess"
        ? `answered for request ${JSON.stringify(a.requestId)}`
        : sameProvider
          ? "valid Assessment"
          : `provider ${JSON.stringify(a.provider)} differs from initialize`,
    );
  }
  // Sources: every diagnostic and coverage source must be declared (host §4).
  const bad: string[] = [];
  for (const d of Array.isArray(a.diagnostics) ? a.diagnostics : []) {
    const source = (d as { source?: unknown }).source;
    const code = (d as { code?: unknown }).code;
    if (typeof source !== "string" || !declared.has(source)) bad.push(`source ${JSON.stringify(source)}`);
    else if (typeof code !== "string" || !code.startsWith(`${source}/`)) bad.push(`code ${JSON.stringify(code)}`);
  }
  for (const s of a.coverage?.sources ?? []) if (!declared.has(s)) bad.push(`coverage source ${JSON.stringify(s)}`);
  set(
    "declared-sources",
    bad.length === 0,
    bad.length === 0 ? `declared: ${[...declared].join(", ")}` : `undeclared ${bad.slice(0, 3).join(", ")}`,
  );
  // validAsOf: the host's baseline and changeset, and exactly the blobs served (host §5).
  const v = a.validAsOf;
  const served = [...t.served].sort();
  const reads = Array.isArray(v?.reads) ? [...v.reads].sort() : null;
  const problems: string[] = [];
  if (v?.baseline !== fixture.base) problems.push(`baseline ${JSON.stringify(v?.baseline)} is not ${fixture.base}`);
  if (v?.changeset !== fixture.changeset.digest)
    problems.push(`changeset ${JSON.stringify(v?.changeset)} is not ${fixture.changeset.digest}`);
  if (reads === null || JSON.stringify(reads) !== JSON.stringify(served)) {
    problems.push(`reads ${JSON.stringify(reads)} differ from the blobs served ${JSON.stringify(served)}`);
  }
  set(
    "valid-as-of",
    problems.length === 0,
    problems.length === 0 ? `${served.length} reads echoed` : problems.join("; "),
  );
  // Content comes through callbacks: a complete answer on a change that touched files must have read one.
  const readChanged = served.some((d) => fixture.changedBlobs.has(d));
  const cbProblems: string[] = [];
  if (foreign.length > 0) cbProblems.push(`callbacks with a foreign requestId ${JSON.stringify(foreign.slice(0, 3))}`);
  if (a.status === "complete" && !readChanged) {
    cbProblems.push("answered complete without reading any changed blob through host/readBlob (read from disk?)");
  }
  set(
    "callback-reads",
    cbProblems.length === 0,
    cbProblems.length === 0 ? `${served.length} blobs read through callbacks` : cbProblems.join("; "),
  );
  // A provider that does not declare `check` (edit- or inspect-only) answers check/assess
  // honestly with `unsupported`: a capability gap, not a failure (host §2).
  const capabilityGap = a.status === "unsupported" && !init.capabilities.includes("check");
  set(
    "assess-status",
    a.status === "complete" || capabilityGap,
    capabilityGap
      ? 'status "unsupported" from a provider that does not declare check (an honest capability gap)'
      : `status ${JSON.stringify(a.status)}${a.error ? ` (${a.error.code}: ${a.error.message})` : ""}`,
  );
}

async function checkCancellation(
  connection: MessageConnection,
  params: unknown,
  t: RequestTrack,
  boundMs: number,
  set: Setter,
  alive: () => boolean,
  gone: () => string,
): Promise<void> {
  const source = new CancellationTokenSource();
  let answered: "result" | "error" | null = null;
  let answerCode: number | null = null;
  const pending = connection.sendRequest(METHODS.checkAssess, params, source.token).then(
    () => {
      answered = "result";
    },
    (error: unknown) => {
      answered = "error";
      answerCode = error instanceof ResponseError ? error.code : null;
    },
  );
  // Cancel once the provider is busy: after its first callback (held unanswered), or soon.
  await Promise.race([t.firstCallback, pending, new Promise((r) => setTimeout(r, 150))]);
  if (answered !== null) {
    set("cancellation", true, "answered before cancellation could be sent");
    return;
  }
  const sentAt = performance.now();
  source.cancel();
  try {
    await within(pending, boundMs, "the cancelled request");
    const ms = Math.round(performance.now() - sentAt);
    set(
      "cancellation",
      true,
      answered === "error"
        ? `answered error ${answerCode} ${ms} ms after $/cancelRequest`
        : `answered ${ms} ms after $/cancelRequest`,
    );
  } catch (error) {
    set("cancellation", false, alive() ? describeError(error) : gone());
  }
}

function finish(
  options: ConformanceOptions,
  results: Map<CheckId, { status: "pass" | "fail" | "skip"; detail: string }>,
  init: InitializeResult | null,
  started: number,
  skipReason: string,
  conn?: ProviderConnection,
  transportErrors: readonly string[] = [],
  head: Buffer = Buffer.alloc(0),
): ConformanceReport {
  const framed = head.length === 0 || /^content-(length|type):/i.test(head.toString("latin1"));
  const transportOk = framed && transportErrors.length === 0;
  results.set("transport", {
    status: transportOk ? "pass" : "fail",
    detail: !framed
      ? `wrote non-protocol bytes to stdout: ${JSON.stringify(head.toString("utf8").slice(0, 40))}`
      : transportErrors.length > 0
        ? `transport error: ${transportErrors[0]}`
        : head.length === 0
          ? "no output"
          : "LSP framing",
  });
  conn?.kill();
  conn?.connection.dispose();
  const checks: ConformanceCheck[] = CHECKS.map((c) => {
    const r = results.get(c.id);
    return { id: c.id, title: c.title, status: r?.status ?? "skip", detail: r?.detail ?? (skipReason || "skipped") };
  });
  const provider = init === null ? null : { id: init.provider.id, version: init.provider.version };
  const subjectDigest = options.subjectDigest ?? null;
  const passed = checks.every((c) => c.status === "pass");
  return {
    $$type: "@asp/ConformanceReport",
    version: 1,
    suite: SUITE_VERSION,
    command: [...options.command],
    provider,
    subjectDigest,
    checks,
    passed,
    digest: digest({
      type: "asp.conformance-report",
      suite: SUITE_VERSION,
      provider,
      subjectDigest,
      checks: checks.map((c) => [c.id, c.status]),
    }),
    durationMs: Math.round(performance.now() - started),
  };
}

/** Render a report for people: one line per check, then the verdict and the digest. */
export function formatReport(report: ConformanceReport): string {
  const mark = { pass: "PASS", fail: "FAIL", skip: "SKIP" } as const;
  const lines = [
    `Conformance ${report.suite}: ${report.provider ? `${report.provider.id}@${report.provider.version}` : "(no provider identity)"}`,
    ...report.checks.map((c) => `  ${mark[c.status]}  ${c.id.padEnd(18)} ${c.detail}`),
    "",
    `${report.passed ? "conforming" : "NOT conforming"}: ${report.checks.filter((c) => c.status === "pass").length}/${report.checks.length} checks passed`,
    `conformance digest ${report.digest}`,
  ];
  return lines.join("\n");
}
