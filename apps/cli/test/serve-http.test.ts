import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AutoRunProjection } from "@asp/auto-mode";
import { digestBytes } from "@asp/evidence";
import { tokenDigest } from "@asp/server";
import { afterEach, describe, expect, it } from "vitest";
import { AUTO_MODE, autoModeCopy, exampleCopy } from "./example-copy.js";
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
const ADMIN_SECRET = "serve-http-test-admin-token";
const HOST_CHECKS = join(REPO_ROOT, "plugins", "verifier-host-checks", "dist", "plugin");

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

  it("a frame's settings PATCHed over HTTP drive asp auto run --frame, whose audits and Artifact bytes the server then serves", async () => {
    const copy = autoModeCopy([HOST_CHECKS], { autoMode: AUTO_MODE });
    roots.push(copy.root);
    const config = JSON.parse(readFileSync(copy.config, "utf8")) as Record<string, unknown>;
    writeFileSync(
      copy.config,
      JSON.stringify({
        ...config,
        server: {
          repositories: { demo: copy.repo },
          tokens: [
            { id: "ci", digest: tokenDigest(SECRET), scopes: ["read", "evaluate"] },
            { id: "ops", digest: tokenDigest(ADMIN_SECRET), scopes: ["admin"] },
          ],
        },
      }),
    );
    const admin = { authorization: `Bearer ${ADMIN_SECRET}`, "content-type": "application/merge-patch+json" };
    let served = await serve(copy.config, "127.0.0.1:0");
    const patched = await fetch(`${served.url}/api/v1/frames/team-a/auto-mode`, {
      method: "PATCH",
      headers: admin,
      body: JSON.stringify({ budgets: { max_review_rounds: 1, wall_time_s: 600 } }),
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    // The reader's token cannot edit a frame.
    const denied = await fetch(`${served.url}/api/v1/frames/team-a/auto-mode`, {
      method: "PATCH",
      headers: { ...auth, "content-type": "application/merge-patch+json" },
      body: "{}",
    });
    expect(denied.status).toBe(403);
    served.child.kill("SIGTERM");
    expect(await exited(served.child)).toBe(0);

    // The run of that frame resolves the stored settings at frame scope.
    const run = runBinary([
      "auto",
      "run",
      "--frame",
      "team-a",
      "--engine",
      "scripted",
      "--reviewer",
      "host-checks",
      "--json",
      "--config",
      copy.config,
      copy.repo,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const projection = JSON.parse(run.stdout) as AutoRunProjection;
    expect(projection.run?.root_frame_id).toBe("team-a");
    expect(projection.state).toBe("verified");
    expect(projection.ledger?.limits).toMatchObject({ max_review_rounds: 1, wall_time_s: 600 });
    const bad = runBinary([
      "auto",
      "run",
      "--frame",
      "../x",
      "--engine",
      "scripted",
      "--reviewer",
      "host-checks",
      "--config",
      copy.config,
      copy.repo,
    ]);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain("ASP_ROLLOUT_INVALID_OPTION");

    served = await serve(copy.config, "127.0.0.1:0");
    const audits = (await (
      await fetch(`${served.url}/api/v1/frames/team-a/auto-audits?subject_kind=result_review`, { headers: auth })
    ).json()) as { audits: Array<{ event: { type: string; run: { root_frame_id: string } } }> };
    expect(audits.audits.map((a) => a.event.type)).toEqual(["auto_audit_completed", "auto_audit_started"]);
    const shown = (await (
      await fetch(`${served.url}/api/v1/auto-runs/${projection.runId}`, { headers: auth })
    ).json()) as AutoRunProjection;
    expect(shown).toEqual(projection);
    const [version] = projection.candidate?.artifact_versions ?? [];
    expect(version).toBeDefined();
    const bytes = await fetch(`${served.url}/api/v1/artifacts/versions/${version?.version_id}`, { headers: auth });
    expect(bytes.status).toBe(200);
    expect(bytes.headers.get("x-asp-checksum")).toBe(version?.checksum);
    expect(digestBytes(new Uint8Array(await bytes.arrayBuffer()))).toBe(version?.checksum);
    served.child.kill("SIGTERM");
    expect(await exited(served.child)).toBe(0);
  }, 240_000);

  it("examples/asp.host.json serves as the README says: demo to the example token, a decision, and the console", async () => {
    // The example configuration with its own store (the example's is left alone) and paths made absolute.
    const examples = join(REPO_ROOT, "examples");
    const example = JSON.parse(readFileSync(join(examples, "asp.host.json"), "utf8")) as {
      plugins: string[];
      server: { repositories: Record<string, string> };
    } & Record<string, unknown>;
    const root = mkdtempSync(join(tmpdir(), "asp-serve-example-"));
    roots.push(root);
    const config = join(root, "asp.host.json");
    writeFileSync(
      config,
      JSON.stringify({
        ...example,
        store: join(root, "store"),
        policy: join(examples, "asp.policy.json"),
        trustRoots: [join(examples, "keys", "example.key.pub")],
        plugins: example.plugins.map((p) => join(examples, p)),
        server: { ...example.server, repositories: { demo: join(examples, "demo-repo") } },
      }),
    );
    const { child, url, stderr } = await serve(config, "127.0.0.1:0");
    const token = { authorization: "Bearer asp-example-token" };
    expect(await (await fetch(`${url}/api/v1/repositories`, { headers: token })).json()).toEqual({
      repositories: ["demo"],
    });
    const gate = await fetch(`${url}/api/v1/repositories/demo/evaluate`, {
      method: "POST",
      headers: { ...token, "content-type": "application/json" },
      body: JSON.stringify({ callSite: "gate" }),
    });
    expect(gate.status).toBe(200);
    expect(((await gate.json()) as { decision: string }).decision).toBe("allow");
    // The console, built by pnpm build beside the CLI.
    for (let i = 0; i < 250 && !stderr().includes("console at"); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(stderr()).toContain(`console at ${url}/console/`);
    const page = await fetch(`${url}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(await page.text()).toContain('<div id="root"></div>');
    child.kill("SIGTERM");
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
