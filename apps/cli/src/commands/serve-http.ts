import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createServer } from "@asp/server";
import { type ComposedHost, candidatePolicyPaths } from "@asp/ths";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { requireHostConfig } from "../host-config.js";
import { onInterrupt } from "../interrupt.js";
import { inert } from "../terminal.js";
import { hostFromConfig, readHostConfig } from "./host.js";
import { openForWriting, parseWait } from "./store.js";

/** The web console's build (apps/console/dist), beside this package in the repository. */
const CONSOLE_DIR = fileURLToPath(new URL("../../../console/dist", import.meta.url));

/** Where `asp serve --http` listens: a loopback address and port, or a unix socket path. */
type Listen = { readonly host: string; readonly port: number } | { readonly path: string };

/**
 * `ADDR` of `--http`: `HOST:PORT` on a loopback address (`127.0.0.1`, `::1` as `[::1]:PORT`,
 * `localhost`), or `unix:/absolute/path`. Anything else is refused: the server speaks plain HTTP
 * with bearer tokens, so it never listens where another machine could reach it.
 *
 * @throws UsageError `ASP_CLI_BAD_INPUT`.
 */
export function parseListen(addr: string): Listen {
  if (addr.startsWith("unix:")) {
    const path = addr.slice("unix:".length);
    if (!path.startsWith("/")) {
      throw new UsageError(
        "ASP_CLI_BAD_INPUT",
        `--http ${addr}: a unix socket path must be absolute (unix:/run/asp.sock)`,
      );
    }
    return { path };
  }
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(addr);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (m === null || host === undefined || !Number.isInteger(port) || port > 65_535) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `--http ${addr}: expected HOST:PORT or unix:/path (e.g. 127.0.0.1:7340)`);
  }
  const loopback = host === "localhost" || host === "::1" || (isIP(host) === 4 && host.startsWith("127."));
  if (!loopback) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `--http ${addr}: only a loopback address or a unix socket is served (plain HTTP, bearer tokens); put a TLS proxy in front to reach it from elsewhere`,
      { data: { host } },
    );
  }
  return { host, port };
}

/**
 * `asp serve --http ADDR`: one long-lived host over the configuration's store (held for writing
 * for the server's life, so it is the store's one writer), its providers warm, answering
 * `@asp/server`'s routes until SIGINT / SIGTERM, then closing the server, the host and the store.
 *
 * @throws UsageError `ASP_CLI_BAD_INPUT` (no `server` section, a base-revision policy, a
 *   PostgreSQL store, a bad address); ThsError `ASP_THS_UNTRUSTED_LOCATION` (a configured
 *   repository holds trusted configuration).
 */
export async function serveHttp(ctx: CliContext, flags: { http: string; config?: string; wait?: string }) {
  const listen = parseListen(flags.http);
  const config = readHostConfig(ctx, flags.config);
  const settings = config.server;
  if (settings === undefined) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      'the host configuration has no "server" section: add { "repositories": { "NAME": "PATH" }, "tokens": [{ "id": "ci", "digest": "sha256:…", "scopes": ["read", "evaluate"] }] } (docs/server.md)',
    );
  }
  if (typeof config.policy !== "string") {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      "asp serve --http needs a policy file: a policy read from a base revision belongs to one repository, the server serves several",
    );
  }
  if (/^postgres(?:ql)?:\/\//i.test(config.store)) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      "asp serve --http holds a level store as its one writer; a PostgreSQL store is not served yet (run asp gate against it)",
    );
  }
  // Threat model invariant 2, for every repository the server may be asked about: the file and
  // every path it names lie outside each of them.
  for (const repo of Object.values(settings.repositories)) readHostConfig(ctx, flags.config, repo);
  const store = await openForWriting(ctx, "serve", config.store, parseWait(flags.wait));
  let host: ComposedHost | undefined;
  try {
    host = await hostFromConfig(ctx, config, { store });
    const server = await createServer({
      host,
      repositories: settings.repositories,
      tokens: settings.tokens,
      candidatePolicyPath: candidatePolicyPaths(config),
      // The console, when it was built beside this CLI (pnpm build in the repository).
      ...(existsSync(join(CONSOLE_DIR, "index.html")) ? { consoleDir: CONSOLE_DIR } : {}),
      // Frames resolve under the trusted configuration's "autoMode" and the OPENAI4S_* environment.
      autoMode: {
        ...(config.autoMode === null ? {} : { deployment: config.autoMode }),
        deploymentOrigin: requireHostConfig(ctx, flags.config).path,
        env: ctx.io.env,
      },
    });
    const stopped = new Promise<void>((done) => {
      const release = onInterrupt(() => done());
      server.addHook("onClose", async () => release());
    });
    await server.listen("path" in listen ? { path: listen.path } : { host: listen.host, port: listen.port });
    const address = server.server.address();
    const where =
      typeof address === "string"
        ? `unix:${address}`
        : address === null
          ? flags.http
          : `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;
    const names = Object.keys(settings.repositories);
    ctx.io.stderr(
      `asp serve: listening on ${inert(where)} (${names.length} repositor${names.length === 1 ? "y" : "ies"}: ${names.map(inert).join(", ")}; ${settings.tokens.length} token${settings.tokens.length === 1 ? "" : "s"}); SIGINT or SIGTERM stops it\n`,
    );
    if (existsSync(join(CONSOLE_DIR, "index.html")) && !where.startsWith("unix:")) {
      ctx.io.stderr(`asp serve: console at ${inert(where)}/console/\n`);
    }
    await stopped;
    ctx.io.stderr("asp serve: stopping\n");
    await server.close();
  } finally {
    try {
      await host?.close();
    } finally {
      await store.close();
    }
  }
}
