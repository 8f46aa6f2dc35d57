import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, relative, resolve } from "node:path";
import type { LaunchRequest, LaunchResult } from "@asp/contracts";
import { BubblewrapError } from "./errors.js";

/** Where `bwrap` is looked for after the host's PATH: Debian's package installs it there. */
export const DEFAULT_BWRAP = "/usr/bin/bwrap";

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
  /** The host process's PATH (where `bwrap` is searched first). */
  readonly path: string | undefined;
  /** Where `bwrap` is looked for when the PATH has none ({@link DEFAULT_BWRAP}). */
  readonly fallback: string;
  /** The node binary the host runs on (used for the probe). */
  readonly execPath: string;
  /** Try `bwrap` once: can it create the namespaces a launch needs? */
  readonly probe: (bwrap: string, execPath: string) => ProbeResult;
}

/** The real host: `process.env.PATH`, `process.execPath`, and a `spawnSync` probe. */
export function realHost(): BubblewrapHost {
  return { path: process.env.PATH, fallback: DEFAULT_BWRAP, execPath: process.execPath, probe: probeBwrap };
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
 * The absolute path of `bwrap`: the first executable `bwrap` in the PATH's absolute entries
 * (a relative entry would resolve against whatever folder the host runs in), else
 * `fallback` ({@link DEFAULT_BWRAP}); null when there is none.
 */
export function findBwrap(path: string | undefined, fallback: string = DEFAULT_BWRAP): string | null {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, "bwrap");
    if (isExecutableFile(candidate)) return candidate;
  }
  return isAbsolute(fallback) && isExecutableFile(fallback) ? fallback : null;
}

const firstLine = (text: string): string => text.trim().split("\n")[0]?.slice(0, 300) ?? "";

/**
 * Run `bwrap` once with the launch's namespace flags over a read-only view of `/`, executing
 * `node -e ""`: it either creates the namespaces or says why not (no user namespaces for this
 * user, a seccomp filter in a container, a setuid-less build...). Never throws.
 */
export function probeBwrap(bwrap: string, execPath: string): ProbeResult {
  const version = spawnSync(bwrap, ["--version"], { encoding: "utf8", timeout: 10_000, env: {} });
  if (version.error !== undefined || version.status !== 0) {
    return {
      ok: false,
      reason: `${bwrap} --version failed: ${version.error?.message ?? (firstLine(version.stderr) || `exit ${version.status}`)}`,
    };
  }
  const run = spawnSync(
    bwrap,
    [...NAMESPACE_FLAGS, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", execPath, "-e", ""],
    { encoding: "utf8", timeout: 10_000, env: {} },
  );
  if (run.error !== undefined || run.status !== 0) {
    const why = run.error?.message ?? (firstLine(run.stderr) || `exit ${run.status ?? run.signal}`);
    return { ok: false, reason: `bwrap cannot create the sandbox's namespaces here: ${why}` };
  }
  return { ok: true, version: firstLine(version.stdout) || "bubblewrap" };
}

/** True when `path` is `folder` or inside it (both absolute, normalized). */
export function isWithin(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

const realOrSelf = (path: string): string => {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
};

/**
 * The folder of an executable's installation: `<prefix>` for `<prefix>/bin/<name>`, else the
 * executable's own folder; never `/` (that would bind the whole machine).
 */
export function installPrefix(executable: string): string {
  const dir = dirname(executable);
  const up = dirname(dir);
  return dir.endsWith("/bin") && up !== "/" ? up : dir;
}

/** The bwrap flags that rebuild the runtime read-only: system folders (or their symlinks), loader files, the executable's install. */
function runtimeBinds(executable: string): { args: string[]; bound: string[] } {
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
  const prefix = installPrefix(executable);
  if (!bound.some((b) => isWithin(prefix, b))) {
    args.push("--ro-bind", prefix, prefix);
    bound.push(prefix);
  }
  return { args, bound };
}

/**
 * The bwrap argument vector confining `request` (everything before the command): namespaces,
 * a fresh `/proc`, a minimal `/dev`, a tmpfs `/tmp`, the runtime and each `readOnly` folder
 * bound read-only, every `deny` folder that a bind would expose masked by an empty tmpfs, the
 * environment set from `request.env` only, and the working folder set to a read-only bound
 * folder. Nothing is writable but the sandbox's own tmpfs. Pure apart from reading the
 * runtime's layout (symlinks, which loader files exist).
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_REQUEST` when a path is not absolute or a read-only
 *   folder is a deny folder or contains one.
 */
export function bwrapArgs(request: LaunchRequest, executable: string): string[] {
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
  const args = [...NAMESPACE_FLAGS];
  for (const [name, value] of Object.entries(request.env)) args.push("--setenv", name, value);
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  const runtime = runtimeBinds(executable);
  args.push(...runtime.args);
  // After the tmpfs: a copy under /tmp is bound on top of the sandbox's own /tmp.
  for (const ro of readOnly) args.push("--ro-bind", ro, ro);
  // A deny folder under a runtime bind (a repository under /usr/local...) is masked, never shown.
  for (const d of deny) if (runtime.bound.some((b) => isWithin(d, b))) args.push("--tmpfs", d);
  const cwd = realOrSelf(request.cwd);
  const chdir = readOnly.some((ro) => isWithin(cwd, ro)) ? cwd : (readOnly[0] ?? "/");
  args.push("--chdir", chdir);
  return args;
}

/** The mechanism line reported per provider (at most 500 characters, as the schema allows). */
export function mechanismOf(version: string): string {
  return `${version}: user, pid, ipc, net, uts namespaces; read-only runtime and provider copy; tmpfs /tmp; no worktree, no store`.slice(
    0,
    500,
  );
}

/**
 * Confine a launch: the wrapped `bwrap` launch, `isolated` and without direct write, or the
 * launch unchanged, `advisory` with direct write and the exact reason, when `bwrap` is missing
 * or cannot create namespaces (probed once per `bwrap` path).
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_REQUEST` (see {@link bwrapArgs}).
 */
export function confine(
  request: LaunchRequest,
  host: BubblewrapHost,
  probes: Map<string, ProbeResult> = new Map(),
): LaunchResult {
  const unconfined = (reason: string): LaunchResult => ({
    executable: request.executable,
    args: [...request.args],
    cwd: request.cwd,
    env: { ...request.env },
    mode: "advisory",
    mechanism: "plain subprocess (bubblewrap unavailable)",
    directWrite: true,
    reason: reason.slice(0, 2000),
  });
  const bwrap = findBwrap(host.path, host.fallback);
  if (bwrap === null) return unconfined(`bwrap not found on the host's PATH nor at ${host.fallback}`);
  let probe = probes.get(bwrap);
  if (probe === undefined) {
    probe = host.probe(bwrap, host.execPath);
    probes.set(bwrap, probe);
  }
  if (!probe.ok) return unconfined(probe.reason);
  const executable = realOrSelf(request.executable);
  return {
    executable: bwrap,
    args: [...bwrapArgs(request, executable), "--", executable, ...request.args],
    cwd: request.cwd,
    // bwrap itself needs nothing; the provider's environment is set inside with --setenv.
    env: {},
    mode: "isolated",
    mechanism: mechanismOf(probe.version),
    directWrite: false,
  };
}
