import { runInNewContext } from "node:vm";
import type { EditPlan } from "@asp/contracts";
import type { Digest, FileMode, ObjectStore } from "@asp/evidence";
import { lookupPath, type PathAfter, treeWith } from "./tree.js";
import type { ApplyRejection } from "./validate.js";

/** One touched path: what the baseline held and what the plan makes of it. */
export interface PlannedWrite {
  readonly path: string;
  readonly before: PathAfter;
  readonly after: PathAfter;
  /** The bytes of `after` (null: the path is removed). */
  readonly content: Uint8Array | null;
}

/** The hypothetical after-state of a plan over a baseline, built in the object store only. */
export interface Hypothetical {
  readonly before: Digest;
  readonly after: Digest;
  /** Every touched path whose state differs from the baseline, sorted by path. */
  readonly writes: readonly PlannedWrite[];
}

type Virtual =
  | { readonly kind: "absent" }
  | {
      readonly kind: "file";
      readonly mode: FileMode;
      readonly bytes: Uint8Array | null;
      readonly digest: Digest | null;
    };

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();
const REGEX_TIMEOUT_MS = 250;

class Refused extends Error {
  constructor(readonly rejection: ApplyRejection) {
    super(rejection.detail);
  }
}

const refuse = (code: ApplyRejection["code"], detail: string): never => {
  throw new Refused({ code, detail });
};

function occurrences(haystack: string, needle: string, limit: number): number[] {
  const at: number[] = [];
  for (let i = haystack.indexOf(needle); i >= 0 && at.length < limit; i = haystack.indexOf(needle, i + 1)) at.push(i);
  return at;
}

/** `text.replace(new RegExp(pattern, flags), replacement)` in a separate context, time-bounded (invariant 10). */
function searchReplace(text: string, pattern: string, flags: string, replacement: string, path: string): string {
  try {
    const r = runInNewContext(
      `(() => { const re = new RegExp(pattern, flags); let n = 0; text.replace(re, () => { n++; return ""; });
        return { n, out: n === 0 ? text : text.replace(re, replacement) }; })()`,
      { text, pattern, flags, replacement },
      { timeout: REGEX_TIMEOUT_MS },
    ) as { n: number; out: string };
    if (r.n === 0) refuse("ASP_APPLY_OPERATION_FAILED", `the pattern does not match in ${path}`);
    return String(r.out);
  } catch (error) {
    if (error instanceof Refused) throw error;
    return refuse("ASP_APPLY_OPERATION_FAILED", `the pattern could not run on ${path} within ${REGEX_TIMEOUT_MS} ms`);
  }
}

/**
 * Apply a validated plan to its baseline exactly as the host would write it (host §6 step 2):
 * operations in order, each over the effect of the earlier ones, with the semantics
 * `provider-text-edit` documents (overlapping occurrences counted, an exact `oldText` once unless
 * `occurrence` is given, multi_replace ranges located in the file before the operation). The
 * result is the hypothetical after-tree in the object store; nothing touches the disk.
 */
export async function buildHypothetical(
  objects: ObjectStore,
  baseline: Digest,
  plan: EditPlan,
): Promise<{ ok: true; value: Hypothetical } | { ok: false; rejection: ApplyRejection }> {
  try {
    return { ok: true, value: await build(objects, baseline, plan) };
  } catch (error) {
    if (error instanceof Refused) return { ok: false, rejection: error.rejection };
    return {
      ok: false,
      rejection: {
        code: "ASP_APPLY_OPERATION_FAILED",
        detail: `the plan does not apply: ${(error as Error).message}`.slice(0, 4000),
      },
    };
  }
}

async function build(objects: ObjectStore, baseline: Digest, plan: EditPlan): Promise<Hypothetical> {
  const state = new Map<string, Virtual>();
  const initial = new Map<string, PathAfter>();
  const load = async (path: string): Promise<Virtual> => {
    const known = state.get(path);
    if (known !== undefined) return known;
    const at = await lookupPath(objects, baseline, path);
    let v: Virtual;
    switch (at.kind) {
      case "file":
        v = { kind: "file", mode: at.mode, bytes: null, digest: at.digest };
        initial.set(path, { digest: at.digest, mode: at.mode });
        break;
      case "link":
        v = { kind: "file", mode: "120000", bytes: null, digest: at.digest };
        initial.set(path, { digest: at.digest, mode: "120000" });
        break;
      case "absent":
        v = { kind: "absent" };
        initial.set(path, null);
        break;
      case "directory":
        return refuse("ASP_APPLY_OPERATION_FAILED", `${path} is a directory`);
      case "through-link":
        return refuse("ASP_APPLY_PATH_ESCAPE", `${path} goes through the symbolic link ${at.at}`);
      case "under-file":
        return refuse("ASP_APPLY_OPERATION_FAILED", `${path} is below the file ${at.at}`);
    }
    state.set(path, v);
    return v;
  };
  const textOf = async (path: string): Promise<{ mode: FileMode; text: string }> => {
    const v = await load(path);
    if (v.kind === "absent") return refuse("ASP_APPLY_OPERATION_FAILED", `${path} does not exist`);
    if (v.mode === "120000") return refuse("ASP_APPLY_PATH_ESCAPE", `${path} is a symbolic link, not a text file`);
    const bytes = v.bytes ?? (await objects.readBlob(v.digest as Digest));
    try {
      return { mode: v.mode, text: decoder.decode(bytes) };
    } catch {
      return refuse(
        "ASP_APPLY_BINARY_EDIT",
        `${path} is not UTF-8 text: a text operation cannot express an edit of it`,
      );
    }
  };
  const put = (path: string, mode: FileMode, text: string): void => {
    state.set(path, { kind: "file", mode, bytes: encoder.encode(text), digest: null });
  };
  const free = async (path: string, what: string): Promise<void> => {
    const v = await load(path);
    if (v.kind !== "absent") refuse("ASP_APPLY_OPERATION_FAILED", `${what} ${path}: it exists`);
  };

  for (const [i, op] of plan.operations.entries()) {
    const where = `operations[${i}] (${op.op})`;
    switch (op.op) {
      case "replace": {
        const { mode, text } = await textOf(op.path);
        const found = occurrences(text, op.oldText, op.occurrence ?? 2);
        if (op.oldText === "" || found.length === 0)
          refuse("ASP_APPLY_OPERATION_FAILED", `${where}: oldText is not in ${op.path}`);
        if (op.occurrence === undefined && found.length > 1) {
          refuse("ASP_APPLY_OPERATION_FAILED", `${where}: oldText occurs more than once in ${op.path}`);
        }
        if (op.occurrence !== undefined && found.length < op.occurrence) {
          refuse(
            "ASP_APPLY_OPERATION_FAILED",
            `${where}: oldText occurs fewer than ${op.occurrence} times in ${op.path}`,
          );
        }
        const at = found[(op.occurrence ?? 1) - 1] as number;
        put(op.path, mode, text.slice(0, at) + op.newText + text.slice(at + op.oldText.length));
        break;
      }
      case "multi_replace": {
        const { mode, text } = await textOf(op.path);
        const spans = op.edits.map((e, k) => {
          const found = occurrences(text, e.oldText, 2);
          if (e.oldText === "" || found.length !== 1) {
            refuse(
              "ASP_APPLY_OPERATION_FAILED",
              `${where}: edits[${k}].oldText does not occur exactly once in ${op.path}`,
            );
          }
          const start = found[0] as number;
          return { start, end: start + e.oldText.length, newText: e.newText };
        });
        spans.sort((a, b) => a.start - b.start);
        let out = "";
        let from = 0;
        for (const s of spans) {
          if (s.start < from) refuse("ASP_APPLY_OPERATION_FAILED", `${where}: two edits overlap in ${op.path}`);
          out += text.slice(from, s.start) + s.newText;
          from = s.end;
        }
        put(op.path, mode, out + text.slice(from));
        break;
      }
      case "search_replace": {
        const { mode, text } = await textOf(op.path);
        put(op.path, mode, searchReplace(text, op.pattern, op.flags ?? "", op.replacement, op.path));
        break;
      }
      case "create": {
        await free(op.path, "cannot create");
        const bytes =
          op.encoding === "base64" ? new Uint8Array(Buffer.from(op.content, "base64")) : encoder.encode(op.content);
        state.set(op.path, { kind: "file", mode: op.mode ?? "100644", bytes, digest: null });
        break;
      }
      case "rename": {
        const v = await load(op.from);
        if (v.kind === "absent") refuse("ASP_APPLY_OPERATION_FAILED", `${where}: ${op.from} does not exist`);
        await free(op.to, "cannot rename onto");
        state.set(op.to, v);
        state.set(op.from, { kind: "absent" });
        break;
      }
      case "delete": {
        const v = await load(op.path);
        if (v.kind === "absent") refuse("ASP_APPLY_OPERATION_FAILED", `${where}: ${op.path} does not exist`);
        state.set(op.path, { kind: "absent" });
        break;
      }
    }
  }

  const writes: PlannedWrite[] = [];
  const tree = new Map<string, PathAfter>();
  for (const [path, v] of [...state].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const before = initial.get(path) ?? null;
    let after: PathAfter = null;
    let content: Uint8Array | null = null;
    if (v.kind === "file") {
      content = v.bytes ?? (await objects.readBlob(v.digest as Digest));
      after = { digest: v.bytes === null ? (v.digest as Digest) : await objects.putBlob(v.bytes), mode: v.mode };
    }
    if (before?.digest === after?.digest && before?.mode === after?.mode) continue;
    writes.push({ path, before, after, content });
    tree.set(path, after);
  }
  const after = await treeWith(objects, baseline, tree);
  return { before: baseline, after, writes };
}
