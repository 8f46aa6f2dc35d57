// Which path components git, or a filesystem it runs on, takes for `.git` (issue 32 hole 5). One
// definition for the host's plan validation and for any sandbox that publishes an apply.

const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;

/**
 * True when git, or a filesystem it runs on, would take the path component `segment` for `.git`:
 * compared after NFKD compatibility folding (`．ｇｉｔ`), with the code points HFS+ ignores removed
 * (`.g\u200cit`), in lower case (`.GIT`), without the trailing dots and spaces NTFS drops
 * (`.git. `), and with the NTFS forms git refuses too: the 8.3 short name `git~1` and an
 * alternate data stream (`.git::$INDEX_ALLOCATION`). A write there (a nested repository's hooks,
 * `core.fsmonitor` in its config) runs code on the next git command in that folder.
 *
 * @example
 * ```ts
 * ["vendor", ".GIT", "config"].some(isGitName); // true
 * ```
 */
export function isGitName(segment: string): boolean {
  const folded = segment
    .normalize("NFKD")
    .replace(IGNORABLE, "")
    .toLowerCase()
    .replace(/[ .]+$/, "");
  return folded === ".git" || folded === "git~1" || folded.startsWith(".git:");
}
