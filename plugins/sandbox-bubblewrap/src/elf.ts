import { closeSync, openSync, readSync } from "node:fs";
import { BubblewrapError } from "./errors.js";

/** What the dynamic loader reads from one ELF object before it runs: its interpreter, libraries and search paths. */
export interface ElfLinks {
  /** `PT_INTERP`: the loader the kernel starts (absolute), or null for a static or shared object. */
  readonly interpreter: string | null;
  /** `DT_NEEDED` names, in order. */
  readonly needed: readonly string[];
  /** `DT_RPATH` entries (used only when there is no `DT_RUNPATH`), `:`-split, `$ORIGIN` unexpanded. */
  readonly rpath: readonly string[];
  /** `DT_RUNPATH` entries, `:`-split, `$ORIGIN` unexpanded. */
  readonly runpath: readonly string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const DT_RPATH = 15n;
const DT_RUNPATH = 29n;
/** Bounds on what a header may make us read: a hostile or broken file costs bounded time and memory. */
const MAX_PHNUM = 512;
const MAX_DYNAMIC = 4096;
const MAX_STRING = 4096;

const unreadable = (path: string, why: string): BubblewrapError =>
  new BubblewrapError(
    "ASP_BWRAP_RUNTIME_UNKNOWN",
    `cannot tell which shared libraries ${path} loads: ${why}; run the provider with a runtime installed under /usr (or /opt) whose libraries the sandbox can bind`,
    { data: { path } },
  );

/**
 * Read the dynamic-linking facts of the ELF file at `path` without running it (no `ldd`: that
 * executes the file). Null when the file is not ELF (a script, say). Little-endian ELF32 and
 * ELF64 only.
 *
 * @throws BubblewrapError `ASP_BWRAP_RUNTIME_UNKNOWN` when the file is ELF but cannot be read
 *   as such (big-endian, truncated, a header out of bounds).
 */
export function readElfLinks(path: string): ElfLinks | null {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw unreadable(path, (error as Error).message);
  }
  try {
    const read = (offset: bigint, length: number): Buffer => {
      const buf = Buffer.alloc(length);
      const got = readSync(fd, buf, 0, length, offset);
      if (got !== length) throw unreadable(path, `truncated at offset ${offset}`);
      return buf;
    };
    const ident = Buffer.alloc(16);
    if (readSync(fd, ident, 0, 16, 0) < 16 || ident.readUInt32BE(0) !== 0x7f454c46) return null;
    const is64 = ident[4] === 2;
    if (ident[4] !== 1 && !is64) throw unreadable(path, `unknown ELF class ${ident[4]}`);
    if (ident[5] !== 1) throw unreadable(path, "not a little-endian ELF file");
    const header = read(0n, is64 ? 64 : 52);
    const phoff = is64 ? header.readBigUInt64LE(0x20) : BigInt(header.readUInt32LE(0x1c));
    const phentsize = header.readUInt16LE(is64 ? 0x36 : 0x2a);
    const phnum = header.readUInt16LE(is64 ? 0x38 : 0x2c);
    if (phnum > MAX_PHNUM || phentsize < (is64 ? 56 : 32)) throw unreadable(path, "program headers out of bounds");
    const loads: Array<{ vaddr: bigint; offset: bigint; filesz: bigint }> = [];
    let interp: { offset: bigint; size: bigint } | null = null;
    let dynamic: { offset: bigint; size: bigint } | null = null;
    for (let i = 0; i < phnum; i++) {
      const ph = read(phoff + BigInt(i * phentsize), is64 ? 56 : 32);
      const type = ph.readUInt32LE(0);
      const offset = is64 ? ph.readBigUInt64LE(8) : BigInt(ph.readUInt32LE(4));
      const vaddr = is64 ? ph.readBigUInt64LE(16) : BigInt(ph.readUInt32LE(8));
      const filesz = is64 ? ph.readBigUInt64LE(32) : BigInt(ph.readUInt32LE(16));
      if (type === PT_LOAD) loads.push({ vaddr, offset, filesz });
      else if (type === PT_INTERP) interp = { offset, size: filesz };
      else if (type === PT_DYNAMIC) dynamic = { offset, size: filesz };
    }
    const cString = (offset: bigint): string => {
      const buf = Buffer.alloc(MAX_STRING);
      const got = readSync(fd, buf, 0, MAX_STRING, offset);
      const end = buf.subarray(0, got).indexOf(0);
      if (end < 0) throw unreadable(path, `unterminated string at offset ${offset}`);
      return buf.subarray(0, end).toString("utf8");
    };
    const interpreter = interp === null ? null : cString(interp.offset);
    if (dynamic === null) return { interpreter, needed: [], rpath: [], runpath: [] };
    const entry = is64 ? 16 : 8;
    const count = Math.min(Number(dynamic.size / BigInt(entry)), MAX_DYNAMIC);
    const table = read(dynamic.offset, count * entry);
    const tags: Array<[bigint, bigint]> = [];
    let strtab: bigint | null = null;
    for (let i = 0; i < count; i++) {
      const tag = is64 ? table.readBigInt64LE(i * entry) : BigInt(table.readInt32LE(i * entry));
      const val = is64 ? table.readBigUInt64LE(i * entry + 8) : BigInt(table.readUInt32LE(i * entry + 4));
      if (tag === DT_NULL) break;
      if (tag === DT_STRTAB) strtab = val;
      else if (tag === DT_NEEDED || tag === DT_RPATH || tag === DT_RUNPATH) tags.push([tag, val]);
    }
    if (tags.length === 0) return { interpreter, needed: [], rpath: [], runpath: [] };
    if (strtab === null) throw unreadable(path, "a dynamic section without a string table");
    const address = strtab;
    const segment = loads.find((l) => address >= l.vaddr && address < l.vaddr + l.filesz);
    if (segment === undefined) throw unreadable(path, "its string table lies in no loaded segment");
    const base = address - segment.vaddr + segment.offset;
    const needed: string[] = [];
    const rpath: string[] = [];
    const runpath: string[] = [];
    for (const [tag, val] of tags) {
      const s = cString(base + val);
      if (tag === DT_NEEDED) needed.push(s);
      else (tag === DT_RPATH ? rpath : runpath).push(...s.split(":").filter((p) => p !== ""));
    }
    return { interpreter, needed, rpath, runpath };
  } finally {
    closeSync(fd);
  }
}
