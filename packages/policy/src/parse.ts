import {
  canonicalize,
  type Digest,
  digest,
  findDuplicateKeys,
  isAspError,
  type Policy,
  validate,
} from "@asp/contracts";
import picomatch from "picomatch";
import semver from "semver";
import { type PolicyError, type PolicyErrorCode, type PolicyProblem, policyError, problemsError } from "./errors.js";
import { type DeepReadonly, deepFreeze, toPointer, valueAt } from "./json.js";

/** The only policy `apiVersion` this package activates. */
export const POLICY_API_VERSION = "asp.policy/v1";

/** A validated policy document: frozen, readonly all the way down. */
export type PolicyDocument = DeepReadonly<Policy>;

/** Where an active policy came from (reported, never trusted by itself). */
export type PolicyOrigin =
  | { readonly kind: "inline" }
  | { readonly kind: "file"; readonly path: string }
  | {
      readonly kind: "git";
      readonly repository: string;
      readonly revision: string;
      readonly commit: string;
      readonly path: string;
    }
  | { readonly kind: "floor"; readonly base: Digest; readonly floor: Digest };

/**
 * A policy that passed every check of {@link parsePolicy}: schema, semantic rules and the
 * launch-instruction scan. Frozen; its `digest` is the `policyDigest` every decision reports.
 */
export interface ActivePolicy {
  readonly $$type: "@asp/ActivePolicy";
  readonly version: 1;
  readonly document: PolicyDocument;
  /** `sha256:<hex>` of the RFC 8785 canonical document (`@asp/contracts` `digest`, equal to `@asp/evidence` `digest`). */
  readonly digest: Digest;
  readonly origin: PolicyOrigin;
}

/** Options of {@link parsePolicy} and {@link validatePolicy}. */
export interface ParsePolicyOptions {
  /** Recorded on the active policy; defaults to `{ kind: "inline" }`. */
  readonly origin?: PolicyOrigin;
  /** How messages name the document, e.g. `policy ./asp.policy.json`. Defaults to `policy`. */
  readonly what?: string;
}

/** Result of {@link validatePolicy}: never an exception for bad input. */
export type PolicyValidation =
  | { readonly ok: true; readonly policy: ActivePolicy }
  | { readonly ok: false; readonly problems: ReadonlyArray<PolicyProblem> };

/** At most this many problems are reported for one document. */
export const MAX_REPORTED_PROBLEMS = 50;

// ------------------------------------------------------------------ launch instructions (host §2)

// Keys that only ever carry launch metadata. Policy is logical input: it names providers by
// pinned identity and never says how to start anything.
const LAUNCH_KEY =
  /^(?:exec|executable|execpath|command|commands|cmd|argv|args|arguments|shell|script|scripts|entry|entrypoint|cwd|workdir|workingdirectory|env|environment|envpassthrough|launch|spawn|bin|binary|program|run)$/i;
// Free text: a description may mention a command without being one.
const PROSE_KEYS = new Set(["description"]);
// Glob-valued keys, where `/`, `*` and braces are ordinary.
const GLOB_KEYS = new Set(["path", "network"]);

function launchShape(value: string, glob: boolean): string | null {
  if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(value)) return "an environment assignment";
  if (/\$\(|\$\{|`|&&|\|\||;/.test(value)) return "a shell string";
  if (glob) return null;
  if (/\s/.test(value)) return "a command line (identifiers never contain whitespace)";
  if (/^(?:\/|\.{1,2}\/|~|[A-Za-z]:[\\/])/.test(value)) return "an executable path";
  if (/[|<>&$]/.test(value)) return "a shell string";
  return null;
}

// The host pin's version is a semver range: `>=0.1.0 <0.3.0` and `0.1.x || 0.2.x` are ranges,
// not command lines. Only a value the semver grammar accepts in full is exempt.
const isHostVersionRange = (value: string, path: ReadonlyArray<string | number>): boolean =>
  path.length === 2 && path[0] === "host" && path[1] === "version" && semver.validRange(value) !== null;

function scanLaunch(value: unknown, path: Array<string | number>, parentKey: string, out: PolicyProblem[]): void {
  if (typeof value === "string") {
    if (PROSE_KEYS.has(parentKey) || isHostVersionRange(value, path)) return;
    const shape = launchShape(value, GLOB_KEYS.has(parentKey) || parentKey === "credentialFence");
    if (shape !== null) {
      out.push({
        code: "ASP_POLICY_LAUNCH_INSTRUCTION",
        pointer: toPointer(path),
        message: `looks like ${shape}; policy never carries launch instructions (host §2)`,
      });
    }
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      path.push(i);
      scanLaunch(item, path, parentKey, out);
      path.pop();
    });
    return;
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      path.push(key);
      if (LAUNCH_KEY.test(key)) {
        out.push({
          code: "ASP_POLICY_LAUNCH_INSTRUCTION",
          pointer: toPointer(path),
          message: `"${key}" is launch metadata; executables, argv, working directories and environment come only from trusted installed configuration (host §2)`,
        });
      } else {
        scanLaunch(child, path, key, out);
      }
      path.pop();
    }
  }
}

// ------------------------------------------------------------------ empty values and the floor

function scanEmpty(value: unknown, path: Array<string | number>, out: PolicyProblem[]): void {
  if (typeof value === "string") {
    if (value.trim() === "") {
      out.push({
        code: "ASP_POLICY_EMPTY_VALUE",
        pointer: toPointer(path),
        message: "is empty; omit it or give a value",
      });
    }
    return;
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      path.push(Array.isArray(value) ? Number(key) : key);
      scanEmpty(child, path, out);
      path.pop();
    }
  }
}

function scanFailOpenFloor(raw: unknown, out: PolicyProblem[]): void {
  const table = valueAt(raw, "/failPolicy");
  if (typeof table !== "object" || table === null || Array.isArray(table)) return;
  for (const [failClass, cells] of Object.entries(table)) {
    if (typeof cells === "object" && cells !== null && (cells as Record<string, unknown>).gate === "open") {
      out.push({
        code: "ASP_POLICY_FAIL_OPEN_FLOOR",
        pointer: toPointer(["failPolicy", failClass, "gate"]),
        message: "a gate cell may never be open: required gate coverage fails indeterminate or deny (host §2)",
      });
    }
  }
}

// ------------------------------------------------------------------ schema errors -> codes

// The three messages @asp/contracts' validate() writes itself for these keywords (the
// classification is pinned by a test, so a wording change there fails here, loudly).
function schemaCode(raw: unknown, pointer: string, message: string): PolicyErrorCode {
  if (message === "is not an allowed property") return "ASP_POLICY_UNKNOWN_FIELD";
  if (message === "is required") return "ASP_POLICY_MISSING_FIELD";
  if (pointer === "/apiVersion") return "ASP_POLICY_UNSUPPORTED_VERSION";
  if (message.startsWith("must be one of")) return "ASP_POLICY_UNKNOWN_VALUE";
  const at = valueAt(raw, pointer);
  // minLength / minItems: an empty list where one is required (a wrong type stays INVALID_VALUE).
  if (at === "" || (Array.isArray(at) && at.length === 0 && /fewer than/.test(message)))
    return "ASP_POLICY_EMPTY_VALUE";
  return "ASP_POLICY_INVALID_VALUE";
}

// ------------------------------------------------------------------ semantic rules

function duplicates<T>(
  items: ReadonlyArray<T>,
  key: (item: T) => string,
  pointer: (index: number) => string,
  what: (item: T) => string,
  out: PolicyProblem[],
): void {
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const k = key(item);
    const first = seen.get(k);
    if (first === undefined) seen.set(k, i);
    else {
      out.push({
        code: "ASP_POLICY_DUPLICATE_ID",
        pointer: pointer(i),
        message: `${what(item)} is defined twice (first at index ${first})`,
      });
    }
  });
}

function semanticProblems(doc: Policy): PolicyProblem[] {
  const out: PolicyProblem[] = [];
  duplicates(
    doc.requirements,
    (r) => r.id,
    (i) => `/requirements/${i}/id`,
    (r) => `requirement ${JSON.stringify(r.id)}`,
    out,
  );
  duplicates(
    doc.providers,
    (p) => p.id,
    (i) => `/providers/${i}/id`,
    (p) => `provider pin ${JSON.stringify(p.id)} (pin one version and digest per provider)`,
    out,
  );
  duplicates(
    doc.plugins ?? [],
    (p) => p.id,
    (i) => `/plugins/${i}/id`,
    (p) => `plugin grant ${JSON.stringify(p.id)}`,
    out,
  );
  duplicates(
    doc.grants,
    (g) => `${g.provider}\u0000${g.requirement}`,
    (i) => `/grants/${i}`,
    (g) => `the grant of ${JSON.stringify(g.requirement)} to ${JSON.stringify(g.provider)}`,
    out,
  );
  const requirements = new Map(doc.requirements.map((r) => [r.id, r]));
  const pins = new Map(doc.providers.map((p) => [p.id, p]));
  doc.grants.forEach((g, i) => {
    const pin = pins.get(g.provider);
    if (pin === undefined) {
      out.push({
        code: "ASP_POLICY_UNPINNED_GRANT",
        pointer: `/grants/${i}/provider`,
        message: `provider ${JSON.stringify(g.provider)} is not pinned in providers[]; authority goes only to a pinned id + version + digest`,
      });
    } else if (pin.version !== g.version) {
      out.push({
        code: "ASP_POLICY_UNPINNED_GRANT",
        pointer: `/grants/${i}/version`,
        message: `grant names version ${g.version} but providers[] pins ${JSON.stringify(g.provider)} at ${pin.version}`,
      });
    } else if (pin.digest !== g.digest) {
      out.push({
        code: "ASP_POLICY_UNPINNED_GRANT",
        pointer: `/grants/${i}/digest`,
        message: `grant digest differs from the digest providers[] pins for ${JSON.stringify(g.provider)}`,
      });
    }
    const requirement = requirements.get(g.requirement);
    if (requirement === undefined) {
      out.push({
        code: "ASP_POLICY_UNKNOWN_REQUIREMENT",
        pointer: `/grants/${i}/requirement`,
        message: `requirement ${JSON.stringify(g.requirement)} is not defined in requirements[]`,
      });
      return;
    }
    g.callSites.forEach((site, j) => {
      if (!requirement.callSites.includes(site)) {
        out.push({
          code: "ASP_POLICY_UNKNOWN_REQUIREMENT",
          pointer: `/grants/${i}/callSites/${j}`,
          message: `requirement ${JSON.stringify(g.requirement)} is not required at ${site}; a grant there would authorize nothing`,
        });
      }
    });
  });
  if (doc.host?.version !== undefined && semver.validRange(doc.host.version) === null) {
    out.push({
      code: "ASP_POLICY_INVALID_VALUE",
      pointer: "/host/version",
      message: "is not a semver range (e.g. 0.1.0, ^0.1.0, >=0.1.0 <0.3.0)",
    });
  }
  const globs: Array<[string, string]> = [];
  doc.permissions?.rules.forEach((r, i) => {
    globs.push([`/permissions/rules/${i}/tool`, r.tool]);
    if (r.path !== undefined) globs.push([`/permissions/rules/${i}/path`, r.path]);
    if (r.network !== undefined) globs.push([`/permissions/rules/${i}/network`, r.network]);
  });
  doc.permissions?.credentialFence?.forEach((g, i) => {
    globs.push([`/permissions/credentialFence/${i}`, g]);
  });
  for (const [pointer, glob] of globs) {
    try {
      picomatch.makeRe(glob, { dot: true, strictBrackets: true });
    } catch (error) {
      out.push({
        code: "ASP_POLICY_INVALID_VALUE",
        pointer,
        message: `is not a valid glob: ${(error as Error).message}`,
      });
    }
  }
  return out;
}

// ------------------------------------------------------------------ entry points

function underAny(pointer: string, roots: ReadonlyArray<string>): boolean {
  return roots.some((r) => pointer === r || pointer.startsWith(`${r}/`));
}

function problemsOf(text: string, raw: unknown): { problems: PolicyProblem[]; doc: Policy | null } {
  const early: PolicyProblem[] = [];
  let duplicateKeys: Array<{ pointer: string; key: string }> = [];
  try {
    duplicateKeys = findDuplicateKeys(text);
  } catch {
    early.push({ code: "ASP_POLICY_INVALID_VALUE", pointer: "", message: "is nested too deeply to be a policy" });
  }
  for (const d of duplicateKeys) {
    early.push({
      code: "ASP_POLICY_DUPLICATE_KEY",
      pointer: d.pointer,
      message: `key ${JSON.stringify(d.key)} appears twice in the same object; JSON keeps only the last one`,
    });
  }
  scanLaunch(raw, [], "", early);
  scanEmpty(raw, [], early);
  scanFailOpenFloor(raw, early);
  const flagged = early.map((p) => p.pointer);
  const launchRoots = early.filter((p) => p.code === "ASP_POLICY_LAUNCH_INSTRUCTION").map((p) => p.pointer);
  const result = validate("policy", raw);
  const schema: PolicyProblem[] = result.ok
    ? []
    : result.errors
        .filter((e) => !flagged.includes(e.pointer) && !underAny(e.pointer, launchRoots))
        .map((e) => ({ code: schemaCode(raw, e.pointer, e.message), pointer: e.pointer, message: e.message }));
  const problems = [...early, ...schema];
  if (problems.length > 0 || !result.ok) return { problems, doc: null };
  return { problems: semanticProblems(result.value), doc: result.value };
}

function toText(input: unknown): { text: string; raw: unknown } | PolicyProblem {
  if (typeof input === "string") {
    try {
      return { text: input, raw: JSON.parse(input) as unknown };
    } catch (error) {
      return { code: "ASP_POLICY_NOT_JSON", pointer: "", message: `is not JSON: ${(error as Error).message}` };
    }
  }
  try {
    const text = canonicalize(input);
    return { text, raw: JSON.parse(text) as unknown };
  } catch (error) {
    const pointer = isAspError(error) && typeof error.data?.pointer === "string" ? error.data.pointer : "";
    return { code: "ASP_POLICY_INVALID_VALUE", pointer, message: "is not a JSON value" };
  }
}

/**
 * Validate a policy document (JSON text or an already-parsed value) without throwing: every
 * problem with its code and JSON pointer, or the activated policy.
 *
 * @throws never for bad input (see {@link parsePolicy} for the throwing form).
 */
export function validatePolicy(input: unknown, options: ParsePolicyOptions = {}): PolicyValidation {
  const parsed = toText(input);
  if ("code" in parsed) return { ok: false, problems: [parsed] };
  const { problems, doc } = problemsOf(parsed.text, parsed.raw);
  if (problems.length > 0 || doc === null) {
    return { ok: false, problems: problems.slice(0, MAX_REPORTED_PROBLEMS) };
  }
  const document = deepFreeze(doc) as PolicyDocument;
  const policy: ActivePolicy = Object.freeze({
    $$type: "@asp/ActivePolicy" as const,
    version: 1 as const,
    document,
    digest: digest(document),
    origin: deepFreeze({ ...(options.origin ?? { kind: "inline" as const }) }),
  });
  return { ok: true, policy };
}

/**
 * Parse, validate and activate a trusted policy document. Nothing partial is ever activated:
 * the result is a frozen {@link ActivePolicy}, or the call throws with every problem listed in
 * `data.errors` and the first one's pointer in `data.pointer`.
 *
 * Checks, in order: JSON syntax; duplicate object keys; launch instructions anywhere
 * (executable paths, shell strings, argv/env/cwd keys, `KEY=value`); empty strings; `gate`
 * cells set to `open`; the `PolicySchema` of `@asp/contracts` (closed objects, closed
 * vocabularies); then duplicate ids, grants to unpinned providers or unknown requirements, and
 * invalid globs.
 *
 * @throws PolicyError with the first problem's code: `ASP_POLICY_NOT_JSON`, `ASP_POLICY_DUPLICATE_KEY`,
 *   `ASP_POLICY_LAUNCH_INSTRUCTION`, `ASP_POLICY_EMPTY_VALUE`, `ASP_POLICY_FAIL_OPEN_FLOOR`,
 *   `ASP_POLICY_UNSUPPORTED_VERSION`, `ASP_POLICY_UNKNOWN_FIELD`, `ASP_POLICY_UNKNOWN_VALUE`,
 *   `ASP_POLICY_MISSING_FIELD`, `ASP_POLICY_INVALID_VALUE`, `ASP_POLICY_DUPLICATE_ID`,
 *   `ASP_POLICY_UNPINNED_GRANT` or `ASP_POLICY_UNKNOWN_REQUIREMENT`.
 * @example
 * ```ts
 * const policy = parsePolicy(readFileSync("asp.policy.json", "utf8"));
 * policy.digest; // "sha256:…", the policyDigest of every decision made under it
 * ```
 */
export function parsePolicy(input: unknown, options: ParsePolicyOptions = {}): ActivePolicy {
  const result = validatePolicy(input, options);
  if (result.ok) return result.policy;
  throw problemsError(result.problems, options.what ?? "policy");
}

/** True for an {@link ActivePolicy} (brand check, so a copy from another package instance passes). */
export function isActivePolicy(value: unknown): value is ActivePolicy {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Partial<ActivePolicy>;
  return (
    v.$$type === "@asp/ActivePolicy" &&
    v.version === 1 &&
    typeof v.digest === "string" &&
    typeof v.document === "object" &&
    v.document !== null
  );
}

/** @internal Guard for functions that need an activated policy. */
export function requireActive(value: unknown, what: string): ActivePolicy {
  if (isActivePolicy(value)) return value;
  const error: PolicyError = policyError(
    "ASP_POLICY_NOT_ACTIVE",
    `${what} must be an ActivePolicy returned by parsePolicy(); raw documents are never trusted`,
    { pointer: "" },
  );
  throw error;
}
