import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import {
  type AuditReceipt,
  CALL_SITES,
  CAPABILITY_FAMILIES,
  type CallSite,
  type CapabilityFamily,
  type DecisionEnvelope,
  type HostStatus,
  type ProviderState,
  validate,
} from "@asp/contracts";
import { type Clock, type Digest, type FactLog, type ObjectStore, TOKENS } from "@asp/evidence";
import {
  Applier,
  type ApplyOptions,
  type ApplyResult,
  type ProposeOptions,
  type ProposeResult,
} from "./apply/applier.js";
import type { Budgets, SupervisorTimings } from "./budgets.js";
import { ContentView } from "./content.js";
import { decide, type FailOpen, type ProviderEvaluation, type RequirementFailure } from "./decide.js";
import { inject, injectable } from "./di.js";
import { ThsError } from "./errors.js";
import { type Binding, FreshnessAuthority } from "./freshness.js";
import { QUARANTINE_RESET_FACT_KIND } from "./health.js";
import { type LaunchRecord, ProviderLauncher } from "./launcher.js";
import { candidatePolicyFailures } from "./policy-change.js";
import {
  achievedAssurance,
  authorityEvidence,
  initializedGrants,
  requiredRequirements,
  verifiedGrants,
} from "./policy-view.js";
import { appendDecision, buildReceipt } from "./receipts.js";
import { type AssessOutcome, type HostInfo, ProviderSupervisor } from "./supervisor.js";
import {
  type FailOpenSink,
  type HostPolicy,
  type IdSource,
  type ProviderSet,
  type SandboxSet,
  THS_TOKENS,
} from "./tokens.js";
import { manifestLocationsInside } from "./trusted-location.js";

/** Progress of one evaluation, for a spinner or log line. */
export type ProgressEvent =
  | { readonly phase: "baseline"; readonly baseline: string; readonly changes: number | null }
  | { readonly phase: "provider-start"; readonly provider: string }
  | { readonly phase: "provider-done"; readonly provider: string; readonly ok: boolean; readonly detail: string }
  | { readonly phase: "deciding" };

/** Options of {@link Host.evaluate}. */
export interface EvaluateOptions {
  /** The candidate repository folder (default: the current directory). */
  readonly repo?: string;
  /**
   * A git revision: the changeset is `base -> worktree`. Otherwise the trusted base: the
   * after-tree of the last allow at the gate call-site for this repository, else the empty tree.
   */
  readonly base?: string;
  /** Evaluate the whole tree without a changeset (default true for `sweep`). */
  readonly wholeTree?: boolean;
  /** Cancels every in-flight provider request (`$/cancelRequest`); they degrade as `cancelled`. */
  readonly signal?: AbortSignal;
  readonly onProgress?: (event: ProgressEvent) => void;
  /** Requirement-level failures found outside the providers (e.g. policy self-authorization, host §7). */
  readonly requirementFailures?: readonly RequirementFailure[];
  /**
   * The repository-relative path (or paths) of the repository's own (candidate) policy file. When
   * the change edits one, the candidate is assessed against the active policy and any
   * self-authorization attempt degrades coverage (host §7); it never decides this change.
   * `candidatePolicyPaths(config)` derives them from trusted configuration.
   */
  readonly candidatePolicyPath?: string | readonly string[];
  /**
   * Evaluate a hypothetical change built in the object store instead of the worktree (host §6
   * step 3, mediated apply): the changeset is `before -> after` and the after-tree is `after`.
   * The worktree is not snapshotted for it, and an allow never moves the trusted base.
   */
  readonly hypothetical?: { readonly before: Digest; readonly after: Digest };
}

/** What an evaluation returns: the envelope (already durable) and its receipt. */
export interface EvaluateResult {
  readonly envelope: DecisionEnvelope;
  readonly receipt: AuditReceipt;
  readonly failOpens: readonly FailOpen[];
}

/** One check provider's evaluation: what decide sees, what it answered, and how its process was launched. */
interface Evaluated {
  readonly eval: ProviderEvaluation;
  readonly outcome: AssessOutcome;
  readonly launch: LaunchRecord | null;
}

/** `host/capabilities`: per capability family, the providers offering it and their state. */
/** What {@link Host.resetQuarantine} did. */
export interface QuarantineReset {
  readonly provider: string;
  /** False when the provider was not quarantined: nothing changed and nothing was written. */
  readonly lifted: boolean;
  /** The consecutive failures the reset cleared (null when nothing was lifted). */
  readonly clearedFailures: number | null;
  /** The seq of the recorded reset (null when nothing was lifted). */
  readonly seq: number | null;
}

export type HostCapabilities = Record<CapabilityFamily, Array<{ readonly id: string; readonly state: ProviderState }>>;

/**
 * The Trusted Host Service (Core Profile): supervises providers, binds every request to a
 * baseline, collects assessments under budgets, decides, and writes the receipt before it
 * answers. Compose it with `composeHost`.
 */
@injectable()
export class Host {
  private readonly supervisors: ProviderSupervisor[];
  /** Propose, validate and apply (host §4, §6): serialized per repository. */
  private readonly applier: Applier;
  /** Launches every provider through the granted sandbox (host §3). */
  private readonly launcher: ProviderLauncher;
  private closed = false;
  /** Recent durations from "providers answered" to "receipt durable" (ms), newest last. */
  private readonly tails: number[] = [];

  constructor(
    @inject(THS_TOKENS.Policy) readonly policy: HostPolicy,
    @inject(THS_TOKENS.Providers) private readonly providerSet: ProviderSet,
    @inject(THS_TOKENS.Budgets) readonly budgets: Budgets,
    @inject(THS_TOKENS.Timings) timings: SupervisorTimings,
    @inject(THS_TOKENS.HostInfo) private readonly info: HostInfo,
    @inject(THS_TOKENS.LaunchEnv) env: Readonly<Record<string, string | undefined>>,
    @inject(THS_TOKENS.FailOpenSink) private readonly failOpenSink: FailOpenSink,
    @inject(THS_TOKENS.Ids) private readonly ids: IdSource,
    @inject(TOKENS.FactLog) readonly log: FactLog,
    @inject(TOKENS.ObjectStore) private readonly objects: ObjectStore,
    @inject(TOKENS.Clock) private readonly clock: Clock,
    @inject(FreshnessAuthority) private readonly freshness: FreshnessAuthority,
    @inject(THS_TOKENS.StoreId) private readonly storeId: string,
    /** Verified, granted sandbox plugins: launch confinement, staged apply and recovery (issue 13). */
    @inject(THS_TOKENS.Sandboxes) readonly sandboxes: SandboxSet,
    /** Where apply journals live (beside the store); `dir: null` for an in-memory store. */
    @inject(THS_TOKENS.ApplyJournalDir) readonly applyJournalDir: { readonly dir: string | null },
  ) {
    // The store folder is what its journal folder sits beside (`<store>.journal`); null in memory.
    const journal = applyJournalDir.dir;
    this.launcher = new ProviderLauncher(
      sandboxes.sandboxes,
      journal?.endsWith(".journal") === true ? journal.slice(0, -".journal".length) : null,
    );
    this.supervisors = providerSet.providers.map(
      // host §8: each supervisor restores its provider's stored health before its first launch.
      (p) =>
        new ProviderSupervisor(
          p,
          budgets,
          timings,
          info,
          initializedGrants(policy, p.manifest),
          env,
          log,
          this.launcher,
        ),
    );
    this.applier = new Applier({
      objects,
      log,
      clock,
      freshness,
      policy,
      editRetries: budgets.editRetries,
      proposeTimeoutMs: budgets.timeoutMs.gate,
      sandboxes,
      journalRoot: applyJournalDir.dir,
      supervisors: this.supervisors,
      evaluate: (callSite, options) => this.evaluate(callSite, options),
    });
  }

  /**
   * Launch and initialize now, in parallel, every provider whose trusted manifest declares
   * `check` (failures are recorded, not thrown). Edit- and inspect-only providers are launched
   * when first used: a process that is never asked anything is never started.
   */
  async warm(timeoutMs = 10_000): Promise<void> {
    await Promise.all(
      this.supervisors.filter((s) => s.provider.manifest.capabilities.includes("check")).map((s) => s.warm(timeoutMs)),
    );
  }

  /** `asp check`: the interactive call-site (one whole-host time ceiling). */
  check(options: EvaluateOptions = {}): Promise<EvaluateResult> {
    return this.evaluate("interactive", options);
  }

  /** `asp gate`: the gate call-site (never allow on any failure). */
  gate(options: EvaluateOptions = {}): Promise<EvaluateResult> {
    return this.evaluate("gate", options);
  }

  /** `asp sweep`: the whole tree at the sweep call-site. */
  sweep(options: EvaluateOptions = {}): Promise<EvaluateResult> {
    return this.evaluate("sweep", { wholeTree: true, ...options });
  }

  /**
   * Evaluate the repository at `callSite` and return the decision envelope, after its receipt
   * is durable in the fact log.
   * @throws ThsError `ASP_THS_BAD_REQUEST` (unknown call-site), `ASP_THS_CLOSED`; EvidenceError
   *   `ASP_EVIDENCE_IO` / `ASP_EVIDENCE_GIT_FAILED` when the repository or `base` cannot be read.
   */
  async evaluate(callSite: CallSite, options: EvaluateOptions = {}): Promise<EvaluateResult> {
    if (this.closed) throw new ThsError("ASP_THS_CLOSED", "the host is closed");
    if (!(CALL_SITES as readonly string[]).includes(callSite)) {
      throw new ThsError("ASP_THS_BAD_REQUEST", `unknown call-site ${JSON.stringify(callSite)}`, {
        data: { callSite },
      });
    }
    // host §8: the interactive budget is one ceiling for the whole evaluation, from the snapshot to
    // the durable receipt; gate and sweep bound each provider's call.
    const started = performance.now();
    const timeout = this.budgets.timeoutMs[callSite];
    const interactiveDeadline = started + timeout - this.tailReserve(timeout);
    const repo = resolve(options.repo ?? process.cwd());
    // A provider launched from now on never sees this repository (deny list of the sandbox).
    this.launcher.denyRepository(repo);
    const progress = options.onProgress ?? (() => {});
    const policy = this.policy;
    const hypo = options.hypothetical;
    if (hypo === undefined) await this.applier.recover(repo);
    const binding: Binding =
      hypo !== undefined
        ? await this.freshness.hypothetical(hypo.before, hypo.after, repo)
        : await this.freshness.issue(repo, {
            ...(options.base === undefined ? {} : { base: options.base }),
            wholeTree: options.wholeTree === true,
          });
    progress({ phase: "baseline", baseline: binding.baseline, changes: binding.changeset?.changes.length ?? null });
    const required = requiredRequirements(policy, callSite);
    const policyFailures =
      options.candidatePolicyPath === undefined
        ? []
        : await candidatePolicyFailures(policy, binding.changeset, options.candidatePolicyPath, this.objects);
    const cs = binding.changeset;
    const wireChangeset =
      cs === null
        ? null
        : {
            digest: cs.digest,
            base: cs.base,
            after: cs.after,
            changes: cs.changes.map((c) => ({
              path: c.path,
              kind: c.kind,
              before: c.before?.digest ?? null,
              after: c.after?.digest ?? null,
            })),
          };
    // host §9: the dependency environment is read through the same callbacks, never part of the change.
    const env = binding.environment;
    const wireEnvironment = env === null ? undefined : { tree: env.tree, roots: [...env.roots] };
    const roots = [binding.baseline, ...(cs === null ? [] : [cs.base]), ...(env === null ? [] : [env.tree])];
    const view = new ContentView(this.objects, roots);

    // check/assess goes only to providers whose trusted manifest declares `check`; an edit- or
    // inspect-only provider is not a check source, so it neither runs nor degrades check coverage.
    const checkers = this.supervisors.filter((s) => s.provider.manifest.capabilities.includes("check"));
    const evaluations = await Promise.all(
      checkers.map(async (sup): Promise<Evaluated> => {
        const m = sup.provider.manifest;
        const grants = verifiedGrants(policy, m, callSite);
        progress({ phase: "provider-start", provider: m.id });
        let outcome: AssessOutcome;
        // host §2: never launched from the mutable candidate repository: executable, arguments that
        // name files, and cwd, after resolving symlinks (a folder named `..x` inside is inside).
        const inside = manifestLocationsInside(repo, m);
        if (inside.length > 0) {
          outcome = {
            kind: "failed",
            failClass: "unavailable",
            detail:
              `launch refused: ${inside.map((l) => `${l.field} ${l.path}`).join(", ")} inside the candidate repository`.slice(
                0,
                1900,
              ),
            state: "unavailable",
            declaredSources: [],
          };
        } else {
          const deadlineAt = callSite === "interactive" ? interactiveDeadline : performance.now() + timeout;
          outcome = await sup.assess(
            {
              callSite,
              baseline: binding.baseline,
              changeset: wireChangeset,
              requirements: grants.map((g) => g.requirement),
              ...(wireEnvironment === undefined ? {} : { environment: wireEnvironment }),
            },
            view,
            deadlineAt,
            options.signal,
          );
        }
        progress({
          phase: "provider-done",
          provider: m.id,
          ok: outcome.kind === "ok",
          detail: outcome.kind === "ok" ? outcome.assessment.status : `${outcome.failClass}: ${outcome.detail}`,
        });
        // host §1: identity and integrity are measured (a plugin's verified signature and digest, a
        // configured provider's root digest equal to its pin), never taken from the initialize reply.
        // A launch refused because the root no longer measures as pinned fails the axis too.
        // host §3: how the provider's process was really launched; nothing ran if it never was.
        const launch = sup.launched;
        const measured =
          outcome.kind === "failed" && outcome.failClass === "integrity_unverified"
            ? "failed"
            : sup.provider.integrityVerified
              ? "verified"
              : sup.provider.origin === "config" && m.root !== undefined
                ? "failed"
                : "unverified";
        return {
          outcome,
          eval: {
            provider: { id: m.id, version: m.version, digest: m.digest },
            capability: "check",
            state: outcome.kind === "ok" ? sup.state : outcome.state,
            declaredSources: outcome.declaredSources.length > 0 ? outcome.declaredSources : m.diagnosticSources,
            grants,
            authority: authorityEvidence(policy, m, callSite, {
              identity: measured,
              integrity: measured,
              isolated: launch?.mode === "isolated",
            }),
            outcome:
              outcome.kind === "ok"
                ? { kind: "ok", assessment: outcome.assessment }
                : { kind: "failed", failClass: outcome.failClass, detail: outcome.detail },
            directWrite: launch?.directWrite ?? false,
            isolation: launch?.mode ?? "advisory",
          },
          launch,
        };
      }),
    );

    // Providers refused before supervision (e.g. by plugin-host) still count as offered, each
    // under an id of its own: one evaluation never holds two providers under one id, so a
    // refusal can neither stand in for a supervised provider nor stop the decision.
    const ids = new Set(evaluations.map((e) => e.eval.provider.id));
    const distinct = (wanted: string): string => {
      let id = wanted;
      for (let n = 2; ids.has(id); n++) id = `${[...wanted].slice(0, 248).join("")}#${n}`;
      ids.add(id);
      return id;
    };
    const refused: ProviderEvaluation[] = this.providerSet.refused
      .map((r) => ({ r, id: distinct(r.id) }))
      .map(({ r, id }) => ({
        provider: { id, version: "0.0.0", digest: `sha256:${"0".repeat(64)}` },
        capability: "check",
        state: "unavailable",
        declaredSources: [],
        grants: [],
        authority: {
          providerId: id,
          providerVersion: "0.0.0",
          providerDigest: `sha256:${"0".repeat(64)}`,
          identity: "failed",
          integrity: "failed",
          conformance: "unverified",
          isolation: "unverified",
          authorityGrant: "unverified",
          grants: [],
        },
        outcome: { kind: "failed", failClass: r.reason, detail: r.detail },
        directWrite: false,
      }));

    // THREAT-MODEL invariant 6: the worktree the decision describes is the worktree the caller gets.
    // A write during evaluation (by a provider or anyone else) makes every required answer moot.
    const tailStarted = performance.now();
    // A hypothetical after-tree lives in the store only: the apply re-checks the worktree itself.
    const movedTo = hypo !== undefined ? null : await this.freshness.moved(repo, binding);
    // Dependency content is evidence too (host §9): a write into node_modules mid-evaluation (a
    // provider without a sandbox can) moves the environment the answers were bound to.
    const envMovedTo = await this.freshness.environmentMoved(repo, binding);
    const moves = [
      ...(movedTo === null
        ? []
        : [`the worktree changed during evaluation: baseline ${binding.baseline}, now ${movedTo}`]),
      ...(envMovedTo === null
        ? []
        : [
            `the dependency environment changed during evaluation: ${binding.environment?.tree ?? "none"}, now ${envMovedTo}`,
          ]),
    ];
    const worktreeFailures: RequirementFailure[] =
      moves.length === 0
        ? []
        : required.map((r) => ({
            requirement: r.id,
            failClass: "worktree_changed" as const,
            detail: moves.join("; "),
          }));

    progress({ phase: "deciding" });
    const providers = [...evaluations.map((e) => e.eval), ...refused];
    // host §3: every process this host has launched (granted or not, this call-site's or not: an
    // unconfined one can write the worktree or the store, or leave a child that does) bounds the
    // assurance of this decision.
    const launches = this.supervisors.flatMap((s) => (s.launched === null ? [] : [{ id: s.id, record: s.launched }]));
    const decisionId = this.ids.next("decision");
    const receiptId = this.ids.next("receipt");
    const { envelope: decided, failOpens } = decide({
      callSite,
      policy,
      // host §2: compared with the policy's host pin. This host cannot measure its own artifact.
      host: { name: this.info.name, version: this.info.version, digest: null },
      baseline: binding.baseline,
      changeset: cs?.digest ?? null,
      required,
      providers,
      assurance: achievedAssurance(launches.map((l) => l.record)),
      requirementFailures: [...(options.requirementFailures ?? []), ...policyFailures, ...worktreeFailures],
      decisionId,
      decidedAt: this.clock.now().toISOString(),
    });
    const envelope: DecisionEnvelope = {
      ...decided,
      assurance: {
        ...decided.assurance,
        providers: [
          ...launches.map(({ id, record }) => providerAssurance(id, record)),
          ...evaluations
            .filter((e) => e.launch === null)
            .map((e) => providerAssurance(e.eval.provider.id, null, e.outcome)),
        ],
      },
      receipt: { id: receiptId, location: `asp-store:${this.storeId}/receipts/${receiptId}` },
      ...(env === null ? {} : { environment: { tree: env.tree, roots: [...env.roots], files: env.files } }),
      // THREAT-MODEL invariant 11: what the judged worktree left out is reported, never silent.
      ...(binding.judged === undefined || (binding.judged.leftOut === 0 && binding.judged.submodules.length === 0)
        ? {}
        : { judged: { leftOut: binding.judged.leftOut, submodules: [...binding.judged.submodules] } }),
    };
    const receipt = buildReceipt(envelope, {
      receiptId,
      validAsOf: evaluations.flatMap((e) =>
        e.outcome.kind === "ok" ? [{ provider: e.eval.provider.id, validAsOf: e.outcome.assessment.validAsOf }] : [],
      ),
      provenance: evaluations.map((e) => ({
        provider: { id: e.eval.provider.id, version: e.eval.provider.version },
        digest: e.eval.provider.digest,
        sources: [...e.eval.declaredSources],
        // What the provider says answered (e.g. the project's compiler version): its claim, bound to its digest.
        ...(e.outcome.kind === "ok" && e.outcome.assessment.tool !== undefined
          ? { tool: { ...e.outcome.assessment.tool } }
          : {}),
      })),
      failOpens,
    });
    const envOk = validate("verdict", envelope);
    const rcptOk = validate("audit-receipt", receipt);
    if (!envOk.ok || !rcptOk.ok) {
      const errors = envOk.ok ? (rcptOk.ok ? [] : rcptOk.errors) : envOk.errors;
      throw new ThsError("ASP_THS_INTERNAL", `the host built an invalid ${envOk.ok ? "receipt" : "envelope"}`, {
        data: { errors },
      });
    }
    // host §1 / DESIGN §8: decision + receipt durable in one synced batch BEFORE the envelope is returned;
    // host §8: provider health (failures, quarantine, latency) in the same batch, so one-shot hosts accumulate it.
    // A gate allow moves the trusted base only on the head this evaluation was bound on.
    await appendDecision(this.log, envelope, receipt, hypo !== undefined ? null : repo, {
      facts: this.supervisors.flatMap((s) => s.healthFacts()),
      ...(binding.trustedBaseSeq === undefined ? {} : { trustedBaseSeq: binding.trustedBaseSeq }),
    });
    this.recordTail(performance.now() - tailStarted);
    for (const f of failOpens) this.failOpenSink.log({ ...f, decisionId });
    return { envelope, receipt, failOpens };
  }

  /**
   * What the interactive ceiling keeps back for the work after the providers answer (re-snapshot,
   * decide, durable append): the slowest of the recent tails, at least 5% and at most half of the
   * budget, so a slow store shortens the providers' share instead of overrunning the budget.
   */
  private tailReserve(timeout: number): number {
    const slowest = this.tails.length === 0 ? 0 : Math.max(...this.tails);
    return Math.min(Math.max(slowest, timeout * 0.05), timeout * 0.5);
  }

  private recordTail(ms: number): void {
    this.tails.push(ms);
    if (this.tails.length > 8) this.tails.shift();
  }

  /**
   * Lift a provider's quarantine (host §8): an operator's reset, after the cause (a slow start on
   * a loaded machine, a fixed plugin) is gone. The provider launches again on the next request,
   * its consecutive failures from zero; its other figures are kept. The reset (who asked, and
   * the failures it cleared) and the cleared health are appended in one synced batch before this
   * resolves. A provider that is not quarantined is left as it is and nothing is written.
   *
   * @param by Who asked (a token id, an operator's name): recorded with the reset.
   * @throws ThsError `ASP_THS_UNKNOWN_PROVIDER` (`data.provider`, `data.known`) for an id the host
   *   does not run; `ASP_THS_INTERNAL` when the provider's stored health cannot be read.
   */
  async resetQuarantine(providerId: string, by: string): Promise<QuarantineReset> {
    const sup = this.supervisors.find((s) => s.id === providerId);
    if (sup === undefined) {
      const known = this.supervisors.map((s) => s.id);
      throw new ThsError(
        "ASP_THS_UNKNOWN_PROVIDER",
        `the host runs no provider ${JSON.stringify(providerId)}; it runs ${known.join(", ") || "none"}`,
        {
          data: { provider: providerId, known },
        },
      );
    }
    const had = await sup.liftQuarantine();
    if (had === null) return { provider: providerId, lifted: false, clearedFailures: null, seq: null };
    const [entry] = await this.log.append([
      {
        kind: QUARANTINE_RESET_FACT_KIND,
        record: { $$type: "@asp/QuarantineReset", version: 1, provider: { ...sup.identity }, by, clearedFailures: had },
        index: [{ name: "provider", value: providerId }],
      },
      ...sup.healthFacts(),
    ]);
    return { provider: providerId, lifted: true, clearedFailures: had, seq: entry?.seq ?? null };
  }

  /** `host/status`: per-provider and per-family state, health, latency, timeouts and coverage. */
  status(): HostStatus {
    const capabilities = Object.fromEntries(
      CAPABILITY_FAMILIES.map((f) => [
        f,
        this.supervisors
          .filter((s) => s.provider.manifest.capabilities.includes(f) && s.state !== "quarantined")
          .map((s) => s.id),
      ]),
    ) as HostStatus["capabilities"];
    return {
      $$type: "@asp/HostStatus",
      version: 1,
      hostVersion: this.info.version,
      policyDigest: this.policy.digest,
      providers: this.supervisors.map((s) => s.status()),
      capabilities,
      generatedAt: this.clock.now().toISOString(),
    };
  }

  /** `host/capabilities`: per family, which providers offer it and in which state. */
  capabilities(): HostCapabilities {
    const out = { inspect: [], check: [], edit: [] } as HostCapabilities;
    for (const s of this.supervisors) {
      const st = s.status();
      for (const f of CAPABILITY_FAMILIES) {
        const state = st.families[f];
        if (state !== undefined) out[f].push({ id: s.id, state });
      }
    }
    return out;
  }

  /** Shut every provider down (bounded per provider). Idempotent. The store is closed by its owner. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.supervisors.map((s) => s.close()));
  }
  /**
   * Ask an edit provider for a plan against the repository's baseline (`edit/propose`), validate
   * it (host §6: a coded `ASP_APPLY_*` rejection for anything that is not a structured EditPlan
   * bound to that baseline) and store the plan or its rejection in the fact log (kind
   * `ths.edit-proposal`, indexed by `proposalId`) before returning. Nothing is written to the
   * worktree. The returned `proposalId` is the host's, never the provider's.
   * @throws ThsError `ASP_THS_CLOSED`; EvidenceError when the repository or the store cannot be read.
   * @example
   * ```ts
   * const p = await host.propose({ repo, intent: { kind: "replace", arguments: { path: "a.ts", oldText: "1", newText: "2" } } });
   * const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
   * ```
   */
  async propose(options: ProposeOptions): Promise<ProposeResult> {
    if (this.closed) throw new ThsError("ASP_THS_CLOSED", "the host is closed");
    return this.applier.propose(options, resolve(options.repo ?? process.cwd()));
  }

  /**
   * Apply a stored proposal on explicit intent (host §6): re-validate it against the worktree as
   * it is (3-way merge or bounded re-proposal when a touched path moved), run the required checks
   * of `callSite` (default `gate`) on the hypothetical after-tree exactly as a gate does, and
   * publish only on allow: through a granted `sandbox:staged_snapshot` sandbox with a journal, or
   * by the host's own temp-file-and-rename writes (`rollback_attempted`). The apply receipt is
   * durable in the fact log (kind `ths.apply-receipt`) before it is returned. Denied or
   * indeterminate: `applied: false`, `baselineAfter: null`, nothing written. A proposal applies
   * at most once (`ASP_APPLY_ALREADY_APPLIED`). Applies on one repository are serialized.
   * @throws ThsError `ASP_APPLY_UNKNOWN_PROPOSAL`, `ASP_THS_BAD_REQUEST` (proposal of another
   *   repository or unknown call-site), `ASP_THS_CLOSED`.
   */
  async apply(options: ApplyOptions): Promise<ApplyResult> {
    if (this.closed) throw new ThsError("ASP_THS_CLOSED", "the host is closed");
    return this.applier.apply(options, resolve(options.repo ?? process.cwd()));
  }

  /**
   * Apply several proposals of one repository (host §4): two that touch overlapping blobs never
   * both apply. The first of an overlapping pair applies; the other then meets the moved baseline
   * and is merged, re-proposed against it, or rejected with `ASP_APPLY_CONFLICT`. One result per
   * id, in the order given.
   * @throws ThsError `ASP_APPLY_UNKNOWN_PROPOSAL`, `ASP_THS_BAD_REQUEST`, `ASP_THS_CLOSED`.
   */
  async applyMany(
    proposalIds: readonly string[],
    options: Omit<ApplyOptions, "proposalId"> = {},
  ): Promise<ApplyResult[]> {
    if (this.closed) throw new ThsError("ASP_THS_CLOSED", "the host is closed");
    return this.applier.applyMany(proposalIds, options, resolve(options.repo ?? process.cwd()));
  }
}

/** One provider's line of `assurance.providers[]`: how its process was launched, or why it never was. */
function providerAssurance(
  id: string,
  record: LaunchRecord | null,
  outcome?: AssessOutcome,
): NonNullable<DecisionEnvelope["assurance"]["providers"]>[number] {
  if (record === null) {
    const why = outcome?.kind === "failed" ? `${outcome.failClass}: ${outcome.detail}` : "never launched";
    return {
      provider: id,
      mode: "advisory",
      mechanism: "not launched",
      sandbox: null,
      directWrite: false,
      reason: `not launched (${why})`.slice(0, 2000),
    };
  }
  return {
    provider: id,
    mode: record.mode,
    mechanism: record.mechanism.slice(0, 500),
    sandbox: record.sandbox === null ? null : { id: record.sandbox.id, digest: record.sandbox.digest },
    directWrite: record.directWrite,
    ...(record.reason === undefined ? {} : { reason: record.reason.slice(0, 2000) }),
  };
}
