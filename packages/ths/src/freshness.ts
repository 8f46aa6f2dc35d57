import { resolve } from "node:path";
import type { Assessment } from "@asp/contracts";

type ValidAsOf = Assessment["validAsOf"];

import {
  type Changeset,
  type Digest,
  diffTrees,
  type FactLog,
  type ObjectStore,
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
  /** Where the base came from: a git revision, the last recorded baseline, or the empty tree. */
  readonly baseFrom: "git" | "recorded" | "empty" | "none";
}

/** Options of {@link FreshnessAuthority.issue}. */
export interface IssueOptions {
  /** A git revision to diff against (`--base`); otherwise the last recorded baseline, or the empty tree. */
  readonly base?: string;
  /** Evaluate the whole tree (no changeset), e.g. a sweep. */
  readonly wholeTree?: boolean;
  /** Host-configured excludes in gitignore syntax (the store folder is always excluded). */
  readonly excludes?: readonly string[];
}

/** The fact log state key under which the last baseline of a repository is recorded. */
export function baselineStateKey(repo: string): string {
  return `ths.baseline:${resolve(repo)}`;
}

/**
 * The sole issuer of baselines (host §5): content-addressed snapshots written to the object
 * store, so every blob a provider may read is there, verified, under its digest.
 */
@injectable()
export class FreshnessAuthority {
  constructor(
    @inject(TOKENS.ObjectStore) private readonly objects: ObjectStore,
    @inject(TOKENS.FactLog) private readonly log: FactLog,
    @inject(THS_TOKENS.StoreId) private readonly storeId: string,
    @inject(THS_TOKENS.SnapshotExcludes) private readonly excludes: readonly string[],
  ) {}

  /**
   * Snapshot `repo` and bind the evaluation to it.
   * @throws EvidenceError `ASP_EVIDENCE_IO` (unreadable folder), `ASP_EVIDENCE_GIT_FAILED` (bad `base`).
   */
  async issue(repo: string, options: IssueOptions = {}): Promise<Binding> {
    const target = { id: this.storeId, objects: this.objects };
    const excludes = [".asp/", ...this.excludes, ...(options.excludes ?? [])];
    const { tree: baseline } = await snapshotWorktree(repo, { store: target, excludes });
    if (options.wholeTree === true) return { baseline, changeset: null, baseFrom: "none" };
    let base: Digest;
    let baseFrom: Binding["baseFrom"];
    if (options.base !== undefined) {
      base = (await snapshotGitRevision(repo, options.base, { store: target, excludes })).tree;
      baseFrom = "git";
    } else {
      const last = await this.log.latest(baselineStateKey(repo));
      const recorded = (last?.record as { baseline?: unknown } | undefined)?.baseline;
      if (typeof recorded === "string" && (await this.objects.has("tree", recorded as Digest))) {
        base = recorded as Digest;
        baseFrom = "recorded";
      } else {
        base = await this.objects.putTree([]);
        baseFrom = "empty";
      }
    }
    const changeset = await diffTrees(this.objects, base, baseline);
    return { baseline, changeset, baseFrom };
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
