import { performance } from "node:perf_hooks";
import {
  type Assessment,
  type AssessParams,
  CAPABILITY_FAMILIES,
  type CapabilityFamily,
  type FailClass,
  type InitializedParams,
  type InitializeResult,
  PROTOCOL_VERSION,
  type ProposeParams,
  type ProviderManifest,
  type ProviderState,
  validate,
  validateAssessment,
} from "@asp/contracts";
import type { Digest, FactInput, FactLog } from "@asp/evidence";
import {
  type CallFailure,
  type ExitInfo,
  type LaunchSpec,
  METHODS,
  PROTOCOL_ERRORS,
  ProviderConnection,
  ResponseError,
} from "@asp/protocol";
import type { Budgets, SupervisorTimings } from "./budgets.js";
import { type ContentView, RequestScope } from "./content.js";
import { ThsError } from "./errors.js";
import { freshnessMismatch } from "./freshness.js";
import { loadHealth, outcomeOfAssessment, ProviderHealth, type ProviderStatus } from "./health.js";
import { type LaunchRecord, PLAIN_SUBPROCESS, type ProviderLauncher } from "./launcher.js";

/** A provider the host may launch: trusted launch configuration plus where it came from. */
export interface TrustedProvider {
  readonly manifest: ProviderManifest;
  /** `config`: named in the trusted host configuration; `plugin`: loaded and verified by plugin-host. */
  readonly origin: "config" | "plugin";
  /**
   * True when the artifact was measured and equals its pin: plugin-host verified a plugin's
   * signature and digest, or the host measured a configured provider's `root` (see integrity.ts).
   */
  readonly integrityVerified: boolean;
  /**
   * Re-measures what is about to run before every launch and restart; a reason string refuses
   * the launch (`integrity_unverified`, nothing is spawned), `null` lets it go ahead.
   */
  readonly verifyLaunch?: () => string | null;
}

/** What one provider answered for one evaluation, after validation and freshness. */
export type AssessOutcome =
  | {
      readonly kind: "ok";
      readonly assessment: Assessment;
      /** The sources the provider declared at initialize (and the trusted manifest allows). */
      readonly declaredSources: readonly string[];
      readonly reissued: boolean;
      readonly ms: number;
    }
  | {
      readonly kind: "failed";
      readonly failClass: FailClass;
      readonly detail: string;
      readonly state: ProviderState;
      readonly declaredSources: readonly string[];
    };

/**
 * What an edit provider answered to `edit/propose` (host §6), before the host validates it: the
 * raw answer and the exact set of blobs it read through callbacks, or a typed failure.
 */
export type ProposeOutcome =
  | {
      readonly kind: "ok";
      /** The untrusted answer, exactly as received: the host's plan validation decides what it is. */
      readonly answer: unknown;
      /** Blobs served through `host/readBlob` for this request (what `validAsOf.reads` must echo). */
      readonly reads: ReadonlySet<string>;
      /** Digests asked for outside the baseline (refused). */
      readonly outside: readonly string[];
      readonly ms: number;
    }
  | { readonly kind: "failed"; readonly failClass: FailClass; readonly detail: string };

/** Host identity sent in `initialize`. */
export interface HostInfo {
  readonly name: string;
  readonly version: string;
}

const majorOf = (v: string): string => v.split(".")[0] ?? "";

/** The minimal launch environment: PATH plus only the names the trusted manifest passes through (host §2). */
export function launchEnvironment(
  manifest: ProviderManifest,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = { PATH: env.PATH ?? "/usr/local/bin:/usr/bin:/bin" };
  for (const name of manifest.envPassthrough ?? []) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * Supervises one provider: launch from trusted configuration, `initialize`/`initialized`,
 * lifecycle state per provider and per capability family, restart with backoff, quarantine,
 * callbacks bound to the request's baseline, and per-provider metrics (host §2, §5, §8).
 * Health (failures, quarantine, latency, a count per outcome kind) lives in a
 * {@link ProviderHealth} restored from the store before the first launch, so it accumulates
 * across one-shot hosts.
 */
export class ProviderSupervisor {
  private conn: ProviderConnection | null = null;
  private init: InitializeResult | null = null;
  private starting: Promise<{ ok: true } | { ok: false; failClass: FailClass; detail: string }> | null = null;
  private stateValue: ProviderState = "exited";
  private readonly families = new Map<CapabilityFamily, ProviderState>();
  private readonly scopes = new Map<string, RequestScope>();
  private sessionCallbacks = 0;
  private launches = 0;
  private readonly health: ProviderHealth;
  private restoring: Promise<string | null> | null = null;
  private restored = false;
  private lastExitAt = 0;
  private closing = false;
  private requestCounter = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private launchRecord: LaunchRecord | null = null;

  constructor(
    readonly provider: TrustedProvider,
    private readonly budgets: Budgets,
    private readonly timings: SupervisorTimings,
    private readonly host: HostInfo,
    private readonly grants: InitializedParams["grants"],
    private readonly env: Readonly<Record<string, string | undefined>>,
    /** Where health is restored from; without it, health lives only as long as this supervisor. */
    private readonly store?: FactLog,
    /** Launches through the host's sandbox (host §3); without it, a plain subprocess reported as advisory. */
    private readonly launcher?: ProviderLauncher,
  ) {
    const m = provider.manifest;
    this.health = new ProviderHealth(
      { id: m.id, version: m.version, digest: m.digest },
      budgets.quarantineAfterFailures,
    );
  }

  private get quarantined(): boolean {
    return this.health.quarantined;
  }

  private get consecutiveFailures(): number {
    return this.health.consecutiveFailures;
  }

  /**
   * Restore this identity's health from the store, once, before anything is counted or
   * launched. Resolves to null, or to why the store could not be read (the provider is then not
   * launched: an unreadable quarantine must not become a clean record).
   */
  restore(): Promise<string | null> {
    this.restoring ??= (async () => {
      if (this.store === undefined) {
        this.restored = true;
        return null;
      }
      try {
        const record = await loadHealth(this.store, this.health.provider);
        if (record !== null) this.health.restore(record);
        if (this.health.quarantined) this.setState("quarantined");
        this.restored = true;
        return null;
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return `the provider's health could not be read from the store (${typeof code === "string" ? code : "error"})`;
      }
    })();
    return this.restoring;
  }

  /**
   * The fact recording this provider's health, to append with the decision; none before the
   * stored health was restored (a fresh record must never overwrite an unread one).
   */
  healthFacts(): FactInput[] {
    return this.restored ? [this.health.toFact()] : [];
  }

  get id(): string {
    return this.provider.manifest.id;
  }

  /** The pinned identity (id, version, digest) its health is kept under. */
  get identity(): ProviderHealth["provider"] {
    return this.health.provider;
  }

  /** Current lifecycle state (DESIGN §6). */
  get state(): ProviderState {
    return this.stateValue;
  }

  /** The `initialize` answer of the running session, if any. */
  get initialized(): InitializeResult | null {
    return this.init;
  }

  /** How the latest process was launched (mode, mechanism, sandbox, direct write); null before any launch. */
  get launched(): LaunchRecord | null {
    return this.launchRecord;
  }

  private setState(state: ProviderState, family?: CapabilityFamily): void {
    this.stateValue = state;
    if (family !== undefined) this.families.set(family, state);
    else for (const f of this.provider.manifest.capabilities) this.families.set(f, state);
  }

  /** Sources the provider may own: declared at initialize AND allowed by the trusted manifest. */
  get declaredSources(): readonly string[] {
    const allowed = new Set(this.provider.manifest.diagnosticSources);
    return (this.init?.diagnosticSources ?? []).filter((s) => allowed.has(s));
  }

  private fail(failClass: FailClass, detail: string, state: ProviderState, family?: CapabilityFamily) {
    if (this.health.failed(failClass)) {
      this.enterQuarantine();
      return {
        kind: "failed" as const,
        failClass,
        detail: `${detail}; quarantined after ${this.consecutiveFailures} consecutive failures`,
        state: "quarantined" as ProviderState,
        declaredSources: this.declaredSources,
      };
    }
    this.setState(state, family);
    return { kind: "failed" as const, failClass, detail, state, declaredSources: this.declaredSources };
  }

  /**
   * Lift this provider's quarantine (an operator's reset): its stored health is read first (a
   * quarantine not yet restored is still lifted), then it may launch again on the next request,
   * its failure count from zero. Returns the failures it had, or null when it was not
   * quarantined. The caller records the cleared health ({@link healthFacts}).
   */
  async liftQuarantine(): Promise<number | null> {
    const unreadable = await this.restore();
    if (unreadable !== null) {
      throw new ThsError("ASP_THS_INTERNAL", `the quarantine of ${this.id} cannot be lifted: ${unreadable}`, {
        data: { provider: this.id },
      });
    }
    const had = this.health.liftQuarantine();
    if (had !== null) this.setState("exited");
    return had;
  }

  /** host §8: stop the session and launch nothing more for this identity. */
  private enterQuarantine(): void {
    if (this.conn !== null) this.retire(this.conn);
    this.setState("quarantined");
  }

  private onExit(conn: ProviderConnection, info: ExitInfo): void {
    if (this.conn !== conn) return;
    const wasInitialized = this.init !== null;
    this.conn = null;
    this.init = null;
    this.lastExitAt = performance.now();
    if (this.quarantined) return;
    if (wasInitialized && !this.closing) this.scheduleRestart();
    if (this.closing || this.stateValue === "shutting_down") this.setState("exited");
    else if (info.spawnError !== undefined) this.setState("unavailable");
    else if (this.stateValue !== "timed_out" && this.stateValue !== "malformed" && this.stateValue !== "incompatible")
      this.setState("crashed");
  }

  /** Kill a session and forget it now, so the next request starts a fresh process (after backoff). */
  private retire(conn: ProviderConnection): void {
    conn.kill();
    if (this.conn !== conn) return;
    const wasInitialized = this.init !== null;
    this.conn = null;
    this.init = null;
    this.lastExitAt = performance.now();
    if (wasInitialized) this.scheduleRestart();
  }

  /**
   * Restart a provider that was healthy before it failed, in the background after the backoff,
   * so the next request does not pay for the launch. A provider that never initialized is only
   * restarted on demand (no busy restart loop).
   */
  private scheduleRestart(): void {
    if (this.closing || this.quarantined || this.restartTimer !== null) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      void this.ensure(performance.now() + this.timings.initializeTimeoutMs);
    }, this.backoffMs());
    this.restartTimer.unref();
  }

  private backoffMs(): number {
    if (this.consecutiveFailures === 0 || this.launches === 0) return 0;
    const delay = this.timings.restartBackoffMs * 2 ** (this.consecutiveFailures - 1);
    return Math.min(delay, this.timings.restartBackoffMaxMs);
  }

  /** Make sure the provider runs and is initialized (launching or restarting it), within the deadline. */
  async ensure(deadlineAt: number): Promise<{ ok: true } | { ok: false; failClass: FailClass; detail: string }> {
    if (this.closing) return { ok: false, failClass: "unavailable", detail: "the host is closing" };
    const unreadable = await this.restore();
    if (unreadable !== null) return { ok: false, failClass: "unavailable", detail: unreadable };
    if (this.quarantined) return { ok: false, failClass: "quarantined", detail: "the provider is quarantined" };
    if (this.conn !== null && this.init !== null) return { ok: true };
    if (this.restartTimer !== null) {
      clearTimeout(this.restartTimer);
      this.restartTimer = null;
    }
    this.starting ??= this.start(deadlineAt).finally(() => {
      this.starting = null;
    });
    const left = deadlineAt - performance.now();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<{ ok: false; failClass: FailClass; detail: string }>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, failClass: "timed_out", detail: "the provider did not start within the budget" }),
        Math.max(1, left),
      );
    });
    try {
      return await Promise.race([this.starting, expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async start(deadlineAt: number): Promise<{ ok: true } | { ok: false; failClass: FailClass; detail: string }> {
    const wait = this.lastExitAt + this.backoffMs() - performance.now();
    if (wait > 0) {
      if (performance.now() + wait >= deadlineAt) {
        return {
          ok: false,
          failClass: "unavailable",
          detail: `restart backoff (${Math.round(wait)} ms) exceeds the budget`,
        };
      }
      await new Promise((r) => setTimeout(r, wait));
    }
    // Invariant 4: what runs is what was verified, at every launch and restart.
    const refused = this.provider.verifyLaunch?.() ?? null;
    if (refused !== null) {
      this.setState("unavailable");
      return {
        ok: false,
        failClass: "integrity_unverified",
        detail: this.fail("integrity_unverified", refused, "unavailable").detail,
      };
    }
    const m = this.provider.manifest;
    const requested: LaunchSpec = {
      executable: m.executable,
      args: m.args,
      cwd: m.cwd,
      env: launchEnvironment(m, this.env),
    };
    // host §3: every launch goes through the host's sandbox; what it enforced is recorded as is.
    const { spec, record } = await this.confine(requested);
    if (this.closing) return { ok: false, failClass: "unavailable", detail: "the host is closing" };
    this.launchRecord = record;
    if (this.launches > 0) this.health.restarted();
    this.launches++;
    this.sessionCallbacks = 0;
    const conn = ProviderConnection.launch(spec, this.budgets.maxResponseBytes, (info) => this.onExit(conn, info));
    this.conn = conn;
    this.setState("launched");
    conn.connection.onRequest(METHODS.readBlob, (params: unknown) => this.readBlob(params));
    conn.connection.onRequest(METHODS.readTree, (params: unknown) => this.readTree(params));
    this.setState("initializing");
    const timeout = Math.min(this.timings.initializeTimeoutMs, Math.max(1, deadlineAt - performance.now()));
    const res = await conn.call<unknown>(
      METHODS.initialize,
      {
        protocolVersion: PROTOCOL_VERSION,
        host: { name: this.host.name, version: this.host.version },
        processId: process.pid,
      },
      timeout,
    );
    const refuse = (failClass: FailClass, state: ProviderState, detail: string) => {
      this.setState(state);
      this.retire(conn);
      const f = this.fail(failClass, detail, state);
      return { ok: false as const, failClass, detail: f.detail };
    };
    if (!res.ok) return refuse(...this.classify(res.failure, conn));
    const valid = validate("protocol-initialize-result", res.value);
    if (!valid.ok) {
      const e = valid.errors[0];
      return refuse("malformed", "malformed", `initialize result is invalid: ${e?.pointer || "/"} ${e?.message ?? ""}`);
    }
    const result = valid.value;
    if (majorOf(result.protocolVersion) !== majorOf(PROTOCOL_VERSION)) {
      return refuse(
        "incompatible",
        "incompatible",
        `provider speaks protocol ${result.protocolVersion}, the host ${PROTOCOL_VERSION}`,
      );
    }
    if (result.provider.id !== m.id || result.provider.version !== m.version) {
      return refuse(
        "incompatible",
        "incompatible",
        `provider says it is ${result.provider.id}@${result.provider.version}, the trusted manifest pins ${m.id}@${m.version}`,
      );
    }
    this.init = result;
    conn.notify(METHODS.initialized, { grants: this.grants } satisfies InitializedParams);
    this.setState("initialized");
    return { ok: true };
  }

  private confine(spec: LaunchSpec): Promise<{ spec: LaunchSpec; record: LaunchRecord }> {
    if (this.launcher !== undefined) return this.launcher.launch(spec, this.provider.manifest);
    return Promise.resolve({
      spec,
      record: {
        mode: "advisory",
        mechanism: PLAIN_SUBPROCESS,
        sandbox: null,
        directWrite: true,
        reason: "no sandbox plugin granted: a plain subprocess can write the worktree",
      },
    });
  }

  private classify(f: CallFailure, conn: ProviderConnection): [FailClass, ProviderState, string] {
    const stderr = conn.stderr.trim().split("\n").slice(-1)[0];
    const tail = stderr ? ` (stderr: ${stderr.slice(0, 200)})` : "";
    switch (f.kind) {
      case "timeout":
        this.health.timedOut();
        return ["timed_out", "timed_out", f.detail];
      case "cancelled":
        return ["cancelled", "cancelled", f.detail];
      case "exited":
        return conn.exit?.spawnError !== undefined
          ? ["unavailable", "unavailable", f.detail]
          : ["crashed", "crashed", `${f.detail}${tail}`];
      case "oversize":
      case "framing":
      case "unparseable":
        return ["malformed", "malformed", f.detail];
      case "response-error":
        if (f.code === PROTOCOL_ERRORS.unsupported || f.code === PROTOCOL_ERRORS.methodNotFound)
          return ["unsupported", "degraded", `error ${f.code}: ${f.detail}`];
        if (f.code === PROTOCOL_ERRORS.requestCancelled) return ["cancelled", "cancelled", f.detail];
        return ["errored", "degraded", `error ${f.code}: ${f.detail}`];
    }
  }

  /** A failed request: classified, the session retired when it can no longer be trusted, counted. */
  private callFailed(failure: CallFailure, conn: ProviderConnection, family: CapabilityFamily) {
    const [failClass, state, detail] = this.classify(failure, conn);
    if (state === "timed_out" || state === "malformed" || state === "cancelled") {
      this.setState(state);
      this.retire(conn);
    }
    return this.fail(failClass, detail, state, family);
  }

  private scopeFor(params: unknown, kind: "blob" | "tree"): RequestScope {
    const schema = kind === "blob" ? "protocol-read-blob-params" : "protocol-read-tree-params";
    const valid = validate(schema, params);
    if (!valid.ok) throw new ResponseError(PROTOCOL_ERRORS.invalidParams, `invalid ${schema.replace("protocol-", "")}`);
    const scope = this.scopes.get(valid.value.requestId);
    if (scope === undefined) {
      throw new ResponseError(PROTOCOL_ERRORS.unknownRequest, `no live request ${valid.value.requestId}`);
    }
    scope.callbacks++;
    this.sessionCallbacks++;
    if (scope.callbacks > scope.callbackLimit || this.sessionCallbacks > this.budgets.callbacksPerSession) {
      scope.overBudget = true;
      throw new ResponseError(PROTOCOL_ERRORS.callbackBudgetExceeded, "callback budget exceeded");
    }
    return scope;
  }

  private async readBlob(params: unknown) {
    const scope = this.scopeFor(params, "blob");
    const digest = (params as { digest: Digest }).digest;
    if (!(await scope.view.contains("blob", digest))) {
      scope.outside.push(digest);
      throw new ResponseError(PROTOCOL_ERRORS.outOfBaseline, `${digest} is not a blob of this request's baseline`);
    }
    const bytes = await scope.view.readBlob(digest);
    scope.reads.add(digest);
    return { digest, size: bytes.byteLength, base64: Buffer.from(bytes).toString("base64") };
  }

  private async readTree(params: unknown) {
    const scope = this.scopeFor(params, "tree");
    const digest = (params as { digest: Digest }).digest;
    if (!(await scope.view.contains("tree", digest))) {
      scope.outside.push(digest);
      throw new ResponseError(PROTOCOL_ERRORS.outOfBaseline, `${digest} is not a tree of this request's baseline`);
    }
    const tree = await scope.view.readTree(digest);
    return { digest, entries: tree.entries.map((e) => ({ name: e.name, mode: e.mode, digest: e.digest })) };
  }

  /**
   * Run `check/assess` under the deadline: validate the answer (schema and no host-owned
   * field), check its freshness binding, re-issue once when stale and time remains.
   */
  async assess(
    params: Omit<AssessParams, "requestId" | "deadlineMs">,
    view: ContentView,
    deadlineAt: number,
    signal?: AbortSignal,
  ): Promise<AssessOutcome> {
    const ready = await this.ensure(deadlineAt);
    if (!ready.ok) {
      if (ready.failClass === "quarantined") {
        this.health.failed("quarantined");
        return { kind: "failed", ...ready, state: "quarantined", declaredSources: [] };
      }
      if (this.stateValue === "quarantined") {
        return {
          kind: "failed",
          failClass: ready.failClass,
          detail: ready.detail,
          state: "quarantined",
          declaredSources: [],
        };
      }
      if (ready.failClass === "unavailable" && this.conn === null) this.setState("unavailable");
      return { kind: "failed", ...ready, state: this.stateValue, declaredSources: [] };
    }
    const conn = this.conn;
    const init = this.init;
    if (conn === null || init === null) {
      return {
        kind: "failed",
        failClass: "unavailable",
        detail: "the provider is not running",
        state: this.stateValue,
        declaredSources: [],
      };
    }
    if (!init.capabilities.includes("check")) {
      return this.fail("unsupported", "the provider did not declare the check capability", "degraded", "check");
    }
    let staleDetail = "";
    for (let attempt = 0; attempt < 2; attempt++) {
      const left = Math.floor(deadlineAt - performance.now());
      if (left <= 0) return this.fail("timed_out", "no budget left for check/assess", "timed_out", "check");
      const requestId = `${this.id}#${++this.requestCounter}`;
      const scope = new RequestScope(requestId, view, this.budgets.callbacksPerRequest);
      this.scopes.set(requestId, scope);
      this.setState("active", "check");
      this.stateValue = "active";
      const res = await conn.call<unknown>(
        METHODS.checkAssess,
        { ...params, requestId, deadlineMs: left },
        left,
        signal,
      );
      this.scopes.delete(requestId);
      if (!res.ok) return this.callFailed(res.failure, conn, "check");
      if (scope.overBudget) {
        return this.fail(
          "incomplete",
          `callback budget exceeded after ${scope.callbacks} callbacks`,
          "degraded",
          "check",
        );
      }
      const valid = validateAssessment(res.value);
      if (!valid.ok) {
        const e = valid.errors[0];
        return this.fail(
          "malformed",
          `assessment is invalid: ${e?.pointer || "/"} ${e?.message ?? ""}`,
          "malformed",
          "check",
        );
      }
      const a = valid.value;
      if (a.requestId !== requestId) {
        return this.fail(
          "malformed",
          `assessment answers request ${a.requestId}, not ${requestId}`,
          "malformed",
          "check",
        );
      }
      if (a.provider.id !== this.provider.manifest.id || a.provider.version !== this.provider.manifest.version) {
        return this.fail(
          "malformed",
          `assessment claims to come from ${a.provider.id}@${a.provider.version}`,
          "malformed",
          "check",
        );
      }
      staleDetail =
        scope.outside.length > 0
          ? `read outside the baseline refused: ${scope.outside[0]}`
          : (freshnessMismatch(
              {
                baseline: params.baseline as Digest,
                changeset: (params.changeset?.digest ?? null) as Digest | null,
                environment: (params.environment?.tree ?? null) as Digest | null,
              },
              scope.reads,
              a.validAsOf,
            ) ?? "");
      if (staleDetail !== "") continue; // host §5: re-issue once within budget
      // host §2, §8: only a complete answer that misses nothing is a successful run.
      const quarantinedNow = this.health.assessed(a, res.ms);
      this.stateValue = "initialized";
      this.families.set("check", outcomeOfAssessment(a) === "complete" ? "initialized" : "degraded");
      for (const f of this.provider.manifest.capabilities) if (f !== "check") this.families.set(f, "initialized");
      if (quarantinedNow) this.enterQuarantine();
      return { kind: "ok", assessment: a, declaredSources: this.declaredSources, reissued: attempt > 0, ms: res.ms };
    }
    this.stateValue = "initialized";
    return this.fail("stale", `${staleDetail} (after one re-issue)`, "degraded", "check");
  }

  /** Launch and initialize now (warm start); failures are recorded, never thrown. */
  async warm(timeoutMs: number): Promise<void> {
    await this.ensure(performance.now() + timeoutMs);
  }

  /** Per-provider status for `host/status` (host §2, §8). */
  status(): ProviderStatus {
    const families: Partial<Record<CapabilityFamily, ProviderState>> = {};
    for (const f of CAPABILITY_FAMILIES) {
      if (!this.provider.manifest.capabilities.includes(f)) continue;
      families[f] = this.quarantined ? "quarantined" : (this.families.get(f) ?? this.stateValue);
    }
    return {
      id: this.provider.manifest.id,
      version: this.provider.manifest.version,
      state: this.stateValue,
      families,
      ...this.health.figures(),
    };
  }

  /** Shut the provider down (bounded); a provider that exits mid-shutdown is recorded as exited. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    await this.starting;
    const conn = this.conn;
    if (conn === null) {
      if (!this.quarantined) this.setState("exited");
      return;
    }
    this.setState("shutting_down");
    await conn.shutdown(this.timings.shutdownTimeoutMs);
    if (!this.quarantined) this.setState("exited");
    this.conn = null;
  }
  /**
   * Run `edit/propose` under the deadline with the request's baseline view and callbacks, like
   * {@link assess}. An edit-only provider is launched here, on first use. The answer is returned
   * raw: the host validates it as an EditPlan (apply/validate.ts), never this supervisor.
   */
  async propose(
    params: Omit<ProposeParams, "requestId" | "deadlineMs">,
    view: ContentView,
    deadlineAt: number,
    signal?: AbortSignal,
  ): Promise<ProposeOutcome> {
    const ready = await this.ensure(deadlineAt);
    if (!ready.ok) return { kind: "failed", failClass: ready.failClass, detail: ready.detail };
    const conn = this.conn;
    const init = this.init;
    if (conn === null || init === null) {
      return { kind: "failed", failClass: "unavailable", detail: "the provider is not running" };
    }
    if (!init.capabilities.includes("edit")) {
      const f = this.fail("unsupported", "the provider did not declare the edit capability", "degraded", "edit");
      return { kind: "failed", failClass: f.failClass, detail: f.detail };
    }
    const left = Math.floor(deadlineAt - performance.now());
    if (left <= 0) return { kind: "failed", failClass: "timed_out", detail: "no budget left for edit/propose" };
    const requestId = `${this.id}#${++this.requestCounter}`;
    const scope = new RequestScope(requestId, view, this.budgets.callbacksPerRequest);
    this.scopes.set(requestId, scope);
    this.setState("active", "edit");
    const res = await conn.call<unknown>(METHODS.editPropose, { ...params, requestId, deadlineMs: left }, left, signal);
    this.scopes.delete(requestId);
    if (!res.ok) {
      const f = this.callFailed(res.failure, conn, "edit");
      return { kind: "failed", failClass: f.failClass, detail: f.detail };
    }
    if (scope.overBudget) {
      const f = this.fail(
        "incomplete",
        `callback budget exceeded after ${scope.callbacks} callbacks`,
        "degraded",
        "edit",
      );
      return { kind: "failed", failClass: f.failClass, detail: f.detail };
    }
    this.stateValue = "initialized";
    this.families.set("edit", "initialized");
    return { kind: "ok", answer: res.value, reads: scope.reads, outside: scope.outside, ms: res.ms };
  }
}
