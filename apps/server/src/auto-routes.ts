import {
  listAutoRuns,
  listFrameAudits,
  loadAutoRunProjection,
  readArtifactVersion,
  readRunFacts,
} from "@asp/auto-mode";
import type { ServerScope, SubjectKind } from "@asp/contracts";
import type { Store } from "@asp/evidence";
import {
  checkFrameId,
  configurationReport,
  createFrameSettingsStore,
  type Environment,
  patchFrameSettings,
  RolloutError,
  resolveConfiguration,
} from "@asp/rollout";
import type { FastifyInstance } from "fastify";
import { ServerError } from "./errors.js";
import type { RouteSchema } from "./schemas.js";

/** The Auto Mode configuration a server resolves frames under: trusted deployment configuration and the environment. */
export interface ServerAutoMode {
  /** The trusted host configuration's `autoMode` (deployment scope), or none. */
  readonly deployment?: unknown;
  /** Where `deployment` came from, for value sources (e.g. the host configuration's path). */
  readonly deploymentOrigin?: string;
  /** The `OPENAI4S_*` environment the server was started with (stage flags, budget ceilings). */
  readonly env?: Environment;
}

/** What the Auto Mode routes need from the server. */
export interface AutoRouteContext {
  readonly app: FastifyInstance;
  readonly store: Pick<Store, "log" | "objects">;
  readonly autoMode: ServerAutoMode;
  /** Run one write at a time over the store. */
  readonly serial: <T>(task: () => Promise<T>) => Promise<T>;
  /** A route's options (its scope check and its schema), by method and path. */
  readonly routeOptions: (method: string, path: string) => { config: { aspScope: ServerScope }; schema: RouteSchema };
}

const IfMatch = /^"(\d+)"$/;

/** `"<seq>"`: the version of a frame's settings (`"0"` before any were stored), as ETag and If-Match. */
const etagOf = (seq: number | null): string => `"${seq ?? 0}"`;

function resolveFrame(autoMode: ServerAutoMode, frame: Readonly<Record<string, unknown>> | undefined) {
  return resolveConfiguration({
    env: autoMode.env ?? {},
    ...(autoMode.deployment === undefined || autoMode.deployment === null
      ? {}
      : { deployment: autoMode.deployment, deploymentOrigin: autoMode.deploymentOrigin ?? "deployment" }),
    ...(frame === undefined || Object.keys(frame).length === 0 ? {} : { frame, frameOrigin: "frame settings" }),
  });
}

/** Base64 of a `sha256:<hex>` digest's bytes, as RFC 9530's `Repr-Digest: sha-256=:…:` carries it. */
const base64OfDigest = (digest: string): string =>
  Buffer.from(digest.slice("sha256:".length), "hex").toString("base64");

/**
 * The canonical Auto Mode routes of the contract, exactly these and no aliases:
 * `GET/PATCH /api/v1/frames/{fid}/auto-mode`, `GET /api/v1/frames/{fid}/auto-audits`,
 * `GET /api/v1/artifacts/versions/{version_id}`; and a run's projection beside them.
 */
export function registerAutoModeRoutes(ctx: AutoRouteContext): void {
  const { app, store, autoMode, serial, routeOptions } = ctx;
  // A deployment configuration or environment that does not resolve (an unbuilt stage turned on,
  // a misspelt variable) is refused at start, not on the first request.
  resolveFrame(autoMode, undefined);
  const frames = createFrameSettingsStore(store.log as Store["log"]);

  const frameView = async (fid: string) => {
    const stored = await frames.load(checkFrameId(fid));
    const settings = stored?.settings ?? {};
    let effective: ReturnType<typeof configurationReport> | null = null;
    let problem: { code: string; message: string } | null = null;
    try {
      effective = configurationReport(resolveFrame(autoMode, settings));
    } catch (error) {
      // Settings stored under an older, looser deployment: shown, and refused visibly, never widened.
      if (!(error instanceof RolloutError)) throw error;
      problem = { code: error.code, message: error.message };
    }
    return {
      etag: etagOf(stored?.seq ?? null),
      body: {
        root_frame_id: fid,
        settings,
        stored: stored === null ? null : { seq: stored.seq, at: stored.at },
        effective,
        problem,
      },
    };
  };

  const AUTO_MODE = "/api/v1/frames/:fid/auto-mode";
  app.get<{ Params: { fid: string } }>(AUTO_MODE, routeOptions("GET", AUTO_MODE), async (request, reply) => {
    const view = await frameView(request.params.fid);
    void reply.header("etag", view.etag);
    return view.body;
  });

  app.patch<{ Params: { fid: string }; Body: Record<string, unknown> }>(
    AUTO_MODE,
    routeOptions("PATCH", AUTO_MODE),
    async (request, reply) => {
      const fid = request.params.fid;
      const ifMatch = request.headers["if-match"];
      const view = await serial(async () => {
        // Stage 2 is what makes a frame's selection durable: with it off, nothing is stored.
        const flags = resolveFrame(autoMode, undefined).flags;
        if (!flags.isEnabled("stage2_auto_run_storage")) {
          throw new RolloutError(
            "ASP_ROLLOUT_STAGE_DISABLED",
            'a frame\'s Auto Mode settings are stored only under stage2_auto_run_storage: turn it on in the trusted host configuration ("autoMode": { "stages": { "stage2_auto_run_storage": true } })',
            { data: { key: "stage2_auto_run_storage", source: "deployment" } },
          );
        }
        const current = await frames.load(checkFrameId(fid));
        if (ifMatch !== undefined) {
          const m = IfMatch.exec(String(ifMatch));
          if (m === null || etagOf(current?.seq ?? null) !== `"${m[1]}"`) {
            throw new ServerError(
              "ASP_SERVER_PRECONDITION_FAILED",
              `the frame's settings are at ${etagOf(current?.seq ?? null)}, not ${String(ifMatch)}: GET them again and re-apply the patch`,
            );
          }
        }
        const next = patchFrameSettings(current?.settings ?? {}, request.body);
        // The merged settings must resolve under the deployment and the environment (budgets only
        // tighten) before anything is stored.
        resolveFrame(autoMode, next);
        await frames.save(fid, next);
        return frameView(fid);
      });
      void reply.header("etag", view.etag);
      return view.body;
    },
  );

  const AUDITS = "/api/v1/frames/:fid/auto-audits";
  app.get<{ Params: { fid: string }; Querystring: { subject_kind?: SubjectKind; before?: number; limit?: number } }>(
    AUDITS,
    routeOptions("GET", AUDITS),
    async (request) =>
      listFrameAudits(store.log, request.params.fid, {
        limit: request.query.limit ?? 50,
        ...(request.query.subject_kind === undefined ? {} : { subjectKind: request.query.subject_kind }),
        ...(request.query.before === undefined ? {} : { before: request.query.before }),
      }),
  );

  const VERSION = "/api/v1/artifacts/versions/:version_id";
  app.get<{ Params: { version_id: string } }>(VERSION, routeOptions("GET", VERSION), async (request, reply) => {
    const version = await readArtifactVersion(store, request.params.version_id);
    // Frozen bytes, never rendered by a browser on this origin (an Artifact may be HTML).
    void reply
      .header("content-type", "application/octet-stream")
      .header("content-disposition", "attachment")
      .header("x-content-type-options", "nosniff")
      .header("cache-control", "private, max-age=31536000, immutable")
      .header("etag", `"${version.checksum}"`)
      .header("repr-digest", `sha-256=:${base64OfDigest(version.checksum)}:`)
      .header("x-asp-checksum", version.checksum)
      .header("x-asp-artifact-id", encodeURIComponent(version.artifact_id))
      .header("x-asp-candidate-id", version.sources[0]?.candidate_id ?? "");
    return reply.send(Buffer.from(version.bytes));
  });

  const RUNS = "/api/v1/auto-runs";
  app.get<{ Querystring: { root_frame_id?: string; before?: number; limit?: number } }>(
    RUNS,
    routeOptions("GET", RUNS),
    async (request) => {
      const page = await listAutoRuns(store.log, {
        limit: request.query.limit ?? 20,
        ...(request.query.root_frame_id === undefined ? {} : { rootFrameId: request.query.root_frame_id }),
        ...(request.query.before === undefined ? {} : { before: request.query.before }),
      });
      // Each row's label is its projection's, from the durable records (never a cached badge).
      const runs = [];
      for (const row of page.runs) {
        const p = await loadAutoRunProjection(store, row.run_id);
        runs.push({
          ...row,
          state: p.state,
          terminal_reason: p.terminal_reason,
          user_truth: p.user_truth,
          label: p.label,
        });
      }
      return { runs, next: page.next };
    },
  );

  const RUN = "/api/v1/auto-runs/:run_id";
  app.get<{ Params: { run_id: string } }>(RUN, routeOptions("GET", RUN), async (request) => {
    const runId = request.params.run_id;
    if ((await readRunFacts(store.log, runId)).length === 0) {
      throw new ServerError("ASP_SERVER_UNKNOWN_RUN", `no Auto Run ${runId} in this store`);
    }
    return loadAutoRunProjection(store, runId);
  });
}
