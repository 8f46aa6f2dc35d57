import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type ExitInfo, ProviderConnection, type StreamFault } from "../src/index.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/fake-padded.mjs", import.meta.url));
const open: ProviderConnection[] = [];
afterEach(() => {
  for (const c of open.splice(0)) c.kill();
});

function launch(args: string[], maxBytes: number, faults: StreamFault[] = []): ProviderConnection {
  const conn = ProviderConnection.launch(
    { executable: process.execPath, args: [FIXTURE, ...args], cwd: process.cwd(), env: { PATH: "" } },
    maxBytes,
    () => {},
    (f) => faults.push(f),
  );
  open.push(conn);
  return conn;
}

describe("ProviderConnection", () => {
  it("H2a.3 host §2: passes argv as given, never through a shell", async () => {
    const args = ["$(touch /tmp/asp-pwned)", "a b", "; echo hi", "`id`"];
    const r = await launch(args, 1024).call<string[]>("argv", null, 10_000);
    expect(r.ok && r.value).toEqual(args);
  });

  describe("H8.4 when an answer is over the bound by its framed size (host §8)", () => {
    it("fails the call as oversize, reports the fault and the framed size, and stays in sync", async () => {
      const faults: StreamFault[] = [];
      const conn = launch([], 1024, faults);
      const padded = await conn.call("padded", null, 10_000);
      expect(padded.ok ? null : padded.failure.kind).toBe("oversize");
      expect(faults.map((f) => f.kind)).toEqual(["oversize"]);
      expect(conn.largestFrameBytes).toBeGreaterThan(8192);
      const small = await conn.call<number>("small", null, 10_000);
      expect(small.ok && small.value).toBe(2);
    });
  });

  it("H2.3 host §2: a request written to a provider that was just killed fails as exited, never as the provider's error answer", async () => {
    const conn = launch([], 1024);
    expect((await conn.call<string[]>("argv", null, 10_000)).ok).toBe(true);
    const pid = (conn as unknown as { child: { pid: number } }).child.pid;
    process.kill(pid, "SIGKILL");
    // Race the kill: the writes fail with EPIPE (or the exit is seen first); either way it is a death.
    const kinds = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const r = await conn.call("argv", null, 2_000);
      kinds.add(r.ok ? "ok" : r.failure.kind);
    }
    expect([...kinds]).toEqual(["exited"]);
  });

  it("reports a failed spawn as an exit, never a throw", async () => {
    const exited = new Promise<ExitInfo>((resolve) => {
      open.push(
        ProviderConnection.launch({ executable: "/nonexistent/provider", args: [], cwd: "/", env: {} }, 1024, resolve),
      );
    });
    expect((await exited).spawnError).toBeDefined();
  });
});
