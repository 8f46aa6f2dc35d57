import type { EditPlan } from "@asp/contracts";
import type { BaselineReader, PathState } from "./baseline.js";
import { TextEditError } from "./errors.js";
import { type EditIntent, type EditOperation, MAX_CONTENT, parseIntent } from "./intent.js";
import { type RegexBudget, runSearchReplace } from "./regex.js";

/** A precondition: the blob the path holds in the baseline, or `absent`. */
export type Precondition = EditPlan["preconditions"][number];

/** What {@link planEdit} proposes; the SDK binds it to the baseline (`proposalId`, `validAsOf`). */
export interface PlannedEdit {
  readonly description: string;
  readonly preconditions: Precondition[];
  readonly operations: EditOperation[];
}

/** Options of {@link planEdit}. */
export interface PlanOptions {
  readonly regex?: RegexBudget;
  /** Checked between operations; an aborted signal stops planning. */
  readonly signal?: AbortSignal;
}

/** A path as the plan sees it after the operations so far. */
type Virtual =
  | { readonly kind: "absent" }
  | { readonly kind: "directory" }
  | { readonly kind: "symlink"; readonly digest: string }
  | {
      readonly kind: "file";
      readonly mode: "100644" | "100755";
      /** Baseline digest (content read lazily) or the bytes the plan gave it. */
      readonly digest?: string;
      readonly bytes?: Uint8Array;
    };

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Occurrences of `needle` in `haystack`, overlapping ones included (how the host locates them). */
function occurrences(haystack: string, needle: string, limit = Number.POSITIVE_INFINITY): number[] {
  const at: number[] = [];
  for (let i = haystack.indexOf(needle); i >= 0 && at.length < limit; i = haystack.indexOf(needle, i + 1)) at.push(i);
  return at;
}

function err(code: ConstructorParameters<typeof TextEditError>[0], message: string, data: Record<string, unknown>) {
  return new TextEditError(code, message, { data });
}

function summarize(ops: readonly EditOperation[]): string {
  const one = (op: EditOperation): string => {
    switch (op.op) {
      case "replace":
        return `replace text in ${op.path}`;
      case "multi_replace":
        return `${op.edits.length} replacements in ${op.path}`;
      case "search_replace":
        return `regex replace in ${op.path}`;
      case "create":
        return `create ${op.path}`;
      case "rename":
        return `rename ${op.from} to ${op.to}`;
      case "delete":
        return `delete ${op.path}`;
    }
  };
  const parts = ops.slice(0, 5).map(one);
  if (ops.length > 5) parts.push(`and ${ops.length - 5} more`);
  return parts.join("; ").slice(0, 10_000);
}

/**
 * Turn an intent into a structured EditPlan body against the baseline, without writing anything:
 * every operation is checked by simulating it over the baseline (read through `reader`, so
 * through host callbacks), and every path the plan touches gets one precondition — the blob it
 * holds in the baseline, or `absent`. Operations apply in order; a later operation sees the
 * effect of the earlier ones (create then replace, rename then replace ...).
 *
 * @throws TextEditError — every `ASP_TEXT_EDIT_*` refusal (see `TextEditErrorCode`).
 * @example
 * ```ts
 * const plan = await planEdit(
 *   { kind: "replace", arguments: { path: "src/a.ts", oldText: "const a = 1", newText: "const a = 2" } },
 *   createBaselineReader(baseline, ctx),
 * );
 * // plan.preconditions: [{ path: "src/a.ts", blob: "sha256:…" }]
 * ```
 */
export async function planEdit(
  intent: EditIntent,
  reader: BaselineReader,
  options: PlanOptions = {},
): Promise<PlannedEdit> {
  const ops = parseIntent(intent);
  const preconditions = new Map<string, Precondition>();
  const state = new Map<string, Virtual>();

  /** The baseline state of `path`, recording its precondition the first time the plan touches it. */
  const load = async (path: string): Promise<Virtual> => {
    const known = state.get(path);
    if (known !== undefined) return known;
    const s: PathState = await reader.stat(path);
    let v: Virtual;
    switch (s.kind) {
      case "blocked":
        if (s.by === "symlink") {
          throw err("ASP_TEXT_EDIT_PATH_ESCAPES", `${path} goes through the symbolic link ${s.at}`, { path, at: s.at });
        }
        v = { kind: "absent" };
        break;
      case "file":
        v = { kind: "file", mode: s.mode, digest: s.digest };
        break;
      case "symlink":
        v = { kind: "symlink", digest: s.digest };
        break;
      case "directory":
        v = { kind: "directory" };
        break;
      case "absent":
        v = { kind: "absent" };
        break;
    }
    if (s.kind !== "directory") {
      preconditions.set(path, { path, blob: s.kind === "file" || s.kind === "symlink" ? s.digest : "absent" });
    }
    state.set(path, v);
    return v;
  };

  /** A file the plan may edit as text: its content, decoded. */
  const textOf = async (path: string): Promise<{ file: Extract<Virtual, { kind: "file" }>; text: string }> => {
    const v = await load(path);
    if (v.kind === "absent") throw err("ASP_TEXT_EDIT_NO_SUCH_PATH", `${path} is not in the baseline`, { path });
    if (v.kind !== "file") throw err("ASP_TEXT_EDIT_NOT_A_FILE", `${path} is a ${v.kind}, not a file`, { path });
    const bytes = v.bytes ?? (await reader.readBlob(v.digest as string));
    if (bytes.length > MAX_CONTENT) {
      throw err("ASP_TEXT_EDIT_TOO_LARGE", `${path} is over ${MAX_CONTENT} bytes`, { path, size: bytes.length });
    }
    try {
      return { file: v, text: decoder.decode(bytes) };
    } catch {
      throw err("ASP_TEXT_EDIT_NOT_A_FILE", `${path} is not UTF-8 text`, { path });
    }
  };

  const write = (path: string, file: Extract<Virtual, { kind: "file" }>, before: string, after: string): void => {
    if (after === before) throw err("ASP_TEXT_EDIT_NO_CHANGE", `the edit leaves ${path} unchanged`, { path });
    state.set(path, { kind: "file", mode: file.mode, bytes: new TextEncoder().encode(after) });
  };

  /** A path a create or rename may write to: absent, not a directory, no parent that is a file. */
  const ensureFree = async (path: string, what: string): Promise<void> => {
    const segments = path.split("/");
    for (let i = 1; i < segments.length; i++) {
      const parent = segments.slice(0, i).join("/");
      const p = state.get(parent) ?? (await reader.stat(parent));
      if (p.kind === "file" || p.kind === "symlink") {
        throw err("ASP_TEXT_EDIT_EXISTS", `${what} ${path}: its parent ${parent} is a ${p.kind}`, { path, parent });
      }
      if (p.kind === "blocked") {
        throw err("ASP_TEXT_EDIT_EXISTS", `${what} ${path}: ${p.at} is a ${p.by}`, { path, parent: p.at });
      }
    }
    const v = await load(path);
    if (v.kind !== "absent")
      throw err("ASP_TEXT_EDIT_EXISTS", `${what} ${path}: it already exists (${v.kind})`, { path });
    for (const [other, o] of state) {
      if (other.startsWith(`${path}/`) && o.kind !== "absent") {
        throw err("ASP_TEXT_EDIT_EXISTS", `${what} ${path}: the plan puts ${other} under it`, { path });
      }
    }
  };

  for (const [index, op] of ops.entries()) {
    if (options.signal?.aborted) throw options.signal.reason ?? new Error("aborted");
    try {
      switch (op.op) {
        case "replace": {
          const { file, text } = await textOf(op.path);
          const found = occurrences(text, op.oldText, op.occurrence ?? 2);
          if (found.length === 0)
            throw err("ASP_TEXT_EDIT_TEXT_NOT_FOUND", `oldText does not occur in ${op.path}`, { path: op.path });
          if (op.occurrence === undefined && found.length > 1) {
            throw err(
              "ASP_TEXT_EDIT_AMBIGUOUS",
              `oldText occurs more than once in ${op.path}: give a longer oldText or an occurrence`,
              { path: op.path },
            );
          }
          if (op.occurrence !== undefined && found.length < op.occurrence) {
            throw err(
              "ASP_TEXT_EDIT_TEXT_NOT_FOUND",
              `oldText occurs ${found.length} time(s) in ${op.path}, not ${op.occurrence}`,
              { path: op.path, occurrences: found.length },
            );
          }
          const at = found[(op.occurrence ?? 1) - 1] as number;
          write(op.path, file, text, text.slice(0, at) + op.newText + text.slice(at + op.oldText.length));
          break;
        }
        case "multi_replace": {
          const { file, text } = await textOf(op.path);
          const spans = op.edits.map((e, i) => {
            const found = occurrences(text, e.oldText, 2);
            if (found.length === 0) {
              throw err("ASP_TEXT_EDIT_TEXT_NOT_FOUND", `edits[${i}].oldText does not occur in ${op.path}`, {
                path: op.path,
                edit: i,
              });
            }
            if (found.length > 1) {
              throw err("ASP_TEXT_EDIT_AMBIGUOUS", `edits[${i}].oldText occurs more than once in ${op.path}`, {
                path: op.path,
                edit: i,
              });
            }
            const start = found[0] as number;
            return { i, start, end: start + e.oldText.length, newText: e.newText };
          });
          spans.sort((a, b) => a.start - b.start);
          let out = "";
          let from = 0;
          for (const [k, s] of spans.entries()) {
            const prev = spans[k - 1];
            if (prev !== undefined && s.start < prev.end) {
              throw err("ASP_TEXT_EDIT_OVERLAP", `edits[${prev.i}] and edits[${s.i}] overlap in ${op.path}`, {
                path: op.path,
                edits: [prev.i, s.i],
              });
            }
            out += text.slice(from, s.start) + s.newText;
            from = s.end;
          }
          write(op.path, file, text, out + text.slice(from));
          break;
        }
        case "search_replace": {
          const { file, text } = await textOf(op.path);
          const r = runSearchReplace(text, op.pattern, op.flags ?? "", op.replacement, options.regex);
          if (r.matches === 0)
            throw err("ASP_TEXT_EDIT_TEXT_NOT_FOUND", `the pattern does not match in ${op.path}`, { path: op.path });
          write(op.path, file, text, r.output);
          break;
        }
        case "create": {
          await ensureFree(op.path, "cannot create");
          const bytes =
            op.encoding === "base64"
              ? new Uint8Array(Buffer.from(op.content, "base64"))
              : new TextEncoder().encode(op.content);
          state.set(op.path, { kind: "file", mode: op.mode ?? "100644", bytes });
          break;
        }
        case "rename": {
          const v = await load(op.from);
          if (v.kind === "absent")
            throw err("ASP_TEXT_EDIT_NO_SUCH_PATH", `${op.from} is not in the baseline`, { path: op.from });
          if (v.kind === "directory") {
            throw err("ASP_TEXT_EDIT_NOT_A_FILE", `${op.from} is a directory: rename its files one by one`, {
              path: op.from,
            });
          }
          await ensureFree(op.to, "cannot rename onto");
          state.set(op.to, v);
          state.set(op.from, { kind: "absent" });
          break;
        }
        case "delete": {
          const v = await load(op.path);
          if (v.kind === "absent")
            throw err("ASP_TEXT_EDIT_NO_SUCH_PATH", `${op.path} is not in the baseline`, { path: op.path });
          if (v.kind === "directory") {
            throw err("ASP_TEXT_EDIT_NOT_A_FILE", `${op.path} is a directory: delete its files one by one`, {
              path: op.path,
            });
          }
          state.set(op.path, { kind: "absent" });
          break;
        }
      }
    } catch (error) {
      if (error instanceof TextEditError && ops.length > 1) {
        // Say which operation of a plan was refused, keeping the code.
        throw new TextEditError(error.code, `operations[${index}] (${op.op}): ${error.message}`, {
          data: { ...error.data, operation: index },
        });
      }
      throw error;
    }
  }
  return {
    description: intent.description ?? summarize(ops),
    preconditions: [...preconditions.values()],
    operations: ops,
  };
}
