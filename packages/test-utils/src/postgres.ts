import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A throwaway PostgreSQL cluster in a temp folder, listening on a loopback port (tests only). */
export interface ThrowawayPostgres {
  /** `postgres://asp@127.0.0.1:PORT/postgres` (trust authentication, loopback only). */
  readonly url: string;
  readonly port: number;
  /** The temp folder holding the cluster (`data/`), its socket folder and its log. */
  readonly dir: string;
  /** Stop fast (`pg_ctl stop -m fast`) and start again on the same port and data. */
  restart(): Promise<void>;
  /** Kill the server like a crash (`pg_ctl stop -m immediate`: no checkpoint, WAL recovery on start). */
  crash(): Promise<void>;
  /** Start again after {@link ThrowawayPostgres.crash}. */
  start(): Promise<void>;
  /** Stop the server and remove the folder. Idempotent. */
  stop(): Promise<void>;
  /** The server log so far (for a failing test's message). */
  log(): string;
}

/**
 * The folder holding `initdb`, `pg_ctl` and `postgres`: `ASP_PG_BIN`, else the newest
 * `/usr/lib/postgresql/<major>/bin` (Debian), else the folder of `initdb` on PATH; `null` when
 * PostgreSQL is not installed (`.ci/run` installs Debian's `postgresql`).
 */
export function findPostgresBin(): string | null {
  const env = process.env.ASP_PG_BIN;
  if (env !== undefined && env !== "" && existsSync(join(env, "pg_ctl"))) return env;
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const majors = readdirSync(debian)
      .filter((d) => /^\d+$/.test(d) && existsSync(join(debian, d, "bin", "pg_ctl")))
      .sort((a, b) => Number(b) - Number(a));
    if (majors[0] !== undefined) return join(debian, majors[0], "bin");
  }
  const which = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" });
  const found = which.status === 0 ? which.stdout.trim() : "";
  return found === "" ? null : found.slice(0, found.lastIndexOf("/"));
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const live = new Set<() => void>();
let hooked = false;

/**
 * Start a throwaway PostgreSQL cluster: `initdb` into a new temp folder (trust authentication,
 * superuser `asp`), `pg_ctl start` on a free loopback port with its socket in that folder. As
 * root (initdb refuses root) the cluster is owned by and run as the `postgres` user. Nothing
 * assumes a running server; {@link ThrowawayPostgres.stop} removes everything, and so does the
 * process's exit.
 *
 * @throws Error when PostgreSQL is not installed or the cluster does not start (with its log).
 */
export async function startPostgres(options: { readonly prefix?: string } = {}): Promise<ThrowawayPostgres> {
  const bin = findPostgresBin();
  if (bin === null) throw new Error("PostgreSQL is not installed (apt-get install postgresql; .ci/run does it)");
  const dir = mkdtempSync(join(tmpdir(), options.prefix ?? "asp-pg-"));
  const data = join(dir, "data");
  const logFile = join(dir, "server.log");
  const root = process.getuid?.() === 0;
  if (root) {
    const id = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
    const gidOut = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
    if (id.status !== 0) throw new Error("running as root needs the postgres user (Debian's postgresql package)");
    chownSync(dir, Number(id.stdout.trim()), Number(gidOut.stdout.trim()));
    chmodSync(dir, 0o700);
  }
  const run = (exe: string, args: string[]): void => {
    const [cmd, argv] = root ? ["runuser", ["-u", "postgres", "--", join(bin, exe), ...args]] : [join(bin, exe), args];
    execFileSync(cmd, argv, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  };
  run("initdb", ["-D", data, "-A", "trust", "-U", "asp", "-E", "UTF8", "--locale=C", "--no-sync"]);
  const port = await freePort();
  const ctl = (args: string[]): void => run("pg_ctl", ["-D", data, ...args]);
  const start = async (): Promise<void> => {
    try {
      ctl([
        "-l",
        logFile,
        "-w",
        "-t",
        "60",
        "-o",
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`,
        "start",
      ]);
    } catch (error) {
      throw new Error(`PostgreSQL did not start: ${(error as Error).message}\n${readLog()}`);
    }
  };
  const readLog = (): string => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  let stopped = false;
  const kill = (): void => {
    spawnSync(root ? "runuser" : join(bin, "pg_ctl"), [
      ...(root ? ["-u", "postgres", "--", join(bin, "pg_ctl")] : []),
      "-D",
      data,
      "-m",
      "immediate",
      "-w",
      "stop",
    ]);
    rmSync(dir, { recursive: true, force: true });
  };
  await start();
  live.add(kill);
  if (!hooked) {
    hooked = true;
    process.on("exit", () => {
      for (const k of live) k();
    });
  }
  return {
    url: `postgres://asp@127.0.0.1:${port}/postgres`,
    port,
    dir,
    async restart() {
      ctl(["-m", "fast", "-w", "stop"]);
      await start();
    },
    async crash() {
      ctl(["-m", "immediate", "-w", "stop"]);
    },
    start,
    async stop() {
      if (stopped) return;
      stopped = true;
      live.delete(kill);
      kill();
    },
    log: readLog,
  };
}
