import { type TSchema, type TUnsafe, Type } from "@sinclair/typebox";
import {
  ASSURANCE_MODES,
  AXIS_STATES,
  CAPABILITY_FAMILIES,
  DEGRADATION_REASONS,
  FAIL_CLASSES,
  PROVIDER_STATES,
  SEVERITIES,
  TRANSACTION_GUARANTEES,
} from "../vocabularies.js";

/** A string enum from a const vocabulary array, typed as its union. */
export function StringEnum<const T extends ReadonlyArray<string>>(
  values: T,
  options: { description?: string } = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: "string", enum: [...values], ...options });
}

/**
 * A conditional `required` that ajv's strictRequired accepts: the properties are declared
 * (as `true`) next to `required`; their real schemas live in the parent object.
 */
export function requires(...names: string[]): { required: string[]; properties: Record<string, true> } {
  return { required: names, properties: Object.fromEntries(names.map((n) => [n, true as const])) };
}

/** JSON Schema `if`/`then`: when `condition` holds, `consequence` must hold too. */
export function when(condition: object, consequence: object): { if: object; then: object } {
  // biome-ignore lint/suspicious/noThenProperty: `then` is the JSON Schema keyword, not a thenable.
  return { if: condition, then: consequence };
}

/** A closed object: unknown properties are invalid. */
export const Closed = { additionalProperties: false } as const;

/** Digest of content or canonical JSON: `sha256:<64 hex>`. */
export const Digest = Type.String({ pattern: "^sha256:[0-9a-f]{64}$", description: "sha256:<hex> content digest" });

/** A non-empty identifier. */
export const Id = Type.String({ minLength: 1, maxLength: 256 });

/** RFC 3339 timestamp. */
export const Timestamp = Type.String({ format: "date-time" });

/** Semantic version (major.minor.patch with optional pre-release/build). */
export const SemVer = Type.String({
  pattern: "^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-[0-9A-Za-z.-]+)?(?:\\+[0-9A-Za-z.-]+)?$",
});

/**
 * An npm-style semver range (`0.1.0`, `^0.1.0`, `>=0.1.0 <0.3.0`, `0.1.x || 0.2.x`). The pattern
 * only bounds the alphabet; `@asp/policy` checks the grammar with the `semver` package.
 */
export const SemVerRange = Type.String({ minLength: 1, maxLength: 256, pattern: "^[0-9A-Za-z.+*^~<>=| -]+$" });

/** Normalized relative POSIX path: no leading `/`, no `.`/`..` segments, no empty segments, no backslash. */
export const RelPath = Type.String({
  minLength: 1,
  maxLength: 4096,
  pattern: "^(?!/)(?!.*//)(?!.*\\\\)(?!(?:.*/)?\\.\\.?(?:/|$))[^\\u0000]+(?<!/)$",
});

/** A plugin id (`asp-plugin.json` `id`): npm-like, optionally one `scope/` level. */
export const PluginId = Type.String({ pattern: "^[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)?$", maxLength: 214 });

/** Absolute POSIX path (trusted launch configuration only). */
export const AbsPath = Type.String({ minLength: 2, maxLength: 4096, pattern: "^/[^\\u0000]*$" });

/** Diagnostic source namespace declared by a provider at initialize (e.g. `ts`, `secrets`). */
export const DiagnosticSource = Type.String({ pattern: "^[a-z][a-z0-9-]*(?:\\.[a-z0-9-]+)*$", maxLength: 64 });

/** Namespaced diagnostic code `<source>/<code>` (e.g. `ts/2322`). */
export const DiagnosticCode = Type.String({
  pattern: "^[a-z][a-z0-9-]*(?:\\.[a-z0-9-]+)*/[A-Za-z0-9._:-]+$",
  maxLength: 200,
});

/** Any JSON value. */
export const Json = Type.Unknown();

/** Brand literal for host-produced objects that cross package/plugin boundaries (STYLE §6). */
export function Brand<const K extends string>(kind: K) {
  return Type.Literal(`@asp/${kind}` as `@asp/${K}`);
}

export const CallSiteMap = <T extends TSchema>(cell: T) =>
  Type.Object({ interactive: Type.Optional(cell), gate: Type.Optional(cell), sweep: Type.Optional(cell) }, Closed);

export const SeverityT = StringEnum(SEVERITIES);
export const AssuranceModeT = StringEnum(ASSURANCE_MODES, { description: "assurance mode, weakest first" });
export const TransactionGuaranteeT = StringEnum(TRANSACTION_GUARANTEES);
export const DegradationReasonT = StringEnum(DEGRADATION_REASONS);
export const FailClassT = StringEnum(FAIL_CLASSES);
export const ProviderStateT = StringEnum(PROVIDER_STATES);
export const CapabilityFamilyT = StringEnum(CAPABILITY_FAMILIES);
export const AxisStateT = StringEnum(AXIS_STATES);

/** Identity of a provider as pinned by policy. */
export const ProviderRef = Type.Object({ id: Id, version: SemVer }, Closed);

/** One `coverage.degraded[]` entry (host §2): names the provider or the requirement, and why. */
export const DegradedEntry = Type.Object(
  {
    provider: Type.Optional(Id),
    requirement: Type.Optional(Id),
    reason: DegradationReasonT,
    failClass: Type.Optional(FailClassT),
    capability: Type.Optional(CapabilityFamilyT),
    providerState: Type.Optional(ProviderStateT),
    failOpen: Type.Boolean({ description: "true when the fail-policy let this failure open (always logged)" }),
    detail: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  { ...Closed, anyOf: [requires("provider"), requires("requirement")] },
);

/** Authority evidence across the five axes (host §1). */
export const AuthorityEvidence = Type.Object(
  {
    providerId: Id,
    providerVersion: SemVer,
    providerDigest: Digest,
    identity: AxisStateT,
    integrity: AxisStateT,
    conformance: AxisStateT,
    isolation: AxisStateT,
    authorityGrant: AxisStateT,
    grants: Type.Array(
      Type.Object({ requirement: Id, callSite: StringEnum(["interactive", "gate", "sweep"]) }, Closed),
    ),
  },
  Closed,
);

/** The assurance block of an envelope or receipt. */
/**
 * How one provider really ran (issue 13): the isolation its launch enforced, by which mechanism
 * (a sandbox plugin or a plain subprocess), whether it could write the worktree, and why the
 * mode is lower than asked when it is.
 */
export const ProviderAssurance = Type.Object(
  {
    provider: Id,
    mode: AssuranceModeT,
    mechanism: Type.String({ minLength: 1, maxLength: 500 }),
    sandbox: Type.Union([Type.Object({ id: Id, digest: Digest }, Closed), Type.Null()]),
    directWrite: Type.Boolean(),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  },
  Closed,
);

export const AssuranceBlock = Type.Object(
  {
    mode: AssuranceModeT,
    transactionGuarantee: Type.Optional(TransactionGuaranteeT),
    directWriteRisk: Type.Boolean(),
    /** Per provider that ran (or was refused a launch) in this decision: its achieved isolation. */
    providers: Type.Optional(Type.Array(ProviderAssurance, { maxItems: 1000 })),
  },
  Closed,
);

/**
 * The dependency environment of a request (host §5, §9): a tree, laid out at repository paths,
 * holding only the host-declared dependency roots (such as `node_modules`) snapshotted read-only.
 * It is evidence a provider may read through the same callbacks, never part of the change.
 */
export const EnvironmentRef = Type.Object(
  {
    /** Tree id of the environment: a root tree whose only content is the roots below. */
    tree: Digest,
    /** The dependency roots it holds, as repository-relative folder paths (e.g. `node_modules`). */
    roots: Type.Array(RelPath, { minItems: 1, uniqueItems: true, maxItems: 10_000 }),
  },
  Closed,
);

/**
 * What an assessment or plan is bound to: the host's baseline, changeset, read set and, when the
 * request carried one, the environment tree (host §5).
 */
export const ValidAsOf = Type.Object(
  {
    baseline: Digest,
    changeset: Type.Union([Digest, Type.Null()]),
    reads: Type.Array(Digest, { uniqueItems: true, maxItems: 100_000 }),
    /** The request's environment tree id; present exactly when the request carried an environment. */
    environment: Type.Optional(Digest),
  },
  Closed,
);

/** Coverage of a decision (host §1). */
export const Coverage = Type.Object(
  {
    required: Type.Array(Id, { uniqueItems: true }),
    ran: Type.Array(Id, { uniqueItems: true }),
    degraded: Type.Array(DegradedEntry),
  },
  Closed,
);
