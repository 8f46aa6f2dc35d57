import { createHash, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { findEditConflicts } from "@asp/arbitration";
import {
  type ApplyReceipt,
  type AssuranceMode,
  type CallSite,
  type DecisionEnvelope,
  type EditPlan,
  type ProposeParams,
  TRANSACTION_GUARANTEES,
  validate,
} from "@asp/contracts";
import type { Clock, Digest, FactLog, ObjectStore } from "@asp/evidence";
import type { Sandbox } from "@asp/plugin-host";
import { ContentView } from "../content.js";
import { ThsError } from "../errors.js";
import { type FreshnessAuthority, repoIdentity } from "../freshness.js";
import type { EvaluateOptions, EvaluateResult } from "../host.js";
import { assuranceAtLeast, authorityEvidence } from "../policy-view.js";
import type { ProviderSupervisor } from "../supervisor.js";
import type { HostPolicy, SandboxSet } from "../tokens.js";
import { diskDrift } from "./disk.js";
import { buildHypothetical, type PlannedWrite } from "./hypothetical.js";
import { mergeText } from "./merge.js";
import { KeyedMutex } from "./mutex.js";
import { lookupPath, type PathAfter, treeWith } from "./tree.js";
import { type ApplyRejection, pathEscape, validatePlan } from "./validate.js";
import { type FileWrite, writeDirect } from "./write.js";

/** Fact kinds of mediated apply (host §6), each indexed by `proposalId`. */
export const APPLY_FACT_KINDS = Object.freeze({
  proposal: "ths.edit-proposal",
  receipt: "ths.apply-receipt",
  /** Appended before a staging sandbox publishes: the receipt the host would write on success. */
  pending: "ths.apply-pending",
  /** A recovery of the repository's staged-apply journal that could not run (index `applyJournalRepo`). */
  recoveryFailed: "ths.apply-recovery-failed",
} as const);

/** The only call-site that validates an apply (THREAT-MODEL invariant 15): trusted, never the requester's. */
export const APPLY_CALL_SITE: CallSite = "gate";

/** An edit intent, as `edit/propose` carries it. */
export type EditIntent = ProposeParams["intent"];

/** Options of `Host.propose`. */
export interface ProposeOptions {
  /** The repository folder (default: the current directory). */
  readonly repo?: string;
  /** The edit provider's id (default: the first provider whose trusted manifest declares `edit`). */
  readonly provider?: string;
  readonly intent: EditIntent;
  /** A tree id in the store to propose against instead of a fresh snapshot of the worktree. */
  readonly base?: Digest;
  readonly signal?: AbortSignal;
}

/** The provider that proposed, as the trusted manifest pins it. */
export interface ProposalProvider {
  readonly id: string;
  readonly version: string;
  readonly digest: Digest;
}

/** What `Host.propose` returns, after the proposal is durable in the fact log. */
export interface ProposeResult {
  /** The host's id of this proposal (never the provider's): what `Host.apply` takes. */
  readonly proposalId: string;
  readonly provider: ProposalProvider | null;
  /** The baseline the plan is bound to. */
  readonly baseline: Digest;
  /** The validated plan, when it passed validation. */
  readonly plan?: EditPlan;
  /** Why it did not, with a stable `ASP_APPLY_*` code. */
  readonly rejection?: ApplyRejection;
}

/** Options of `Host.apply`. */
export interface ApplyOptions {
  readonly repo?: string;
  readonly proposalId: string;
  /**
   * Only `gate` (or absent): an apply is always validated by the gate's required checks. Any other
   * value is refused `ASP_APPLY_CALL_SITE_REFUSED` (THREAT-MODEL invariant 15): the requester never
   * chooses how strictly it is judged.
   */
  readonly callSite?: CallSite;
  /**
   * The repository-relative path of its candidate policy file: an edit of it is assessed under the
   * active policy and can never authorize itself (host §7), as in `Host.evaluate`.
   */
  readonly candidatePolicyPath?: string | readonly string[];
  readonly signal?: AbortSignal;
}

/** What `Host.apply` returns, after the apply receipt is durable. */
export interface ApplyResult {
  readonly receipt: ApplyReceipt;
  /** The validation decision over the hypothetical after-state, or null when none ran. */
  readonly envelope: DecisionEnvelope | null;
}

/** A proposal as stored in the fact log. */
interface StoredProposal {
  readonly $$type: "@asp/EditProposal";
  readonly version: 1;
  readonly proposalId: string;
  readonly repo: string;
  readonly provider: ProposalProvider | null;
  readonly baseline: Digest;
  readonly intent: EditIntent;
  readonly plan: EditPlan | null;
  readonly rejection: ApplyRejection | null;
  /**
   * How the edit provider ran when it proposed (issue 13): the apply receipt reports no more
   * assurance than this, and no more than the validation achieved. Absent on older records:
   * counted as an unconfined subprocess.
   */
  readonly launch?: { readonly mode: AssuranceMode; readonly directWrite: boolean } | null;
  readonly proposedAt: string;
}

/** What the applier needs from the host that owns it. */
export interface ApplierDeps {
  readonly objects: ObjectStore;
  readonly log: FactLog;
  readonly clock: Clock;
  readonly freshness: FreshnessAuthority;
  readonly policy: HostPolicy;
  readonly editRetries: number;
  readonly proposeTimeoutMs: number;
  readonly sandboxes: SandboxSet;
  readonly journalRoot: string | null;
  readonly supervisors: readonly ProviderSupervisor[];
  readonly evaluate: (callSite: CallSite, options: EvaluateOptions) => Promise<EvaluateResult>;
}

/** A sandbox that may stage applies: granted `sandbox:staged_snapshot` and implementing `stage`. */
function stager(set: SandboxSet): Sandbox | null {
  return set.sandboxes.find((s) => s.capabilities.includes("sandbox:staged_snapshot") && s.stage !== undefined) ?? null;
}

const ZERO = `sha256:${"0".repeat(64)}` as Digest;

/**
 * Propose, validate and apply edits (host §4, §6, DESIGN §7): proposals are durable facts, an
 * apply re-validates against the worktree as it is, runs the required checks of the call-site
 * on the hypothetical after-tree, and publishes through a staging sandbox or, without one, by
 * the host's own temp-file-and-rename writes. One apply at a time per repository.
 */
export class Applier {
  private readonly mutex = new KeyedMutex();
  private tempJournals: string | null = null;

  constructor(private readonly deps: ApplierDeps) {}

  /** The journal folder of `repo`: `<journal root>/<sha256 of its real path, 16 hex>`. */
  journalDir(repo: string): string {
    let root = this.deps.journalRoot;
    if (root === null) {
      this.tempJournals ??= mkdtempSync(join(tmpdir(), "asp-apply-journal-"));
      root = this.tempJournals;
    }
    return join(root, createHash("sha256").update(repoIdentity(repo)).digest("hex").slice(0, 16));
  }

  /**
   * Finish or undo an interrupted staged apply of `repo` (its journal folder exists) before the
   * repository is read for an apply or an evaluation.
   */
  async recover(repo: string): Promise<void> {
    const dir = this.journalDir(repo);
    if (!existsSync(dir)) return;
    const outcomes: string[] = [];
    for (const s of this.deps.sandboxes.sandboxes) {
      if (s.recover !== undefined) {
        let r: Awaited<ReturnType<NonNullable<Sandbox["recover"]>>>;
        try {
          r = await s.recover({ root: repoIdentity(repo), journalDir: dir });
        } catch (error) {
          throw await this.recoveryFailed(repo, dir, s, error);
        }
        outcomes.push(`${s.id}: ${r.outcome}`);
      }
    }
    await this.settlePending(repo, outcomes.join(", ") || "no recovering sandbox");
  }

  /**
   * A recovery that cannot run (issue 32 hole 12): recorded in the log first, then a typed
   * integrity error naming the command that puts the damaged journal aside. Nothing of the
   * repository is evaluated or applied while its journal cannot be read: the worktree may be
   * between two states, and only an operator can say which.
   */
  private async recoveryFailed(repo: string, dir: string, sandbox: Sandbox, error: unknown): Promise<ThsError> {
    const root = repoIdentity(repo);
    const raw = (error as { code?: unknown }).code;
    const code = typeof raw === "string" ? raw.slice(0, 128) : "ERROR";
    const detail = String((error as Error)?.message ?? error).slice(0, 2000);
    const next = `asp edit discard-journal ${dir}`;
    await this.deps.log.append([
      {
        kind: APPLY_FACT_KINDS.recoveryFailed,
        record: {
          $$type: "@asp/ApplyRecoveryFailed",
          version: 1,
          repo: root,
          journalDir: dir,
          sandbox: { id: sandbox.id, digest: sandbox.digest },
          code,
          detail,
          nextStep: next,
          at: this.now(),
        },
        index: [{ name: "applyJournalRepo", value: root }],
      },
    ]);
    return new ThsError(
      "ASP_APPLY_JOURNAL_DAMAGED",
      `the staged-apply journal of ${root} cannot be recovered by ${sandbox.id} (${code}: ${detail}); ` +
        `nothing was evaluated. Check the worktree (git -C ${root} status), then run: ${next}`,
      { category: "integrity", cause: error, data: { repo: root, journalDir: dir, code, nextStep: next } },
    );
  }

  /**
   * Append the receipt an interrupted apply never wrote (the log agrees with the worktree after any
   * crash): for each pending apply of this repository without a receipt, the worktree as recovery
   * left it decides: exactly the validated after-tree is an apply, anything else is not.
   */
  private async settlePending(repo: string, recovered: string): Promise<void> {
    const root = repoIdentity(repo);
    const pending = await this.deps.log.list({ index: { name: "applyPendingRepo", value: root } });
    for (const entry of pending) {
      if (entry.kind !== APPLY_FACT_KINDS.pending) continue;
      const draft = entry.record as unknown as ApplyReceipt;
      const facts = await this.deps.log.list({ index: { name: "proposalId", value: draft.proposalId } });
      const settled = facts.some((e) => e.kind === APPLY_FACT_KINDS.receipt && e.seq > entry.seq);
      if (settled) continue;
      const tree = await this.deps.freshness.snapshot(repo);
      const detail = `the host stopped while publishing; recovery (${recovered}) left the worktree at ${tree}`;
      const receipt: ApplyReceipt =
        tree === draft.hypotheticalAfter
          ? { ...draft, applied: true, baselineAfter: tree, reason: detail.slice(0, 4000), appliedAt: this.now() }
          : {
              ...draft,
              applied: false,
              baselineAfter: null,
              transactionGuarantee: tree === draft.baselineBefore ? draft.transactionGuarantee : "none",
              rejection: { code: "ASP_APPLY_INTERRUPTED", detail: detail.slice(0, 4000) },
              files: (draft.files ?? []).map((f) => ({ ...f, outcome: "unchanged" as const })),
              appliedAt: this.now(),
            };
      await this.finish(receipt);
    }
  }

  private now(): string {
    return this.deps.clock.now().toISOString();
  }

  private supervisor(id: string | undefined): ProviderSupervisor | null {
    const edit = this.deps.supervisors.filter((s) => s.provider.manifest.capabilities.includes("edit"));
    return (id === undefined ? edit[0] : edit.find((s) => s.id === id)) ?? null;
  }

  /** Ask the provider for a plan against `baseline` and validate it (no fact written). */
  private async ask(
    sup: ProviderSupervisor,
    repo: string,
    baseline: Digest,
    intent: EditIntent,
    signal: AbortSignal | undefined,
  ): Promise<{ ok: true; plan: EditPlan } | { ok: false; rejection: ApplyRejection }> {
    // host §9: the provider reads the dependency environment through the same callbacks.
    const env = await this.deps.freshness.environment(repo, baseline);
    const view = new ContentView(this.deps.objects, env === null ? [baseline] : [baseline, env.tree]);
    const deadline = performance.now() + this.deps.proposeTimeoutMs;
    const out = await sup.propose(
      { baseline, intent, ...(env === null ? {} : { environment: { tree: env.tree, roots: [...env.roots] } }) },
      view,
      deadline,
      signal,
    );
    if (out.kind === "failed") {
      return {
        ok: false,
        rejection: { code: "ASP_APPLY_PROVIDER_FAILED", detail: `${out.failClass}: ${out.detail}`.slice(0, 4000) },
      };
    }
    const m = sup.provider.manifest;
    const checked = await validatePlan(
      out.answer,
      {
        baseline,
        provider: { id: m.id, version: m.version },
        reads: out.reads,
        outside: out.outside,
        root: repo,
        environment: env?.tree ?? null,
        insideEnvironment: (path) => this.deps.freshness.insideEnvironment(path),
      },
      this.deps.objects,
      view,
    );
    if (!checked.ok) return checked;
    const hyp = await buildHypothetical(this.deps.objects, baseline, checked.plan);
    return hyp.ok ? checked : hyp;
  }

  /**
   * Ask an edit provider for a plan, validate it (host §6) and store the plan or its coded
   * rejection as a durable fact before returning.
   * @throws EvidenceError from the store or the snapshot (`ASP_EVIDENCE_IO`, ...).
   */
  async propose(options: ProposeOptions, repo: string): Promise<ProposeResult> {
    await this.recover(repo);
    const baseline = options.base ?? (await this.deps.freshness.snapshot(repo));
    const sup = this.supervisor(options.provider);
    const provider = sup === null ? null : pinOf(sup);
    const outcome =
      sup === null
        ? {
            ok: false as const,
            rejection: {
              code: "ASP_APPLY_PROVIDER_FAILED" as const,
              detail: `no edit provider ${options.provider === undefined ? "is configured" : JSON.stringify(options.provider)}`,
            },
          }
        : await this.ask(sup, repo, baseline, options.intent, options.signal);
    const record: StoredProposal = {
      $$type: "@asp/EditProposal",
      version: 1,
      proposalId: `proposal-${randomUUID()}`,
      repo: repoIdentity(repo),
      provider,
      baseline,
      intent: options.intent,
      plan: outcome.ok ? outcome.plan : null,
      rejection: outcome.ok ? null : outcome.rejection,
      launch:
        sup?.launched === null || sup?.launched === undefined
          ? null
          : { mode: sup.launched.mode, directWrite: sup.launched.directWrite },
      proposedAt: this.deps.clock.now().toISOString(),
    };
    await this.deps.log.append([
      { kind: APPLY_FACT_KINDS.proposal, record, index: [{ name: "proposalId", value: record.proposalId }] },
    ]);
    return {
      proposalId: record.proposalId,
      provider,
      baseline,
      ...(outcome.ok ? { plan: outcome.plan } : { rejection: outcome.rejection }),
    };
  }

  private async load(proposalId: string): Promise<StoredProposal> {
    const entries = await this.deps.log.list({ index: { name: "proposalId", value: proposalId } });
    const found = entries.find((e) => e.kind === APPLY_FACT_KINDS.proposal);
    if (found === undefined) {
      throw new ThsError("ASP_APPLY_UNKNOWN_PROPOSAL", `no proposal ${JSON.stringify(proposalId)} in the store`, {
        data: { proposalId },
      });
    }
    return found.record as unknown as StoredProposal;
  }

  private async appliedBefore(proposalId: string): Promise<boolean> {
    const entries = await this.deps.log.list({ index: { name: "proposalId", value: proposalId } });
    return entries.some(
      (e) => e.kind === APPLY_FACT_KINDS.receipt && (e.record as { applied?: unknown }).applied === true,
    );
  }

  /**
   * Apply a stored proposal (serialized per repository), validated at the gate.
   * @throws ThsError `ASP_APPLY_UNKNOWN_PROPOSAL`, `ASP_THS_BAD_REQUEST` (a proposal of another repository),
   *   `ASP_APPLY_CALL_SITE_REFUSED` (a call-site other than the gate).
   */
  apply(options: ApplyOptions, repo: string, conflict = false): Promise<ApplyResult> {
    refuseCallSite(options.callSite);
    return this.mutex.run(repoIdentity(repo), () => this.applyLocked(options, repo, conflict));
  }

  /**
   * Apply several proposals of one repository (host §4): plans that touch overlapping blobs
   * (`findEditConflicts`) never both apply. The first of each overlapping pair (in the order
   * given) applies; every other is applied after it, so it meets the moved baseline: merged when
   * the changes do not overlap, else re-proposed against the new baseline, else rejected with
   * `ASP_APPLY_CONFLICT`.
   */
  async applyMany(
    proposalIds: readonly string[],
    options: Omit<ApplyOptions, "proposalId">,
    repo: string,
  ): Promise<ApplyResult[]> {
    refuseCallSite(options.callSite);
    const stored = await Promise.all(proposalIds.map((id) => this.load(id)));
    const plans = stored.flatMap((p) => (p.plan === null ? [] : [{ ...p.plan, proposalId: p.proposalId }]));
    const texts = new Map<string, string>();
    for (const plan of plans) {
      for (const pre of plan.preconditions) {
        if (pre.blob === "absent" || texts.has(pre.blob)) continue;
        try {
          texts.set(
            pre.blob,
            new TextDecoder("utf-8", { fatal: true }).decode(await this.deps.objects.readBlob(pre.blob as Digest)),
          );
        } catch {
          // not text: every operation on it counts as whole-file
        }
      }
    }
    const losers = new Set<string>();
    const chosen = new Set<string>();
    const conflicts = findEditConflicts(plans, { read: (_path, blob) => texts.get(blob) });
    for (const id of proposalIds) {
      const against = conflicts
        .filter((c) => c.proposals.includes(id))
        .map((c) => (c.proposals[0] === id ? c.proposals[1] : c.proposals[0]));
      if (against.some((other) => chosen.has(other))) losers.add(id);
      else chosen.add(id);
    }
    const results: ApplyResult[] = [];
    for (const id of proposalIds) results.push(await this.apply({ ...options, proposalId: id }, repo, losers.has(id)));
    return results;
  }

  private async applyLocked(options: ApplyOptions, repo: string, conflict: boolean): Promise<ApplyResult> {
    const proposal = await this.load(options.proposalId);
    if (proposal.repo !== repoIdentity(repo)) {
      throw new ThsError("ASP_THS_BAD_REQUEST", `proposal ${proposal.proposalId} is for another repository`, {
        data: { proposalId: proposal.proposalId },
      });
    }
    const callSite = APPLY_CALL_SITE;
    const receipt = new ReceiptDraft(proposal, callSite, this.deps);
    if (await this.appliedBefore(proposal.proposalId)) {
      return this.finish(
        receipt.reject("ASP_APPLY_ALREADY_APPLIED", "the proposal was applied before; it applies at most once"),
      );
    }
    if (proposal.plan === null) {
      const r = proposal.rejection ?? { code: "ASP_APPLY_NOT_A_PLAN" as const, detail: "no plan" };
      return this.finish(receipt.reject(r.code, r.detail));
    }
    await this.recover(repo);
    const sup = this.supervisor(proposal.provider?.id);
    let plan = proposal.plan;
    let base = proposal.baseline;
    let reproposals = 0;
    for (;;) {
      receipt.attempts++;
      const now = await this.deps.freshness.snapshot(repo);
      receipt.baselineBefore = now;
      const hyp = await buildHypothetical(this.deps.objects, base, plan);
      if (!hyp.ok) return this.finish(receipt.reject(hyp.rejection.code, hyp.rejection.detail));
      let writes = hyp.value.writes;
      let after = hyp.value.after;
      if (now !== base) {
        const rebased = await this.rebase(now, writes);
        if (rebased === null) {
          // host §6 step 5: the change overlaps what moved: re-propose against the new baseline, bounded.
          const code = conflict ? "ASP_APPLY_CONFLICT" : "ASP_APPLY_BASELINE_MOVED";
          if (sup === null || reproposals >= this.deps.editRetries) {
            return this.finish(
              receipt.reject(
                code,
                `the worktree moved under a touched path since ${base}; ${reproposals} re-proposal(s) did not succeed`,
              ),
            );
          }
          reproposals++;
          const again = await this.ask(sup, repo, now, proposal.intent, options.signal);
          if (!again.ok) {
            return this.finish(
              receipt.reject(
                code,
                `re-proposal against ${now} refused: ${again.rejection.code}: ${again.rejection.detail}`,
              ),
            );
          }
          plan = again.plan;
          base = now;
          continue;
        }
        writes = rebased.writes;
        after = rebased.after;
        receipt.mergedPaths = rebased.merged;
      }
      receipt.files = writes;
      receipt.hypotheticalAfter = after;
      // host §6 step 3: the required checks of the call-site, on the hypothetical change, exactly as a gate.
      const evaluated = await this.deps.evaluate(callSite, {
        repo,
        hypothetical: { before: now, after },
        ...(options.candidatePolicyPath === undefined ? {} : { candidatePolicyPath: options.candidatePolicyPath }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      receipt.validated(evaluated);
      const decision = evaluated.envelope.decision;
      if (decision !== "allow") {
        return this.finish(
          receipt.reject(
            decision === "deny" ? "ASP_APPLY_DENIED" : "ASP_APPLY_INDETERMINATE",
            `the required checks at ${callSite} decided ${decision} on the hypothetical after-state ${after}`,
          ),
          evaluated.envelope,
        );
      }
      // The worktree must still be what was validated; a move meanwhile starts another round.
      if ((await this.deps.freshness.snapshot(repo)) !== now) {
        if (receipt.attempts > this.deps.editRetries) {
          return this.finish(
            receipt.reject("ASP_APPLY_BASELINE_MOVED", "the worktree kept moving during validation"),
            evaluated.envelope,
          );
        }
        continue;
      }
      // issue 32 hole 5: the host's own last word before anything is published, whatever sandbox
      // publishes: no `.git` component (a proposal recorded by an older host included), and every
      // touched path is on disk exactly what the judged tree says (absent means absent on disk).
      const refused = refusePublish(repo, writes);
      if (refused !== null) return this.finish(receipt.reject(refused.code, refused.detail), evaluated.envelope);
      await this.publish(repo, writes, receipt);
      if (receipt.failed !== null)
        return this.finish(
          receipt.reject(receipt.drifted ? "ASP_APPLY_DISK_DRIFT" : "ASP_APPLY_WRITE_FAILED", receipt.failed),
          evaluated.envelope,
        );
      const published = await this.deps.freshness.snapshot(repo);
      return this.finish(receipt.applied(published), evaluated.envelope);
    }
  }

  /**
   * The plan's writes re-based from `base` onto `now`: paths the plan touches that did not move
   * keep their writes; a touched file that moved is 3-way merged when both sides are text and
   * the changes do not overlap. Null when a touched path moved and cannot be merged.
   */
  private async rebase(
    now: Digest,
    writes: readonly PlannedWrite[],
  ): Promise<{ writes: PlannedWrite[]; after: Digest; merged: string[] } | null> {
    const objects = this.deps.objects;
    const out: PlannedWrite[] = [];
    const merged: string[] = [];
    for (const w of writes) {
      const at = await lookupPath(objects, now, w.path);
      if (at.kind !== "file" && at.kind !== "link" && at.kind !== "absent") return null;
      const current: PathAfter =
        at.kind === "absent" ? null : { digest: at.digest, mode: at.kind === "link" ? "120000" : at.mode };
      if (current?.digest === w.before?.digest && current?.mode === w.before?.mode) {
        out.push(w);
        continue;
      }
      // Moved: only a text file edited on both sides can merge.
      if (w.before === null || w.after === null || current === null || w.content === null) return null;
      if (w.before.mode === "120000" || current.mode === "120000") return null;
      const bytes = mergeText(
        await objects.readBlob(w.before.digest),
        await objects.readBlob(current.digest),
        w.content,
      );
      if (bytes === null) return null;
      const digest = await objects.putBlob(bytes);
      merged.push(w.path);
      out.push({ path: w.path, before: current, after: { digest, mode: w.after.mode }, content: bytes });
    }
    const after = await treeWith(objects, now, new Map(out.map((w) => [w.path, w.after])));
    return { writes: out, after, merged };
  }

  /** Publish the writes: through a staging sandbox when one is granted, else the host's own writes. */
  private async publish(repo: string, writes: readonly PlannedWrite[], receipt: ReceiptDraft): Promise<void> {
    const files: FileWrite[] = writes.map((w) => ({
      path: w.path,
      content: w.content,
      mode: w.after?.mode ?? null,
      before: w.before,
    }));
    const root = repoIdentity(repo);
    const sandbox = stager(this.deps.sandboxes);
    if (sandbox?.stage !== undefined) {
      const journalDir = this.journalDir(repo);
      mkdirSync(journalDir, { recursive: true });
      receipt.sandbox = { id: sandbox.id, digest: sandbox.digest };
      // The receipt this apply would end with, durable before anything is published: a crash
      // from here on is settled by the next host's recovery (settlePending), never lost.
      receipt.guarantee = "staged_snapshot";
      receipt.outcomes = new Map(files.map((f) => [f.path, f.content === null ? "deleted" : "written"]));
      const draft = receipt.applied(receipt.hypotheticalAfter as Digest);
      await this.deps.log.append([
        {
          kind: APPLY_FACT_KINDS.pending,
          record: draft,
          index: [
            { name: "applyPendingRepo", value: root },
            { name: "proposalId", value: draft.proposalId },
          ],
        },
      ]);
      try {
        const staged = await sandbox.stage({
          root,
          writes: files.map((f) => ({
            path: f.path,
            content: f.content,
            ...(f.mode === "100644" || f.mode === "100755" ? { mode: f.mode } : {}),
            // The sandbox re-checks it on disk right before its commit point (issue 32 hole 5).
            before: f.before ?? null,
          })),
          journalDir,
        });
        receipt.guarantee = staged.applied ? staged.guarantee : "none";
        receipt.outcomes = new Map(
          files.map((f) => [f.path, staged.applied ? (f.content === null ? "deleted" : "written") : "unchanged"]),
        );
        if (!staged.applied) receipt.failed = `the sandbox did not apply: ${staged.detail ?? "no detail"}`;
      } catch (error) {
        receipt.guarantee = "none";
        receipt.failed = `the sandbox failed: ${(error as Error).message}`.slice(0, 4000);
        // The sandbox's own re-check of the disk right before its commit point (issue 32 hole 5).
        receipt.drifted = (error as { code?: unknown }).code === "ASP_STAGED_PRECONDITION_FAILED";
        await this.recover(repo);
      }
      return;
    }
    const result = writeDirect(root, files);
    // host §6: ordinary worktrees support rollback_attempted at most.
    receipt.guarantee = "rollback_attempted";
    receipt.outcomes = result.outcomes;
    if (!result.ok) receipt.failed = result.detail ?? "a write failed";
    receipt.drifted = result.drift === true;
  }

  /** Validate the receipt and append it durably before it is returned (invariant 8). */
  private async finish(receipt: ApplyReceipt, envelope: DecisionEnvelope | null = null): Promise<ApplyResult> {
    const ok = validate("apply-receipt", receipt);
    if (!ok.ok) {
      throw new ThsError("ASP_THS_INTERNAL", "the host built an invalid apply receipt", {
        data: { errors: ok.errors },
      });
    }
    await this.deps.log.append([
      { kind: APPLY_FACT_KINDS.receipt, record: receipt, index: [{ name: "proposalId", value: receipt.proposalId }] },
    ]);
    return { receipt, envelope };
  }
}

function pinOf(sup: ProviderSupervisor): ProposalProvider {
  const m = sup.provider.manifest;
  return { id: m.id, version: m.version, digest: m.digest as Digest };
}

/** The apply receipt being assembled through one apply. */
class ReceiptDraft {
  attempts = 0;
  baselineBefore: Digest;
  hypotheticalAfter: Digest | null = null;
  files: readonly PlannedWrite[] = [];
  outcomes: ReadonlyMap<string, NonNullable<ApplyReceipt["files"]>[number]["outcome"]> = new Map();
  mergedPaths: string[] = [];
  guarantee: ApplyReceipt["transactionGuarantee"] = "none";
  sandbox: { id: string; digest: Digest } | null = null;
  failed: string | null = null;
  /** The failure was a path whose state on disk is not its precondition. */
  drifted = false;
  private validation: NonNullable<ApplyReceipt["validation"]> | null = null;
  private decision: ApplyReceipt["decision"] = null;
  private assurance: { mode: ApplyReceipt["assuranceMode"]; directWriteRisk: boolean } = {
    mode: "advisory",
    directWriteRisk: true,
  };

  constructor(
    private readonly proposal: StoredProposal,
    private readonly callSite: CallSite,
    private readonly deps: ApplierDeps,
  ) {
    this.baselineBefore = proposal.baseline;
  }

  validated(result: EvaluateResult): void {
    const env = result.envelope;
    this.decision = env.decision;
    this.validation = {
      decisionId: env.decisionId,
      receiptId: result.receipt.receiptId,
      envelopeDigest: result.receipt.envelopeDigest as Digest,
      callSite: env.callSite,
    };
    // host §3: the weaker of what the validation achieved and how the proposing provider ran.
    const launch = this.proposal.launch ?? { mode: "advisory" as const, directWrite: true };
    this.assurance = {
      mode: assuranceAtLeast(launch.mode, env.assurance.mode) ? env.assurance.mode : launch.mode,
      directWriteRisk: env.assurance.directWriteRisk || launch.directWrite,
    };
  }

  private base(): Omit<ApplyReceipt, "applied" | "baselineAfter" | "transactionGuarantee"> {
    const p = this.proposal.provider;
    const pin = p ?? { id: "none", version: "0.0.0", digest: ZERO };
    const sup = this.deps.supervisors.find((s) => s.id === pin.id);
    const measured = sup?.provider.integrityVerified === true ? "verified" : "unverified";
    return {
      $$type: "@asp/ApplyReceipt",
      version: 1,
      proposalId: this.proposal.proposalId,
      repo: this.proposal.repo,
      baselineBefore: this.baselineBefore,
      hypotheticalAfter: this.hypotheticalAfter,
      decision: this.decision,
      validation: this.validation,
      policyDigest: this.deps.policy.digest as Digest,
      provenance: { provider: { id: pin.id, version: pin.version }, digest: pin.digest },
      authority: authorityEvidence(this.deps.policy, pin, this.callSite, {
        identity: measured,
        integrity: measured,
        isolated: this.proposal.launch?.mode === "isolated",
      }),
      assuranceMode: this.assurance.mode,
      directWriteRisk: this.assurance.directWriteRisk,
      sandbox: this.sandbox,
      files: this.files.map((w) => ({
        path: w.path,
        before: w.before?.digest ?? null,
        after: w.after?.digest ?? null,
        outcome: this.outcomes.get(w.path) ?? "unchanged",
      })),
      attempts: this.attempts,
      mergedPaths: this.mergedPaths,
      appliedAt: this.deps.clock.now().toISOString(),
    };
  }

  reject(code: ApplyRejection["code"], detail: string): ApplyReceipt {
    const wrote = [...this.outcomes.values()].some((o) => o !== "unchanged");
    return {
      ...this.base(),
      applied: false,
      baselineAfter: null,
      // Nothing published: no guarantee to claim unless a rollback was attempted.
      transactionGuarantee: wrote ? capGuarantee(this.guarantee, this.assurance.directWriteRisk).guarantee : "none",
      rejection: { code, detail: detail.slice(0, 4000) },
    };
  }

  applied(published: Digest): ApplyReceipt {
    const exact = published === this.hypotheticalAfter;
    const capped = exact ? capGuarantee(this.guarantee, this.assurance.directWriteRisk) : null;
    const reason = !exact
      ? `the worktree after the apply is ${published}, not the validated after-tree ${this.hypotheticalAfter}`
      : capped?.capped === true
        ? `${this.guarantee} capped to ${capped.guarantee}: a participating provider could write the worktree directly (direct-write risk) during or after the publish (host §3)`
        : undefined;
    return {
      ...this.base(),
      applied: true,
      baselineAfter: published,
      // The guarantee holds only when the worktree is exactly the validated after-tree, and only
      // as far as no provider could write around the sandbox.
      transactionGuarantee: capped?.guarantee ?? "none",
      ...(reason === undefined ? {} : { reason }),
    };
  }
}

/**
 * host §3: with a direct-write risk (an unconfined provider took part: the proposing edit provider
 * or a validating one) no sandbox can stop a write around its publish, so a transaction guarantee
 * is at most `rollback_attempted`, what an ordinary worktree supports.
 */
export function capGuarantee(
  guarantee: ApplyReceipt["transactionGuarantee"],
  directWriteRisk: boolean,
): { guarantee: ApplyReceipt["transactionGuarantee"]; capped: boolean } {
  const ceiling = "rollback_attempted";
  if (!directWriteRisk || TRANSACTION_GUARANTEES.indexOf(guarantee) <= TRANSACTION_GUARANTEES.indexOf(ceiling)) {
    return { guarantee, capped: false };
  }
  return { guarantee: ceiling, capped: true };
}

/**
 * @throws ThsError `ASP_APPLY_CALL_SITE_REFUSED` for a requested call-site other than the gate
 *   (THREAT-MODEL invariant 15: `interactive` fails open, `sweep` requires another set).
 */
function refuseCallSite(callSite: CallSite | undefined): void {
  if (callSite === undefined || callSite === APPLY_CALL_SITE) return;
  throw new ThsError(
    "ASP_APPLY_CALL_SITE_REFUSED",
    `an apply is validated at the ${APPLY_CALL_SITE} call-site only; the requested ${JSON.stringify(String(callSite).slice(0, 64))} is refused (drop it)`,
    { data: { callSite: String(callSite).slice(0, 64) } },
  );
}

/** Why the host refuses to publish `writes` into `repo`, or null (issue 32 hole 5). */
function refusePublish(repo: string, writes: readonly PlannedWrite[]): ApplyRejection | null {
  const root = repoIdentity(repo);
  for (const w of writes) {
    const escapes = pathEscape(w.path);
    if (escapes !== null) return { code: "ASP_APPLY_PATH_ESCAPE", detail: escapes.slice(0, 4000) };
  }
  for (const w of writes) {
    const drift = diskDrift(root, w.path, w.before);
    if (drift !== null) return { code: "ASP_APPLY_DISK_DRIFT", detail: drift.slice(0, 4000) };
  }
  return null;
}
