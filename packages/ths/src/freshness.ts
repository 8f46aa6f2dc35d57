import { mkdirSync, realpathSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Assessment } from "@asp/contracts";

type ValidAsOf = Assessment["validAsOf"];

import {
  type Changeset,
  createStatCache,
  type Digest,
  diffTrees,
  digest,
  type EnvironmentSnapshot,
  type FactLog,
  isDigest,
  type ObjectStore,
  type StatCache,
  snapshotEnvironment,
  snapshotGitRevision,
  snapshotWorktree,
  TOKENS,
  type WorktreeSnapshot,
} from "@asp/evidence";
import { inject, injectable } from "./di.js";
import { type EnvironmentSetting, environmentExcludes, insideEnvironment, packageRoots } from "./environment.js";
import { readTrustedBase } from "./host-records.js";
import { THS_TOKENS } from "./tokens.js";

/** What the host binds one evaluation to (host §5). */
export interface Binding {
  /** The baseline: the snapshot tree id of the repository as it is now. */
  readonly baseline: Digest;
  /** The change under evaluation (base -> baseline), or null for a whole-tree evaluation. */
  readonly changeset: Changeset | null;
  /** Where the base came from: a git revision, the trusted base, or the empty tree (`none`: whole tree). */
  readonly baseFrom: "git" | "trusted" | "empty" | "none" | "hypothetical";
  /**
   * The dependency environment snapshotted next to the baseline (host §5, §9), or null when the
   * host declares none or no declared root exists. Requests carry it; answers must echo its tree.
   */
  readonly environment: EnvironmentSnapshot | null;
  /** What the worktree snapshot left out (untracked, ignored or excluded) and the submodules it does not hold. */
  readonly judged?: { readonly leftOut: number; readonly submodules: readonly string[] };
  /**
   * The seq of the latest entry under the repository's trusted-base key when the evaluation was
   * bound (`null`: none yet); absent for a hypothetical. A gate allow moves the trusted base only
   * if the key still has this head when it is recorded (a conditional append), so a host never
   * replaces a trusted base another host recorded meanwhile.
   */
  readonly trustedBaseSeq?: number | null;
}

/** Options of {@link FreshnessAuthority.issue}. */
export interface IssueOptions {
  /** A git revision to diff against (`--base`); otherwise the trusted base, or the empty tree. */
  readonly base?: string;
  /** Evaluate the whole tree (no changeset), e.g. a sweep. */
  readonly wholeTree?: boolean;
  /** Host-configured excludes in gitignore syntax (the store folder is always excluded). */
  readonly excludes?: readonly string[];
}

/**
 * The real path of a repository folder (symlinks resolved), so one repository has one key
 * however it is spelled. A folder that cannot be resolved keeps its absolute path: the
 * snapshot then fails with its own error.
 */
export function repoIdentity(repo: string): string {
  try {
    return realpathSync(resolve(repo));
  } catch {
    return resolve(repo);
  }
}

/**
 * The fact log state key under which the trusted base of a repository is recorded: the
 * after-tree of its last **allow at the gate call-site**. A deny, an indeterminate, an
 * interactive check or a sweep never writes it, so a decision never depends on what the host
 * evaluated before (THREAT-MODEL invariant 1).
 */
export function trustedBaseKey(repo: string): string {
  return `ths.trustedBase:${repoIdentity(repo)}`;
}

/**
 * The sole issuer of baselines (host §5): content-addressed snapshots written to the object
 * store, so every blob a provider may read is there, verified, under its digest. Snapshots of a
 * repository go through one stat cache per repository when the store is on disk, so the
 * re-snapshot after the providers answer reads only what changed.
 */
@injectable()
export class FreshnessAuthority {
  private readonly caches = new Map<string, StatCache>();

  constructor(
    @inject(TOKENS.ObjectStore) private readonly objects: ObjectStore,
    @inject(TOKENS.FactLog) private readonly log: FactLog,
    @inject(THS_TOKENS.StoreId) private readonly storeId: string,
    @inject(THS_TOKENS.SnapshotExcludes) private readonly excludes: readonly string[],
    @inject(THS_TOKENS.StatCacheDir) private readonly statCacheDir: { readonly dir: string | null },
    @inject(THS_TOKENS.Environment) private readonly environmentSetting: { readonly setting: EnvironmentSetting },
  ) {}

  /** Every exclude of a snapshot: the store folder, the host's, the environment's roots, then `extra`. */
  private excludesWith(extra: readonly string[] = []): string[] {
    // Anchored: the host's own folder at the root, never a folder of that name anywhere (inv. 11).
    return ["/.asp/", ...this.excludes, ...environmentExcludes(this.environmentSetting.setting), ...extra];
  }

  /** The stat cache of `repo` (one file per repository under the store), or undefined for a memory store. */
  private statCache(repo: string): StatCache | undefined {
    const dir = this.statCacheDir.dir;
    if (dir === null) return undefined;
    const id = repoIdentity(repo);
    let cache = this.caches.get(id);
    if (cache === undefined) {
      const name = digest({ repo: id, excludes: this.excludesWith() }).slice("sha256:".length, "sha256:".length + 32);
      mkdirSync(dir, { recursive: true });
      cache = createStatCache(join(dir, name));
      this.caches.set(id, cache);
    }
    return cache;
  }

  /**
   * Snapshot the worktree of `repo` into the store and return its tree id. The environment's
   * roots are never in it (host §9: dependencies are evidence, never part of the change).
   */
  async snapshot(repo: string, extraExcludes: readonly string[] = []): Promise<Digest> {
    return (await this.snapshotWhole(repo, extraExcludes)).tree;
  }

  /** {@link snapshot}, with what it left out. */
  private async snapshotWhole(repo: string, extraExcludes: readonly string[] = []): Promise<WorktreeSnapshot> {
    const cache = this.statCache(repo);
    // THREAT-MODEL invariant 11: every path the index tracks is judged, whatever the candidate's
    // ignore files, folder names or nested .git markers say; untracked ones follow .gitignore.
    return snapshotWorktree(repo, {
      tracked: "index",
      store: { id: this.storeId, objects: this.objects },
      excludes: this.excludesWith(extraExcludes),
      ...(cache === undefined ? {} : { statCache: cache }),
    });
  }

  /**
   * Snapshot `repo` and bind the evaluation to it. Without `base`, the change is measured from
   * the trusted base ({@link trustedBaseKey}), else from the empty tree.
   * @throws EvidenceError `ASP_EVIDENCE_IO` (unreadable folder), `ASP_EVIDENCE_GIT_FAILED` (bad `base`).
   */
  async issue(repo: string, options: IssueOptions = {}): Promise<Binding> {
    const whole = await this.snapshotWhole(repo, options.excludes);
    const baseline = whole.tree;
    const judged = { leftOut: whole.leftOut, submodules: whole.submodules };
    const environment = await this.environment(repo, baseline);
    // Whatever the base, the trusted base's head as of now: an allow at the gate records its own
    // after-tree there only on this head (receipts.ts, appendDecision).
    const fromTrusted = options.wholeTree !== true && options.base === undefined;
    const read = fromTrusted
      ? await this.readTrustedBase(repo)
      : { tree: null, seq: await this.log.latestSeq(trustedBaseKey(repo)) };
    const trustedBaseSeq = read.seq;
    if (options.wholeTree === true)
      return { baseline, changeset: null, baseFrom: "none", environment, judged, trustedBaseSeq };
    let base: Digest;
    let baseFrom: Binding["baseFrom"];
    if (options.base !== undefined) {
      const excludes = this.excludesWith(options.excludes);
      const target = { id: this.storeId, objects: this.objects };
      base = (await snapshotGitRevision(repo, options.base, { store: target, excludes })).tree;
      baseFrom = "git";
    } else if (read.tree !== null) {
      base = read.tree;
      baseFrom = "trusted";
    } else {
      base = await this.objects.putTree([]);
      baseFrom = "empty";
    }
    const changeset = await diffTrees(this.objects, base, baseline);
    return { baseline, changeset, baseFrom, environment, judged, trustedBaseSeq };
  }

  /**
   * Snapshot the dependency environment of `repo` for an evaluation of `baseline` (host §9): the
   * configured roots, or with `"auto"` the `node_modules` beside each `package.json` of `baseline`,
   * that exist as real folders. Stat-cached per repository beside the worktree stat caches, so a
   * re-snapshot hashes only what changed. Null when the host declares none or none exists.
   * @throws EvidenceError `ASP_EVIDENCE_IO` when a root cannot be read.
   */
  async environment(repo: string, baseline: Digest): Promise<EnvironmentSnapshot | null> {
    const setting = this.environmentSetting.setting;
    if (setting === false) return null;
    const roots = setting.roots === "auto" ? await packageRoots(this.objects, baseline) : setting.roots;
    if (roots.length === 0) return null;
    const dir = this.statCacheDir.dir;
    const statCacheDir =
      dir === null
        ? undefined
        : join(
            dir,
            `env-${digest({ repo: repoIdentity(repo), excludes: [...(setting.excludes ?? [])] }).slice("sha256:".length, "sha256:".length + 32)}`,
          );
    return snapshotEnvironment(repo, roots, {
      store: { id: this.storeId, objects: this.objects },
      ...(statCacheDir === undefined ? {} : { statCacheDir }),
      ...(setting.excludes === undefined ? {} : { excludes: setting.excludes }),
    });
  }

  /**
   * The trusted base of `repo`: the after-tree of its last allowed gate, when that tree is still
   * in the object store; otherwise null (the change is then measured from the empty tree, which
   * can only make a gate see more, never less).
   */
  async trustedBase(repo: string): Promise<Digest | null> {
    return (await this.readTrustedBase(repo)).tree;
  }

  /** {@link trustedBase} and the head seq of the trusted-base key, from one read. */
  private async readTrustedBase(repo: string): Promise<{ tree: Digest | null; seq: number | null }> {
    // THREAT-MODEL invariant 13: only a verified gate-allow receipt of the host's moves the base;
    // an entry some other writer appended under the key is ignored (verifyReceipts reports it).
    const { tree, seq } = await readTrustedBase(this.log, trustedBaseKey(repo));
    if (tree === null || !isDigest(tree) || !(await this.objects.has("tree", tree))) return { tree: null, seq };
    return { tree, seq };
  }

  /**
   * Bind an evaluation to a hypothetical after-tree built in the store (host §6 step 2): the
   * baseline is `after` and the changeset `before -> after`, so the checks see exactly the edit.
   * Only the dependency environment of `repo` is read from disk (it is never part of an edit).
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND` when either tree is not in the store.
   */
  async hypothetical(before: Digest, after: Digest, repo: string): Promise<Binding> {
    const changeset = await diffTrees(this.objects, before, after);
    return { baseline: after, changeset, baseFrom: "hypothetical", environment: await this.environment(repo, after) };
  }

  /**
   * Re-snapshot `repo` after the providers answered and say whether it still is `binding`'s
   * baseline (THREAT-MODEL invariant 6): null when it is, else the tree it is now.
   */
  async moved(repo: string, binding: Binding, extraExcludes: readonly string[] = []): Promise<Digest | null> {
    const now = await this.snapshot(repo, extraExcludes);
    return now === binding.baseline ? null : now;
  }

  /** True when an edit to `path` would write into the dependency environment (read-only, host §9). */
  insideEnvironment(path: string): boolean {
    return insideEnvironment(this.environmentSetting.setting, path);
  }

  /**
   * Re-snapshot the dependency environment after the providers answered (stat-cached, cheap) and
   * say whether it still is `binding`'s (THREAT-MODEL invariant 6: dependency content is evidence
   * too, so a write into `node_modules` mid-evaluation moves it): null when it is, else what it is
   * now (`"none"` when no root exists any more).
   */
  async environmentMoved(repo: string, binding: Binding): Promise<string | null> {
    const now = await this.environment(repo, binding.baseline);
    const was = binding.environment?.tree ?? null;
    const is = now?.tree ?? null;
    return was === is ? null : (is ?? "none");
  }
}

/**
 * Why a provider's `validAsOf` does not bind its answer to this request, or null when it does:
 * it must equal the request's baseline, changeset digest and environment tree (absent exactly
 * when the request carried none), and exactly the set of blobs the provider read through
 * `host/readBlob` (which the host knows).
 */
export function freshnessMismatch(
  expected: { readonly baseline: Digest; readonly changeset: Digest | null; readonly environment: Digest | null },
  reads: ReadonlySet<string>,
  got: ValidAsOf,
): string | null {
  if (got.baseline !== expected.baseline) return `validAsOf.baseline ${got.baseline} is not ${expected.baseline}`;
  if (got.changeset !== expected.changeset)
    return `validAsOf.changeset ${String(got.changeset)} is not ${String(expected.changeset)}`;
  if ((got.environment ?? null) !== expected.environment)
    return `validAsOf.environment ${got.environment ?? "(absent)"} is not ${expected.environment ?? "(absent)"}`;
  const claimed = new Set(got.reads);
  const missing = [...reads].filter((d) => !claimed.has(d));
  const extra = [...claimed].filter((d) => !reads.has(d));
  if (missing.length > 0 || extra.length > 0) {
    return `validAsOf.reads differs from the blobs read through callbacks (${missing.length} unclaimed, ${extra.length} never read)`;
  }
  return null;
}
