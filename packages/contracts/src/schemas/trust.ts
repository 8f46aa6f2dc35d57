import { type Static, Type } from "@sinclair/typebox";
import { AutoModeConfigSchema } from "./auto-mode.js";
import { Closed, Digest, PluginId, RelPath, requires, SemVer, StringEnum } from "./common.js";
import { ProviderManifestSchema } from "./host.js";

// Trust documents: what decides which plugin code a host runs (trust roots, signatures) and how
// it is composed (the host configuration). Every object is closed: a misspelt `revoked` must be
// an error, never a revocation silently dropped.

/**
 * Signature algorithms the plugin verifier implements. A trust document naming any other is
 * refused rather than trusted for an algorithm nobody checks.
 */
export const SIGNATURE_ALGORITHMS = ["ed25519"] as const;
/** One of {@link SIGNATURE_ALGORITHMS}. */
export type SignatureAlgorithm = (typeof SIGNATURE_ALGORITHMS)[number];

const Algorithm = StringEnum(SIGNATURE_ALGORITHMS, { description: "the only algorithm the verifier implements" });

/** `ed25519:` + the first 32 hex digits of sha256(public key). */
const KeyId = Type.String({ pattern: "^ed25519:[0-9a-f]{32}$", description: "ed25519:<32 hex> key id" });

/** base64 of a 32-byte ed25519 public key (44 characters, one `=` of padding). */
const PublicKeyBase64 = Type.String({ pattern: "^[A-Za-z0-9+/]{43}=$", description: "base64 of 32 bytes" });

/**
 * A UTC instant in one fixed form, `YYYY-MM-DDTHH:MM:SSZ` or with milliseconds
 * (`YYYY-MM-DDTHH:MM:SS.sssZ`): no offsets, no lower-case `t`/`z`, no date-only values whose
 * meaning depends on the reader's time zone.
 */
export const UtcTimestamp = Type.String({
  format: "date-time",
  pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{3})?Z$",
  description: "UTC, YYYY-MM-DDTHH:MM:SS[.sss]Z",
});

/** A public key file (`PATH.pub`, written by `asp plugin keygen`), usable as a trust root. */
export const PluginPublicKeySchema = Type.Object(
  {
    type: Type.Literal("asp-plugin-public-key"),
    algorithm: Algorithm,
    keyId: KeyId,
    publicKey: PublicKeyBase64,
    expiresAt: Type.Optional(UtcTimestamp),
  },
  Closed,
);
/** A parsed, valid public key file. */
export type PluginPublicKeyFile = Static<typeof PluginPublicKeySchema>;

/** One trusted key of a trust file. */
const TrustKey = Type.Object(
  {
    algorithm: Algorithm,
    keyId: Type.Optional(KeyId),
    publicKey: PublicKeyBase64,
    expiresAt: Type.Optional(UtcTimestamp),
  },
  Closed,
);

/** One revocation: exactly one of a key id or a plugin digest. */
const Revocation = Type.Object(
  {
    keyId: Type.Optional(KeyId),
    digest: Type.Optional(Digest),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  },
  { ...Closed, oneOf: [requires("keyId"), requires("digest")] },
);

/** A trust file: several keys with their expiries, and a revocation list. */
export const PluginTrustSchema = Type.Object(
  {
    type: Type.Literal("asp-plugin-trust"),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    keys: Type.Optional(Type.Array(TrustKey, { maxItems: 1024 })),
    revoked: Type.Optional(Type.Array(Revocation, { maxItems: 65536, uniqueItems: true })),
  },
  Closed,
);
/** A parsed, valid trust file. */
export type PluginTrustFile = Static<typeof PluginTrustSchema>;

/** The detached plugin signature `asp-plugin.sig`. */
export const PluginSignatureSchema = Type.Object(
  {
    type: Type.Literal("asp-plugin-signature/v1"),
    payload: Type.Object({ id: PluginId, version: SemVer, digest: Digest }, Closed),
    keyId: KeyId,
    signature: Type.String({ pattern: "^[A-Za-z0-9+/]{86}==$", description: "base64 of the 64-byte signature" }),
  },
  Closed,
);
/** A parsed, valid `asp-plugin.sig`. */
export type PluginSignatureFile = Static<typeof PluginSignatureSchema>;

/** A path in the host configuration; relative ones resolve against the file's folder. */
const ConfigPath = Type.String({ minLength: 1, maxLength: 4096, pattern: "^[^\\u0000]+$" });

/**
 * Trusted policy read from a base revision of the repository being evaluated (its committed,
 * already-reviewed history), never from its working tree: `git` names the revision, `path` the
 * policy file inside it. The schema checks the spelling only; the host accepts only a revision the
 * change cannot write (a full commit id, or `refs/remotes/<remote>/<branch>`: threat model
 * invariant 14) and refuses the rest with `ASP_THS_POLICY_REVISION_UNTRUSTED`.
 */
const BaseRevisionPolicy = Type.Object(
  {
    git: Type.String({
      minLength: 1,
      maxLength: 256,
      pattern: "^(?!-)[A-Za-z0-9._/@{}^~-]+$",
      description:
        "a full commit id pinned by the trusted side, or refs/remotes/<remote>/<branch> of a protected branch; never HEAD-relative",
    }),
    path: RelPath,
  },
  Closed,
);

/** What a bearer token of `asp serve` may do: each route names the one scope it needs. */
export const SERVER_SCOPES = ["read", "evaluate", "apply", "admin"] as const;
/** One scope of {@link SERVER_SCOPES}. */
export type ServerScope = (typeof SERVER_SCOPES)[number];

/** A name a client uses for something trusted configuration defines (a repository, a token). */
const ServerName = Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,63}$" });

/**
 * `asp serve`: the repositories a client may ask the host to evaluate, by name (a client never
 * names a path), and the bearer tokens it accepts. A token is configured by its digest only
 * (`sha256:` of its UTF-8 bytes), never as the secret itself.
 */
const ServerConfig = Type.Object(
  {
    repositories: Type.Record(ServerName, ConfigPath, {
      minProperties: 1,
      maxProperties: 1024,
      additionalProperties: false,
    }),
    tokens: Type.Array(
      Type.Object(
        {
          id: ServerName,
          digest: Digest,
          scopes: Type.Array(StringEnum(SERVER_SCOPES), { minItems: 1, maxItems: 4, uniqueItems: true }),
        },
        Closed,
      ),
      { maxItems: 256 },
    ),
  },
  Closed,
);

/** The trusted host configuration file (`host.json` / `asp.host.json`). */
export const HostConfigSchema = Type.Object(
  {
    $schema: Type.Optional(Type.String({ maxLength: 2000 })),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    store: ConfigPath,
    policy: Type.Union([ConfigPath, BaseRevisionPolicy]),
    trustRoots: Type.Optional(Type.Array(ConfigPath, { maxItems: 1024 })),
    plugins: Type.Optional(Type.Array(ConfigPath, { maxItems: 1024 })),
    providers: Type.Optional(Type.Array(ProviderManifestSchema, { maxItems: 1024 })),
    excludes: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { maxItems: 4096 })),
    /**
     * The repository's own policy file, assessed as a pending candidate when a change edits it
     * (host §7); the trusted policy's own path is assessed by default, `false` turns both off.
     */
    candidatePolicy: Type.Optional(Type.Union([RelPath, Type.Literal(false)])),
    /**
     * The PostgreSQL database of the job queue (`asp sweep --queue`, `asp worker`), used when
     * `store` is not itself a `postgres://` URL. Put no password in it: `pg` reads `PGPASSWORD`
     * or `~/.pgpass`.
     */
    queue: Type.Optional(Type.String({ pattern: "^postgres(ql)?://", minLength: 12, maxLength: 4096 })),
    /**
     * The dependency environment (host §5, §9): `false` turns it off; otherwise `roots` are the
     * repository-relative dependency folders to snapshot read-only (default `"auto"`: each
     * `node_modules` next to a `package.json` of the baseline) and `excludes` are gitignore
     * patterns inside each root (default `[".cache/"]`).
     */
    environment: Type.Optional(
      Type.Union([
        Type.Literal(false),
        Type.Object(
          {
            roots: Type.Optional(
              Type.Union([
                Type.Literal("auto"),
                Type.Array(RelPath, { minItems: 1, uniqueItems: true, maxItems: 10_000 }),
              ]),
            ),
            excludes: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { maxItems: 4096 })),
          },
          Closed,
        ),
      ]),
    ),
    /**
     * Auto Mode rollout at deployment scope (the contracts `auto-mode-config` shape: stage flags,
     * preset, result review mode, approvals reviewer, budgets), as `asp auto run` resolves it with
     * the `OPENAI4S_*` environment. Only trusted configuration may turn a stage on.
     */
    autoMode: Type.Optional(AutoModeConfigSchema),
    /** The HTTP host of `asp serve` (repositories by name, bearer tokens by digest). */
    server: Type.Optional(ServerConfig),
    /**
     * Options of verifier plugins (Reviewers) by plugin id, e.g. a Reviewer's base
     * URL and model; each is validated against its plugin's `optionsSchema` before `init`. Never a
     * secret: name the environment variable that holds one (verifier-openai's `apiKeyEnv`).
     */
    pluginOptions: Type.Optional(
      Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.Record(Type.String(), Type.Unknown()), {
        maxProperties: 1024,
      }),
    ),
  },
  Closed,
);
/** A parsed, valid host configuration file, before paths are resolved. */
export type HostConfigFile = Static<typeof HostConfigSchema>;
