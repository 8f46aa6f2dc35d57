import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A throwaway PostgreSQL cluster for the `store-pg` suite. The bench runs from `dist/` under
 * plain Node, where `@asp/test-utils` (TypeScript sources only) cannot load, so this is the
 * bench's own small copy of its `startPostgres`: initdb into a temp folder (as the postgres user
 * when root), a free loopback port, trust authentication; `stop()` removes everything.
 */
export async function benchPostgres(): Promise<{ url: string; stop(): void }> {
  const debian = "/usr/lib/postgresql";
  const major = existsSync(debian)
    ? readdirSync(debian)
        .filter((d) => /^\d+$/.test(d))
        .sort((a, b) => Number(b) - Number(a))[0]
    : undefined;
  const bin = process.env.ASP_PG_BIN ?? (major === undefined ? null : join(debian, major, "bin"));
  if (bin === null) throw new Error("PostgreSQL is not installed (apt-get install postgresql)");
  const dir = mkdtempSync(join(tmpdir(), "asp-bench-pg-"));
  const root = process.getuid?.() === 0;
  if (root) {
    const id = (flag: string): number => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout);
    chownSync(dir, id("-u"), id("-g"));
  }
  const run = (exe: string, args: string[]): void => {
    const [cmd, argv] = root ? ["runuser", ["-u", "postgres", "--", join(bin, exe), ...args]] : [join(bin, exe), args];
    execFileSync(cmd, argv, { stdio: "ignore", cwd: dir });
  };
  const port = await new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });
  const data = join(dir, "data");
  run("initdb", ["-D", data, "-A", "trust", "-U", "asp", "-E", "UTF8", "--locale=C", "--no-sync"]);
  run("pg_ctl", [
    "-D",
    data,
    "-l",
    join(dir, "log"),
    "-w",
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`,
    "start",
  ]);
  return {
    url: `postgres://asp@127.0.0.1:${port}/postgres`,
    stop: () => {
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
