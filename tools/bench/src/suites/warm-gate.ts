import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { BIN, exampleConfigCopy, runProcess } from "../example-host.js";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import { FEATURES, featureModule, generateProject, writeProject } from "../project.js";
import type { Suite } from "../suite.js";

// Issue 28: a warm gate through one running `asp serve --http` (the example host: its signed
// plugins, policy and sandboxes; providers already running) after a one-file change, against
// what a user would run instead: `tsc --noEmit -p` cold (a whole process), and `tsc --incremental`'s
// recheck of the same change (a whole process with its build info from the round before). Then
// eight gates sent together against one. The client is a raw HTTP request from this process;
// starting the server is not timed. Before each round (untimed, for both sides) the edited file
// gets new, still type-correct content.

const req = createRequire(import.meta.url);
const TSC = join(dirname(req.resolve("typescript/package.json")), "bin", "tsc");
const SECRET = "bench-warm-gate-token";

/** Start `asp serve --http 127.0.0.1:0` and resolve with its base URL once it listens. */
function serve(config: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [BIN, "serve", "--http", "127.0.0.1:0", "--config", config], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  return new Promise((resolveUrl, reject) => {
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString("utf8");
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m?.[1] !== undefined) resolveUrl({ child, url: m[1] });
    });
    child.once("exit", (code) => reject(new Error(`asp serve exited ${code}: ${err}`)));
  });
}

const suite: Suite = {
  name: "warm-gate",
  description: `a warm gate through asp serve --http (example host, raw HTTP client) on a ${FEATURES + 10}-file TypeScript project with a one-file change, vs tsc --noEmit -p cold and tsc --incremental's recheck (whole processes); 8 gates together vs one`,
  async run(ctx) {
    const features = ctx.size === "smoke" ? 4 : FEATURES;
    const edited = ctx.size === "smoke" ? "src/features/f2.ts" : "src/features/f105.ts";
    const index = Number(/f(\d+)\.ts$/.exec(edited)?.[1]);
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-warm-gate-"));
    let server: ChildProcess | undefined;
    try {
      const repo = join(dir, "repo");
      const files = generateProject(features);
      writeProject(repo, files);
      commitAll(repo);
      const config = exampleConfigCopy(dir, {
        server: {
          repositories: { bench: repo },
          tokens: [
            {
              id: "bench",
              digest: `sha256:${createHash("sha256").update(SECRET).digest("hex")}`,
              scopes: ["read", "evaluate"],
            },
          ],
        },
      });
      let edit = 0;
      const change = () => writeFileSync(join(repo, edited), featureModule(index, ++edit));
      const started = await serve(config);
      server = started.child;
      const gate = async (): Promise<string> => {
        const res = await fetch(`${started.url}/api/v1/repositories/bench/evaluate`, {
          method: "POST",
          headers: { authorization: `Bearer ${SECRET}`, "content-type": "application/json" },
          body: JSON.stringify({ callSite: "gate", base: "HEAD" }),
        });
        const body = (await res.json()) as { decision?: string; code?: string };
        if (res.status !== 200 || body.decision !== "allow") {
          throw new Error(`the warm gate did not allow the type-correct change: ${res.status} ${JSON.stringify(body)}`);
        }
        return body.decision;
      };
      const tscArgs = [TSC, "--noEmit", "-p", repo];
      const info = join(dir, "tsc.tsbuildinfo");
      const incrementalArgs = [TSC, "--noEmit", "--incremental", "--tsBuildInfoFile", info, "-p", repo];
      const expectExit = (what: string, r: { code: number; stdout: string }): void => {
        if (r.code !== 0) throw new Error(`${what} exited ${r.code}: ${r.stdout.slice(0, 2000)}`);
      };
      // Both sides give the answer a user wants on the change before anything is timed.
      change();
      expectExit("tsc --noEmit", await runProcess(process.execPath, tscArgs));
      expectExit("tsc --incremental", await runProcess(process.execPath, incrementalArgs));
      await gate();
      ctx.progress(`${files.size - 2} TypeScript files; the warm gate allows the one-file change (${edited})`);

      const rounds = ctx.size === "smoke" ? 1 : 9;
      const warmup = ctx.size === "smoke" ? 0 : 1;
      const details = { files: files.size - 2 };
      ctx.report(
        await compare({
          name: `warm gate through asp serve --http, ${files.size - 2} files, one-file change`,
          baselineName: "tsc --noEmit -p (whole process, cold)",
          baseline: async () => expectExit("tsc --noEmit", await runProcess(process.execPath, tscArgs)),
          subject: gate,
          before: change,
          rounds,
          warmup,
          target: 0.05,
          headline: true,
          details,
        }),
      );
      ctx.report(
        await compare({
          name: `warm gate through asp serve --http, ${files.size - 2} files, one-file change`,
          baselineName: "tsc --incremental recheck of the same change (whole process)",
          baseline: async () => expectExit("tsc --incremental", await runProcess(process.execPath, incrementalArgs)),
          subject: gate,
          before: change,
          rounds,
          warmup,
          target: 1.0,
          details,
        }),
      );
      ctx.report(
        await compare({
          name: "8 warm gates sent together through one server",
          baselineName: "one warm gate",
          baseline: gate,
          subject: async () => {
            await Promise.all(Array.from({ length: 8 }, () => gate()));
          },
          before: change,
          rounds: ctx.size === "smoke" ? 1 : 5,
          warmup,
          target: 2.0,
          details,
        }),
      );
    } finally {
      server?.kill("SIGTERM");
      if (server !== undefined && server.exitCode === null) {
        await new Promise((done) => server?.once("exit", done));
      }
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
