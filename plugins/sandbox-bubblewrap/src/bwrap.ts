import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { accessSync, constants, existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { closedStdio, isAspError, type LaunchRequest, type LaunchResult } from "@asp/contracts";
import { BubblewrapError } from "./errors.js";
import { type BubblewrapLimits, DEFAULT_LIMITS } from "./limits.js";
import { type FileBind, runtimeFiles } from "./runtime.js";
import { isWithin, machineHomes, realOrSelf, secretExposure } from "./secrets.js";

/** Where `bwrap` is looked for after the host's PATH: Debian's package installs it there. */
export const DEFAULT_BWRAP = "/usr/bin/bwrap";

/** Where `prlimit` (util-linux) is looked for after the host's PATH. */
export const DEFAULT_PRLIMIT = "/usr/bin/prlimit";

/**
 * The namespaces and process flags of every wrapped launch: a new user, pid, ipc, network and
 * uts namespace (cgroup when the kernel allows), killed with the host, in its own session (no
 * terminal injection through TIOCSTI), no capabilities, and an environment of exactly what the
 * host passed.
 */
export const NAMESPACE_FLAGS: readonly string[] = Object.freeze([
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
]);

/** System folders of the runtime, bound read-only when they exist (or re-created as the same symlink). */
export const RUNTIME_FOLDERS: readonly string[] = Object.freeze(["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"]);

/** Single runtime files the dynamic loader reads, bound read-only when they exist. */
export const RUNTIME_FILES: readonly string[] = Object.freeze(["/etc/ld.so.cache", "/etc/ld.so.conf"]);

/** What a probe of `bwrap` found. */
export type ProbeResult =
  | { readonly ok: true; readonly version: string }
  | { readonly ok: false; readonly reason: string };

/** The host facts a launch depends on, injectable so tests can pin them. */
export interface BubblewrapHost {
  /** The host process's PATH (where `bwrap` and `prlimit` are searched first). */
  readonly path: string | undefined;
  /** Where `bwrap` is looked for when the PATH has none ({@link DEFAULT_BWRAP}). */
  readonly fallback: string;
  /** The node binary the host runs on (used for the probe). */
  readonly execPath: string;
  /** Try `bwrap` once: can it create the sandbox a launch needs? */
  readonly probe: (bwrap: string, execPath: string, layout: LaunchLayout) => ProbeResult;
  /** The machine's home folders: no bind may be, or hold, one of them (see `machineHomes`). */
  readonly homes: readonly string[];
  /** The host's uid: `RLIMIT_NPROC` does not bind uid 0, so the mechanism says so. Null where unknown. */
  readonly uid: number | null;
  /** Where `prlimit` is looked for when the PATH has none ({@link DEFAULT_PRLIMIT}). */
  readonly prlimitFallback: string;
}

/** What shapes every launch besides the request: the budget, the homes, and `prlimit` if there is one. */
export interface LaunchLayout {
  readonly limits: BubblewrapLimits;
  readonly homes: readonly string[];
  /** Absolute path of `prlimit`, run inside the sandbox in front of the provider; null: none found. */
  readonly prlimit: string | null;
}

/** The real host: `process.env.PATH`, `process.execPath`, a `spawnSync` probe, the machine's homes and uid. */
export function realHost(): BubblewrapHost {
  return {
    path: process.env.PATH,
    fallback: DEFAULT_BWRAP,
    execPath: process.execPath,
    probe: probeBwrap,
    homes: machineHomes(),
    uid: typeof process.getuid === "function" ? process.getuid() : null,
    prlimitFallback: DEFAULT_PRLIMIT,
  };
}

const isExecutableFile = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return lstatSync(realpathSync(path)).isFile();
  } catch {
    return false;
  }
};

/**
 * The absolute path of the executable `name`: the first one in the PATH's absolute entries (a
 * relative entry would resolve against whatever folder the host runs in), else `fallback`;
 * null when there is none.
 */
export function findExecutable(name: string, path: string | undefined, fallback: string): string | null {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return isAbsolute(fallback) && isExecutableFile(fallback) ? fallback : null;
}

/** {@link findExecutable} for `bwrap`, falling back to {@link DEFAULT_BWRAP}. */
export function findBwrap(path: string | undefined, fallback: string = DEFAULT_BWRAP): string | null {
  return findExecutable("bwrap", path, fallback);
}

const firstLine = (text: string): string => text.trim().split("\n")[0]?.slice(0, 300) ?? "";

/**
 * Run `bwrap` once exactly as a launch of `node -e ""` would run (the same namespaces, binds,
 * tmpfs sizes and `prlimit` budget): it either creates the sandbox or says why not (no user
 * namespaces for this user, a seccomp filter in a container, a bwrap older than 0.5 without
 * `--size`...). The probe holds its stdio and `/dev/null` only. Never throws.
 */
export function probeBwrap(bwrap: string, execPath: string, layout: LaunchLayout = defaultLayout()): ProbeResult {
  const stdio = closedStdio(fs, ["ignore", "pipe", "pipe"]) as ["ignore", "pipe", "pipe", ...number[]];
  const version = spawnSync(bwrap, ["--version"], { encoding: "utf8", timeout: 10_000, env: {}, stdio });
  if (version.error !== undefined || version.status !== 0) {
    return {
      ok: false,
      reason: `${bwrap} --version failed: ${version.error?.message ?? (firstLine(version.stderr) || `exit ${version.status}`)}`,
    };
  }
  let argv: string[];
  try {
    argv = wrappedArgv({ executable: execPath, args: ["-e", ""], cwd: "/", env: {}, readOnly: [], deny: [] }, layout);
  } catch (error) {
    return { ok: false, reason: `bwrap cannot confine this host's node: ${(error as Error).message}` };
  }
  const run = spawnSync(bwrap, argv, { encoding: "utf8", timeout: 10_000, env: {}, stdio });
  if (run.error !== undefined || run.status !== 0) {
    const why = run.error?.message ?? (firstLine(run.stderr) || `exit ${run.status ?? run.signal}`);
    return { ok: false, reason: `bwrap cannot create the sandbox here: ${why}` };
  }
  return { ok: true, version: firstLine(version.stdout) || "bubblewrap" };
}

export { isWithin };

/** The system folders of the runtime: bwrap flags (read-only binds, or the same symlinks) and the real folders bound. */
function systemBinds(): { args: string[]; bound: string[] } {
  const args: string[] = [];
  const bound: string[] = [];
  for (const folder of RUNTIME_FOLDERS) {
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(folder);
    } catch {
      continue;
    }
    // Merged /usr: /bin -> usr/bin is re-created as the same symlink, so nothing new is exposed.
    if (stat.isSymbolicLink()) args.push("--symlink", readlinkSync(folder), folder);
    else if (stat.isDirectory()) {
      args.push("--ro-bind", folder, folder);
      bound.push(folder);
    }
  }
  for (const file of RUNTIME_FILES) {
    if (existsSync(file)) args.push("--ro-bind", file, file);
  }
  return { args, bound };
}

const secretFolder = (folder: string, exposes: string, what: string): BubblewrapError =>
  new BubblewrapError(
    "ASP_BWRAP_SECRET_FOLDER",
    `${what} ${folder} would show ${exposes}, which can hold the user's secrets; move the provider's code (or the runtime) out of the home folder, e.g. under /opt, and point the host configuration there`,
    { data: { folder, exposes } },
  );

/** The default layout: {@link DEFAULT_LIMITS}, this machine's homes, `prlimit` from the PATH. */
export function defaultLayout(): LaunchLayout {
  return {
    limits: DEFAULT_LIMITS,
    homes: machineHomes(),
    prlimit: findExecutable("prlimit", process.env.PATH, DEFAULT_PRLIMIT),
  };
}

/**
 * The bwrap argument vector confining `request` (everything before the command): namespaces,
 * a fresh `/proc`, a minimal read-only `/dev` with a bounded `/dev/shm`, a bounded tmpfs
 * `/tmp`, the system folders of the runtime, **exactly the files** the executable (and
 * `prlimit`) load from anywhere else (never their install prefix: `~/bin/node` binds that one
 * file, not the home), each `readOnly` folder bound read-only, every `deny` folder that a bind
 * would expose masked by an empty tmpfs, the environment set from `request.env` only, the
 * working folder set to a read-only bound folder, and the root remounted read-only. Nothing is
 * writable but `/tmp` and `/dev/shm`, each of its budgeted size.
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_REQUEST` when a path is not absolute or a read-only
 *   folder is a deny folder or contains one; `ASP_BWRAP_SECRET_FOLDER` when a folder it would
 *   bind is or holds a home folder or a credential folder; `ASP_BWRAP_RUNTIME_UNKNOWN` when it
 *   cannot tell which files the executable loads.
 */
export function bwrapArgs(
  request: LaunchRequest,
  executable: string,
  layout: LaunchLayout = defaultLayout(),
): string[] {
  for (const p of [request.cwd, ...request.readOnly, ...request.deny]) {
    if (!isAbsolute(p)) {
      throw new BubblewrapError("ASP_BWRAP_BAD_REQUEST", `launch path ${JSON.stringify(p)} is not absolute`, {
        data: { path: p },
      });
    }
  }
  const readOnly = [...new Set(request.readOnly.map(realOrSelf))];
  const deny = [...new Set(request.deny.map(realOrSelf))];
  for (const ro of readOnly) {
    const hidden = deny.find((d) => isWithin(d, ro));
    if (hidden !== undefined) {
      throw new BubblewrapError(
        "ASP_BWRAP_BAD_REQUEST",
        `read-only folder ${ro} holds ${hidden}, which the provider must never see`,
        { data: { readOnly: ro, deny: hidden } },
      );
    }
  }
  const system = systemBinds();
  // THREAT-MODEL invariant 12 (issue 32 hole 4): no bound folder is, or holds, a home folder.
  for (const folder of system.bound) {
    const exposes = secretExposure(realOrSelf(folder), layout.homes);
    if (exposes !== null) throw secretFolder(folder, exposes, "the system folder");
  }
  for (const ro of readOnly) {
    const exposes = secretExposure(ro, layout.homes);
    if (exposes !== null) throw secretFolder(ro, exposes, "the provider's code folder");
  }
  const visible = [...system.bound.map(realOrSelf), ...readOnly];
  const files = new Map<string, FileBind>();
  for (const exe of layout.prlimit === null ? [executable] : [executable, layout.prlimit]) {
    for (const f of runtimeFiles(exe, visible)) files.set(f.dest, f);
  }
  const { limits } = layout;
  const args = [...NAMESPACE_FLAGS];
  for (const [name, value] of Object.entries(request.env)) args.push("--setenv", name, value);
  // THREAT-MODEL invariant 12 (issue 32 hole 9): every writable place has its budgeted size.
  args.push("--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev");
  args.push("--size", String(limits.shmBytes), "--tmpfs", "/dev/shm");
  args.push("--size", String(limits.tmpBytes), "--tmpfs", "/tmp");
  args.push(...system.args);
  for (const f of files.values()) args.push("--ro-bind", f.source, f.dest);
  // After the tmpfs: a copy under /tmp is bound on top of the sandbox's own /tmp.
  for (const ro of readOnly) args.push("--ro-bind", ro, ro);
  // A deny folder under a bind (a repository under /usr/local...) is masked, never shown.
  for (const d of deny) if (visible.some((b) => isWithin(d, b))) args.push("--tmpfs", d);
  const cwd = realOrSelf(request.cwd);
  const chdir = readOnly.some((ro) => isWithin(cwd, ro)) ? cwd : (readOnly[0] ?? "/");
  // Last: the root bwrap builds the tree in is a tmpfs of half the machine's memory; read-only, it holds nothing.
  args.push("--remount-ro", "/", "--chdir", chdir);
  return args;
}

/**
 * The whole bwrap argv of `request`: {@link bwrapArgs}, `--`, then `prlimit` with the budget's
 * process and address-space bounds (soft and hard, so the provider cannot raise them), then the
 * real path of the executable and its arguments.
 *
 * @throws BubblewrapError as {@link bwrapArgs}.
 */
export function wrappedArgv(request: LaunchRequest, layout: LaunchLayout): string[] {
  const executable = realOrSelf(request.executable);
  const { limits, prlimit } = layout;
  const bound =
    prlimit === null ? [] : [prlimit, `--nproc=${limits.maxProcesses}`, `--as=${limits.maxAddressSpaceBytes}`, "--"];
  return [...bwrapArgs(request, executable, layout), "--", ...bound, executable, ...request.args];
}

const mib = (bytes: number): string =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;

/**
 * The mechanism line reported per provider (at most 500 characters, as the schema allows): the
 * namespaces, what is bound, and the budget as enforced (never a bound that does not hold: no
 * `prlimit`, or a host running as uid 0, where `RLIMIT_NPROC` does not apply, is said as such).
 */
export function mechanismOf(version: string, layout?: LaunchLayout, uid: number | null = null): string {
  const base = `${version}: user, pid, ipc, net, uts namespaces; read-only runtime files and provider copy; no worktree, no store`;
  if (layout === undefined) return base.slice(0, 500);
  const { limits } = layout;
  const disk = `tmpfs /tmp ${mib(limits.tmpBytes)}, /dev/shm ${mib(limits.shmBytes)}, the rest read-only`;
  const procs =
    layout.prlimit === null
      ? "processes and memory unbounded (no prlimit)"
      : uid === 0
        ? `address space ${mib(limits.maxAddressSpaceBytes)} per process; processes unbounded (the host runs as uid 0, which RLIMIT_NPROC does not bind)`
        : `at most ${limits.maxProcesses} processes, address space ${mib(limits.maxAddressSpaceBytes)} each`;
  return `${base}; ${disk}; ${procs}`.slice(0, 500);
}

/**
 * Confine a launch: the wrapped `bwrap` launch, `isolated` and without direct write, or the
 * launch unchanged, `advisory` with direct write and the exact reason, when `bwrap` is missing
 * or cannot create the sandbox (probed once per `bwrap` path), or when the launch cannot be
 * confined without showing a home folder (`ASP_BWRAP_SECRET_FOLDER`) or without knowing what
 * the executable loads (`ASP_BWRAP_RUNTIME_UNKNOWN`): never `isolated` then.
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_REQUEST` (see {@link bwrapArgs}).
 */
export function confine(
  request: LaunchRequest,
  host: BubblewrapHost,
  probes: Map<string, ProbeResult> = new Map(),
  limits: BubblewrapLimits = DEFAULT_LIMITS,
): LaunchResult {
  const unconfined = (reason: string, mechanism = "plain subprocess (bubblewrap unavailable)"): LaunchResult => ({
    executable: request.executable,
    args: [...request.args],
    cwd: request.cwd,
    env: { ...request.env },
    mode: "advisory",
    mechanism,
    directWrite: true,
    reason: reason.slice(0, 2000),
  });
  const bwrap = findBwrap(host.path, host.fallback);
  if (bwrap === null) return unconfined(`bwrap not found on the host's PATH nor at ${host.fallback}`);
  const layout: LaunchLayout = {
    limits,
    homes: host.homes,
    prlimit: findExecutable("prlimit", host.path, host.prlimitFallback),
  };
  let probe = probes.get(bwrap);
  if (probe === undefined) {
    probe = host.probe(bwrap, host.execPath, layout);
    probes.set(bwrap, probe);
  }
  if (!probe.ok) return unconfined(probe.reason);
  let args: string[];
  try {
    args = wrappedArgv(request, layout);
  } catch (error) {
    if (isAspError(error) && (error.code === "ASP_BWRAP_SECRET_FOLDER" || error.code === "ASP_BWRAP_RUNTIME_UNKNOWN")) {
      return unconfined(`${error.code}: ${error.message}`, "plain subprocess (bubblewrap cannot confine this layout)");
    }
    throw error;
  }
  return {
    executable: bwrap,
    args,
    cwd: request.cwd,
    // bwrap itself needs nothing; the provider's environment is set inside with --setenv.
    env: {},
    mode: "isolated",
    mechanism: mechanismOf(probe.version, layout, host.uid),
    directWrite: false,
  };
}
