import { lstatSync } from "node:fs";
import { join } from "node:path";
import { EDIT_OPERATIONS, type EditPlan, findHostOwnedFields, isGitName, validate } from "@asp/contracts";
import type { Digest, ObjectStore } from "@asp/evidence";
import type { ContentView } from "../content.js";
import type { ApplyRejectionCode } from "../errors.js";
import { lookupPath } from "./tree.js";

/** A coded refusal of a plan or an apply (host §6): recorded, never thrown. */
export interface ApplyRejection {
  readonly code: ApplyRejectionCode;
  /** Bounded, names paths and fields, never file content. */
  readonly detail: string;
}

/** What {@link validatePlan} needs to know about the request the answer is for. */
export interface PlanRequest {
  /** The baseline the request carried (host §5: the host is its sole issuer). */
  readonly baseline: Digest;
  /** The provider the request went to (trusted manifest). */
  readonly provider: { readonly id: string; readonly version: string };
  /** Blobs served through `host/readBlob` for this request. */
  readonly reads: ReadonlySet<string>;
  /** Digests the provider asked for outside the baseline. */
  readonly outside: readonly string[];
  /** The real worktree: every parent of a touched path is lstat'ed (a symlink there escapes). */
  readonly root: string;
  /** The dependency environment tree the request carried, or null (host §9). */
  readonly environment: Digest | null;
  /** True for a path inside the dependency environment: read-only, never edited (host §9). */
  readonly insideEnvironment: (path: string) => boolean;
}

const reject = (code: ApplyRejectionCode, detail: string): { ok: false; rejection: ApplyRejection } => ({
  ok: false,
  rejection: { code, detail: detail.slice(0, 4000) },
});

const norm = (key: string): string =>
  key
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "");

/** Host-owned guarantee and assurance concepts: a provider claiming one claims a transaction guarantee. */
const GUARANTEE_FIELDS = new Set(["assuranceMode", "assurance", "transactionGuarantee", "guarantee"]);
/** Apply-receipt fields only the host sets, beyond the contracts' host-owned list. */
const APPLY_OWNED = new Set(["applied", "baselineafter", "appliedat", "applyreceipt", "receipt", "validation"]);

/** Keys (normalized) that carry something to execute instead of a structured edit, by code. */
const EXECUTABLE_KEYS: ReadonlyArray<readonly [ApplyRejectionCode, ReadonlySet<string>]> = [
  ["ASP_APPLY_COMMAND_ARRAY", new Set(["argv", "commands", "cmds", "commandline", "args"])],
  ["ASP_APPLY_SHELL_COMMAND", new Set(["command", "cmd", "shell", "exec", "sh", "bash", "run"])],
  ["ASP_APPLY_SCRIPT", new Set(["script", "scripts", "eval", "code", "program"])],
  ["ASP_APPLY_PATCH_SHELLOUT", new Set(["patch", "patches", "diff", "unifieddiff", "gitapply"])],
];

/** `op` values that are not edits but something to run, by code; any other unknown op is unsupported. */
const EXECUTABLE_OPS: ReadonlyArray<readonly [ApplyRejectionCode, ReadonlySet<string>]> = [
  ["ASP_APPLY_SHELL_COMMAND", new Set(["shell", "exec", "run", "command", "spawn", "sh", "bash"])],
  ["ASP_APPLY_SCRIPT", new Set(["script", "eval", "node", "javascript", "python"])],
  ["ASP_APPLY_PATCH_SHELLOUT", new Set(["patch", "applypatch", "diff", "gitapply"])],
];

/** Every member name anywhere in `value`, with its pointer (iterative; cycles visited once). */
function keysOf(value: unknown): Array<{ key: string; pointer: string; child: unknown }> {
  const out: Array<{ key: string; pointer: string; child: unknown }> = [];
  const seen = new Set<object>();
  const stack: Array<{ node: unknown; pointer: string }> = [{ node: value, pointer: "" }];
  while (stack.length > 0) {
    const { node, pointer } = stack.pop() as { node: unknown; pointer: string };
    if (typeof node !== "object" || node === null || seen.has(node)) continue;
    seen.add(node);
    for (const [key, child] of Object.entries(node)) {
      const at = `${pointer}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
      if (!Array.isArray(node)) out.push({ key, pointer: at, child });
      stack.push({ node: child, pointer: at });
    }
  }
  return out;
}

/** Why a raw path string escapes the root, or null (checked before the schema, which would only say "invalid"). */
export function pathEscape(path: unknown): string | null {
  if (typeof path !== "string") return null;
  if (path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path)) return `${JSON.stringify(path)} is absolute`;
  if (path.includes("\\")) return `${JSON.stringify(path)} has a backslash`;
  if (path.includes("\0")) return `${JSON.stringify(path)} has a NUL`;
  const segments = path.split("/");
  if (segments.some((s) => s === ".." || s === ".")) return `${JSON.stringify(path)} has a . or .. segment`;
  // issue 32 hole 5: a `.git` at any depth (a nested repository's hooks or config run on the next
  // git command there); the host's own folder `.asp/` only at the root, where the host keeps it.
  const git = segments.find(isGitName);
  if (git !== undefined) return `${JSON.stringify(path)} has a component git reads as .git (${JSON.stringify(git)})`;
  if (segments[0]?.normalize("NFKC").toLowerCase() === ".asp") return `${JSON.stringify(path)} is inside .asp/`;
  return null;
}

/** The paths an operation touches (a rename touches both ends). */
export function touchedPaths(op: EditPlan["operations"][number]): string[] {
  return op.op === "rename" ? [op.from, op.to] : [op.path];
}

/** Screening before the schema: what the answer tries to smuggle in, each with its own code. */
function screen(answer: unknown): ApplyRejection | null {
  const keys = keysOf(answer);
  for (const hit of findHostOwnedFields(answer)) {
    if (GUARANTEE_FIELDS.has(hit.field)) {
      return { code: "ASP_APPLY_CLAIMED_GUARANTEE", detail: `the provider claims ${hit.field} at ${hit.pointer}` };
    }
  }
  const hostOwned = findHostOwnedFields(answer)[0];
  if (hostOwned !== undefined) {
    return {
      code: "ASP_APPLY_HOST_OWNED_FIELD",
      detail: `host-owned field ${hostOwned.field} at ${hostOwned.pointer}`,
    };
  }
  for (const k of keys) {
    if (APPLY_OWNED.has(norm(k.key))) {
      return { code: "ASP_APPLY_HOST_OWNED_FIELD", detail: `host-owned apply field at ${k.pointer}` };
    }
  }
  for (const k of keys) {
    const n = norm(k.key);
    for (const [code, names] of EXECUTABLE_KEYS) {
      if (!names.has(n)) continue;
      // A command given as an array is a command array whatever it is called.
      const c = Array.isArray(k.child) && code === "ASP_APPLY_SHELL_COMMAND" ? "ASP_APPLY_COMMAND_ARRAY" : code;
      return { code: c, detail: `${k.pointer} carries something to execute, not a structured edit` };
    }
  }
  const ops = (answer as { operations?: unknown }).operations;
  if (Array.isArray(ops)) {
    for (const [i, op] of ops.entries()) {
      const kind = (op as { op?: unknown } | null)?.op;
      if (typeof kind === "string" && (EDIT_OPERATIONS as readonly string[]).includes(kind)) {
        for (const field of ["path", "from", "to"]) {
          const why = pathEscape((op as Record<string, unknown>)[field]);
          if (why !== null) return { code: "ASP_APPLY_PATH_ESCAPE", detail: `operations[${i}].${field}: ${why}` };
        }
        continue;
      }
      const n = typeof kind === "string" ? norm(kind) : "";
      for (const [code, names] of EXECUTABLE_OPS) {
        if (names.has(n)) return { code, detail: `operations[${i}] is ${JSON.stringify(kind)}: not an edit` };
      }
      return {
        code: "ASP_APPLY_UNSUPPORTED_OPERATION",
        detail: `operations[${i}].op ${JSON.stringify(kind)?.slice(0, 64)} is not one of ${EDIT_OPERATIONS.join(", ")}`,
      };
    }
  }
  const pre = (answer as { preconditions?: unknown }).preconditions;
  if (Array.isArray(pre)) {
    for (const [i, p] of pre.entries()) {
      const why = pathEscape((p as { path?: unknown } | null)?.path);
      if (why !== null) return { code: "ASP_APPLY_PATH_ESCAPE", detail: `preconditions[${i}].path: ${why}` };
    }
  }
  return null;
}

/**
 * Decide whether an `edit/propose` answer is a structured EditPlan the host may apply (host §6),
 * or why not, with a stable code per rejection class. Checks, in order: smuggled host-owned or
 * guarantee fields, anything executable (shell, script, command array, patch), unsupported
 * operations and escaping paths (before the schema, so each gets its own code), the schema,
 * provider identity, `validAsOf` against the request (baseline, changeset, environment, exact
 * read set), no touched path inside the dependency environment,
 * one precondition per touched path, preconditions against the baseline (blob present, path
 * holds it), and symbolic links on every touched path in the baseline tree and the real worktree.
 * Text-level problems (a text operation on a binary blob, text not found) are found when the
 * host applies the plan to the baseline (see hypothetical.ts).
 */
export async function validatePlan(
  answer: unknown,
  request: PlanRequest,
  objects: ObjectStore,
  view: ContentView,
): Promise<{ ok: true; plan: EditPlan } | { ok: false; rejection: ApplyRejection }> {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) {
    return reject("ASP_APPLY_NOT_A_PLAN", `the answer is ${Array.isArray(answer) ? "an array" : typeof answer}`);
  }
  const screened = screen(answer);
  if (screened !== null) return { ok: false, rejection: screened };
  const valid = validate("edit-plan", answer);
  if (!valid.ok) {
    const e = valid.errors[0];
    return reject("ASP_APPLY_NOT_A_PLAN", `not an EditPlan: ${e?.pointer || "/"} ${e?.message ?? ""}`);
  }
  const plan = valid.value;
  if (plan.provider.id !== request.provider.id || plan.provider.version !== request.provider.version) {
    return reject(
      "ASP_APPLY_NOT_A_PLAN",
      `the plan claims to come from ${plan.provider.id}@${plan.provider.version}, not ${request.provider.id}@${request.provider.version}`,
    );
  }
  // host §5: the answer is bound to the request's baseline and to exactly what was read.
  if (plan.validAsOf.baseline !== request.baseline) {
    return reject(
      "ASP_APPLY_BASELINE_MISMATCH",
      `validAsOf.baseline ${plan.validAsOf.baseline} is not ${request.baseline}`,
    );
  }
  if (request.outside.length > 0) {
    return reject("ASP_APPLY_STALE", `read outside the baseline refused: ${request.outside[0]}`);
  }
  if (plan.validAsOf.changeset !== null) {
    return reject("ASP_APPLY_STALE", `validAsOf.changeset ${plan.validAsOf.changeset} is not null`);
  }
  if ((plan.validAsOf.environment ?? null) !== request.environment) {
    return reject(
      "ASP_APPLY_STALE",
      `validAsOf.environment ${plan.validAsOf.environment ?? "(absent)"} is not ${request.environment ?? "(absent)"}`,
    );
  }
  for (const op of plan.operations) {
    for (const path of touchedPaths(op)) {
      if (request.insideEnvironment(path)) {
        return reject("ASP_APPLY_PATH_ESCAPE", `${path} is inside the dependency environment, which is read-only`);
      }
    }
  }
  const claimed = new Set(plan.validAsOf.reads);
  const unclaimed = [...request.reads].filter((d) => !claimed.has(d)).length;
  const never = [...claimed].filter((d) => !request.reads.has(d)).length;
  if (unclaimed > 0 || never > 0) {
    return reject(
      "ASP_APPLY_STALE",
      `validAsOf.reads differs from the blobs read through callbacks (${unclaimed} unclaimed, ${never} never read)`,
    );
  }
  const pre = new Map<string, string>();
  for (const p of plan.preconditions) {
    if (pre.has(p.path) && pre.get(p.path) !== p.blob) {
      return reject("ASP_APPLY_PATH_DRIFT", `two preconditions for ${p.path} disagree`);
    }
    pre.set(p.path, p.blob);
  }
  for (const [i, op] of plan.operations.entries()) {
    for (const path of touchedPaths(op)) {
      if (!pre.has(path)) {
        return reject("ASP_APPLY_MISSING_PRECONDITION", `operations[${i}] touches ${path}, which has no precondition`);
      }
    }
  }
  for (const [path, blob] of pre) {
    const at = await lookupPath(objects, request.baseline, path);
    if (at.kind === "through-link") {
      return reject("ASP_APPLY_PATH_ESCAPE", `${path} goes through the symbolic link ${at.at} in the baseline`);
    }
    if (blob !== "absent" && !(await view.contains("blob", blob as Digest))) {
      return reject(
        "ASP_APPLY_MISSING_BLOB",
        `the precondition of ${path} names ${blob}, which is not in the baseline`,
      );
    }
    const holds = at.kind === "file" || at.kind === "link" ? at.digest : at.kind === "absent" ? "absent" : at.kind;
    if (holds !== blob) {
      return reject("ASP_APPLY_PATH_DRIFT", `the precondition of ${path} is ${blob}; the baseline holds ${holds}`);
    }
    const real = realPathEscape(request.root, path);
    if (real !== null) return reject("ASP_APPLY_PATH_ESCAPE", real);
  }
  return { ok: true, plan };
}

/**
 * Why writing `path` under `root` would leave the root, or null: any parent that is a symbolic
 * link (or not a directory) in the real worktree. Each component is lstat'ed, never followed;
 * the path itself may be a link (a rename or delete replaces the link, never its target).
 */
export function realPathEscape(root: string, path: string): string | null {
  const segments = path.split("/");
  for (let i = 1; i < segments.length; i++) {
    const rel = segments.slice(0, i).join("/");
    let st: ReturnType<typeof lstatSync> | undefined;
    try {
      st = lstatSync(join(root, rel));
    } catch {
      return null; // absent from here on: created below a real directory
    }
    if (st.isSymbolicLink()) return `${rel} is a symbolic link in the worktree`;
    if (!st.isDirectory()) return `${rel} is not a directory in the worktree`;
  }
  return null;
}
