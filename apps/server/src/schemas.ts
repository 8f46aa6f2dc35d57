import { CALL_SITES, type SchemaName, SUBJECT_KINDS } from "@asp/contracts";
import { type TSchema, Type } from "@sinclair/typebox";

/** A repository name of `server.repositories`. */
const Name = Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,63}$", description: "a repository name" });
/** A root frame id. */
const Fid = Type.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$", description: "a root frame id" });
const RunId = Type.String({ pattern: "^sha256:[0-9a-f]{64}$", description: "an Auto Run id" });
const Limit = Type.Integer({ minimum: 1, maximum: 500, default: 50, description: "page size" });
const Before = Type.Integer({ minimum: 1, description: "the `next` of the previous page (a seq)" });
const Closed = { additionalProperties: false } as const;

export const EvaluateBody = Type.Object(
  {
    callSite: Type.Union(
      CALL_SITES.map((c) => Type.Literal(c)),
      { description: "interactive, gate or sweep" },
    ),
    /** A git revision to diff against (default: the trusted base). Never an option: no leading `-`. */
    base: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 256,
        pattern: "^(?!-)[A-Za-z0-9._/@{}^~-]+$",
        description: "a git revision to diff against (default: the trusted base)",
      }),
    ),
  },
  Closed,
);
/** A merge patch of frame settings: an object (its keys are checked by the rollout parser, closed). */
export const FramePatch = Type.Object({}, { additionalProperties: true, maxProperties: 16 });

/** What one route accepts: its path parameters, query and body, each a closed schema. */
export interface RouteSchema {
  readonly params?: TSchema;
  readonly querystring?: TSchema;
  readonly body?: TSchema;
}

/** What one route answers with on success, for the OpenAPI document. */
export interface RouteAnswer {
  readonly status: number;
  readonly contentType: "application/json" | "application/octet-stream" | "text/event-stream";
  /** A contracts schema by name, or an inline schema; none for a body the document only describes. */
  readonly schema?: SchemaName | TSchema;
  readonly description: string;
}

/**
 * The request schemas of every route, by `METHOD path`: what Fastify validates (the server
 * registers each route with exactly this object) and what the OpenAPI document states.
 */
export const ROUTE_SCHEMAS: Readonly<Record<string, RouteSchema>> = {
  "GET /api/v1/status": {},
  "GET /api/v1/capabilities": {},
  "GET /api/v1/repositories": {},
  "POST /api/v1/providers/:id/quarantine/reset": {
    params: Type.Object({
      id: Type.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9._@/-]{0,127}$", description: "a provider id" }),
    }),
  },
  "POST /api/v1/repositories/:name/evaluate": { params: Type.Object({ name: Name }), body: EvaluateBody },
  "GET /api/v1/receipts": {
    querystring: Type.Object({ limit: Type.Optional(Limit), before: Type.Optional(Before) }, Closed),
  },
  "GET /api/v1/receipts/head": {},
  "GET /api/v1/receipts/verify": {},
  "GET /api/v1/receipts/:id": {
    params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 256, description: "a receipt or decision id" }) }),
  },
  "GET /api/v1/frames/:fid/auto-mode": { params: Type.Object({ fid: Fid }) },
  "PATCH /api/v1/frames/:fid/auto-mode": { params: Type.Object({ fid: Fid }), body: FramePatch },
  "GET /api/v1/frames/:fid/auto-audits": {
    params: Type.Object({ fid: Fid }),
    querystring: Type.Object(
      {
        subject_kind: Type.Optional(Type.Union(SUBJECT_KINDS.map((k) => Type.Literal(k)))),
        before: Type.Optional(Before),
        limit: Type.Optional(Limit),
      },
      Closed,
    ),
  },
  "GET /api/v1/artifacts/versions/:version_id": {
    params: Type.Object({
      version_id: Type.String({ minLength: 1, maxLength: 256, description: "an Artifact version id" }),
    }),
  },
  "GET /api/v1/auto-runs": {
    querystring: Type.Object(
      {
        root_frame_id: Type.Optional(Fid),
        before: Type.Optional(Before),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: "page size" })),
      },
      Closed,
    ),
  },
  "GET /api/v1/auto-runs/:run_id": { params: Type.Object({ run_id: RunId }) },
  "GET /api/v1/events": {
    querystring: Type.Object(
      {
        after: Type.Optional(Type.Integer({ minimum: 0, description: "start after this seq (0: from the start)" })),
        run_id: Type.Optional(RunId),
      },
      Closed,
    ),
  },
  "GET /api/v1/openapi.json": {},
};

const json = (description: string, schema?: SchemaName | TSchema): RouteAnswer => ({
  status: 200,
  contentType: "application/json",
  description,
  ...(schema === undefined ? {} : { schema }),
});

/** What every route answers with on success (the OpenAPI document's 200s). */
export const ROUTE_ANSWERS: Readonly<Record<string, RouteAnswer>> = {
  "GET /api/v1/status": json("providers, their lifecycle state and health", "host-status"),
  "GET /api/v1/capabilities": json("what each provider can do"),
  "POST /api/v1/providers/:id/quarantine/reset": json(
    "what the reset did (`lifted` false: it was not quarantined, nothing written) and the provider's status",
    Type.Object({
      provider: Type.String(),
      lifted: Type.Boolean(),
      clearedFailures: Type.Union([Type.Integer(), Type.Null()]),
      seq: Type.Union([Type.Integer(), Type.Null()]),
      status: Type.Object({}),
    }),
  ),
  "GET /api/v1/repositories": json(
    "the repository names a client may use",
    Type.Object({ repositories: Type.Array(Type.String()) }),
  ),
  "POST /api/v1/repositories/:name/evaluate": json(
    "the decision, its envelope and its receipt (written before the answer)",
    Type.Object({ decision: Type.String(), envelope: Type.Object({}), receipt: Type.Object({}) }),
  ),
  "GET /api/v1/receipts": json(
    "receipts, newest first (`receipts` holds `{ seq, at, receipt }`)",
    Type.Object({
      receipts: Type.Array(Type.Object({ seq: Type.Integer(), at: Type.String() })),
      next: Type.Union([Type.Integer(), Type.Null()]),
    }),
  ),
  "GET /api/v1/receipts/head": json("the store's head, or null when empty"),
  "GET /api/v1/receipts/verify": json("the chain and every receipt, walked"),
  "GET /api/v1/receipts/:id": json("one receipt (`receipt`) and the envelope it is bound to"),
  "GET /api/v1/frames/:fid/auto-mode": json("a frame's stored settings and the configuration they resolve to"),
  "PATCH /api/v1/frames/:fid/auto-mode": json("the frame's settings as stored, and what they resolve to"),
  "GET /api/v1/frames/:fid/auto-audits": json(
    "the frame's committed audit events, newest first (`audits` holds `{ seq, at, event }`)",
    Type.Object({
      root_frame_id: Type.String(),
      audits: Type.Array(Type.Object({ seq: Type.Integer(), at: Type.String(), event: Type.Object({}) })),
      next: Type.Union([Type.Integer(), Type.Null()]),
    }),
  ),
  "GET /api/v1/artifacts/versions/:version_id": {
    status: 200,
    contentType: "application/octet-stream",
    description:
      "the frozen bytes, with X-Asp-Checksum, Repr-Digest (RFC 9530), ETag, X-Asp-Artifact-Id and X-Asp-Candidate-Id",
  },
  "GET /api/v1/auto-runs": json(
    "runs newest first, each `{ seq, at, run_id, run, state, terminal_reason, user_truth, label }` from its projection",
    Type.Object({
      runs: Type.Array(Type.Object({ seq: Type.Integer(), run_id: Type.String(), label: Type.String() })),
      next: Type.Union([Type.Integer(), Type.Null()]),
    }),
  ),
  "GET /api/v1/auto-runs/:run_id": json("the run's projection from its durable records"),
  "GET /api/v1/events": {
    status: 200,
    contentType: "text/event-stream",
    description:
      "committed facts as server-sent events; `id` is the fact's seq, resume with Last-Event-ID (no duplicate, no gap)",
  },
  "GET /api/v1/openapi.json": json("this document"),
};
