import { closeSync, existsSync, openSync, readSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, normalize } from "node:path";
import { readElfLinks } from "./elf.js";
import { BubblewrapError } from "./errors.js";
import { isWithin, realOrSelf } from "./secrets.js";

/** One file bound read-only at `dest` inside the sandbox, from `source` (its real path) outside. */
export interface FileBind {
  readonly source: string;
  readonly dest: string;
}

/** How many objects (executables, interpreters, libraries) one launch may pull in before the sandbox gives up. */
const MAX_OBJECTS = 256;
/** The kernel follows at most four `#!` interpreters. */
const MAX_SHEBANG_DEPTH = 4;

const unknown = (path: string, why: string): BubblewrapError =>
  new BubblewrapError(
    "ASP_BWRAP_RUNTIME_UNKNOWN",
    `cannot tell which files ${path} loads: ${why}; run the provider with a runtime installed under /usr (or /opt) whose libraries the sandbox can bind`,
    { data: { path } },
  );

/** The `#!` interpreter of a script (absolute), null when the file is not a script. */
function shebang(path: string): string | null {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(256);
    const got = readSync(fd, buf, 0, buf.length, 0);
    const head = buf.subarray(0, got);
    if (head[0] !== 0x23 || head[1] !== 0x21) return null;
    const line = head.subarray(2, head.indexOf(0x0a) < 0 ? head.length : head.indexOf(0x0a)).toString("utf8");
    const interpreter = line.trim().split(/[ \t]+/)[0] ?? "";
    if (!isAbsolute(interpreter))
      throw unknown(path, `its #! interpreter ${JSON.stringify(interpreter)} is not absolute`);
    return interpreter;
  } finally {
    closeSync(fd);
  }
}

/** `$ORIGIN` and `${ORIGIN}` expanded; any other `$` token (`$LIB`, `$PLATFORM`) is refused. */
function expand(entry: string, origin: string, object: string): string {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the dynamic loader's own token, not a placeholder.
  const out = entry.replaceAll("${ORIGIN}", origin).replaceAll("$ORIGIN", origin);
  if (out.includes("$"))
    throw unknown(object, `its library search path ${JSON.stringify(entry)} uses a token the sandbox does not expand`);
  return normalize(isAbsolute(out) ? out : join(origin, out));
}

/**
 * Exactly the files outside the `visible` folders that running `executable` loads: the file
 * itself, its `#!` interpreter (and that one's), its ELF interpreter and every shared library
 * found through a `DT_RPATH`/`DT_RUNPATH` folder, recursively. A library found in none of those
 * is looked up by the loader in the system folders (`/etc/ld.so.cache`, `/lib`, `/usr/lib`),
 * which the sandbox binds whole. Nothing is executed: the files are read, not run (`ldd` runs them).
 * Each file is bound at its real path, and also at the path it is reached by when that is not
 * inside a `visible` folder (a library under `$ORIGIN/../lib` that is a symbolic link).
 *
 * @param visible - real paths of the folders already bound (the system folders and the provider's code).
 * @throws BubblewrapError `ASP_BWRAP_RUNTIME_UNKNOWN` when a file cannot be read as what it
 *   claims to be, or a search path uses `$LIB`/`$PLATFORM`, or more than 256 objects are involved.
 */
export function runtimeFiles(executable: string, visible: readonly string[]): FileBind[] {
  const binds = new Map<string, FileBind>();
  const seen = new Set<string>();
  const covered = (real: string): boolean => visible.some((v) => isWithin(real, v));
  const bind = (path: string): string => {
    let real: string;
    try {
      real = realpathSync(path);
      if (!statSync(real).isFile()) throw new Error("not a regular file");
    } catch (error) {
      throw unknown(path, (error as Error).message);
    }
    if (!covered(real)) {
      binds.set(real, { source: real, dest: real });
      if (path !== real && !covered(path)) binds.set(path, { source: real, dest: path });
    }
    return real;
  };
  // `origin`: the folder the loader sees the object in ($ORIGIN), `exeRpath`: the executable's DT_RPATH.
  const visit = (path: string, origin: string, exeRpath: readonly string[] | null, depth: number): void => {
    const key = `${path}\0${origin}`;
    if (seen.has(key)) return;
    seen.add(key);
    if (seen.size > MAX_OBJECTS) throw unknown(executable, `it pulls in more than ${MAX_OBJECTS} objects`);
    const real = bind(path);
    const interpreter = shebang(real);
    if (interpreter !== null) {
      if (depth >= MAX_SHEBANG_DEPTH) throw unknown(path, "its #! interpreters nest too deep");
      visit(interpreter, dirname(realOrSelf(interpreter)), null, depth + 1);
      return;
    }
    const links = readElfLinks(real);
    if (links === null) return; // neither a script nor ELF: exec fails inside as it would outside
    if (links.interpreter !== null) visit(links.interpreter, dirname(realOrSelf(links.interpreter)), null, depth);
    const rpath = exeRpath ?? links.rpath;
    const dirs =
      links.runpath.length > 0
        ? links.runpath.map((e) => expand(e, origin, path))
        : [...links.rpath, ...(exeRpath ?? [])].map((e) => expand(e, origin, path));
    for (const name of links.needed) {
      if (name.includes("/")) {
        if (!isAbsolute(name)) throw unknown(path, `it needs the relative library ${JSON.stringify(name)}`);
        visit(name, dirname(name), rpath, depth);
        continue;
      }
      const found = dirs.map((d) => join(d, name)).find((p) => existsSync(p));
      if (found !== undefined) visit(found, dirname(found), rpath, depth);
    }
  };
  const real = realOrSelf(executable);
  visit(real, dirname(real), null, 0);
  return [...binds.values()];
}
