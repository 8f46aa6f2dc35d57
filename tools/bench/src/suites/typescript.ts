import { type ChildProcessWithoutNullStreams, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type Assessment, PROTOCOL_VERSION } from "@asp/contracts";
import { METHODS } from "@asp/protocol";
import { blobDigest, MemoryRepo } from "@asp/sdk/testing";
import {
  createMessageConnection,
  type MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";
import { compare } from "../measure.js";
import { featureModule, generateProject, writeProject } from "../project.js";
import type { Suite } from "../suite.js";

/**
 * `@asp/provider-typescript` against `tsc --noEmit` on the same generated 200-file project.
 *
 * Both sides are real processes started with `process.execPath`: the baseline spawns the
 * `tsc` of the `typescript` package; the subject drives the provider's built entry
 * (`dist/main.js`) as a host would, over the real protocol, serving every file through
 * `host/readTree` / `host/readBlob` from memory.
 *
 * - cold: a fresh provider process, `initialize`, one `check/assess` of the whole baseline (every
 *   file read through callbacks, parsed and checked), `shutdown`;
 * - warm: the same long-lived provider, one `check/assess` after a one-file change (a new edit
 *   each round, so no answer is cached): it reads one blob and re-checks the changed file and
 *   the files that import it.
 */

const req = createRequire(import.meta.url);
const TSC = join(dirname(req.resolve("typescript/package.json")), "bin", "tsc");
const PROVIDER = join(dirname(req.resolve("@asp/provider-typescript/package.json")), "dist", "main.js");

/** The file edited by the warm check: mid-chain, so four files import it (transitively). */
const EDITED = "src/features/f105.ts";

// ------------------------------------------------------------------ a minimal in-memory host

interface ProviderProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly connection: MessageConnection;
}

async function launch(store: MemoryRepo): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [PROVIDER], { stdio: ["pipe", "pipe", "pipe"] });
  child.stderr.resume();
  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout),
    new StreamMessageWriter(child.stdin),
  );
  connection.onRequest(METHODS.readTree, (p: { digest: string }) => ({
    digest: p.digest,
    entries: store.readTree(p.digest),
  }));
  connection.onRequest(METHODS.readBlob, (p: { digest: string }) => {
    const bytes = Buffer.from(store.readBlob(p.digest));
    return { digest: p.digest, size: bytes.length, base64: bytes.toString("base64") };
  });
  connection.listen();
  await connection.sendRequest(METHODS.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    host: { name: "asp-bench", version: "1.0.0" },
    processId: process.pid,
  });
  await connection.sendNotification(METHODS.initialized, { grants: [] });
  return { child, connection };
}

async function stop(p: ProviderProcess): Promise<void> {
  const exited = new Promise<void>((resolve) => p.child.once("exit", () => resolve()));
  await p.connection.sendRequest(METHODS.shutdown);
  await p.connection.sendNotification(METHODS.exit);
  await exited;
  p.connection.dispose();
}

let requests = 0;
async function assess(
  p: ProviderProcess,
  baseline: string,
  changeset: { digest: string; base: string; after: string; changes: unknown[] } | null,
): Promise<Assessment> {
  const a = (await p.connection.sendRequest(METHODS.checkAssess, {
    requestId: `bench-${++requests}`,
    callSite: "gate",
    baseline,
    changeset,
    requirements: [],
    deadlineMs: 600_000,
  })) as Assessment;
  if (a.status !== "complete" || a.diagnostics.length > 0) {
    throw new Error(`the provider answered ${a.status} with ${a.diagnostics.length} diagnostics on a clean project`);
  }
  return a;
}

function tscNoEmit(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [TSC, "-p", dir, "--noEmit"], (error, stdout) => {
      if (error) reject(new Error(`tsc --noEmit failed: ${stdout.slice(0, 2000)}`));
      else resolve();
    });
  });
}

const suite: Suite = {
  name: "typescript",
  description:
    "provider-typescript (subprocess over the protocol) cold and warm check of a 200-file project vs tsc --noEmit",
  async run(ctx) {
    const files = generateProject();
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-ts-"));
    try {
      writeProject(dir, files);
      ctx.progress(`generated ${files.size - 2} TypeScript files in ${dir}`);
      const store = new MemoryRepo();
      const baseline = store.tree(Object.fromEntries(files));
      const tsc = () => tscNoEmit(dir);

      ctx.report(
        await compare({
          name: "provider-typescript cold check (new process, 200 files via callbacks)",
          baselineName: "tsc --noEmit (new process)",
          baseline: tsc,
          subject: async () => {
            const p = await launch(store);
            await assess(p, baseline, null);
            await stop(p);
          },
          rounds: 3,
          warmup: 1,
          target: 1.5,
        }),
      );

      const warm = await launch(store);
      try {
        await assess(warm, baseline, null);
        let edit = 0;
        const i = Number(/f(\d+)\.ts$/.exec(EDITED)?.[1]);
        let checked = 0;
        ctx.report(
          await compare({
            name: `provider-typescript warm check after a one-file change (${EDITED})`,
            baselineName: "tsc --noEmit (new process)",
            baseline: tsc,
            subject: async () => {
              edit++;
              const after = new Map(files).set(EDITED, featureModule(i, edit));
              const tree = store.tree(Object.fromEntries(after));
              const before = files.get(EDITED) as string;
              const a = await assess(warm, baseline, {
                digest: blobDigest(`${baseline}->${tree}`),
                base: baseline,
                after: tree,
                changes: [
                  {
                    path: EDITED,
                    kind: "modified",
                    before: blobDigest(before),
                    after: blobDigest(after.get(EDITED) as string),
                  },
                ],
              });
              checked = a.coverage?.paths ?? 0;
            },
            rounds: 5,
            warmup: 1,
            target: 0.3,
          }),
        );
        ctx.progress(`warm check covered ${checked} files (the edited one and its importers)`);
      } finally {
        await stop(warm);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
