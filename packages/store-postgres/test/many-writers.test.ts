import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openPostgresStore } from "../src/index.js";
import { ensureBuilt, migratedDatabase, useCluster } from "./helpers.js";

const WRITER = new URL("./fixtures/append-writer.mjs", import.meta.url).pathname;
const cluster = useCluster();
const dir = mkdtempSync(join(tmpdir(), "asp-pgwriters-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Ack {
  readonly writer: string;
  readonly token: string;
  readonly seq: number;
  readonly digest: string;
}

const readAcks = (file: string): Ack[] =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("ack "))
    .map((l) => {
      const [, writer, , token, seq, digest] = l.split(" ");
      return { writer: writer as string, token: token as string, seq: Number(seq), digest: digest as string };
    });

const until = async (what: string, ok: () => boolean, ms = 90_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe("one chain, many writers", () => {
  it("8 processes append concurrently through SIGKILLs and a database crash: every acknowledged append is present exactly once, no gap, no duplicated seq, verify() ok", {
    timeout: 180_000,
  }, async () => {
    const entry = ensureBuilt();
    const url = await migratedDatabase(cluster.pg.url);
    const ackFile = join(dir, "acks");
    writeFileSync(ackFile, "");
    const PER_WRITER = 25;
    const exits = new Map<string, Promise<number | null>>();
    const children = new Map<string, ChildProcess>();
    for (let w = 0; w < 8; w++) {
      const id = `w${w}`;
      // w0 and w1 are SIGKILLed mid-run: give them more appends than they can finish before the kill.
      const count = w < 2 ? 100_000 : PER_WRITER;
      const child = spawn(process.execPath, [WRITER, entry, url, id, String(count), ackFile], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      let err = "";
      child.stderr?.on("data", (d: Buffer) => {
        err += d.toString();
      });
      children.set(id, child);
      exits.set(
        id,
        new Promise((resolve) =>
          child.on("exit", (code) => {
            if (code !== 0 && code !== null) console.error(`${id} exited ${code}: ${err}`);
            resolve(code);
          }),
        ),
      );
    }
    const acked = (writer?: string): number =>
      readAcks(ackFile).filter((a) => writer === undefined || a.writer === writer).length;

    // Two writers are killed mid-run (the loop is tight: they are almost always mid-append).
    await until("w0 and w1 to append", () => acked("w0") >= 3 && acked("w1") >= 3);
    children.get("w0")?.kill("SIGKILL");
    children.get("w1")?.kill("SIGKILL");
    // The database crashes once (no checkpoint: WAL recovery on start) with appends in flight.
    await until("appends from the others", () => acked() >= 40);
    await cluster.pg.crash();
    await new Promise((r) => setTimeout(r, 300));
    await cluster.pg.start();
    const codes = await Promise.all([...exits.entries()].map(async ([id, p]) => [id, await p] as const));
    for (const [id, code] of codes) expect(code, id).toBe(id === "w0" || id === "w1" ? null : 0);

    const acks = readAcks(ackFile);
    for (let w = 2; w < 8; w++) expect(acks.filter((a) => a.writer === `w${w}`)).toHaveLength(PER_WRITER);
    const store = await openPostgresStore(url);
    try {
      const verdict = await store.log.verify();
      expect(verdict).toMatchObject({ ok: true });
      const all = await store.log.list();
      // Gapless, unique seqs 1..N (verify proves it too; said here plainly).
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
      const bySeq = new Map(all.map((e) => [e.seq, e]));
      const tokens = all.map((e) => (e.record as { token: string }).token);
      for (const a of acks) {
        expect(bySeq.get(a.seq)?.digest, a.token).toBe(a.digest);
        expect(
          tokens.filter((t) => t === a.token),
          a.token,
        ).toHaveLength(1);
      }
      expect(all.length).toBeGreaterThanOrEqual(acks.length);
    } finally {
      await store.close();
    }
  });
});
