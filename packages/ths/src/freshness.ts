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
  type FactLog,
  isDigest,
  type ObjectStore,
  type StatCache,
  snapshotGitRevision,
  snapshotWorktree,
  TOKENS,
} from "@asp/evidence";
import { inject, injectable } from "./di.js";
import { THS_TOKENS } from "./tokens.js";

/** What the host binds one evaluation to (host §5). */
export interface Binding {
  /** The baseline: the snapshot tree id of the repository as it is now. */
  readonly baseline: Digest;
  /** The change under evaluation (base -> baseline), or null for a whole-tree evaluation. */
  readonly changeset: Changeset | null;
  /** Where the base came from: a git revision, the trusted base, or the empty tree (`none`: whole tree). */
  readonly baseFrom: "git" | "trusted" | "empty" | "none" | "hypothetical";
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
  ) {}

  /** The stat cache of `repo` (one file per repository under the store), or undefined for a memory store. */
  private statCache(repo: string): StatCache | undefined {
    const dir = this.statCacheDir.dir;
    if (dir === null) return undefined;
    const id = repoIdentity(repo);
    let cache = this.caches.get(id);
    if (cache === undefined) {
      const name = digest({ repo: id, excludes: [...this.excludes] }).slice("sha256:".length, "sha256:".length + 32);
      mkdirSync(dir, { recursive: true });
      cache = createStatCache(join(dir, name));
      this.caches.set(id, cache);
    }
    return cache;
  }

  /** Snapshot the worktree of `repo` into the store and return its tree id. */
  async snapshot(repo: string, extraExcludes: readonly string[] = []): Promise<Digest> {
    const cache = this.statCache(repo);
    const { tree } = await snapshotWorktree(repo, {
      store: { id: this.storeId, objects: this.objects },
      excludes: [".asp/", ...this.excludes, ...extraExcludes],
      ...(cache === undefined ? {} : { statCache: cache }),
    });
    return tree;
  }

  /**
   * Snapshot `repo` and bind the evaluation to it. Without `base`, the change is measured from
   * the trusted base ({@link trustedBaseKey}), else from the empty tree.
   * @throws EvidenceError `ASP_EVIDENCE_IO` (unreadable folder), `ASP_EVIDENCE_GIT_FAILED` (bad `base`).
   */
  async issue(repo: string, options: IssueOptions = {}): Promise<Binding> {
    const baseline = await this.snapshot(repo, options.excludes);
    if (options.wholeTree === true) return { baseline, changeset: null, baseFrom: "none" };
    let base: Digest;
    let baseFrom: Binding["baseFrom"];
    if (options.base !== undefined) {
      const excludes = [".asp/", ...this.excludes, ...(options.excludes ?? [])];
      const target = { id: this.storeId, objects: this.objects };
      base = (await snapshotGitRevision(repo, options.base, { store: target, excludes })).tree;
      baseFrom = "git";
    } else {
      const trusted = await this.trustedBase(repo);
      if (trusted !== null) {
        base = trusted;
        baseFrom = "trusted";
      } else {
        base = await this.objects.putTree([]);
        baseFrom = "empty";
      }
    }
    const changeset = await diffTrees(this.objects, base, baseline);
    return { baseline, changeset, baseFrom };
  }

  /**
   * The trusted base of `repo`: the after-tree of its last allowed gate, when that tree is still
   * in the object store; otherwise null (the change is then measured from the empty tree, which
   * can only make a gate see more, never less).
   */
  async trustedBase(repo: string): Promise<Digest | null> {
    const last = await this.log.latest(trustedBaseKey(repo));
    const record = last?.record as { baseline?: unknown; decision?: unknown; callSite?: unknown } | undefined;
    if (record === undefined || record.decision !== "allow" || record.callSite !== "gate") return null;
    const tree = record.baseline;
    if (typeof tree !== "string" || !isDigest(tree) || !(await this.objects.has("tree", tree))) return null;
    return tree;
  }

  /**
   * Bind an evaluation to a hypothetical after-tree built in the store (host §6 step 2): the
   * baseline is `after` and the changeset `before -> after`, so the checks see exactly the edit.
   * Nothing is read from disk.
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND` when either tree is not in the store.
   */
  async hypothetical(before: Digest, after: Digest): Promise<Binding> {
    const changeset = await diffTrees(this.objects, before, after);
    return { baseline: after, changeset, baseFrom: "hypothetical" };
  }

  /**
   * Re-snapshot `repo` after the providers answered and say whether it still is `binding`'s
   * baseline (THREAT-MODEL invariant 6): null when it is, else the tree it is now.
   */
  async moved(repo: string, binding: Binding, extraExcludes: readonly string[] = []): Promise<Digest | null> {
    const now = await this.snapshot(repo, extraExcludes);
    return now === binding.baseline ? null : now;
  }
}

/**
 * Why a provider's `validAsOf` does not bind its answer to this request, or null when it does:
 * it must equal the request's baseline, changeset digest and exactly the set of blobs the
 * provider read through `host/readBlob` (which the host knows).
 */
export function freshnessMismatch(
  expected: { readonly baseline: Digest; readonly changeset: Digest | null },
  reads: ReadonlySet<string>,
  got: ValidAsOf,
): string | null {
  if (got.baseline !== expected.baseline) return `validAsOf.baseline ${got.baseline} is not ${expected.baseline}`;
  if (got.changeset !== expected.changeset)
    return `validAsOf.changeset ${String(got.changeset)} is not ${String(expected.changeset)}`;
  const claimed = new Set(got.reads);
  const missing = [...reads].filter((d) => !claimed.has(d));
  const extra = [...claimed].filter((d) => !reads.has(d));
  if (missing.length > 0 || extra.length > 0) {
    return `validAsOf.reads differs from the blobs read through callbacks (${missing.length} unclaimed, ${extra.length} never read)`;
  }
  return null;
}
