import { execFileSync } from "node:child_process";
import { constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { open as openFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { canonicalize, createStatCache, openStore, type Store, snapshotWorktree } from "@asp/evidence";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

/** The slice of `level` the raw baseline uses. */
interface RawLevel {
  open(): Promise<void>;
  batch(ops: Array<{ type: "put"; key: string; value: Uint8Array }>, options: { sync: boolean }): Promise<void>;
  close(): Promise<void>;
}

/**
 * The very `level` build `@asp/evidence` runs on (resolved from its package, so the baseline and
 * the subject share one LevelDB binary, and the bench needs no dependency of its own on it).
 */
function rawLevel(location: string): RawLevel {
  const req = createRequire(import.meta.resolve("@asp/evidence"));
  const { Level } = req("level") as { Level: new (location: string, options: object) => RawLevel };
  return new Level(location, { keyEncoding: "utf8", valueEncoding: "view" });
}

const FILES = 10_000;
const AVG_BYTES = 4096;

/** Deterministic PRNG so every run generates the same tree. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * 10,000 files of 1–7 KiB (4 KiB on average) in nested folders: 10 top-level folders, 10
 * subfolders each, 100 files per leaf; a root .gitignore and a few ignored files.
 */
function generateTree(root: string): void {
  const random = prng(7);
  const chunk = Buffer.alloc(8192);
  for (let i = 0; i < chunk.length; i++) chunk[i] = 32 + Math.floor(random() * 94);
  writeFileSync(join(root, ".gitignore"), "*.log\nbuild/\n");
  mkdirSync(join(root, "build"));
  writeFileSync(join(root, "build", "out.js"), "ignored");
  for (let f = 0; f < FILES; f++) {
    const dir = join(root, `pkg${f % 10}`, `mod${Math.floor(f / 10) % 10}`);
    if (f < 100) mkdirSync(dir, { recursive: true });
    const size = 1024 + Math.floor(random() * (2 * AVG_BYTES - 2048));
    const start = Math.floor(random() * (chunk.length - size));
    const body = Buffer.concat([Buffer.from(`// file ${f}\n`), chunk.subarray(start, start + size)]);
    writeFileSync(join(dir, `file${f}.ts`), body);
    if (f % 1000 === 0) writeFileSync(join(dir, `debug${f}.log`), "ignored");
  }
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@asp.local", ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1" },
    maxBuffer: 64 * 1024 * 1024,
  });
}

const suite: Suite = {
  name: "evidence",
  description:
    "worktree snapshots against git on 10,000 files of 4 KiB, and synced, anchored fact-log appends against raw level batches",
  async run(ctx) {
    const base = mkdtempSync(join(tmpdir(), "asp-bench-evidence-"));
    const stores: Store[] = [];
    try {
      const work = join(base, "tree");
      mkdirSync(work);
      ctx.progress(`generating ${FILES.toLocaleString("en")} files in ${work}`);
      generateTree(work);
      let storeN = 0;
      const fresh = () => join(base, `store-${storeN++}`);

      // 1. Cold snapshot (store every object) vs `git add -A && git write-tree` in a fresh repo.
      ctx.progress("cold snapshot vs git add -A && git write-tree");
      let coldStore = fresh();
      ctx.report(
        await compare({
          name: "cold snapshotWorktree (store + stat cache)",
          baselineName: "git add -A && git write-tree (fresh repo)",
          before: () => {
            rmSync(join(work, ".git"), { recursive: true, force: true });
            git(work, "init", "-q");
            rmSync(coldStore, { recursive: true, force: true });
            coldStore = fresh();
          },
          baseline: () => {
            git(work, "add", "-A");
            git(work, "write-tree");
          },
          subject: async () => {
            const store = await openStore(join(coldStore, "db"));
            await snapshotWorktree(work, { store, statCache: join(coldStore, "stat-cache") });
            await store.close();
          },
          // git add of 10,000 files takes seconds on a busy disk: few rounds, one warm-up.
          rounds: 3,
          warmup: 1,
          target: 1.5,
        }),
      );

      // 2. Re-snapshot after one file changed vs `git status --porcelain`.
      ctx.progress("re-snapshot after one changed file vs git status --porcelain");
      rmSync(join(work, ".git"), { recursive: true, force: true });
      git(work, "init", "-q");
      git(work, "add", "-A");
      git(work, "commit", "-q", "-m", "bench");
      const hot = await openStore(fresh());
      stores.push(hot);
      // A host keeps one stat cache handle for its worktree, as git keeps its index.
      const cache = createStatCache(join(base, "hot-stat-cache"));
      await snapshotWorktree(work, { store: hot, statCache: cache });
      let edit = 0;
      ctx.report(
        await compare({
          name: "re-snapshotWorktree after 1 changed file",
          baselineName: "git status --porcelain",
          before: () => {
            edit++;
            writeFileSync(join(work, "pkg3", "mod4", "file43.ts"), `// edit ${edit}\n`);
          },
          baseline: () => git(work, "status", "--porcelain"),
          subject: () => snapshotWorktree(work, { store: hot, statCache: cache }),
          rounds: 21,
          warmup: 3,
          target: 1.0,
        }),
      );

      // 3. Synced appends. Each append makes its batch durable in level, then overwrites one
      // 4 KiB slot of the anchor file in place with O_DSYNC (the anchored head): two flushes.
      ctx.progress("fact-log append (sync, anchored) vs raw level batch (sync)");
      const logStore = await openStore(fresh());
      stores.push(logStore);
      const record = {
        decision: "allow",
        callSite: "gate",
        policy: `sha256:${"ab".repeat(32)}`,
        providers: ["a", "b"],
      };
      const append = () => logStore.log.append([{ kind: "bench.decision", record }]);
      const [sample] = await append();
      const bytes = new TextEncoder().encode(canonicalize(sample));
      const raw = rawLevel(fresh());
      await raw.open();
      const slotFile = await openFile(join(base, "slot"), constants.O_RDWR | constants.O_CREAT | constants.O_DSYNC);
      await slotFile.write(Buffer.alloc(8192), 0, 8192, 0);
      const slot = Buffer.alloc(4096, 0x20);
      let k = 0;
      const rawBatch = () =>
        raw.batch([{ type: "put", key: String(k++).padStart(16, "0"), value: bytes }], { sync: true });
      try {
        // 3a. What an append costs over bare level (before the anchor: 1.15-1.23 in this bench).
        ctx.report(
          await compare({
            name: "FactLog.append 1 entry (sync, anchored)",
            baselineName: `raw level batch of ${bytes.length} bytes (sync)`,
            baseline: rawBatch,
            subject: append,
            iterations: 20,
            rounds: 21,
            warmup: 2,
          }),
        );
        // 3b. The same against the floor of the design: the raw batch plus a raw in-place O_DSYNC
        // slot write, i.e. the two flushes without any of this package's code.
        ctx.report(
          await compare({
            name: "FactLog.append 1 entry (sync, anchored)",
            baselineName: "raw level batch (sync) + raw 4 KiB O_DSYNC slot write",
            baseline: async () => {
              await rawBatch();
              await slotFile.write(slot, 0, slot.length, (k % 2) * 4096);
            },
            subject: append,
            iterations: 20,
            rounds: 21,
            warmup: 2,
            target: 1.3,
          }),
        );
        // 3c. Eight appenders at once (a host serving concurrent gates): group commit puts the
        // calls that arrive while a batch is in flight into the next one, one sync and one
        // anchor write for all of them. Against eight raw synced batches, each less than what
        // an unanchored append cost, so at or under 1.0 means the anchor is amortized.
        ctx.report(
          await compare({
            name: "8 concurrent FactLog.append (sync, anchored, group commit)",
            baselineName: "8 sequential raw level batches (sync)",
            baseline: async () => {
              for (let i = 0; i < 8; i++) await rawBatch();
            },
            subject: () => Promise.all(Array.from({ length: 8 }, append)),
            iterations: 4,
            rounds: 21,
            warmup: 2,
            target: 1.0,
          }),
        );
      } finally {
        await slotFile.close();
        await raw.close();
      }
    } finally {
      for (const s of stores) await s.close();
      rmSync(base, { recursive: true, force: true });
    }
  },
};
export default suite;
