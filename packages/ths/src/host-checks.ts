import { resolve } from "node:path";
import type { CallSite, DecisionEnvelope } from "@asp/contracts";
import { type Digest, isDigest, isNormalizedPath, type ObjectStore, runFile, snapshotGitRevision } from "@asp/evidence";
import type { HostChecks, HostChecksFinding, HostChecksParams, HostChecksResult } from "@asp/plugin-host";
import { lookupPath, type PathAfter, treeWith } from "./apply/tree.js";
import { pathEscape } from "./apply/validate.js";
import { ThsError } from "./errors.js";
import type { EvaluateOptions, EvaluateResult } from "./host.js";

/** Options of {@link createHostChecks}. */
export interface HostChecksOptions {
  /** The composed host whose granted check providers evaluate (its `evaluate`). */
  readonly host: { evaluate(callSite: CallSite, options?: EvaluateOptions): Promise<EvaluateResult> };
  /** The host's store: the candidate's blobs are read from its objects and the after-tree is built there. */
  readonly store: { readonly id: string; readonly objects: ObjectStore };
  /** The repository the candidate changes (its dependency environment is the only thing read from disk). */
  readonly repo: string;
  /** The git revision whose committed tree is the trusted base (default `HEAD`; never the worktree). */
  readonly base?: string;
  /** The call-site whose required checks run (default `gate`: never allow on any failure). */
  readonly callSite?: CallSite;
  /** Extra snapshot excludes of the host configuration, so the base is the tree a gate would see. */
  readonly excludes?: readonly string[];
}

/** At most this many files per evaluation: the request comes from a plugin (invariant 10). */
const MAX_FILES = 10_000;

function refused(
  code: "ASP_THS_HOST_CHECKS_BAD_PATH" | "ASP_THS_HOST_CHECKS_BAD_FILES",
  message: string,
  data: object,
) {
  return new ThsError(code, message, { data: { ...data } });
}

/**
 * Why a candidate path may not be laid over the base, or null. Fails closed: absolute, `.`/`..`,
 * backslash, NUL, not normalized, or any `.git` / `.asp` component (a candidate never writes
 * repository metadata or the host's own folder, at any depth).
 */
function badPath(path: unknown): string | null {
  if (typeof path !== "string") return "is not a string";
  const escapes = pathEscape(path);
  if (escapes !== null) return escapes;
  if (!isNormalizedPath(path)) return `${JSON.stringify(path.slice(0, 200))} is not a normalized relative path`;
  const meta = path.split("/").find((s) => [".git", ".asp"].includes(s.normalize("NFKC").toLowerCase()));
  return meta === undefined ? null : `${JSON.stringify(path.slice(0, 200))} is inside ${meta}/`;
}

/**
 * One path of a request, checked: a safe path (see {@link badPath}) not already named by the
 * request (written or deleted). `field` is where it came from (`files[3]`, `deleted[0]`).
 *
 * @throws ThsError `ASP_THS_HOST_CHECKS_BAD_PATH`, `ASP_THS_HOST_CHECKS_BAD_FILES` (named twice).
 */
function checkPath(field: string, path: unknown, seen: ReadonlyMap<string, unknown>): string {
  const why = badPath(path);
  if (why !== null) {
    throw refused("ASP_THS_HOST_CHECKS_BAD_PATH", `${field}: ${why}`, {
      field,
      path: String(path).slice(0, 4096),
    });
  }
  const p = path as string;
  if (seen.has(p)) {
    throw refused("ASP_THS_HOST_CHECKS_BAD_FILES", `${field}: ${p} is named twice (written or deleted)`, {
      path: p,
    });
  }
  return p;
}

/**
 * The files and removals of a request, checked before anything is evaluated: closed shapes, at
 * most {@link MAX_FILES} paths over both lists, every path safe and named once, every written
 * digest a blob the store holds. A removal maps to null.
 *
 * @throws ThsError `ASP_THS_HOST_CHECKS_BAD_PATH`, `ASP_THS_HOST_CHECKS_BAD_FILES`.
 */
async function checkFiles(objects: ObjectStore, params: unknown): Promise<ReadonlyMap<string, Digest | null>> {
  const files = (params as { files?: unknown } | null)?.files;
  const deleted = (params as { deleted?: unknown } | null)?.deleted ?? [];
  if (!Array.isArray(files)) throw refused("ASP_THS_HOST_CHECKS_BAD_FILES", "files must be an array", {});
  if (!Array.isArray(deleted)) throw refused("ASP_THS_HOST_CHECKS_BAD_FILES", "deleted must be an array of paths", {});
  if (files.length + deleted.length > MAX_FILES) {
    throw refused("ASP_THS_HOST_CHECKS_BAD_FILES", `files and deleted name at most ${MAX_FILES} paths together`, {
      files: files.length,
      deleted: deleted.length,
    });
  }
  const out = new Map<string, Digest | null>();
  for (const [i, f] of files.entries()) {
    const { path, digest } = (f ?? {}) as { path?: unknown; digest?: unknown };
    const p = checkPath(`files[${i}]`, path, out);
    if (typeof digest !== "string" || !isDigest(digest) || !(await objects.has("blob", digest as Digest))) {
      throw refused("ASP_THS_HOST_CHECKS_BAD_FILES", `files[${i}]: ${p} names no blob the store holds`, { path: p });
    }
    out.set(p, digest as Digest);
  }
  for (const [i, path] of deleted.entries()) out.set(checkPath(`deleted[${i}]`, path, out), null);
  return out;
}

/**
 * The after-tree: `base` with each file set to its blob, keeping an existing file's mode (new
 * files are `100644`), and each deleted path (null) removed. A path below a file, through a
 * symbolic link, or onto a folder is refused; deleting a path the base does not hold changes
 * nothing, deleting a link removes the link.
 *
 * @throws ThsError `ASP_THS_HOST_CHECKS_BAD_PATH`.
 */
async function afterTree(
  objects: ObjectStore,
  base: Digest,
  files: ReadonlyMap<string, Digest | null>,
): Promise<Digest> {
  const writes = new Map<string, PathAfter>();
  for (const [path, digest] of files) {
    const at = await lookupPath(objects, base, path);
    if (digest === null) {
      if (at.kind === "through-link" || at.kind === "under-file" || at.kind === "directory") {
        throw refused("ASP_THS_HOST_CHECKS_BAD_PATH", `cannot delete ${path}: it is ${at.kind} in the base tree`, {
          path,
          kind: at.kind,
        });
      }
      if (at.kind === "file" || at.kind === "link") writes.set(path, null);
      continue;
    }
    if (at.kind === "through-link" || at.kind === "under-file" || at.kind === "directory" || at.kind === "link") {
      throw refused("ASP_THS_HOST_CHECKS_BAD_PATH", `${path} is ${at.kind} in the base tree`, { path, kind: at.kind });
    }
    writes.set(path, { digest, mode: at.kind === "file" ? at.mode : "100644" });
  }
  return treeWith(objects, base, writes);
}

/**
 * The committed tree of a repository folder at git revision `rev`, in the object store: the
 * revision's tree when `repo` is the root of its git work tree, else (a folder inside a larger
 * repository, like `examples/demo-repo` in this one) the subtree at the folder's path. Never the
 * worktree. Git runs with an argv array, never a shell.
 *
 * @throws ThsError `ASP_THS_BAD_REQUEST` when the folder is not inside a git work tree or holds
 *   nothing at `rev`; EvidenceError `ASP_EVIDENCE_GIT_FAILED` when git fails.
 */
export async function committedTree(
  repo: string,
  rev: string,
  store: { readonly id: string; readonly objects: ObjectStore },
  excludes: readonly string[] = [],
): Promise<Digest> {
  const dir = resolve(repo);
  let prefix: string;
  try {
    prefix = (await runFile("git", ["rev-parse", "--show-prefix"], { cwd: dir })).stdout.toString("utf8").trim();
  } catch (cause) {
    throw new ThsError("ASP_THS_BAD_REQUEST", `${dir} is not inside a git work tree`, { cause, data: { repo: dir } });
  }
  const { tree } = await snapshotGitRevision(dir, rev, { store, excludes });
  const path = prefix.replace(/\/$/, "");
  if (path === "") return tree;
  const at = await lookupPath(store.objects, tree, path);
  if (at.kind !== "directory") {
    throw new ThsError("ASP_THS_BAD_REQUEST", `${rev} holds no folder ${path}`, { data: { repo: dir, rev, path } });
  }
  return at.digest;
}

/** The gating findings of an envelope, as the host decided them (disposition and effective severity). */
export function gatingFindings(envelope: DecisionEnvelope): HostChecksFinding[] {
  return envelope.findings
    .filter((f) => f.disposition === "gating")
    .map((f) => {
      const range = f.diagnostic.range;
      return {
        provider: f.provider.id,
        ...(range === undefined ? {} : { path: range.path, line: range.start.line + 1 }),
        severity: f.effectiveSeverity,
        code: f.diagnostic.code,
        message: f.diagnostic.message,
      };
    });
}

/**
 * The `asp.plugin.HostChecks` port over a composed host and one repository (issue 14 item 10): a
 * verifier's files, as blobs already in the store, are laid over the trusted base (the committed
 * tree of the repository folder at a git revision, default `HEAD`, see {@link committedTree};
 * never the worktree) into an after-tree built in the object store
 * only; the host evaluates that hypothetical change at the call-site (default `gate`) exactly as
 * a mediated apply validates one, and writes a receipt before answering. The trusted base never
 * moves and the worktree is never read or written. Same files, same base, same policy: same decision.
 *
 * `params.deleted` names paths the change removes (a path the base lacks is nothing to remove).
 *
 * `evaluate` throws ThsError `ASP_THS_HOST_CHECKS_BAD_PATH` (a written or deleted path that is
 * absolute, `..`, `.git`, `.asp`, not normalized, through a link or below a file in the base, or a
 * deletion of a folder) or `ASP_THS_HOST_CHECKS_BAD_FILES` (not an array, more than 10,000 paths
 * over `files` and `deleted`, a path named twice, a blob the store does not hold): nothing is
 * evaluated then.
 *
 * @example
 * ```ts
 * const checks = createHostChecks({ host, store: host.store, repo: "./repo" });
 * const { decision, receipt_id, findings } = await checks.evaluate({ files: [{ path: "src/a.ts", digest }] });
 * ```
 */
export function createHostChecks(options: HostChecksOptions): HostChecks {
  const repo = resolve(options.repo);
  const callSite = options.callSite ?? "gate";
  const { store, host } = options;
  const objects = store.objects;
  return Object.freeze({
    async evaluate(params: HostChecksParams): Promise<HostChecksResult> {
      const files = await checkFiles(objects, params);
      const base = await committedTree(repo, options.base ?? "HEAD", store, options.excludes ?? []);
      const after = await afterTree(objects, base, files);
      const { envelope, receipt } = await host.evaluate(callSite, { repo, hypothetical: { before: base, after } });
      return { decision: envelope.decision, receipt_id: receipt.receiptId, findings: gatingFindings(envelope) };
    },
  });
}
