import { diff3Merge } from "node-diff3";

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Lines with their terminators kept, so joining them gives the text back byte for byte. */
function lines(text: string): string[] {
  return text === "" ? [] : text.split(/(?<=\n)/);
}

/**
 * Three-way merge of one file (host §6 step 5): `base` is what the plan was proposed against,
 * `ours` what the worktree holds now, `theirs` what the plan makes of `base`. Returns the merged
 * bytes when the two changes touch different lines, or null when they overlap or any side is
 * not UTF-8 text (the caller then re-proposes). Line-based, with `node-diff3`.
 */
export function mergeText(base: Uint8Array, ours: Uint8Array, theirs: Uint8Array): Uint8Array | null {
  let o: string;
  let a: string;
  let b: string;
  try {
    o = decoder.decode(base);
    a = decoder.decode(ours);
    b = decoder.decode(theirs);
  } catch {
    return null;
  }
  const regions = diff3Merge(lines(a), lines(o), lines(b), { excludeFalseConflicts: true });
  let out = "";
  for (const r of regions) {
    if (r.conflict !== undefined || r.ok === undefined) return null;
    out += r.ok.join("");
  }
  return new TextEncoder().encode(out);
}
