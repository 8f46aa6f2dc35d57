import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument, SERVER_ROUTES } from "../src/index.js";
import { ROUTE_SCHEMAS } from "../src/schemas.js";
import { bearer, exampleHost } from "./helpers.js";

// Issue 28: an OpenAPI document generated from the same schemas the server validates with,
// served and checked in (apps/server/openapi.json).

const CHECKED_IN = fileURLToPath(new URL("../openapi.json", import.meta.url));

let env: Awaited<ReturnType<typeof exampleHost>>;
let app: FastifyInstance;
beforeAll(async () => {
  env = await exampleHost();
  app = await env.serve();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

type Doc = { paths: Record<string, Record<string, { parameters: Array<{ name: string; in: string }> }>> };

describe("the OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    const result = await new Validator().validate(openApiDocument() as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("is checked in as generated (else: pnpm --filter @asp/server run build && pnpm --filter @asp/server run openapi:emit)", () => {
    expect(JSON.parse(readFileSync(CHECKED_IN, "utf8"))).toEqual(openApiDocument());
  });

  it("names exactly the routes of SERVER_ROUTES, each with its scope and the parameters its schema validates", () => {
    const doc = openApiDocument() as unknown as Doc;
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(listed.sort()).toEqual(
      SERVER_ROUTES.map((r) => `${r.method} ${r.path.replace(/:([a-z_]+)/g, "{$1}")}`).sort(),
    );
    for (const r of SERVER_ROUTES) {
      const op = doc.paths[r.path.replace(/:([a-z_]+)/g, "{$1}")]?.[r.method.toLowerCase()] as unknown as {
        "x-asp-scope": string;
        parameters: Array<{ name: string; in: string }>;
      };
      expect(op["x-asp-scope"], r.path).toBe(r.scope);
      const schema = ROUTE_SCHEMAS[`${r.method} ${r.path}`] ?? {};
      const names = (s: unknown) => Object.keys((s as { properties?: object } | undefined)?.properties ?? {});
      expect(op.parameters.filter((p) => p.in === "path").map((p) => p.name)).toEqual(names(schema.params));
      expect(op.parameters.filter((p) => p.in === "query").map((p) => p.name)).toEqual(names(schema.querystring));
    }
  });

  it("is served at GET /api/v1/openapi.json (read scope), equal to the generated one", async () => {
    const res = await app.inject({ url: "/api/v1/openapi.json", headers: bearer("reader") });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(openApiDocument());
    expect((await app.inject({ url: "/api/v1/openapi.json" })).statusCode).toBe(401);
  });
});

describe("rate limits", () => {
  it("past max requests in the window a token gets 429 ASP_SERVER_RATE_LIMITED with Retry-After; another token does not", async () => {
    const limited = await env.serve({ rateLimit: { max: 3, windowMs: 3_600_000 } });
    const call = (token: string) => limited.inject({ url: "/api/v1/repositories", headers: bearer(token) });
    for (let i = 0; i < 3; i += 1) expect((await call("reader")).statusCode).toBe(200);
    const over = await call("reader");
    expect(over.statusCode).toBe(429);
    expect(over.json()).toMatchObject({ code: "ASP_SERVER_RATE_LIMITED" });
    expect(Number(over.headers["retry-after"])).toBeGreaterThan(0);
    expect((await call("evaluator")).statusCode).toBe(200);
    // Requests without a token are counted per address, and refused once over too.
    for (let i = 0; i < 3; i += 1) expect((await limited.inject({ url: "/api/v1/status" })).statusCode).toBe(401);
    expect((await limited.inject({ url: "/api/v1/status" })).statusCode).toBe(429);
  });
});
