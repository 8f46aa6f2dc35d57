import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createBubblewrapSandbox, findBwrap, probeBwrap, realHost } from "../src/index.js";
import { runLaunch } from "./helpers.js";

// issue 32 hole 1 (THREAT-MODEL invariant 12): no process the host starts holds a descriptor it
// was not given. The host's spawn puts /dev/null over every number above 2 (closedStdio, as the
// provider connection does); bwrap must add nothing of its own (no --info-fd, --sync-fd,
// --json-status-fd, --block-fd), so inside the sandbox the provider holds its three pipes and
// those placeholders only.

const tmp = realpathSync(mkdtempSync(join(tmpdir(), "asp-bwrap-fd-")));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const bwrap = findBwrap(process.env.PATH);
const works = bwrap !== null && probeBwrap(bwrap, process.execPath).ok;

describe.skipIf(!works)("descriptors inside the sandbox", () => {
  it("issue 32 hole 1 (THREAT-MODEL inv. 12): a launched process holds 0, 1, 2 and /dev/null placeholders only", async () => {
    // `ls` rather than node: node opens descriptors of its own (epoll, eventfd) at startup.
    const r = await createBubblewrapSandbox(realHost()).launch({
      executable: "/usr/bin/ls",
      args: ["-l", "/proc/self/fd/"],
      cwd: tmp,
      env: { PATH: "/usr/bin:/bin", LC_ALL: "C" },
      readOnly: [tmp],
      deny: [],
    });
    expect(r.mode).toBe("isolated");
    for (const flag of ["--info-fd", "--sync-fd", "--json-status-fd", "--block-fd", "--userns-block-fd"]) {
      expect(r.args).not.toContain(flag);
    }
    const out = await runLaunch(r);
    expect(out.status, out.stderr).toBe(0);
    const fds = out.stdout
      .split("\n")
      .map((l) => /\s(\d+) -> (.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [Number(m[1]), m[2] ?? ""] as const);
    // node's "pipe" stdio are socket pairs.
    expect(fds.filter(([n]) => n <= 2).map(([, t]) => /^(pipe|socket):/.test(t))).toEqual([true, true, true]);
    // The highest descriptor is the one `ls` opened to list /proc/self/fd itself.
    const own = Math.max(...fds.map(([n]) => n));
    const others = fds.filter(([n]) => n > 2 && n !== own);
    expect(others.filter(([, t]) => t !== "/dev/null")).toEqual([]);
  }, 30_000);
});
