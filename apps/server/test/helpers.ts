import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ServerScope } from "@asp/contracts";
import { git } from "@asp/test-utils";
import { type ComposedHost, composeHost } from "@asp/ths";
import type { FastifyInstance } from "fastify";
import { createServer, type ServerOptions, tokenDigest } from "../src/index.js";

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The four signed example check and edit plugins, as `pnpm build` leaves them. */
const EXAMPLE_PLUGINS = ["provider-typescript", "provider-secrets", "provider-text-edit", "provider-import-graph"];

/** A made-up key in the shape of an AWS access key id (AKIA + 16 uppercase letters and digits). */
export const FAKE_AWS_KEY = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");

/** One token per scope set the tests use; the secret is the id repeated (never a real secret). */
export const TOKENS: Readonly<Record<string, readonly ServerScope[]>> = {
  reader: ["read"],
  evaluator: ["read", "evaluate"],
  admin: ["admin"],
};
export const secretOf = (id: string): string => `test-token-${id}-${id}`;
export const bearer = (id: string): Record<string, string> => ({ authorization: `Bearer ${secretOf(id)}` });

/**
 * A copy of examples/demo-repo as a git repository (one commit) and a host composed over the
 * example policy, the demo trust root and the signed example plugins, with a level store in the
 * same temp folder: the host `asp serve` runs on the example, minus the sandboxes.
 */
export async function exampleHost(): Promise<{
  root: string;
  repo: string;
  host: ComposedHost;
  serve: (extra?: Partial<ServerOptions>) => Promise<FastifyInstance>;
  close: () => Promise<void>;
}> {
  const examples = join(REPO_ROOT, "examples");
  const root = mkdtempSync(join(tmpdir(), "asp-server-"));
  const repo = join(root, "demo-repo");
  cpSync(join(examples, "demo-repo"), repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "base");
  const host = await composeHost({
    store: join(root, "store"),
    policy: join(examples, "asp.policy.json"),
    trustRoots: [join(examples, "keys", "example.key.pub")],
    plugins: EXAMPLE_PLUGINS.map((p) => join(REPO_ROOT, "plugins", p, "dist", "plugin")),
    failOpenSink: { log: () => undefined },
  });
  const servers: FastifyInstance[] = [];
  return {
    root,
    repo,
    host,
    serve: async (extra = {}) => {
      const server = await createServer({
        host,
        repositories: { demo: repo },
        tokens: Object.entries(TOKENS).map(([id, scopes]) => ({ id, digest: tokenDigest(secretOf(id)), scopes })),
        ...extra,
      });
      servers.push(server);
      return server;
    },
    close: async () => {
      for (const s of servers.splice(0)) await s.close();
      await host.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export { passingReviewer } from "@asp/test-utils";
