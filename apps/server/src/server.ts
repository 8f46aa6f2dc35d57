import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import { resolve } from "node:path";
import type { CallSite, ServerScope } from "@asp/contracts";
import { type ComposedHost, listReceipts, showReceipt, verifyReceipts } from "@asp/ths";
import rateLimit from "@fastify/rate-limit";
import type { Static } from "@sinclair/typebox";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { authorize, checkTokens, type ServerToken } from "./auth.js";
import { registerAutoModeRoutes, type ServerAutoMode } from "./auto-routes.js";
import { CONSOLE_ROUTES, registerConsole } from "./console.js";
import { answerOf, ServerError } from "./errors.js";
import { openApiDocument } from "./openapi.js";
import { SERVER_ROUTES } from "./routes.js";
import { type EvaluateBody, ROUTE_SCHEMAS } from "./schemas.js";
import { openStream } from "./stream.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** The scope a token needs for the route (SERVER_ROUTES), checked on every request. */
    aspScope?: ServerScope;
    /** A console file: served without a token (it holds no secret). */
    aspPublic?: boolean;
  }
  interface FastifyRequest {
    /** The id of the token the request was authorized with (set by the scope check). */
    aspTokenId: string | null;
  }
}

/** How `createServer` is set up. Everything here is trusted configuration, never a client's. */
export interface ServerOptions {
  /** The composed host: plugins verified once, providers kept warm, its store held alone. */
  readonly host: ComposedHost;
  /** Repositories a client may name, by name (`[a-z0-9][a-z0-9._-]*`); each an existing folder. */
  readonly repositories: Readonly<Record<string, string>>;
  /** Bearer tokens by digest and scope; none: every route answers 401. */
  readonly tokens: readonly ServerToken[];
  /** The repository's own policy paths assessed as candidates, as `asp gate` passes them. */
  readonly candidatePolicyPath?: string | readonly string[];
  /** Largest request body in bytes (default 64 KiB). */
  readonly bodyLimit?: number;
  /**
   * The Auto Mode configuration frames resolve under: the trusted host configuration's
   * `autoMode` and the environment's `OPENAI4S_*` variables (default: none, every stage off).
   */
  readonly autoMode?: ServerAutoMode;
  /** The event stream: how often it looks for new facts (ms, default 200), keep-alive (ms, default 15,000), open streams at most (default 32). */
  /**
   * Requests per token (per address for a request without one) in one window: `max` (default
   * 1,200) in `windowMs` (default 60,000). Past it a request is `429 ASP_SERVER_RATE_LIMITED`
   * with `Retry-After`.
   */
  readonly rateLimit?: { readonly max?: number; readonly windowMs?: number };
  /**
   * A built console to serve under `/console/` (the `dist` folder of `apps/console`), or none.
   * Its files are read once at start and served without a token.
   */
  readonly consoleDir?: string;
  readonly stream?: {
    readonly pollMs?: number;
    readonly keepAliveMs?: number;
    readonly maxStreams?: number;
  };
}

/** A promise chain that runs one task at a time, in order: the store has one writer. */
function oneAtATime(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (task) => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

function checkRepositories(repositories: Readonly<Record<string, string>>): ReadonlyMap<string, string> {
  const out = new Map<string, string>();
  for (const [name, dir] of Object.entries(repositories)) {
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(name)) {
      throw new ServerError("ASP_SERVER_BAD_OPTIONS", `repository name ${JSON.stringify(name)} is not [a-z0-9._-]`);
    }
    const path = resolve(dir);
    let folder = false;
    try {
      folder = statSync(path).isDirectory();
    } catch {
      folder = false;
    }
    if (!folder) {
      throw new ServerError("ASP_SERVER_BAD_OPTIONS", `repository ${name}: ${path} is not a folder`, {
        data: { repository: name },
      });
    }
    out.set(name, path);
  }
  if (out.size === 0) throw new ServerError("ASP_SERVER_BAD_OPTIONS", "the server needs at least one repository");
  return out;
}

/**
 * The HTTP API of one long-lived host (Fastify). Every route needs a bearer token with its
 * scope (see {@link SERVER_ROUTES}); bodies and queries are validated against closed schemas;
 * every error is `{ code, message }` with its status; evaluations run one at a time over the
 * host's store. A client names a repository from trusted configuration, never a path.
 *
 * The caller owns the host: closing the server does not close it.
 *
 * @throws ServerError `ASP_SERVER_BAD_OPTIONS`. RolloutError (any code of `resolveConfiguration`)
 *   when `autoMode` does not resolve (an unbuilt stage turned on, an unknown `OPENAI4S_*` variable).
 * @example
 * ```ts
 * const server = await createServer({ host, repositories: { demo: "./repo" }, tokens: [{ id: "ci", digest: tokenDigest(secret), scopes: ["read", "evaluate"] }] });
 * await server.listen({ host: "127.0.0.1", port: 7340 });
 * ```
 */
export async function createServer(options: ServerOptions): Promise<FastifyInstance> {
  const repositories = checkRepositories(options.repositories);
  const tokens = checkTokens(options.tokens);
  const { host } = options;
  const serial = oneAtATime();
  const app = Fastify({
    bodyLimit: options.bodyLimit ?? 64 * 1024,
    logger: false,
    // Exactly the routes of SERVER_ROUTES: no implicit HEAD twins.
    exposeHeadRoutes: false,
    // Closed schemas: an unknown field is refused, never stripped; defaults filled, nothing coerced
    // except query strings (which are text on the wire).
    ajv: { customOptions: { removeAdditional: false, useDefaults: true, coerceTypes: true, allErrors: false } },
  });

  // JSON only (anything else is 415); `__proto__` and `constructor.prototype` keys are refused.
  app.removeAllContentTypeParsers();
  const json = app.getDefaultJsonParser("error", "error");
  app.addContentTypeParser("application/json", { parseAs: "string" }, json);
  // RFC 7396 merge patches (PATCH only; any other route refuses it as 415).
  app.addContentTypeParser("application/merge-patch+json", { parseAs: "string" }, json);
  app.addHook("preValidation", async (request) => {
    const type = String(request.headers["content-type"] ?? "");
    if (request.method !== "PATCH" && type.toLowerCase().startsWith("application/merge-patch+json")) {
      throw new ServerError("ASP_SERVER_UNSUPPORTED_MEDIA_TYPE", "a merge patch is for PATCH routes only");
    }
  });

  // Bounded rates, counted per bearer token (by digest: the token itself is never kept) before
  // anything else runs, so a flood of bad tokens is bounded too (per address).
  await app.register(rateLimit, {
    global: true,
    max: options.rateLimit?.max ?? 1200,
    timeWindow: options.rateLimit?.windowMs ?? 60_000,
    keyGenerator: (request) => {
      const header = request.headers.authorization;
      return typeof header === "string" && header.length > 0
        ? `token:${createHash("sha256").update(header).digest("hex")}`
        : `address:${request.ip}`;
    },
    errorResponseBuilder: (_request, context) =>
      new ServerError(
        "ASP_SERVER_RATE_LIMITED",
        `more than ${context.max} requests in ${context.after}: retry after the Retry-After header's seconds`,
      ),
  });

  app.setErrorHandler((error, _request, reply) => {
    const { status, body } = answerOf(error);
    void reply.status(status).send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send({ code: "ASP_SERVER_NOT_FOUND", message: `no route ${request.method} ${request.url.split("?")[0]}` });
  });

  const registered: string[] = [];
  app.addHook("onRoute", (route) => {
    for (const method of [route.method].flat()) registered.push(`${method} ${route.url}`);
    // The scope check runs after the rate limit's hook (added by its own onRoute, before this
    // one), so requests with a bad token or none are counted too.
    if (route.config?.aspPublic === true) return;
    const scope = route.config?.aspScope;
    if (scope === undefined) throw new Error(`route ${route.url} names no scope`);
    route.onRequest = [route.onRequest ?? []].flat().concat(scoped(scope));
  });

  const scoped =
    (scope: ServerScope) =>
    async (request: FastifyRequest): Promise<void> => {
      request.aspTokenId = authorize(request.headers.authorization, tokens, scope).id;
    };
  const scopeOf = (method: string, path: string): ServerScope => {
    const route = SERVER_ROUTES.find((r) => r.method === method && r.path === path);
    if (route === undefined) throw new Error(`route ${method} ${path} is not in SERVER_ROUTES`);
    return route.scope;
  };
  /** A route's options: the scope check of SERVER_ROUTES and exactly the schema of ROUTE_SCHEMAS. */
  const routeOptions = (method: string, path: string) => {
    const schema = ROUTE_SCHEMAS[`${method} ${path}`];
    if (schema === undefined) throw new Error(`route ${method} ${path} has no ROUTE_SCHEMAS entry`);
    return { config: { aspScope: scopeOf(method, path) }, schema };
  };
  const get = (path: string, handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>) =>
    app.get(path, routeOptions("GET", path), handler);

  get("/api/v1/status", async () => host.status());
  get("/api/v1/capabilities", async () => host.capabilities());
  app.decorateRequest("aspTokenId", null);
  app.post<{ Params: { id: string } }>(
    "/api/v1/providers/:id/quarantine/reset",
    routeOptions("POST", "/api/v1/providers/:id/quarantine/reset"),
    async (request) => {
      const id = request.params.id;
      const reset = await serial(() => host.resetQuarantine(id, `token:${request.aspTokenId ?? "unknown"}`));
      return { ...reset, status: host.status().providers.find((p) => p.id === id) ?? null };
    },
  );
  get("/api/v1/repositories", async () => ({ repositories: [...repositories.keys()] }));
  const openapi = openApiDocument();
  get("/api/v1/openapi.json", async () => openapi);

  app.post<{ Params: { name: string }; Body: Static<typeof EvaluateBody> }>(
    "/api/v1/repositories/:name/evaluate",
    routeOptions("POST", "/api/v1/repositories/:name/evaluate"),
    async (request) => {
      const repo = repositories.get(request.params.name);
      if (repo === undefined) {
        throw new ServerError("ASP_SERVER_UNKNOWN_REPOSITORY", `no repository ${request.params.name} is configured`);
      }
      const callSite: CallSite = request.body.callSite;
      const { envelope, receipt } = await serial(() =>
        host.evaluate(callSite, {
          repo,
          ...(request.body.base === undefined ? {} : { base: request.body.base }),
          ...(callSite === "sweep" ? { wholeTree: true } : {}),
          ...(options.candidatePolicyPath === undefined ? {} : { candidatePolicyPath: options.candidatePolicyPath }),
        }),
      );
      return { decision: envelope.decision, envelope, receipt };
    },
  );

  app.get<{ Querystring: { limit?: number; before?: number } }>(
    "/api/v1/receipts",
    routeOptions("GET", "/api/v1/receipts"),
    async (request) => {
      const limit = request.query.limit ?? 50;
      const rows = await listReceipts(host.store.log, limit, request.query.before);
      const last = rows.at(-1);
      return { receipts: rows, next: rows.length === limit && last !== undefined ? last.seq : null };
    },
  );
  get("/api/v1/receipts/head", async () => ({ head: await host.store.log.head() }));
  get("/api/v1/receipts/verify", async () => verifyReceipts(host.store.log));
  app.get<{ Params: { id: string } }>(
    "/api/v1/receipts/:id",
    routeOptions("GET", "/api/v1/receipts/:id"),
    async (request) => showReceipt(host.store.log, request.params.id),
  );

  registerAutoModeRoutes({
    app,
    store: host.store,
    autoMode: options.autoMode ?? {},
    serial,
    routeOptions,
  });

  const streams = new Set<() => void>();
  const maxStreams = options.stream?.maxStreams ?? 32;
  app.addHook("preClose", async () => {
    for (const stop of streams) stop();
  });
  app.get<{ Querystring: { after?: number; run_id?: string } }>(
    "/api/v1/events",
    routeOptions("GET", "/api/v1/events"),
    async (request, reply) => {
      const last = request.headers["last-event-id"];
      if (last !== undefined && !/^\d{1,15}$/.test(String(last))) {
        throw new ServerError("ASP_SERVER_BAD_REQUEST", "Last-Event-ID is the seq of the last event seen");
      }
      if (streams.size >= maxStreams) {
        throw new ServerError("ASP_SERVER_BUSY", `${maxStreams} event streams are open: close one, or try again later`);
      }
      // Resume after the last event the client saw; else after `after`; else from now on.
      const after =
        last !== undefined ? Number(last) : (request.query.after ?? (await host.store.log.head())?.seq ?? 0);
      reply.hijack();
      reply.raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      const stream = openStream(reply.raw, {
        log: host.store.log,
        after,
        ...(request.query.run_id === undefined ? {} : { runId: request.query.run_id }),
        pollMs: options.stream?.pollMs ?? 200,
        keepAliveMs: options.stream?.keepAliveMs ?? 15_000,
      });
      streams.add(stream.stop);
      void stream.done.finally(() => streams.delete(stream.stop));
    },
  );

  if (options.consoleDir !== undefined) registerConsole(app, options.consoleDir);

  // The table is the contract: a route registered but not listed (or listed but not registered) is a bug.
  const listed = [
    ...SERVER_ROUTES.map((r) => `${r.method} ${r.path}`),
    ...(options.consoleDir === undefined ? [] : CONSOLE_ROUTES),
  ].sort();
  if (JSON.stringify([...registered].sort()) !== JSON.stringify(listed)) {
    throw new Error(`registered routes ${registered.join(", ")} are not SERVER_ROUTES`);
  }
  await app.ready();
  return app;
}
