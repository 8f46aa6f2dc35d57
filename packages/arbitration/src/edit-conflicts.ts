import type { EditPlan } from "@asp/contracts";
import { arbitrationError } from "./errors.js";

/** How two edit plans collide on a path. */
export type EditConflictKind =
  /** Both plans carry a precondition for the path, with different blobs: they were proposed against different contents. */
  | "precondition-mismatch"
  /** At least one plan creates, deletes, renames or regex-rewrites the path, or its range cannot be located. */
  | "whole-file"
  /** Both plans replace text in the path and the located ranges overlap. */
  | "overlapping-ranges";

/** Two edit plans that must not both apply (host §4, §6): the caller serializes them. */
export interface EditConflict {
  /** The two proposal ids, sorted. */
  readonly proposals: readonly [string, string];
  readonly path: string;
  readonly kind: EditConflictKind;
  readonly detail: string;
}

/** Options of {@link findEditConflicts}. */
export interface EditConflictOptions {
  /**
   * Content of `path` at blob `blob` (the plan's precondition), used to locate replace ranges.
   * Without it (or when it returns `undefined`), every text operation counts as whole-file.
   */
  readonly read?: (path: string, blob: string) => string | undefined;
}

type Touch =
  | { readonly whole: true; readonly why: string }
  | { readonly whole: false; readonly start: number; readonly end: number };

function locate(content: string | undefined, oldText: string, occurrence: number | undefined): Touch {
  if (content === undefined) return { whole: true, why: "its content was not available to locate the edit" };
  if (oldText === "") return { whole: true, why: "an empty oldText has no position" };
  let at = -1;
  if (occurrence === undefined) {
    at = content.indexOf(oldText);
    if (at >= 0 && content.indexOf(oldText, at + 1) >= 0) return { whole: true, why: "oldText occurs more than once" };
  } else {
    for (let n = 0, from = 0; n < occurrence; n++) {
      at = content.indexOf(oldText, from);
      if (at < 0) break;
      from = at + 1;
    }
  }
  if (at < 0) return { whole: true, why: "oldText is not in the file" };
  return { whole: false, start: at, end: at + oldText.length };
}

function touches(plan: EditPlan, read: EditConflictOptions["read"]): Map<string, Touch[]> {
  const blobs = new Map(plan.preconditions.map((p) => [p.path, p.blob]));
  const content = (path: string): string | undefined => {
    const blob = blobs.get(path);
    return blob === undefined || blob === "absent" || read === undefined ? undefined : read(path, blob);
  };
  const out = new Map<string, Touch[]>();
  const add = (path: string, t: Touch): void => {
    out.set(path, [...(out.get(path) ?? []), t]);
  };
  for (const op of plan.operations) {
    switch (op.op) {
      case "replace":
        add(op.path, locate(content(op.path), op.oldText, op.occurrence));
        break;
      case "multi_replace":
        for (const e of op.edits) add(op.path, locate(content(op.path), e.oldText, undefined));
        break;
      case "search_replace":
        add(op.path, { whole: true, why: "a search_replace may rewrite anywhere in the file" });
        break;
      case "create":
        add(op.path, { whole: true, why: "it creates the file" });
        break;
      case "delete":
        add(op.path, { whole: true, why: "it deletes the file" });
        break;
      case "rename":
        add(op.from, { whole: true, why: `it renames the file to ${op.to}` });
        add(op.to, { whole: true, why: `it renames ${op.from} onto it` });
        break;
    }
  }
  return out;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Every pair of edit plans that touch overlapping blobs: the same path with overlapping ranges,
 * whole-file operations (create, delete, rename, search_replace) on the same path, or
 * preconditions on the same path that name different blobs. At most one conflict per pair and
 * path, the most fundamental kind first (precondition mismatch, whole-file, overlapping ranges);
 * sorted by path, then proposal ids. Two plans that edit disjoint ranges of one file do not conflict.
 *
 * @throws ArbitrationError `ASP_ARBITRATION_DUPLICATE_PROPOSAL` when two plans share a proposal id.
 * @example
 * ```ts
 * for (const c of findEditConflicts(plans, { read: (path, blob) => store.text(blob) })) serialize(c.proposals);
 * ```
 */
export function findEditConflicts(plans: ReadonlyArray<EditPlan>, options: EditConflictOptions = {}): EditConflict[] {
  const ids = new Map<string, number>();
  plans.forEach((p, i) => {
    if (ids.has(p.proposalId)) {
      throw arbitrationError(
        "ASP_ARBITRATION_DUPLICATE_PROPOSAL",
        `proposal ${p.proposalId} appears twice; every edit plan needs its own proposal id`,
        `/${i}/proposalId`,
      );
    }
    ids.set(p.proposalId, i);
  });
  const sorted = [...plans].sort((a, b) => cmp(a.proposalId, b.proposalId));
  const analysed = sorted.map((plan) => ({
    plan,
    touches: touches(plan, options.read),
    blobs: new Map(plan.preconditions.map((p) => [p.path, p.blob])),
  }));
  const conflicts: EditConflict[] = [];
  for (let i = 0; i < analysed.length; i++) {
    for (let j = i + 1; j < analysed.length; j++) {
      const a = analysed[i] as (typeof analysed)[number];
      const b = analysed[j] as (typeof analysed)[number];
      const proposals = [a.plan.proposalId, b.plan.proposalId] as const;
      for (const [path, ta] of a.touches) {
        const tb = b.touches.get(path);
        if (tb === undefined) continue;
        const blobA = a.blobs.get(path);
        const blobB = b.blobs.get(path);
        if (blobA !== undefined && blobB !== undefined && blobA !== blobB) {
          conflicts.push({
            proposals,
            path,
            kind: "precondition-mismatch",
            detail: `the plans expect different contents of ${path}`,
          });
          continue;
        }
        const whole = [...ta, ...tb].find((t) => t.whole);
        if (whole?.whole) {
          conflicts.push({
            proposals,
            path,
            kind: "whole-file",
            detail: `a plan touches all of ${path}: ${whole.why}`,
          });
          continue;
        }
        const overlap = ta.some((x) => !x.whole && tb.some((y) => !y.whole && x.start < y.end && y.start < x.end));
        if (overlap) {
          conflicts.push({
            proposals,
            path,
            kind: "overlapping-ranges",
            detail: `both plans replace overlapping text in ${path}`,
          });
        }
      }
    }
  }
  return conflicts.sort(
    (x, y) => cmp(x.path, y.path) || cmp(x.proposals[0], y.proposals[0]) || cmp(x.proposals[1], y.proposals[1]),
  );
}
