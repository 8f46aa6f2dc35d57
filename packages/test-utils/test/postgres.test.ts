import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { startPostgres } from "../src/postgres.js";

const psql = (url: string, sql: string): string =>
  execFileSync("psql", [url, "-Atc", sql], { encoding: "utf8" }).trim();

describe("startPostgres (throwaway cluster)", () => {
  it("starts a cluster nothing else runs, survives a crash and a restart, and removes itself", async () => {
    const pg = await startPostgres();
    try {
      expect(psql(pg.url, "select 41 + 1")).toBe("42");
      psql(pg.url, "create table t (v int); insert into t values (7)");
      await pg.crash();
      await pg.start();
      expect(psql(pg.url, "select v from t")).toBe("7");
      await pg.restart();
      expect(psql(pg.url, "select count(*) from t")).toBe("1");
    } finally {
      await pg.stop();
    }
    expect(existsSync(pg.dir)).toBe(false);
  }, 120_000);
});
