import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tokenDigest } from "@asp/server";
import { afterEach, describe, expect, it } from "vitest";
import { exampleCopy } from "./example-copy.js";
import { BIN, REPO_ROOT, runBinary } from "./helpers.js";

// Issue 28, first slice: `asp serve --http` as an operator runs it, a real process on loopback.

const SECRET = "serve-http-test-token";
const children: ChildProcess[] = [];
const roots: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/** The example copy with a server section: the repository as `demo`, one read+evaluate token. */
function servedCopy(server: unknown = undefined) {
  const copy = exampleCopy();
  roots.push(copy.root);
  const config = JSON.parse(readFileSync(copy.config, "utf8")) as Record<string, unknown>;
  const section = server ?? {
    repositories: { demo: copy.repo },
    tokens: [{ id: "ci", digest: tokenDigest(SECRET), scopes: ["read", "evaluate"] }],
  };
  writeFileSync(copy.config, JSON.stringify({ ...config, server: section }));
  return copy;
}

/** Start `asp serve --http ADDR` and resolve with the address it printed once it listens. */
function serve(config: string, addr: string): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(process.execPath, [BIN, "serve", "--http", addr, "--config", config], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let err = "";
  return new Promise((resolve, reject) => {
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString("utf8");
      const m = /listening on (\S+)/.exec(err);
      if (m?.[1] !== undefined) resolve({ child, url: m[1], stderr: () => err });
    });
    child.once("exit", (code) => reject(new Error(`asp serve exited ${code}: ${err}`)));
  });
}

const exited = (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", resolve)));

const auth = { authorization: `Bearer ${SECRET}` };

describe("asp serve --http (issue 28)", () => {
  it("serves the example host on loopback: a gate decides over HTTP, SIGTERM stops it cleanly and the receipt is in the store", async () => {
    const { config } = servedCopy();
    const { child, url, stderr } = await serve(config, "127.0.0.1:0");
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(stderr()).toContain("1 repository: demo");
    const status = await fetch(`${url}/api/v1/status`, { headers: auth });
    expect(status.status).toBe(200);
    const gate = await fetch(`${url}/api/v1/repositories/demo/evaluate`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ callSite: "gate", base: "HEAD" }),
    });
    expect(gate.status).toBe(200);
    const body = (await gate.json()) as { decision: string; receipt: { receiptId: string } };
    expect(body.decision).toBe("allow");
    expect((await fetch(`${url}/api/v1/status`)).status).toBe(401);
    child.kill("SIGTERM");
    expect(await exited(child)).toBe(0);
    // The store was released and holds the receipt, verified.
    const shown = runBinary(["receipts", "show", body.receipt.receiptId, "--config", config, "--json"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(runBinary(["receipts", "verify", "--config", config]).code).toBe(0);
  }, 180_000);

  it("serves on a unix socket", async () => {
    const { root, config } = servedCopy();
    const socket = join(root, "asp.sock");
    const { child, url } = await serve(config, `unix:${socket}`);
    expect(url).toBe(`unix:${socket}`);
    const { request } = await import("node:http");
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ socketPath: socket, path: "/api/v1/repositories", headers: auth }, (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString("utf8");
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(answer).toEqual({ status: 200, body: JSON.stringify({ repositories: ["demo"] }) });
    child.kill("SIGINT");
    expect(await exited(child)).toBe(0);
  }, 180_000);

  it.each<[string, string[], unknown, RegExp]>([
    ["neither --stdio nor --http", [], undefined, /exactly one of --stdio or --http/],
    ["a non-loopback address", ["--http", "0.0.0.0:7340"], undefined, /only a loopback address/],
    ["a relative socket path", ["--http", "unix:asp.sock"], undefined, /must be absolute/],
    ["no server section", ["--http", "127.0.0.1:0"], null, /no "server" section/],
  ])("refuses %s with a usage error and starts nothing", (_why, args, server, message) => {
    const copy = servedCopy(server ?? undefined);
    if (server === null) {
      const { server: _drop, ...rest } = JSON.parse(readFileSync(copy.config, "utf8")) as Record<string, unknown>;
      writeFileSync(copy.config, JSON.stringify(rest));
    }
    const r = runBinary(["serve", ...args, "--config", copy.config]);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(message);
  });

  it("refuses a configured repository that holds the host's own configuration (invariant 2)", () => {
    const copy = servedCopy();
    const inside = join(copy.repo, "host.json");
    const config = JSON.parse(readFileSync(copy.config, "utf8")) as Record<string, unknown>;
    writeFileSync(inside, JSON.stringify(config));
    const r = runBinary(["serve", "--http", "127.0.0.1:0", "--config", inside]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("ASP_THS_UNTRUSTED_LOCATION");
  });
});
