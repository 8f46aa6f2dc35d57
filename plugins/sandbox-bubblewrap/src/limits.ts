import { BubblewrapError } from "./errors.js";

/**
 * The resource budget of every launch, from the host's trusted configuration (the plugin's
 * options): THREAT-MODEL invariant 12, bounded memory, processes and disk.
 */
export interface BubblewrapLimits {
  /** Size of the sandbox's `/tmp` tmpfs, in bytes (bubblewrap `--size`): the provider's whole disk. */
  readonly tmpBytes: number;
  /** Size of its `/dev/shm` tmpfs, in bytes; the rest of `/dev` and `/` are read-only. */
  readonly shmBytes: number;
  /** Processes and threads of the sandbox's user, together (`RLIMIT_NPROC`, soft and hard, via `prlimit`). */
  readonly maxProcesses: number;
  /** Address space of each process, in bytes (`RLIMIT_AS`, soft and hard, via `prlimit`). */
  readonly maxAddressSpaceBytes: number;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** The budget when the configuration gives none: enough for the bundled providers (node, TypeScript), small enough to bound a runaway one. */
export const DEFAULT_LIMITS: BubblewrapLimits = Object.freeze({
  tmpBytes: 64 * MiB,
  shmBytes: 1 * MiB,
  maxProcesses: 128,
  maxAddressSpaceBytes: 8 * GiB,
});

/** The bounds each option must lie within (inclusive). */
const RANGES: Readonly<Record<keyof BubblewrapLimits, readonly [number, number]>> = {
  tmpBytes: [64 * 1024, 64 * GiB],
  shmBytes: [64 * 1024, 64 * GiB],
  // node alone runs about a dozen threads; fewer cannot start a provider at all.
  maxProcesses: [16, 65_536],
  // node reserves about 1 GiB of address space before it runs any code.
  maxAddressSpaceBytes: [1 * GiB, 1024 * GiB],
};

const integer = (key: keyof BubblewrapLimits, description: string) => ({
  type: "integer",
  minimum: RANGES[key][0],
  maximum: RANGES[key][1],
  default: DEFAULT_LIMITS[key],
  description,
});

/**
 * The plugin's `optionsSchema` (JSON Schema 2020-12, validated by plugin-host with ajv before
 * `init`): `{ limits?: Partial<BubblewrapLimits> }`, nothing else.
 */
export const OPTIONS_SCHEMA: Readonly<Record<string, unknown>> = Object.freeze({
  type: "object",
  additionalProperties: false,
  properties: {
    limits: {
      type: "object",
      additionalProperties: false,
      properties: {
        tmpBytes: integer("tmpBytes", "size of the sandbox's /tmp, bytes"),
        shmBytes: integer("shmBytes", "size of the sandbox's /dev/shm, bytes"),
        maxProcesses: integer("maxProcesses", "processes and threads of one sandbox (RLIMIT_NPROC)"),
        maxAddressSpaceBytes: integer("maxAddressSpaceBytes", "address space of each process, bytes (RLIMIT_AS)"),
      },
    },
  },
});

/** The options the plugin accepts (see {@link OPTIONS_SCHEMA}). */
export interface BubblewrapOptions {
  readonly limits?: Partial<BubblewrapLimits>;
}

/**
 * The budget `options` asks for, every missing field at its {@link DEFAULT_LIMITS} value.
 * Checks again what the schema checks, for callers that build the sandbox without plugin-host.
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_OPTIONS` for an unknown field or a value out of range.
 */
export function limitsOf(options: unknown): BubblewrapLimits {
  const bad = (message: string, field: string): never => {
    throw new BubblewrapError(
      "ASP_BWRAP_BAD_OPTIONS",
      `${message}; fix pluginOptions["asp.sandbox-bubblewrap"] in the host configuration (see the plugin's README)`,
      { data: { field } },
    );
  };
  if (options === undefined || options === null) return DEFAULT_LIMITS;
  if (typeof options !== "object" || Array.isArray(options)) return bad("options must be an object", "");
  for (const key of Object.keys(options)) if (key !== "limits") bad(`unknown option ${JSON.stringify(key)}`, key);
  const given = (options as { limits?: unknown }).limits;
  if (given === undefined) return DEFAULT_LIMITS;
  if (typeof given !== "object" || given === null || Array.isArray(given))
    return bad("limits must be an object", "limits");
  const out: Record<string, number> = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(given)) {
    const range = RANGES[key as keyof BubblewrapLimits];
    if (range === undefined) return bad(`unknown limit ${JSON.stringify(key)}`, `limits.${key}`);
    if (typeof value !== "number" || !Number.isInteger(value) || value < range[0] || value > range[1]) {
      return bad(`limits.${key} must be an integer from ${range[0]} to ${range[1]}`, `limits.${key}`);
    }
    out[key] = value;
  }
  return Object.freeze(out) as unknown as BubblewrapLimits;
}
