import { isSchemaName, type SchemaName, schemaDocument } from "@asp/contracts";
import type { TSchema } from "@sinclair/typebox";
import { SERVER_ROUTES, type ServerRoute } from "./routes.js";
import { ROUTE_ANSWERS, ROUTE_SCHEMAS } from "./schemas.js";

/** Plain JSON of a TypeBox schema (its symbols dropped). */
const plain = (schema: TSchema): Record<string, unknown> =>
  JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;

const ERROR = { $ref: "#/components/schemas/Error" };
const errorAnswer = (description: string) => ({ description, content: { "application/json": { schema: ERROR } } });

/** The error statuses one route can answer with, each with what it means there. */
function errorsOf(route: ServerRoute, hasParams: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    "400": errorAnswer("ASP_SERVER_BAD_REQUEST: the path, query or body is outside the route's closed schema"),
    "401": errorAnswer("ASP_SERVER_UNAUTHORIZED: no bearer token, or one trusted configuration does not list"),
    "403": errorAnswer(`ASP_SERVER_FORBIDDEN: the token lacks the ${route.scope} scope`),
  };
  if (hasParams) out["404"] = errorAnswer("no such resource (ASP_SERVER_UNKNOWN_*, ASP_*_NOT_FOUND)");
  if (route.method !== "GET") {
    out["413"] = errorAnswer("ASP_SERVER_BODY_TOO_LARGE: the body is over the server's limit");
    out["415"] = errorAnswer("ASP_SERVER_UNSUPPORTED_MEDIA_TYPE: the body is not JSON");
  }
  if (route.method === "PATCH") {
    out["409"] = errorAnswer("ASP_ROLLOUT_STAGE_DISABLED: stage2_auto_run_storage is off; nothing is stored");
    out["412"] = errorAnswer("ASP_SERVER_PRECONDITION_FAILED: If-Match is not the stored version");
  }
  if (route.path === "/api/v1/repositories/:name/evaluate") {
    out["409"] = errorAnswer("ASP_THS_TRUSTED_BASE_MOVED: another host moved the trusted base; run it again");
  }
  if (route.path === "/api/v1/artifacts/versions/:version_id") {
    out["409"] = errorAnswer("ASP_AUTO_MODE_VERSION_AMBIGUOUS: the version id names different bytes; never guessed");
  }
  if (route.path === "/api/v1/events") out["503"] = errorAnswer("ASP_SERVER_BUSY: as many streams are open as allowed");
  out["429"] = errorAnswer(
    "ASP_SERVER_RATE_LIMITED: too many requests from this token; retry after Retry-After seconds",
  );
  out["500"] = errorAnswer("ASP_SERVER_INTERNAL: the host failed; the server's log says why");
  return out;
}

/** The OpenAPI parameters of a route: its path parameters, then its query. */
function parametersOf(method: string, path: string): unknown[] {
  const schema = ROUTE_SCHEMAS[`${method} ${path}`] ?? {};
  const out: unknown[] = [];
  for (const [where, s] of [
    ["path", schema.params],
    ["query", schema.querystring],
  ] as const) {
    if (s === undefined) continue;
    const json = plain(s) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, prop] of Object.entries(json.properties ?? {})) {
      const { description, ...rest } = prop;
      out.push({
        name,
        in: where,
        required: where === "path" || (json.required ?? []).includes(name),
        ...(typeof description === "string" ? { description } : {}),
        schema: rest,
      });
    }
  }
  if (path === "/api/v1/events") {
    out.push({
      name: "Last-Event-ID",
      in: "header",
      required: false,
      description: "resume after this event id (a seq): what an EventSource sends on reconnect",
      schema: { type: "string", pattern: "^\\d{1,15}$" },
    });
  }
  if (method === "PATCH") {
    out.push({
      name: "If-Match",
      in: "header",
      required: false,
      description: 'the ETag of the settings the patch was made against ("<seq>")',
      schema: { type: "string" },
    });
  }
  return out;
}

const operationId = (route: ServerRoute): string =>
  `${route.method.toLowerCase()}${route.path
    .replace(/^\/api\/v1/, "")
    .split(/[/_.-]/)
    .filter((p) => p !== "")
    .map((p) =>
      p.startsWith(":") ? `By${p.slice(1, 2).toUpperCase()}${p.slice(2)}` : p[0]?.toUpperCase() + p.slice(1),
    )
    .join("")}`;

/**
 * The OpenAPI 3.1 document of the server, generated from the same schemas the server validates
 * with (`ROUTE_SCHEMAS`), the route table ({@link SERVER_ROUTES}) and the contracts schemas
 * of the answers. Deterministic: it is checked in as `apps/server/openapi.json` and served at
 * `GET /api/v1/openapi.json`.
 */
export function openApiDocument(): Record<string, unknown> {
  const used = new Set<SchemaName>();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of SERVER_ROUTES) {
    const key = `${route.method} ${route.path}`;
    const schema = ROUTE_SCHEMAS[key] ?? {};
    const answer = ROUTE_ANSWERS[key];
    if (answer === undefined) throw new Error(`route ${key} has no ROUTE_ANSWERS entry`);
    let answerSchema: unknown;
    if (typeof answer.schema === "string") {
      if (!isSchemaName(answer.schema)) throw new Error(`unknown contracts schema ${answer.schema}`);
      used.add(answer.schema);
      answerSchema = { $ref: `#/components/schemas/${answer.schema}` };
    } else if (answer.schema !== undefined) {
      answerSchema = plain(answer.schema);
    } else if (answer.contentType === "application/octet-stream") {
      answerSchema = { type: "string", contentMediaType: "application/octet-stream" };
    } else {
      answerSchema = answer.contentType === "text/event-stream" ? { type: "string" } : { type: "object" };
    }
    const body =
      schema.body === undefined
        ? {}
        : {
            requestBody: {
              required: true,
              content: Object.fromEntries(
                (route.method === "PATCH"
                  ? ["application/merge-patch+json", "application/json"]
                  : ["application/json"]
                ).map((type) => [type, { schema: plain(schema.body as TSchema) }]),
              ),
            },
          };
    const url = route.path.replace(/:([a-z_]+)/g, "{$1}");
    paths[url] ??= {};
    (paths[url] as Record<string, unknown>)[route.method.toLowerCase()] = {
      operationId: operationId(route),
      summary: route.summary,
      security: [{ bearer: [] }],
      "x-asp-scope": route.scope,
      parameters: parametersOf(route.method, route.path),
      ...body,
      responses: {
        [String(answer.status)]: {
          description: answer.description,
          content: { [answer.contentType]: { schema: answerSchema } },
        },
        ...errorsOf(route, schema.params !== undefined),
      },
    };
  }
  const components: Record<string, unknown> = {
    Error: {
      type: "object",
      required: ["code", "message"],
      additionalProperties: false,
      properties: {
        code: { type: "string", description: "a stable code (ASP_*): switch on it, never on the message" },
        message: { type: "string" },
      },
    },
  };
  for (const name of [...used].sort()) {
    const { $schema: _drop, ...doc } = schemaDocument(name);
    components[name] = doc;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "ASP trusted host API",
      version: "1",
      description:
        "The HTTP API of one long-lived ASP trusted host (asp serve --http). Every route needs a bearer token with its scope (x-asp-scope); errors are { code, message }. docs/server.md describes every route with examples.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: "http://127.0.0.1:7340", description: "asp serve --http 127.0.0.1:7340" }],
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "a token of server.tokens" } },
      schemas: components,
    },
  };
}
