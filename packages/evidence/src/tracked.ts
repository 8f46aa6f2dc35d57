import { runFile } from "./child.js";
import { EvidenceError } from "./errors.js";

/**
 * What the git index of a folder tracks (THREAT-MODEL invariant 11): the judged tree holds every
 * one of these paths whatever ignore files, excludes, folder names or `.git` markers the
 * candidate carries. Paths are relative to the folder, `/`-separated, valid UTF-8.
 */
export interface TrackedSet {
  /** Tracked files and links. */
  readonly files: ReadonlySet<string>;
  /** Every folder that holds a tracked path (its ancestors included; the root is ""). */
  readonly dirs: ReadonlySet<string>;
  /** Submodules (gitlinks): tracked, but their content is another repository's (reported, never judged). */
  readonly submodules: readonly string[];
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** `bytes` as UTF-8 text, or an `ASP_EVIDENCE_UNREPRESENTABLE_NAME` naming where it is. */
export function nameText(bytes: Uint8Array, where: string): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new EvidenceError(
      "ASP_EVIDENCE_UNREPRESENTABLE_NAME",
      `${where} holds a file name that is not valid UTF-8 (${Buffer.from(bytes).toString("hex").slice(0, 80)} in hex): the host cannot judge it, so it judges nothing; rename it`,
      { category: "input", data: { where, nameHex: Buffer.from(bytes).toString("hex").slice(0, 200) } },
    );
  }
}

/** The environment every git the snapshot runs gets: no prompts, no optional locks, no fsmonitor hook. */
export function gitEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  // The repository is the folder given, never one an inherited variable points at.
  for (const name of Object.keys(env))
    if (
      /^GIT_(DIR|WORK_TREE|INDEX_FILE|OBJECT_DIRECTORY|COMMON_DIR|NAMESPACE|CEILING_DIRECTORIES|ALTERNATE_OBJECT_DIRECTORIES|CONFIG|CONFIG_PARAMETERS|CONFIG_COUNT)$/.test(
        name,
      )
    )
      delete env[name];
  return { ...env, GIT_OPTIONAL_LOCKS: "0", GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" };
}

/**
 * The tracked set of `dir` from its git index (`git ls-files -z -s`, raw bytes), or null when
 * `dir` is not inside a git work tree. Runs with an argv array, no descriptor of this process
 * (`runFile`), `core.fsmonitor` off (a repository's configured hook never runs).
 *
 * @throws EvidenceError `ASP_EVIDENCE_UNREPRESENTABLE_NAME` for a tracked name that is not
 *   UTF-8; `ASP_EVIDENCE_GIT_FAILED` when git fails inside a work tree.
 */
export async function readTrackedSet(dir: string, git = "git"): Promise<TrackedSet | null> {
  const base = ["-c", "core.fsmonitor=false", "-c", "core.quotePath=false"];
  try {
    const inside = await runFile(git, [...base, "rev-parse", "--is-inside-work-tree"], { cwd: dir, env: gitEnv() });
    if (inside.stdout.toString("utf8").trim() !== "true") return null;
  } catch {
    return null; // not a work tree (or no git at all): the folder rule applies
  }
  let out: Buffer;
  try {
    out = (await runFile(git, [...base, "ls-files", "-z", "-s", "--full-name"], { cwd: dir, env: gitEnv() })).stdout;
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_GIT_FAILED", `git ls-files in ${dir} failed: ${(cause as Error).message}`, {
      cause,
      category: "input",
      data: { repo: dir, command: "ls-files" },
    });
  }
  // --full-name gives paths from the top of the work tree; keep those under `dir` (its prefix).
  const prefix = (
    await runFile(git, [...base, "rev-parse", "--show-prefix"], { cwd: dir, env: gitEnv() })
  ).stdout.toString("utf8");
  const cut = prefix.trim();
  const files = new Set<string>();
  const dirs = new Set<string>([""]);
  const submodules: string[] = [];
  let at = 0;
  while (at < out.length) {
    const end = out.indexOf(0, at);
    const record = out.subarray(at, end < 0 ? out.length : end);
    at = end < 0 ? out.length : end + 1;
    const tab = record.indexOf(9);
    if (tab < 0) continue;
    const mode = record.subarray(0, record.indexOf(32)).toString("latin1");
    const full = nameText(record.subarray(tab + 1), `the git index of ${dir}`);
    if (!full.startsWith(cut)) continue;
    const path = full.slice(cut.length);
    if (path === "") continue;
    if (mode === "160000") {
      submodules.push(path);
      continue;
    }
    files.add(path);
    for (let i = path.indexOf("/"); i >= 0; i = path.indexOf("/", i + 1)) dirs.add(path.slice(0, i));
  }
  return { files, dirs, submodules: submodules.sort() };
}
