import type { EditPlan } from "@asp/contracts";
import { TextEditError } from "./errors.js";
import { checkPath } from "./paths.js";

/** One structured operation of an EditPlan. */
export type EditOperation = EditPlan["operations"][number];

/** The intent kinds this provider answers. `plan` takes a list of operations. */
export const INTENT_KINDS = Object.freeze([
  "replace",
  "multi_replace",
  "search_replace",
  "create",
  "rename",
  "delete",
  "plan",
] as const);
export type IntentKind = (typeof INTENT_KINDS)[number];

/** An `edit/propose` intent: `{ kind, description?, arguments? }`. */
export interface EditIntent {
  readonly kind: string;
  readonly description?: string;
  readonly arguments?: unknown;
}

/** Most operations one intent may carry. */
export const MAX_OPERATIONS = 1000;
/** Largest content one operation may carry (characters of text, or of base64). */
export const MAX_CONTENT = 8 * 1024 * 1024;

type Args = Record<string, unknown>;

const bad = (message: string, data: Record<string, unknown> = {}): never => {
  throw new TextEditError("ASP_TEXT_EDIT_BAD_INTENT", message, { data });
};

function object(value: unknown, where: string, keys: readonly string[], required: readonly string[]): Args {
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad(`${where} must be an object`);
  const o = value as Args;
  for (const k of Object.keys(o)) if (!keys.includes(k)) bad(`${where} has unknown field "${k}"`, { field: k });
  for (const k of required) if (o[k] === undefined) bad(`${where} needs "${k}"`, { field: k });
  return o;
}

function text(o: Args, key: string, where: string, options: { nonEmpty?: boolean } = {}): string {
  const v = o[key];
  if (typeof v !== "string") return bad(`${where}.${key} must be a string`, { field: key });
  if (options.nonEmpty === true && v === "") bad(`${where}.${key} must not be empty`, { field: key });
  if (v.length > MAX_CONTENT) {
    throw new TextEditError("ASP_TEXT_EDIT_TOO_LARGE", `${where}.${key} is over ${MAX_CONTENT} characters`, {
      data: { field: key },
    });
  }
  return v;
}

/**
 * Validate the arguments of one operation kind and return the EditPlan operation. Shapes are
 * closed: an unknown field is refused rather than ignored.
 *
 * @throws TextEditError `ASP_TEXT_EDIT_BAD_INTENT`, `ASP_TEXT_EDIT_PATH_ESCAPES`,
 *   `ASP_TEXT_EDIT_PROTECTED_PATH`, `ASP_TEXT_EDIT_TOO_LARGE`, `ASP_TEXT_EDIT_UNKNOWN_INTENT`.
 */
export function parseOperation(kind: string, args: unknown, where = "arguments"): EditOperation {
  switch (kind) {
    case "replace": {
      const o = object(args, where, ["path", "oldText", "newText", "occurrence"], ["path", "oldText", "newText"]);
      const op: EditOperation = {
        op: "replace",
        path: checkPath(o.path, `${where}.path`),
        oldText: text(o, "oldText", where, { nonEmpty: true }),
        newText: text(o, "newText", where),
      };
      if (o.occurrence === undefined) return op;
      if (typeof o.occurrence !== "number" || !Number.isInteger(o.occurrence) || o.occurrence < 1) {
        bad(`${where}.occurrence must be an integer from 1`, { field: "occurrence" });
      }
      return { ...op, occurrence: o.occurrence as number };
    }
    case "multi_replace": {
      const o = object(args, where, ["path", "edits"], ["path", "edits"]);
      if (!Array.isArray(o.edits) || o.edits.length === 0 || o.edits.length > 1000) {
        bad(`${where}.edits must be an array of 1 to 1000 edits`, { field: "edits" });
      }
      const edits = (o.edits as unknown[]).map((e, i) => {
        const eo = object(e, `${where}.edits[${i}]`, ["oldText", "newText"], ["oldText", "newText"]);
        return {
          oldText: text(eo, "oldText", `${where}.edits[${i}]`, { nonEmpty: true }),
          newText: text(eo, "newText", `${where}.edits[${i}]`),
        };
      });
      return { op: "multi_replace", path: checkPath(o.path, `${where}.path`), edits };
    }
    case "search_replace": {
      const o = object(args, where, ["path", "pattern", "flags", "replacement"], ["path", "pattern", "replacement"]);
      const pattern = text(o, "pattern", where, { nonEmpty: true });
      if (pattern.length > 10_000) bad(`${where}.pattern is over 10000 characters`, { field: "pattern" });
      const op: EditOperation = {
        op: "search_replace",
        path: checkPath(o.path, `${where}.path`),
        pattern,
        replacement: text(o, "replacement", where),
      };
      if (o.flags === undefined) return op;
      if (typeof o.flags !== "string") bad(`${where}.flags must be a string`, { field: "flags" });
      return { ...op, flags: o.flags as string };
    }
    case "create": {
      const o = object(args, where, ["path", "content", "encoding", "mode"], ["path", "content"]);
      const path = checkPath(o.path, `${where}.path`);
      const content = text(o, "content", where);
      let op: EditOperation = { op: "create", path, content };
      if (o.encoding !== undefined) {
        if (o.encoding !== "utf8" && o.encoding !== "base64") bad(`${where}.encoding must be utf8 or base64`);
        if (
          o.encoding === "base64" &&
          !/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(content)
        )
          bad(`${where}.content is not canonical base64`, { field: "content" });
        op = { ...op, encoding: o.encoding as "utf8" | "base64" };
      }
      if (o.mode !== undefined) {
        if (o.mode !== "100644" && o.mode !== "100755") bad(`${where}.mode must be "100644" or "100755"`);
        op = { ...op, mode: o.mode as "100644" | "100755" };
      }
      return op;
    }
    case "rename": {
      const o = object(args, where, ["from", "to"], ["from", "to"]);
      const from = checkPath(o.from, `${where}.from`);
      const to = checkPath(o.to, `${where}.to`);
      if (from === to) bad(`${where}: from and to are the same path`);
      return { op: "rename", from, to };
    }
    case "delete": {
      const o = object(args, where, ["path"], ["path"]);
      return { op: "delete", path: checkPath(o.path, `${where}.path`) };
    }
    default:
      throw new TextEditError(
        "ASP_TEXT_EDIT_UNKNOWN_INTENT",
        `intent kind ${JSON.stringify(kind)} is not one of ${INTENT_KINDS.join(", ")}`,
        { data: { kind } },
      );
  }
}

/**
 * Turn an intent into the list of operations it asks for. `plan` takes
 * `{ operations: [{ op, ...arguments }] }`; every other kind takes that operation's arguments.
 *
 * @throws TextEditError `ASP_TEXT_EDIT_UNKNOWN_INTENT`, `ASP_TEXT_EDIT_BAD_INTENT` and the
 *   path codes of {@link parseOperation}.
 * @example
 * ```ts
 * parseIntent({ kind: "rename", arguments: { from: "a.ts", to: "b.ts" } });
 * // [{ op: "rename", from: "a.ts", to: "b.ts" }]
 * ```
 */
export function parseIntent(intent: EditIntent): EditOperation[] {
  if (intent.kind !== "plan") return [parseOperation(intent.kind, intent.arguments)];
  const o = object(intent.arguments, "arguments", ["operations"], ["operations"]);
  if (!Array.isArray(o.operations) || o.operations.length === 0 || o.operations.length > MAX_OPERATIONS) {
    bad(`arguments.operations must be an array of 1 to ${MAX_OPERATIONS} operations`);
  }
  return (o.operations as unknown[]).map((raw, i) => {
    const where = `arguments.operations[${i}]`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) bad(`${where} must be an object`);
    const { op, ...rest } = raw as Args;
    if (typeof op !== "string" || op === "plan") bad(`${where}.op must be an operation kind`, { index: i });
    return parseOperation(op as string, rest, where);
  });
}
