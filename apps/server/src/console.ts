import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { ServerError } from "./errors.js";

/** The paths the console is served under, outside the API (no token: its files hold no secret). */
export const CONSOLE_ROUTES = ["GET /console", "GET /console/", "GET /console/assets/:file"] as const;

const TYPES: Readonly<Record<string, string>> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
};

/** The page may talk to its own origin only: no external request, no inline script, no framing. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/**
 * Serve a built console (`apps/console`'s `vite build` output) from memory: `index.html` and the
 * files of `assets/`, read once at start, so no request ever reaches the file system.
 * @throws ServerError `ASP_SERVER_BAD_OPTIONS` when `dir` holds no `index.html`.
 */
export function registerConsole(app: FastifyInstance, dir: string): void {
  let index: Buffer;
  try {
    index = readFileSync(join(dir, "index.html"));
  } catch {
    throw new ServerError(
      "ASP_SERVER_BAD_OPTIONS",
      `no built console at ${dir} (run pnpm --filter @asp/console build)`,
    );
  }
  const assets = new Map<string, { bytes: Buffer; type: string }>();
  const assetDir = join(dir, "assets");
  for (const name of statSync(assetDir, { throwIfNoEntry: false })?.isDirectory() ? readdirSync(assetDir) : []) {
    const type = TYPES[name.slice(name.lastIndexOf("."))];
    if (type !== undefined && /^[A-Za-z0-9._-]+$/.test(name))
      assets.set(name, { bytes: readFileSync(join(assetDir, name)), type });
  }
  const config = { aspPublic: true };
  app.get("/console", { config }, async (_request, reply) => reply.redirect("/console/", 308));
  app.get("/console/", { config }, async (_request, reply) =>
    reply
      .header("content-type", "text/html; charset=utf-8")
      .header("content-security-policy", CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("cache-control", "no-cache")
      .send(index),
  );
  app.get<{ Params: { file: string } }>("/console/assets/:file", { config }, async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (asset === undefined) {
      throw new ServerError("ASP_SERVER_NOT_FOUND", `no console file ${request.params.file}`);
    }
    return reply
      .header("content-type", asset.type)
      .header("x-content-type-options", "nosniff")
      .header("cache-control", "public, max-age=31536000, immutable")
      .send(asset.bytes);
  });
}
