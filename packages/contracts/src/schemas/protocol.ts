import { type Static, Type } from "@sinclair/typebox";
import { CALL_SITES, CHANGE_KINDS } from "../vocabularies.js";
import {
  CapabilityFamilyT,
  Closed,
  DiagnosticSource,
  Digest,
  EnvironmentRef,
  Id,
  Json,
  ProviderRef,
  RelPath,
  SemVer,
  StringEnum,
  ValidAsOf,
} from "./common.js";

/** The Core Profile protocol version this package describes. Providers declare the one they speak. */
export const PROTOCOL_VERSION = "1.0";

const ProtocolVersionT = Type.String({ pattern: "^\\d+\\.\\d+$" });

/** `initialize` params (host -> provider): who the host is and which protocol it speaks. */
export const InitializeParamsSchema = Type.Object(
  {
    protocolVersion: ProtocolVersionT,
    host: Type.Object({ name: Id, version: SemVer }, Closed),
    processId: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  },
  Closed,
);
export type InitializeParams = Static<typeof InitializeParamsSchema>;

/** `initialize` result (provider -> host): identity, version, declared diagnostic sources, capabilities. */
export const InitializeResultSchema = Type.Object(
  {
    protocolVersion: ProtocolVersionT,
    provider: ProviderRef,
    diagnosticSources: Type.Array(DiagnosticSource, { uniqueItems: true, maxItems: 64 }),
    capabilities: Type.Array(CapabilityFamilyT, { minItems: 1, uniqueItems: true }),
  },
  Closed,
);
export type InitializeResult = Static<typeof InitializeResultSchema>;

/** `initialized` params (host -> provider): the requirements trusted policy granted it, per call-site. */
export const InitializedParamsSchema = Type.Object(
  {
    grants: Type.Array(
      Type.Object(
        {
          requirement: Id,
          callSites: Type.Array(StringEnum(CALL_SITES), { minItems: 1, uniqueItems: true }),
          sources: Type.Array(DiagnosticSource, { uniqueItems: true }),
        },
        Closed,
      ),
    ),
  },
  Closed,
);
export type InitializedParams = Static<typeof InitializedParamsSchema>;

/** A changeset as sent to providers: base and after trees plus the per-path diff. */
const ChangesetRef = Type.Object(
  {
    digest: Digest,
    base: Digest,
    after: Digest,
    changes: Type.Array(
      Type.Object(
        {
          path: RelPath,
          kind: StringEnum(CHANGE_KINDS),
          before: Type.Union([Digest, Type.Null()]),
          after: Type.Union([Digest, Type.Null()]),
        },
        Closed,
      ),
      { maxItems: 100_000 },
    ),
  },
  Closed,
);

/** `check/assess` params: the host's baseline (a tree id) and, for a change, the changeset. */
export const AssessParamsSchema = Type.Object(
  {
    requestId: Id,
    callSite: StringEnum(CALL_SITES),
    baseline: Digest,
    changeset: Type.Union([ChangesetRef, Type.Null()]),
    requirements: Type.Array(Id, { uniqueItems: true }),
    /** The dependency environment (read-only; absent when the host declares none). */
    environment: Type.Optional(EnvironmentRef),
    deadlineMs: Type.Integer({ minimum: 1 }),
  },
  Closed,
);
export type AssessParams = Static<typeof AssessParamsSchema>;

/** `host/readBlob` params: a blob digest, read under a live request (bound to its baseline). */
export const ReadBlobParamsSchema = Type.Object({ requestId: Id, digest: Digest }, Closed);
export type ReadBlobParams = Static<typeof ReadBlobParamsSchema>;

/** `host/readBlob` result: the bytes, base64-encoded (binary-safe). */
export const ReadBlobResultSchema = Type.Object(
  { digest: Digest, size: Type.Integer({ minimum: 0 }), base64: Type.String({ contentEncoding: "base64" }) },
  Closed,
);
export type ReadBlobResult = Static<typeof ReadBlobResultSchema>;

/** `host/readTree` params: a tree digest (the baseline root, or one reachable from it). */
export const ReadTreeParamsSchema = Type.Object({ requestId: Id, digest: Digest }, Closed);
export type ReadTreeParams = Static<typeof ReadTreeParamsSchema>;

/** `host/readTree` result: the tree's direct entries. */
export const ReadTreeResultSchema = Type.Object(
  {
    digest: Digest,
    entries: Type.Array(
      Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 255, pattern: "^(?!\\.\\.?$)[^/\\u0000]+$" }),
          mode: StringEnum(["100644", "100755", "120000", "040000"]),
          digest: Digest,
        },
        Closed,
      ),
      { maxItems: 1_000_000 },
    ),
  },
  Closed,
);
export type ReadTreeResult = Static<typeof ReadTreeResultSchema>;

/** `inspect/query` params: a read-only graph / search / impact query against a baseline. */
export const InspectParamsSchema = Type.Object(
  {
    requestId: Id,
    baseline: Digest,
    changeset: Type.Union([ChangesetRef, Type.Null()]),
    query: Type.Object(
      {
        kind: StringEnum(["dependents", "dependencies", "impact", "symbol"]),
        path: Type.Optional(RelPath),
        symbol: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
      },
      Closed,
    ),
    /** The dependency environment (read-only; absent when the host declares none). */
    environment: Type.Optional(EnvironmentRef),
    deadlineMs: Type.Integer({ minimum: 1 }),
  },
  Closed,
);
export type InspectParams = Static<typeof InspectParamsSchema>;

/** `inspect/query` result: provider-owned, bound to the baseline like an Assessment. */
export const InspectResultSchema = Type.Object(
  {
    provider: ProviderRef,
    requestId: Id,
    status: StringEnum(["complete", "incomplete", "unsupported", "error"]),
    validAsOf: ValidAsOf,
    results: Type.Array(
      Type.Object(
        {
          path: RelPath,
          symbol: Type.Optional(Type.String({ maxLength: 1000 })),
          line: Type.Optional(Type.Integer({ minimum: 0 })),
          detail: Type.Optional(Type.String({ maxLength: 4000 })),
        },
        Closed,
      ),
      { maxItems: 100_000 },
    ),
    error: Type.Optional(Type.Object({ code: Type.String({ minLength: 1 }), message: Type.String() }, Closed)),
  },
  Closed,
);
export type InspectResult = Static<typeof InspectResultSchema>;

/** `edit/propose` params: what to change, against which baseline; the answer is an EditPlan. */
export const ProposeParamsSchema = Type.Object(
  {
    requestId: Id,
    baseline: Digest,
    intent: Type.Object(
      {
        kind: Id,
        description: Type.Optional(Type.String({ maxLength: 10_000 })),
        arguments: Type.Optional(Json),
      },
      Closed,
    ),
    /** The dependency environment (read-only; absent when the host declares none). */
    environment: Type.Optional(EnvironmentRef),
    deadlineMs: Type.Integer({ minimum: 1 }),
  },
  Closed,
);
export type ProposeParams = Static<typeof ProposeParamsSchema>;

/**
 * `host/applyProposal` params (client -> host): the explicit apply intent for one recorded
 * proposal (host §6). The repository is the one the serving host is bound to, never a client's
 * choice; the call-site whose required checks validate the after-state defaults to `gate`.
 */
export const ApplyProposalParamsSchema = Type.Object(
  {
    proposalId: Id,
    callSite: Type.Optional(StringEnum(CALL_SITES)),
  },
  Closed,
);
export type ApplyProposalParams = Static<typeof ApplyProposalParamsSchema>;
