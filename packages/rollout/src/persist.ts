import { BUDGET_LIMITS, type BudgetLimit, type RunIdentity, validate } from "@asp/contracts";
import { canonicalize, type Digest, digest, type FactEntry, type FactLog } from "@asp/evidence";
import type { BudgetSet, ResolvedBudgets } from "./budgets.js";
import type { SelectionKey } from "./config.js";
import { rolloutError } from "./errors.js";
import type { StageFlags } from "./flags.js";
import type { AutoModeSelection, Normalization, ResolvedSelection } from "./selection.js";
import type { ValueSource } from "./sources.js";

/** The fact kind of a persisted run selection. */
export const SELECTION_FACT_KIND = "rollout.selection";
/** The fact index name under which a persisted selection is found by run (value: {@link runKey}). */
export const RUN_INDEX_NAME = "rollout.run";

const BRAND = "@asp/PersistedSelection";
const RUN_FIELDS = ["root_frame_id", "branch_id", "turn_id", "execution_id"] as const;

/** What is stored with a run: the frozen selection and budget set, plus how they were resolved. */
export interface PersistedSelection {
  readonly $$type: typeof BRAND;
  readonly version: 1;
  readonly run: RunIdentity;
  readonly selection: AutoModeSelection;
  readonly budgets: BudgetSet;
  /** Audit detail only; two records with the same selection and budgets are the same configuration. */
  readonly provenance: {
    readonly selection: Readonly<Record<SelectionKey, ValueSource>>;
    readonly budgets: Readonly<Record<BudgetLimit, ValueSource>>;
    readonly normalizations: ReadonlyArray<Normalization>;
  };
}

/** A persisted selection with the fact that holds it. */
export interface StoredSelection {
  readonly record: PersistedSelection;
  /** Sequence number and digest of the fact log entry. */
  readonly seq: number;
  readonly digest: Digest;
}

/** What {@link SelectionStore.resolveOnce} returns. */
export interface RunConfiguration {
  readonly selection: AutoModeSelection;
  readonly budgets: BudgetSet;
  /** True when read back from an earlier persist (a reopen), false when resolved now. */
  readonly reopened: boolean;
  /** The fact holding it, or null when stage 2 is off and nothing is persisted. */
  readonly stored: StoredSelection | null;
}

/** True for a {@link PersistedSelection}, including one from another copy of this package. */
export function isPersistedSelection(value: unknown): value is PersistedSelection {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === BRAND;
}

/**
 * Check a run identity (root_frame_id + branch_id + turn_id + execution_id, each a non-empty
 * string of at most 256 characters, nothing else).
 *
 * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` naming the first bad field.
 */
export function checkRunIdentity(run: unknown): RunIdentity {
  const bad = (key: string) =>
    rolloutError(
      "ASP_ROLLOUT_INVALID_OPTION",
      "a run identity is root_frame_id, branch_id, turn_id and execution_id, each a non-empty string",
      { key, source: "options" },
    );
  if (typeof run !== "object" || run === null || Array.isArray(run)) throw bad("run");
  const r = run as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!(RUN_FIELDS as ReadonlyArray<string>).includes(key)) throw bad(`run.${key}`);
  for (const key of RUN_FIELDS) {
    const v = r[key];
    if (typeof v !== "string" || v.length === 0 || v.length > 256) throw bad(`run.${key}`);
  }
  return {
    root_frame_id: r.root_frame_id,
    branch_id: r.branch_id,
    turn_id: r.turn_id,
    execution_id: r.execution_id,
  } as RunIdentity;
}

/** The index value a run's selection is stored under: the digest of its canonical identity. */
export function runKey(run: RunIdentity): Digest {
  return digest({ kind: SELECTION_FACT_KIND, run: checkRunIdentity(run) });
}

/** Selection and budgets must satisfy the contract's Auto Run shapes (checked through its run-started event). */
function contractValid(run: RunIdentity, selection: unknown, budgets: unknown): boolean {
  return validate("event-auto-run-started", {
    event_id: "rollout-check",
    type: "auto_run_started",
    run,
    committed_at: "1970-01-01T00:00:00Z",
    selection,
    budgets,
  }).ok;
}

function sameConfiguration(a: Pick<PersistedSelection, "selection" | "budgets">, b: typeof a): boolean {
  return canonicalize({ s: a.selection, b: a.budgets }) === canonicalize({ s: b.selection, b: b.budgets });
}

function decode(entry: FactEntry, run: RunIdentity): PersistedSelection {
  const r = entry.record as unknown as PersistedSelection;
  const ok =
    isPersistedSelection(r) &&
    r.version === 1 &&
    canonicalize(r.run) === canonicalize(run) &&
    typeof r.provenance === "object" &&
    r.provenance !== null &&
    contractValid(run, r.selection, r.budgets);
  if (!ok) {
    throw rolloutError(
      "ASP_ROLLOUT_CORRUPT_RECORD",
      `the persisted selection at fact ${entry.seq} does not validate; refusing to guess a selection for this run`,
      { key: runKey(run), source: "fact_log" },
      { category: "integrity", data: { seq: entry.seq } },
    );
  }
  return r;
}

/**
 * Stage 2 persistence: the resolved selection and budget set are stored with the run through
 * the evidence fact log, so a reopen reads them back and never re-resolves differently. The
 * first fact for a run is authoritative; a later, different one is refused, and if a racing
 * writer ever appends one anyway, readers still take the first.
 */
export class SelectionStore {
  readonly #log: FactLog;
  readonly #flags: StageFlags;
  #queue: Promise<unknown> = Promise.resolve();

  /** Prefer {@link createSelectionStore}. */
  constructor(log: FactLog, flags: StageFlags) {
    this.#log = log;
    this.#flags = flags;
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(fn, fn);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /**
   * The selection persisted for `run`, or `undefined` when none was.
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` (bad run identity), `ASP_ROLLOUT_CORRUPT_RECORD`
   *   (stored record does not validate). Evidence errors (e.g. `ASP_EVIDENCE_CHAIN_BROKEN`) propagate.
   */
  async load(run: RunIdentity): Promise<StoredSelection | undefined> {
    const id = checkRunIdentity(run);
    const [first] = await this.#log.list({ index: { name: RUN_INDEX_NAME, value: runKey(id) }, limit: 1 });
    if (first === undefined) return undefined;
    return { record: decode(first, id), seq: first.seq, digest: first.digest };
  }

  /**
   * Persist the resolved selection and budget set for `run` in one synced fact. Persisting the
   * same selection and budgets again returns the existing fact (idempotent).
   *
   * @throws RolloutError `ASP_ROLLOUT_STAGE_DISABLED` when `stage2_auto_run_storage` is off,
   *   `ASP_ROLLOUT_SELECTION_CONFLICT` when the run already has a different selection or budget
   *   set, `ASP_ROLLOUT_INVALID_OPTION` for a bad run identity, `ASP_ROLLOUT_CORRUPT_RECORD`.
   */
  async persist(
    run: RunIdentity,
    resolved: { readonly selection: ResolvedSelection; readonly budgets: ResolvedBudgets },
  ): Promise<StoredSelection> {
    if (!this.#flags.isEnabled("stage2_auto_run_storage")) {
      throw rolloutError(
        "ASP_ROLLOUT_STAGE_DISABLED",
        "persisting a run selection is stage 2 behaviour; stage2_auto_run_storage is off",
        { key: "stage2_auto_run_storage" },
      );
    }
    const id = checkRunIdentity(run);
    const record: PersistedSelection = {
      $$type: BRAND,
      version: 1,
      run: id,
      selection: resolved.selection.selection,
      budgets: Object.fromEntries(BUDGET_LIMITS.map((l) => [l, resolved.budgets.values[l]])) as BudgetSet,
      provenance: {
        selection: resolved.selection.sources,
        budgets: resolved.budgets.sources,
        normalizations: resolved.selection.normalizations,
      },
    };
    return this.#serial(async () => {
      const existing = await this.load(id);
      if (existing !== undefined) return this.#sameOrConflict(existing, record);
      if (!contractValid(id, record.selection, record.budgets)) {
        throw rolloutError(
          "ASP_ROLLOUT_INVALID_OPTION",
          "the selection or budget set does not satisfy the Auto Run contract",
          { key: "resolved", source: "options" },
        );
      }
      await this.#log.append([
        { kind: SELECTION_FACT_KIND, record, index: [{ name: RUN_INDEX_NAME, value: runKey(id) }] },
      ]);
      // Another writer may have raced us: the first fact for the run is the one that counts.
      const first = await this.load(id);
      if (first === undefined) throw new Error("unreachable: appended selection not found");
      return this.#sameOrConflict(first, record);
    });
  }

  #sameOrConflict(existing: StoredSelection, wanted: PersistedSelection): StoredSelection {
    if (sameConfiguration(existing.record, wanted)) return existing;
    throw rolloutError(
      "ASP_ROLLOUT_SELECTION_CONFLICT",
      "this run already has a persisted selection and budget set; a run never re-resolves differently. Start a fresh continuation instead",
      { key: runKey(existing.record.run), source: "fact_log" },
      { data: { seq: existing.seq, persisted: existing.record.selection, attempted: wanted.selection } },
    );
  }

  /**
   * The reopen-safe entry point. With stage 2 on: return the persisted selection if the run has
   * one (without calling `resolve`), else call `resolve` once and persist its result. With stage
   * 2 off: call `resolve` and persist nothing (flag-off behaviour is unchanged).
   *
   * @throws RolloutError as {@link SelectionStore.persist} and whatever `resolve` throws.
   */
  async resolveOnce(
    run: RunIdentity,
    resolve: () => { readonly selection: ResolvedSelection; readonly budgets: ResolvedBudgets },
  ): Promise<RunConfiguration> {
    if (!this.#flags.isEnabled("stage2_auto_run_storage")) {
      checkRunIdentity(run);
      const fresh = resolve();
      return { selection: fresh.selection.selection, budgets: fresh.budgets.values, reopened: false, stored: null };
    }
    const existing = await this.load(run);
    if (existing !== undefined) {
      return {
        selection: existing.record.selection,
        budgets: existing.record.budgets,
        reopened: true,
        stored: existing,
      };
    }
    const stored = await this.persist(run, resolve());
    return { selection: stored.record.selection, budgets: stored.record.budgets, reopened: false, stored };
  }
}

/** Options of {@link createSelectionStore}. */
export interface SelectionStoreOptions {
  /** The evidence fact log (DI token `TOKENS.FactLog` of `@asp/evidence`). */
  readonly log: FactLog;
  /** The host's resolved stage flags; persistence is stage 2 behaviour. */
  readonly flags: StageFlags;
}

/**
 * Create the Stage 2 {@link SelectionStore} over an evidence fact log.
 *
 * @example
 * ```ts
 * const store = await createMemoryStore();
 * const config = resolveConfiguration({ env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1" } });
 * const selections = createSelectionStore({ log: store.log, flags: config.flags });
 * const run = { root_frame_id: "f1", branch_id: "b1", turn_id: "t1", execution_id: "e1" };
 * await selections.resolveOnce(run, () => config); // resolves and persists
 * await selections.resolveOnce(run, () => config); // reopened: reads back, never re-resolves
 * ```
 */
export function createSelectionStore(options: SelectionStoreOptions): SelectionStore {
  return new SelectionStore(options.log, options.flags);
}
