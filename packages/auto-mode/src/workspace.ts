import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { lstat, mkdir, open, realpath, rename } from "node:fs/promises";
import { dirname, join } from "node:path";
import { closedStdio } from "@asp/contracts";
import { type Digest, digestBytes, type Store, type Tree } from "@asp/evidence";
import type { ActionWorkspace, CommandResult } from "./actions.js";
import { AutoModeError } from "./errors.js";

/** Options of {@link createScratchWorkspace}. */
export interface ScratchWorkspaceOptions {
  /** An empty folder the host owns: the run's scratch workspace (never the user's repository). */
  readonly dir: string;
  /** Materialize this tree (the candidate's starting files, from the evidence store) into `dir` first. */
  readonly from?: { readonly objects: Pick<Store["objects"], "readTree" | "readBlob">; readonly tree: Digest };
  /**
   * The bubblewrap executable commands run under (default `/usr/bin/bwrap`). A command never runs
   * unconfined: without it `run` throws `ASP_AUTO_MODE_SANDBOX_UNAVAILABLE`.
   */
  readonly bwrap?: string;
  /** Per-command output cap in bytes (default 1 MiB per stream). */
  readonly maxOutputBytes?: number;
  /** Per-command time limit in ms (default 120,000); the run's abort ends a command sooner. */
  readonly commandTimeoutMs?: number;
  /** The largest file an adapter reads or a change may hold, in bytes (default 8 MiB). */
  readonly maxFileBytes?: number;
  /** Leave these starting files out of the workspace (e.g. credential-shaped names): the agent never sees them. */
  readonly omit?: (path: string) => boolean;
}

const RUNTIME_FOLDERS = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];
const RUNTIME_FILES = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives"];

function pathEscape(detail: string): never {
  throw new AutoModeError("ASP_AUTO_MODE_PATH_ESCAPE", `the path leaves the run's workspace: ${detail}`, {
    category: "integrity",
    data: { detail },
  });
}

async function materialize(
  objects: Pick<Store["objects"], "readTree" | "readBlob">,
  tree: Digest,
  dir: string,
  omit: (path: string) => boolean,
  prefix = "",
): Promise<void> {
  const t: Tree = await objects.readTree(tree);
  for (const e of t.entries) {
    const path = join(dir, e.name);
    const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
    if (e.mode === "040000") {
      await mkdir(path);
      await materialize(objects, e.digest, path, omit, rel);
    } else if ((e.mode === "100644" || e.mode === "100755") && !omit(rel)) {
      const handle = await open(path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
      try {
        await handle.writeFile(await objects.readBlob(e.digest));
      } finally {
        await handle.close();
      }
      if (e.mode === "100755") await fs.promises.chmod(path, 0o755);
    }
    // Links and submodules are not materialized: an agent's tools never follow a link out.
  }
}

/**
 * The host's own tool adapters over a scratch folder: `read` and `write` resolve every path
 * component without following a link (a planted link, a hard link or a swapped folder is a path
 * escape, never followed), `write` puts a new file in place by rename (never through the old
 * inode), and `run` executes one argv under bubblewrap with no
 * network, a private /tmp, the runtime read-only and only the workspace writable. `changes()` is
 * every file the run wrote whose bytes differ from its starting state.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` when `dir` is not an existing, empty folder.
 * @example
 * ```ts
 * const workspace = await createScratchWorkspace({ dir: await mkdtemp(join(tmpdir(), "run-")), from: { objects: store.objects, tree } });
 * createAutoRunner({ store, engine, reviewers, flags, workspace, permissions });
 * ```
 */
export async function createScratchWorkspace(options: ScratchWorkspaceOptions): Promise<ActionWorkspace> {
  let root: string;
  try {
    root = await realpath(options.dir);
    if (!(await lstat(root)).isDirectory() || (await fs.promises.readdir(root)).length > 0)
      throw new Error("not empty");
  } catch {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a scratch workspace needs an existing, empty folder", {
      data: { key: "dir" },
    });
  }
  if (options.from !== undefined) {
    await materialize(options.from.objects, options.from.tree, root, options.omit ?? (() => false));
  }
  const bwrap = options.bwrap ?? "/usr/bin/bwrap";
  const maxOutput = options.maxOutputBytes ?? 1024 * 1024;
  const commandTimeoutMs = options.commandTimeoutMs ?? 120_000;
  const maxFile = options.maxFileBytes ?? 8 * 1024 * 1024;
  /**
   * The workspace's starting state: every regular file's digest when the run first touched it
   * (taken once, lazily, so a caller may fill the folder after creating it).
   */
  let baseline: Map<string, Digest> | null = null;
  const start = async (): Promise<Map<string, Digest>> => {
    baseline ??= await stateOf(root, maxFile);
    return baseline;
  };
  /** Host paths never reach the model: errors name the workspace, not where it lives. */
  const hide = (error: unknown): never => {
    if ((error as { code?: unknown }).code?.toString().startsWith("ASP_")) throw error;
    throw new Error(String((error as Error)?.message ?? error).replaceAll(root, "<workspace>"));
  };

  /** The absolute path of a canonical relative path, every parent a real folder inside the root. */
  async function resolveInside(path: string, createParents: boolean): Promise<string> {
    const segments = path.split("/");
    let current = root;
    for (const [i, segment] of segments.entries()) {
      if (segment === "" || segment === "." || segment === "..") pathEscape(`${path} is not canonical`);
      const next = join(current, segment);
      const last = i === segments.length - 1;
      let stat: fs.Stats | null = null;
      try {
        stat = await lstat(next);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
      if (stat?.isSymbolicLink()) pathEscape(`${segments.slice(0, i + 1).join("/")} is a link`);
      if (!last) {
        if (stat === null) {
          if (!createParents) return join(current, ...segments.slice(i));
          await mkdir(next);
        } else if (!stat.isDirectory()) {
          pathEscape(`${segments.slice(0, i + 1).join("/")} is not a folder`);
        }
      } else if (stat !== null && !stat.isFile()) {
        pathEscape(`${path} is not a regular file`);
      }
      current = next;
    }
    return current;
  }

  async function readIfFile(abs: string): Promise<Uint8Array | null> {
    try {
      const handle = await open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      try {
        const { size, nlink } = await handle.stat();
        // A hard link shares its bytes with a path the host does not control (one outside the
        // workspace, possibly): never read through it, never written through it.
        if (nlink > 1) pathEscape("a file is a hard link shared with another path");
        if (size > maxFile) throw new Error(`the file is ${size} bytes, over the ${maxFile}-byte limit`);
        return new Uint8Array(await handle.readFile());
      } finally {
        await handle.close();
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return null;
      if (code === "ELOOP") pathEscape("a link was swapped in");
      throw error;
    }
  }

  return {
    async read(path) {
      await start();
      return readIfFile(await resolveInside(path, false)).catch(hide);
    },
    async write(path, bytes) {
      await start();
      if (bytes.length > maxFile) throw new Error(`the content is over the ${maxFile}-byte limit`);
      const abs = await resolveInside(path, true);
      const before = await readIfFile(abs).catch(hide);
      const changed = before === null || digestBytes(before) !== digestBytes(bytes);
      if (!changed) return { changed: false };
      // A new file beside it, renamed over it: the bytes never go through the old inode (a hard
      // link swapped in after the check stays untouched) and a reader never sees half a file.
      const mode = before === null ? 0o644 : (await lstat(abs)).mode & 0o777;
      const temp = join(dirname(abs), `.asp-write-${randomUUID()}`);
      try {
        const handle = await open(
          temp,
          fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
          mode,
        );
        try {
          await handle.writeFile(bytes);
          await handle.chmod(mode);
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(temp, abs);
      } catch (error) {
        await fs.promises.rm(temp, { force: true }).catch(() => undefined);
        throw hide(error);
      }
      return { changed: true };
    },
    async remove(path) {
      await start();
      const abs = await resolveInside(path, false);
      try {
        await fs.promises.unlink(abs);
        return { changed: true };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return { changed: false };
        throw hide(error);
      }
    },
    async run(argv, signal) {
      await start();
      const before = await stateOf(root, maxFile);
      const ran = await runConfined(bwrap, root, argv, signal, maxOutput, commandTimeoutMs);
      const after = await stateOf(root, maxFile);
      const changedPaths = [...new Set([...before.keys(), ...after.keys()])]
        .filter((p) => before.get(p) !== after.get(p))
        .sort();
      return { ...ran, changedPaths };
    },
    async changes() {
      const from = await start();
      const now = await stateOf(root, maxFile);
      const out: { path: string; bytes: Uint8Array | null }[] = [];
      const paths = [...new Set([...from.keys(), ...now.keys()])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      for (const path of paths) {
        const d = now.get(path);
        if (from.get(path) === d) continue;
        // A starting file that is gone (or no longer a regular file) is a removal.
        if (d === undefined) {
          out.push({ path, bytes: null });
          continue;
        }
        const bytes = await readIfFile(await resolveInside(path, false)).catch(hide);
        if (bytes !== null) out.push({ path, bytes });
      }
      return out;
    },
  };
}

/**
 * Every regular file under `root` (links and special files left out) with its digest: the state
 * a command is diffed by and `changes()` compares with the start. Refuses a tree over 100,000
 * files or a file over `maxFile` bytes (a workspace a command flooded).
 */
async function stateOf(root: string, maxFile: number): Promise<Map<string, Digest>> {
  const out = new Map<string, Digest>();
  const walk = async (dir: string, prefix: string): Promise<void> => {
    for (const entry of await fs.promises.readdir(dir, { withFileTypes: true })) {
      const rel = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
      const abs = join(dir, entry.name);
      if (entry.isDirectory()) await walk(abs, rel);
      else if (entry.isFile()) {
        if (out.size >= 100_000) throw new Error("the workspace holds over 100,000 files");
        const stat = await lstat(abs);
        if (stat.size > maxFile) throw new Error(`${rel} is ${stat.size} bytes, over the ${maxFile}-byte limit`);
        out.set(rel, digestBytes(new Uint8Array(await fs.promises.readFile(abs))));
      }
    }
  };
  await walk(root, "");
  return out;
}

/** Resource limits of a confined command (prlimit, when util-linux has it). */
const PRLIMIT = "/usr/bin/prlimit";
const LIMITS = ["--nproc=256", "--as=4294967296", "--fsize=67108864", "--nofile=1024", "--cpu=300"];

function runConfined(
  bwrap: string,
  root: string,
  argv: ReadonlyArray<string>,
  signal: AbortSignal,
  maxOutput: number,
  timeoutMs: number,
): Promise<Omit<CommandResult, "changedPaths">> {
  if (signal.aborted) {
    return Promise.reject(new Error("the run was stopped before the command could start"));
  }
  if (!fs.existsSync(bwrap)) {
    return Promise.reject(
      new AutoModeError(
        "ASP_AUTO_MODE_SANDBOX_UNAVAILABLE",
        `commands run only under bubblewrap, and ${bwrap} does not exist: install it (apt-get install bubblewrap)`,
        { data: { bwrap } },
      ),
    );
  }
  const args = [
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/local/bin:/usr/bin:/bin",
    "--setenv",
    "HOME",
    "/workspace",
  ];
  for (const f of RUNTIME_FOLDERS) if (fs.existsSync(f)) args.push("--ro-bind", f, f);
  for (const f of RUNTIME_FILES) if (fs.existsSync(f)) args.push("--ro-bind", f, f);
  // A bounded private /tmp (64 MiB of memory at most), the workspace the only writable folder.
  args.push("--proc", "/proc", "--dev", "/dev", "--size", "67108864", "--tmpfs", "/tmp");
  args.push("--bind", root, "/workspace", "--chdir", "/workspace");
  // Processes, address space, file size, descriptors and CPU seconds are bounded too.
  args.push("--", ...(fs.existsSync(PRLIMIT) ? [PRLIMIT, ...LIMITS, "--"] : []), ...argv);
  return new Promise((resolve, reject) => {
    const child = spawn(bwrap, args, {
      stdio: closedStdio(fs, ["ignore", "pipe", "pipe"]) as ["ignore", "pipe", "pipe"],
      env: {},
      shell: false,
    });
    const streams = { stdout: "", stderr: "" };
    const take = (name: "stdout" | "stderr") => (d: Buffer) => {
      if (streams[name].length < maxOutput)
        streams[name] += d.toString("utf8").slice(0, maxOutput - streams[name].length);
    };
    child.stdout?.on("data", take("stdout"));
    child.stderr?.on("data", take("stderr"));
    const kill = () => child.kill("SIGKILL");
    signal.addEventListener("abort", kill, { once: true });
    const timer = setTimeout(kill, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", kill);
      reject(
        new AutoModeError("ASP_AUTO_MODE_SANDBOX_UNAVAILABLE", `bubblewrap did not start: ${error.message}`, {
          cause: error,
          data: { bwrap },
        }),
      );
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", kill);
      resolve({ exitCode: code, stdout: streams.stdout, stderr: streams.stderr });
    });
  });
}
