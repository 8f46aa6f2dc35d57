import { type Diagnostic, isAspError } from "@asp/contracts";
import { type AssessContext, type AssessOutcome, defineProvider, type ProviderDefinition } from "@asp/sdk";
import { CONFIG_PATH, effectiveAllowlist, parseSecretsConfig, type SecretsConfig } from "./allowlist.js";
import { type BlobScanner, createInlineScanner } from "./bounded.js";
import { DEFAULT_RULES, type RuleSet } from "./rules.js";
import { SOURCE } from "./scan.js";

/** The provider's identity; equal to `asp-plugin.json`. */
export const PROVIDER = Object.freeze({ id: "asp.provider-secrets", version: "0.1.0" });

/**
 * More findings than this in one answer are cut off and the answer is `incomplete`, with
 * `coverage.truncated` (`{ total, reported }`) and the files whose findings were cut in
 * `coverage.missing`.
 */
export const MAX_DIAGNOSTICS = 500;

/** Files read and queued for scanning at once (their outcomes are still taken in order). */
const IN_FLIGHT = 8;

/** Options of {@link createSecretsProvider}. */
export interface SecretsProviderOptions {
  /** Default: {@link DEFAULT_RULES}. */
  readonly rules?: RuleSet;
  /**
   * Makes the scanner that scans each file (created once, on the first request). The plugin
   * entry passes a bounded one (`createBoundedScanner`: a worker with a deadline and memory
   * limits). Default: in-process and unbounded, for tests and trusted content only.
   */
  readonly scanner?: (rules: RuleSet) => BlobScanner;
}

interface Target {
  readonly path: string;
  readonly digest: string;
}

/** Read `asp.secrets.json` from the root of `tree`, or undefined when there is none. */
async function readConfig(ctx: AssessContext, tree: string): Promise<SecretsConfig | undefined> {
  const entry = (await ctx.readTree(tree)).find((e) => e.name === CONFIG_PATH);
  if (entry === undefined || (entry.mode !== "100644" && entry.mode !== "100755")) return undefined;
  return parseSecretsConfig(await ctx.readText(entry.digest));
}

/**
 * Answer one `check/assess`: scan the after-state of every changed path (every file of the
 * after tree for a sweep or a whole-tree assessment), through host callbacks only.
 *
 * The allowlist configuration is read from the change's **base** tree (the baseline for a
 * whole-tree assessment): a change cannot allowlist the secret it introduces.
 */
export async function assessSecrets(
  ctx: AssessContext,
  rules: RuleSet = DEFAULT_RULES,
  scanner: BlobScanner = createInlineScanner(rules),
): Promise<AssessOutcome> {
  let config: SecretsConfig | undefined;
  try {
    config = await readConfig(ctx, ctx.changeset?.base ?? ctx.baseline);
  } catch (error) {
    if (isAspError(error) && error.code === "ASP_SECRETS_INVALID_CONFIG") {
      return { status: "error", error: { code: error.code, message: error.message }, coverage: { sources: [SOURCE] } };
    }
    throw error;
  }
  const allowlist = effectiveAllowlist(rules, config);

  let targets: Target[];
  if (ctx.changeset === null || ctx.callSite === "sweep") {
    const files = await ctx.listFiles(ctx.changeset?.after ?? ctx.baseline);
    targets = files.filter((f) => f.mode !== "120000").map((f) => ({ path: f.path, digest: f.digest }));
  } else {
    targets = ctx.changes.flatMap((c) => (c.after === null ? [] : [{ path: c.path, digest: c.after }]));
  }

  const diagnostics: Diagnostic[] = [];
  const missing: string[] = [];
  let scanned = 0;
  /** Findings found, reported or not; the files whose findings the cap cut. */
  let total = 0;
  const cut: string[] = [];
  // Reading a blob (a host callback) and scanning it (a worker round trip) are pipelined: up to
  // IN_FLIGHT files are read and queued at once, and their outcomes are taken in target order, so
  // the answer is the same as one at a time, without two thread hand-offs per file on the path.
  type Step =
    | { readonly kind: "skip" }
    | { readonly kind: "missing" }
    | { readonly kind: "cancelled" }
    | { readonly kind: "ok"; readonly diagnostics: readonly Diagnostic[] }
    | { readonly kind: "threw"; readonly error: unknown };
  const step = async (t: Target): Promise<Step> => {
    if (allowlist.skipsPath(t.path)) return { kind: "skip" };
    let bytes: Uint8Array;
    try {
      bytes = await ctx.readBlob(t.digest);
    } catch (error) {
      if (ctx.signal.aborted) return { kind: "cancelled" };
      if (isAspError(error) && error.code === "ASP_SDK_CALLBACK_FAILED") return { kind: "missing" };
      return { kind: "threw", error };
    }
    // Every blob is scanned, whatever its bytes (invalid UTF-8 and NUL bytes are read as latin1);
    // a file whose scan hit the time or memory bound was not scanned and is reported missing.
    const outcome = await scanner.scan(
      { path: t.path, bytes, fingerprints: [...allowlist.fingerprints], values: [...allowlist.values] },
      ctx.signal,
    );
    if (!outcome.ok) return outcome.reason === "cancelled" ? { kind: "cancelled" } : { kind: "missing" };
    return { kind: "ok", diagnostics: outcome.diagnostics };
  };
  const inflight: Promise<Step>[] = [];
  let launched = 0;
  for (const [i, t] of targets.entries()) {
    while (!ctx.signal.aborted && inflight.length < IN_FLIGHT && launched < targets.length) {
      inflight.push(step(targets[launched++] as Target));
    }
    const r: Step = ctx.signal.aborted ? { kind: "cancelled" } : ((await inflight.shift()) ?? { kind: "cancelled" });
    if (r.kind === "cancelled") {
      missing.push(...targets.slice(i).map((x) => x.path));
      break;
    }
    if (r.kind === "threw") throw r.error;
    if (r.kind === "skip") continue;
    if (r.kind === "missing") {
      missing.push(t.path);
      continue;
    }
    scanned++;
    // Past the cap every file is still scanned, so the answer can say how many findings there
    // were and which files' findings it left out (issue 26 item 4).
    total += r.diagnostics.length;
    const room = MAX_DIAGNOSTICS - diagnostics.length;
    diagnostics.push(...r.diagnostics.slice(0, Math.max(0, room)));
    if (r.diagnostics.length > room) cut.push(t.path);
  }
  // Steps still in flight after a cancellation settle on their own (as cancelled or missing).
  for (const p of inflight) void p.catch(() => {});
  const all = boundedPaths([...missing, ...cut]);
  const truncated = total > diagnostics.length ? { truncated: { total, reported: diagnostics.length } } : {};
  const coverage = { sources: [SOURCE], paths: scanned, ...(all.length === 0 ? {} : { missing: all }), ...truncated };
  return { status: all.length > 0 ? "incomplete" : "complete", diagnostics, coverage };
}

/** At most the 10,000 entries an Assessment's `coverage.missing` holds: the last one then counts the rest. */
function boundedPaths(paths: readonly string[]): string[] {
  const MAX = 10_000;
  if (paths.length <= MAX) return [...paths];
  return [...paths.slice(0, MAX - 1), `… and ${paths.length - (MAX - 1)} more paths`];
}

/**
 * The secrets check provider, inert until `.listen()` (the plugin entry calls it on stdio).
 *
 * @example
 * ```ts
 * createSecretsProvider().listen();
 * ```
 */
export function createSecretsProvider(options: SecretsProviderOptions = {}): ProviderDefinition {
  const rules = options.rules ?? DEFAULT_RULES;
  let scanner: BlobScanner | undefined;
  return defineProvider({
    initialize: { provider: PROVIDER, diagnosticSources: [SOURCE], capabilities: ["check"] },
    assess: (ctx) => {
      scanner ??= (options.scanner ?? createInlineScanner)(rules);
      return assessSecrets(ctx, rules, scanner);
    },
  });
}
