import { execFileSync } from "node:child_process";
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Level } from "level";
import { afterEach } from "vitest";

const made: string[] = [];

/** A fresh temp dir removed after the test. */
export function tempDir(prefix = "asp-evidence-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * Age `paths` (mtime a minute back) so none is "racily clean" against a stat cache written next.
 * `utimes` sets each ctime to now, and filesystem clocks are coarse (a tick of a few ms), so a
 * cache file written in the same tick has the same mtime as those ctimes and git's rule rightly
 * re-hashes them. This waits on the condition itself: until a probe file written now has an
 * mtime past every ctime, however slow or busy the machine is.
 */
export async function ageFiles(paths: readonly string[]): Promise<void> {
  const old = new Date(Date.now() - 60_000);
  for (const p of paths) utimesSync(p, old, old);
  let newest = 0;
  for (const p of paths) newest = Math.max(newest, lstatSync(p).ctimeMs);
  const probe = join(tempDir("asp-clock-"), "probe");
  for (;;) {
    writeFileSync(probe, "");
    if (statSync(probe).mtimeMs > newest) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** The package root. */
export const PACKAGE_DIR = fileURLToPath(new URL("../../", import.meta.url));

function newest(dir: string): number {
  let max = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    max = Math.max(max, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return max;
}

/**
 * Child processes run the BUILT package (plain Node cannot run the TS sources). Build it when
 * `dist/` is missing or older than `src/`, serialized across vitest workers with a lock dir.
 */
export function ensureBuilt(): string {
  const entry = join(PACKAGE_DIR, "dist", "index.js");
  const lock = join(PACKAGE_DIR, "dist.build-lock");
  const fresh = (): boolean => {
    try {
      return statSync(entry).mtimeMs >= newest(join(PACKAGE_DIR, "src"));
    } catch {
      return false;
    }
  };
  if (fresh()) return entry;
  const started = Date.now();
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() - started > 120_000) throw new Error("timed out waiting for the dist build lock");
      execFileSync(process.execPath, ["-e", "setTimeout(()=>{},200)"]);
    }
  }
  try {
    if (!fresh()) {
      const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
      execFileSync(process.execPath, [tsc, "-b", PACKAGE_DIR], { stdio: "inherit" });
    }
  } finally {
    rmdirSync(lock);
  }
  return entry;
}

/** Open the store's database directly with `level`, bypassing `@asp/evidence` (to tamper or inspect). */
export async function withRawLevel<T>(dir: string, fn: (db: Level<string, Uint8Array>) => Promise<T>): Promise<T> {
  const db = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view", createIfMissing: false });
  await db.open();
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** A sublevel of a raw database with the encodings the store uses. */
export function rawSpace(db: Level<string, Uint8Array>, space: string) {
  return db.sublevel<string, Uint8Array>(space, { keyEncoding: "utf8", valueEncoding: "view" });
}

/** Every key/value of a raw sublevel, values as text. */
export async function dumpSpace(db: Level<string, Uint8Array>, space: string): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  for await (const [k, v] of rawSpace(db, space).iterator()) out.push([k, Buffer.from(v).toString("utf8")]);
  return out;
}

/**
 * The acknowledgements an appender child printed (`ack <seq> <digest>` lines). Only complete
 * lines count: a line cut by a kill was never a promise.
 */
export function parseAcks(out: string): Array<{ seq: number; digest: string }> {
  return out
    .split("\n")
    .slice(0, -1)
    .filter((l) => l.startsWith("ack "))
    .map((l) => {
      const [, seq, digest] = l.split(" ");
      return { seq: Number(seq), digest: digest as string };
    });
}
