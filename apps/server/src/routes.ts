import type { ServerScope } from "@asp/contracts";

/** One route of the server: method, path (Fastify syntax) and the scope a token needs. */
export interface ServerRoute {
  readonly method: "GET" | "POST" | "PATCH";
  readonly path: string;
  readonly scope: ServerScope;
  readonly summary: string;
}

/**
 * Every route the server answers, exactly: a test holds the server to this table, and any other
 * path (an unversioned or alias one included) is a 404 `ASP_SERVER_NOT_FOUND`.
 */
export const SERVER_ROUTES: readonly ServerRoute[] = [
  { method: "GET", path: "/api/v1/status", scope: "read", summary: "providers, their health and the host" },
  { method: "GET", path: "/api/v1/capabilities", scope: "read", summary: "what each provider can do" },
  {
    method: "POST",
    path: "/api/v1/providers/:id/quarantine/reset",
    scope: "admin",
    summary: "lift a provider's quarantine (recorded with the token id); it launches again on the next request",
  },
  { method: "GET", path: "/api/v1/repositories", scope: "read", summary: "the repository names a client may use" },
  {
    method: "POST",
    path: "/api/v1/repositories/:name/evaluate",
    scope: "evaluate",
    summary: "decide on a repository at a call-site; a receipt is written before the answer",
  },
  { method: "GET", path: "/api/v1/receipts", scope: "read", summary: "receipts, newest first (limit, before)" },
  { method: "GET", path: "/api/v1/receipts/head", scope: "read", summary: "the store's head (seq, digest)" },
  { method: "GET", path: "/api/v1/receipts/verify", scope: "read", summary: "walk the chain and every receipt" },
  { method: "GET", path: "/api/v1/receipts/:id", scope: "read", summary: "one receipt and its envelope" },
  {
    method: "GET",
    path: "/api/v1/frames/:fid/auto-mode",
    scope: "read",
    summary: "a frame's stored Auto Mode settings and the configuration they resolve to",
  },
  {
    method: "PATCH",
    path: "/api/v1/frames/:fid/auto-mode",
    scope: "admin",
    summary: "merge-patch a frame's Auto Mode settings (RFC 7396; budgets only tighten; Stage 2)",
  },
  {
    method: "GET",
    path: "/api/v1/frames/:fid/auto-audits",
    scope: "read",
    summary: "a frame's committed audit events, newest first (subject_kind, before, limit)",
  },
  {
    method: "GET",
    path: "/api/v1/artifacts/versions/:version_id",
    scope: "read",
    summary: "the frozen bytes of one Artifact version, with checksum headers",
  },
  {
    method: "GET",
    path: "/api/v1/auto-runs",
    scope: "read",
    summary: "Auto Runs, newest first, each with its label (root_frame_id, before, limit)",
  },
  { method: "GET", path: "/api/v1/auto-runs/:run_id", scope: "read", summary: "an Auto Run's projection" },
  {
    method: "GET",
    path: "/api/v1/events",
    scope: "read",
    summary: "committed facts as server-sent events, resumable from Last-Event-ID (after, run_id)",
  },
  { method: "GET", path: "/api/v1/openapi.json", scope: "read", summary: "this API's OpenAPI 3.1 document" },
];
