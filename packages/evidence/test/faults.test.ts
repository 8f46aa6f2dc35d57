import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseAnchor } from "../src/anchor.js";
import {
  checkStore,
  type Digest,
  type EvidenceError,
  type FactInput,
  openStore,
  SALVAGE_KIND,
  type SalvageResult,
  type Store,
  salvageStore,
} from "../src/index.js";
import { openStoreWith } from "../src/open.js";
import {
  deleteFile,
  type FileKind,
  fileOf,
  filesOf,
  fingerprint,
  flipBytes,
  flipInside,
  truncateFile,
} from "./helpers/damage.js";
import { fakeClock } from "./helpers/stores.js";
import { ensureBuilt, parseAcks, tempDir } from "./helpers/tmp.js";

// The corruption fault suite (issue 19, item 3; THREAT-MODEL invariant 8): damage to each kind
// of file of a real level store ends either with every acknowledged entry intact and verified,
// or with a coded refusal naming the damage; never a silent loss, never a new chain over the
// old one. Each refused store is then checked and salvaged, which must not modify it, and the
// salvage must keep, carry or name as lost every acknowledged entry.

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** A unique literal per entry, so a flip can be aimed at one entry's bytes (even in a compressed table). */
const token = (n: number): string => createHash("sha256").update(`token ${n}`).digest("base64url").slice(0, 40);
const fact = (n: number): FactInput => ({
  kind: "gate.decision",
  record: { n, token: token(n), pad: "x".repeat(200) },
  index: [{ name: "n", value: String(n) }],
  state: [`k${n % 2}`],
});

interface Acked {
  readonly seq: number;
  readonly digest: Digest;
}

/**
 * Ten acknowledged entries in five appends: 1-6 before a reopen (so level moved them into a
 * table), 7-10 after it (still only in the write-ahead log).
 */
async function tenEntries(): Promise<{ dir: string; acked: Acked[] }> {
  const dir = join(tempDir(), "store");
  const acked: Acked[] = [];
  const clock = fakeClock();
  for (const batches of [
    [1, 3, 5],
    [7, 9],
  ]) {
    const store = await openStore(dir, { clock });
    for (const n of batches) {
      for (const e of await store.log.append([fact(n), fact(n + 1)])) acked.push({ seq: e.seq, digest: e.digest });
    }
    await store.close();
  }
  expect(filesOf(dir, "table").length).toBeGreaterThan(0);
  expect(readFileSync(fileOf(dir, "wal")).length).toBeGreaterThan(0);
  return { dir, acked };
}

type Outcome =
  /** Refused with STORE_CORRUPT whose reason matches; `untouched`: before level touched a byte. */
  | { readonly refused: RegExp; readonly untouched: boolean; readonly lost: readonly number[] }
  /** Opens, every acknowledged entry intact and verified, and the chain goes on. */
  | { readonly intact: true }
  /** Opens; the one damaged entry fails verification and every read of it, by seq. */
  | { readonly entryDamaged: number };

interface Row {
  readonly name: string;
  readonly kind: FileKind;
  readonly damage: (file: string) => void;
  readonly outcome: Outcome;
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const currentSlot = (file: string): number => {
  const read = parseAnchor(readFileSync(file));
  if (read.state !== "ok") throw new Error("fixture anchor does not verify");
  return read.slot;
};

const ROWS: readonly Row[] = [
  {
    name: "write-ahead log: 4 bytes flipped inside acknowledged entry 9",
    kind: "wal",
    damage: (f) => flipInside(f, token(9)),
    outcome: {
      refused: /write-ahead log \d+\.log is damaged at byte \d+ \(holding entries 9-10\)/,
      untouched: true,
      lost: [9],
    },
  },
  {
    name: "write-ahead log: 4 bytes flipped 40 bytes before its end (issue 19)",
    kind: "wal",
    damage: (f) => flipBytes(f, -40),
    outcome: { refused: /write-ahead log \d+\.log is damaged .*entries 9-10/, untouched: true, lost: [] },
  },
  {
    name: "write-ahead log: its last 30 bytes cut off",
    kind: "wal",
    damage: (f) => truncateFile(f, -30),
    outcome: { refused: /write-ahead log \d+\.log is cut short .*entries 9-10/, untouched: true, lost: [] },
  },
  {
    name: "write-ahead log: cut to 0 bytes",
    kind: "wal",
    damage: (f) => truncateFile(f, 0),
    outcome: { refused: /log ends at seq 6, before the anchored head seq 10/, untouched: false, lost: range(7, 10) },
  },
  {
    name: "write-ahead log: deleted",
    kind: "wal",
    damage: deleteFile,
    outcome: { refused: /log ends at seq 6, before the anchored head seq 10/, untouched: false, lost: range(7, 10) },
  },
  {
    name: "table: 4 bytes flipped inside acknowledged entry 3",
    kind: "table",
    damage: (f) => flipInside(f, token(3)),
    outcome: { entryDamaged: 3 },
  },
  {
    name: "table: its footer's magic number flipped",
    kind: "table",
    damage: (f) => flipBytes(f, -8),
    outcome: { refused: /level could not read the database/, untouched: false, lost: range(1, 6) },
  },
  {
    name: "table: cut in half",
    kind: "table",
    damage: (f) => truncateFile(f, Math.floor(readFileSync(f).length / 2)),
    outcome: { refused: /level could not read the database/, untouched: false, lost: range(1, 6) },
  },
  {
    name: "table: deleted",
    kind: "table",
    damage: deleteFile,
    outcome: { refused: /database does not open .*missing files/, untouched: true, lost: range(1, 6) },
  },
  {
    name: "manifest: 4 bytes flipped",
    kind: "manifest",
    damage: (f) => flipBytes(f, 10),
    outcome: { refused: /database does not open .*checksum mismatch/, untouched: true, lost: [] },
  },
  {
    name: "manifest: its last 10 bytes cut off",
    kind: "manifest",
    damage: (f) => truncateFile(f, -10),
    outcome: { refused: /database does not open/, untouched: true, lost: [] },
  },
  {
    name: "manifest: deleted",
    kind: "manifest",
    damage: deleteFile,
    outcome: { refused: /MANIFEST-\d+ is missing/, untouched: true, lost: [] },
  },
  {
    name: "CURRENT: 4 bytes flipped",
    kind: "current",
    damage: (f) => flipBytes(f, 0),
    outcome: { refused: /CURRENT does not name a manifest/, untouched: true, lost: [] },
  },
  {
    name: "CURRENT: cut to 5 bytes",
    kind: "current",
    damage: (f) => truncateFile(f, 5),
    outcome: { refused: /CURRENT does not name a manifest/, untouched: true, lost: [] },
  },
  {
    name: "CURRENT: deleted",
    kind: "current",
    damage: deleteFile,
    outcome: { refused: /CURRENT is missing/, untouched: true, lost: [] },
  },
  {
    name: "store marker: 4 bytes flipped",
    kind: "marker",
    damage: (f) => flipBytes(f, 2),
    outcome: { refused: /store marker .* is damaged/, untouched: true, lost: [] },
  },
  {
    name: "store marker: cut to 10 bytes",
    kind: "marker",
    damage: (f) => truncateFile(f, 10),
    outcome: { refused: /store marker .* is unreadable/, untouched: true, lost: [] },
  },
  {
    name: "store marker: deleted",
    kind: "marker",
    damage: deleteFile,
    outcome: { refused: /store marker .* is missing/, untouched: true, lost: [] },
  },
  {
    name: "anchor: 4 bytes flipped in the slot holding the current head",
    kind: "anchor",
    damage: (f) => flipBytes(f, currentSlot(f) * 4096 + 10),
    outcome: { intact: true },
  },
  {
    name: "anchor: 4 bytes flipped in both slots",
    kind: "anchor",
    damage: (f) => {
      flipBytes(f, 10);
      flipBytes(f, 4096 + 10);
    },
    outcome: { refused: /no anchor slot verifies/, untouched: true, lost: [] },
  },
  {
    name: "anchor: cut to its first slot",
    kind: "anchor",
    damage: (f) => truncateFile(f, 4096),
    outcome: { intact: true },
  },
  {
    name: "anchor: cut to 0 bytes",
    kind: "anchor",
    damage: (f) => truncateFile(f, 0),
    outcome: { refused: /no anchor slot verifies/, untouched: true, lost: [] },
  },
  {
    name: "anchor: deleted",
    kind: "anchor",
    damage: deleteFile,
    outcome: { refused: /anchor file ASP-EVIDENCE-HEAD is missing/, untouched: true, lost: [] },
  },
];

async function refusal(dir: string, options: { readOnly?: boolean } = {}): Promise<EvidenceError> {
  const result = await openStore(dir, { waitMs: 0, ...options }).then(
    async (s) => {
      await s.close();
      return undefined;
    },
    (e: unknown) => e as EvidenceError,
  );
  if (result === undefined) throw new Error(`the damaged store at ${dir} opened`);
  return result;
}

/** Every acknowledged entry is in the salvaged store (same seq and digest), carried, or named lost. */
async function expectNothingSilentlyLost(dir: string, acked: readonly Acked[], result: SalvageResult): Promise<void> {
  const store = await openStore(result.path);
  open.push(store);
  expect(await store.log.verify()).toMatchObject({ ok: true });
  const salvage = (await store.log.latest(SALVAGE_KIND))?.record as unknown as {
    source: { path: string };
    carried: Acked[];
    lost: Array<{ from: number; to: number }>;
  };
  expect(salvage.source.path).toBe(dir);
  for (const a of acked) {
    if (a.seq <= result.kept) expect((await store.log.read(a.seq)).digest, `seq ${a.seq}`).toBe(a.digest);
    else if (salvage.carried.some((c) => c.seq === a.seq && c.digest === a.digest)) continue;
    else
      expect(
        salvage.lost.some((l) => l.from <= a.seq && a.seq <= l.to),
        `seq ${a.seq} is neither kept, carried nor named lost`,
      ).toBe(true);
  }
}

const lostSeqs = (result: SalvageResult): number[] => result.lost.flatMap((l) => range(l.from, l.to));

describe("the corruption fault suite", () => {
  describe("when one file of a store holding ten acknowledged entries is damaged", () => {
    it.each(ROWS)("$name", { timeout: 60_000 }, async (row) => {
      const { dir, acked } = await tenEntries();
      row.damage(fileOf(dir, row.kind));
      const before = fingerprint(dir);
      const { outcome } = row;

      if ("refused" in outcome) {
        const error = await refusal(dir);
        expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT", data: { path: dir } });
        expect(String(error.data?.reason)).toMatch(outcome.refused);
        if (outcome.untouched) expect(fingerprint(dir), "refused before level touched a file").toEqual(before);
        // Refusing is not a one-off: the store does not heal by forgetting, nor open read-only.
        expect(await refusal(dir)).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT" });
        expect(await refusal(dir, { readOnly: true })).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT" });
        const frozen = fingerprint(dir);
        const check = await checkStore(dir);
        expect(check.ok).toBe(false);
        expect(check.damage.some((d) => d.fatal)).toBe(true);
        const result = await salvageStore(dir, join(tempDir(), "salvaged"));
        expect(fingerprint(dir), "check and salvage never modify the damaged store").toEqual(frozen);
        expect(lostSeqs(result)).toEqual(outcome.lost);
        await expectNothingSilentlyLost(dir, acked, result);
        return;
      }

      if ("intact" in outcome) {
        const check = await checkStore(dir);
        expect(check).toMatchObject({ ok: true, verified: 10 });
        const store = await openStore(dir, { waitMs: 0 });
        open.push(store);
        expect(await store.log.verify()).toMatchObject({ ok: true, entries: 10 });
        for (const a of acked) expect((await store.log.read(a.seq)).digest).toBe(a.digest);
        const [next] = await store.log.append([fact(11)]);
        expect(next).toMatchObject({ seq: 11, prev: acked[9]?.digest });
        return;
      }

      const damaged = outcome.entryDamaged;
      const store = await openStore(dir, { waitMs: 0 });
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: false, seq: damaged });
      await expect(store.log.read(damaged)).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
      for (const a of acked.filter((x) => x.seq !== damaged && x.seq !== damaged - 1))
        expect((await store.log.read(a.seq)).digest).toBe(a.digest);
      await store.close();
      open.pop();
      const check = await checkStore(dir);
      expect(check.damage).toContainEqual(expect.objectContaining({ kind: "entry", from: damaged, to: damaged }));
      const result = await salvageStore(dir, join(tempDir(), "salvaged"));
      expect(lostSeqs(result)).toEqual([damaged]);
      await expectNothingSilentlyLost(dir, acked, result);
    });
  });
});

const CHILD = new URL("./fixtures/append-faults.mjs", import.meta.url).pathname;

interface ChildRun {
  readonly acks: Acked[];
  readonly lines: string[];
}

/** Run the appender; SIGKILL it when it prints `killOn`, or let it end by itself. */
function runChild(args: readonly string[], killOn?: string, shell?: string): Promise<ChildRun> {
  const entry = ensureBuilt();
  return new Promise((resolve, reject) => {
    const argv = [process.execPath, CHILD, entry, ...args];
    const child =
      shell === undefined
        ? spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] })
        : spawn("/bin/sh", ["-c", `${shell} && exec "$@"`, "sh", ...argv], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      if (killOn !== undefined && out.includes(`${killOn}\n`)) child.kill("SIGKILL");
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (killOn !== undefined ? signal !== "SIGKILL" : code !== 0) {
        reject(new Error(`appender ended with ${code ?? signal}: ${out}\n${err}`));
        return;
      }
      const lines = out.split("\n").slice(0, -1);
      const acks = parseAcks(out).map(({ seq, digest }) => ({ seq, digest: digest as Digest }));
      resolve({ acks, lines });
    });
  });
}

async function expectAckedIntact(dir: string, acked: readonly Acked[]): Promise<Store> {
  const store = await openStore(dir, { waitMs: 0 });
  open.push(store);
  expect(await store.log.verify()).toMatchObject({ ok: true });
  for (const a of acked) expect((await store.log.read(a.seq)).digest, `acknowledged seq ${a.seq}`).toBe(a.digest);
  return store;
}

describe("the corruption fault suite (processes and space)", () => {
  describe("when the appender is killed after its log batch is durable but before the anchor write", () => {
    it("reopens with every acknowledged entry, the unacknowledged one kept, and re-anchors", {
      timeout: 60_000,
    }, async () => {
      const { dir, acked } = await tenEntries();
      const run = await runChild([dir, "hang-anchor:2"], "anchoring");
      expect(run.acks.map((a) => a.seq)).toEqual([11, 12]);
      const store = await expectAckedIntact(dir, [...acked, ...run.acks]);
      // The batch whose anchor write never happened is in the log: durable, never acknowledged.
      expect(await store.log.head()).toMatchObject({ seq: 13 });
      expect(parseAnchor(readFileSync(join(dir, "ASP-EVIDENCE-HEAD")))).toMatchObject({
        state: "ok",
        record: { seq: 13 },
        pristine: true,
      });
      expect((await store.log.append([fact(14)]))[0]).toMatchObject({ seq: 14 });
    });
  });

  describe("when an anchor write fails with ENOSPC", () => {
    it("rejects that append with WRITE_FAILED naming ENOSPC, takes no more appends, and reopens intact", async () => {
      const { dir, acked } = await tenEntries();
      let fail = false;
      const store = await openStoreWith(
        dir,
        { waitMs: 0 },
        {
          slotWriter: async (fh, bytes, position) => {
            if (fail) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
            await fh.write(bytes, 0, bytes.length, position);
          },
        },
      );
      open.push(store);
      const [ok] = await store.log.append([fact(11)]);
      fail = true;
      await expect(store.log.append([fact(12)])).rejects.toMatchObject({
        code: "ASP_EVIDENCE_WRITE_FAILED",
        data: { stage: "anchor", errno: "ENOSPC" },
      });
      fail = false;
      await expect(store.log.append([fact(13)])).rejects.toThrowWithCode("ASP_EVIDENCE_WRITE_FAILED");
      await store.close();
      open.pop();
      const again = await expectAckedIntact(dir, [...acked, { seq: 11, digest: ok?.digest as Digest }]);
      expect(await again.log.head()).toMatchObject({ seq: 12 });
    });
  });

  describe("when the log cannot grow (a file-size limit, as a full disk)", () => {
    it("fails the append with WRITE_FAILED, refuses further appends, and keeps every acknowledged entry", {
      timeout: 120_000,
    }, async () => {
      const { dir, acked } = await tenEntries();
      // 1024 blocks: 512 KiB or 1 MiB depending on the shell's unit; far below level's 4 MiB log.
      const run = await runChild([dir, "fill"], undefined, "ulimit -f 1024");
      const failed = run.lines.find((l) => l.startsWith("failed "));
      // Level reports the write past the limit as an I/O error naming "File too large".
      expect(failed).toBe("failed ASP_EVIDENCE_WRITE_FAILED EFBIG");
      expect(run.lines.at(-1)).toBe("again ASP_EVIDENCE_WRITE_FAILED");
      expect(run.acks.length).toBeGreaterThan(10);
      const store = await expectAckedIntact(dir, [...acked, ...run.acks]);
      const [next] = await store.log.append([fact(99)]);
      expect(next?.seq).toBeGreaterThan(run.acks.at(-1)?.seq as number);
    });
  });

  describe("when the database is replaced by another store's (a chain over the old one)", () => {
    it("refuses with STORE_CORRUPT: the database belongs to another store than the anchor", async () => {
      const { dir } = await tenEntries();
      const other = join(tempDir(), "other");
      const s = await openStore(other);
      await s.log.append([fact(1)]);
      await s.close();
      for (const f of readdirSync(dir)) if (/^(\d{6}\.(log|ldb)|MANIFEST-\d+|CURRENT)$/.test(f)) rmSync(join(dir, f));
      for (const f of readdirSync(other))
        if (/^(\d{6}\.(log|ldb)|MANIFEST-\d+|CURRENT)$/.test(f)) copyFileSync(join(other, f), join(dir, f));
      const error = await refusal(dir);
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT" });
      expect(String(error.data?.reason)).toMatch(/belongs to store .* but its anchor to store/);
    });
  });

  describe("when every database file is deleted, leaving the marker and the anchor", () => {
    it("refuses with STORE_CORRUPT instead of starting a new chain", async () => {
      const { dir } = await tenEntries();
      for (const f of readdirSync(dir))
        if (/^(\d{6}\.(log|ldb)|MANIFEST-\d+|CURRENT|LOCK|LOG.*)$/.test(f)) rmSync(join(dir, f));
      const error = await refusal(dir);
      expect(String(error.data?.reason)).toMatch(/database files are gone \(the anchored head is seq 10\)/);
      expect(readdirSync(dir).sort()).toEqual(["ASP-EVIDENCE-HEAD", "ASP-EVIDENCE-STORE.json"]);
    });
  });
});
