/**
 * Descriptors a child process inherits (THREAT-MODEL invariant 12, issue 32 hole 1).
 *
 * Node's `child_process.spawn` (libuv) hands the child every descriptor of the parent that is
 * not close-on-exec. Node and libuv open theirs close-on-exec, but native modules do not all do
 * so: LevelDB (classic-level) keeps its write-ahead log, `MANIFEST-*`, `LOCK` and `LOG` open
 * WITHOUT it, so every process the host started could write the store through
 * `/proc/self/fd/N`. JavaScript cannot set close-on-exec on a foreign descriptor, and the child
 * cannot be made to close them before `exec` without a native helper; what libuv does offer is
 * the `stdio` array: each slot N beyond 2 is `dup2`ed onto descriptor N in the child before
 * `exec`. {@link closedStdio} fills every slot from 3 up to past the highest descriptor the
 * parent holds with one descriptor of `/dev/null`, so whatever the parent held at N, the child
 * holds `/dev/null` there instead.
 *
 * The margin covers descriptors opened between the listing and the fork (the kernel hands out
 * the lowest free number, so a descriptor opened in between lands at most a few numbers above
 * the highest one listed, unless more than `margin` are opened in that window).
 *
 * Kept free of Node builtins (contracts builds with `types: []`): the caller passes `node:fs`.
 */

/** The part of `node:fs` {@link closedStdio} uses. */
export interface DescriptorFs {
  readdirSync(path: string): string[];
  openSync(path: string, flags: string): number;
}

/** One stdio slot as `child_process.spawn` takes it. */
export type StdioSlot = "pipe" | "ignore" | "inherit" | number;

/** How far above the highest listed descriptor the placeholders reach. */
export const DESCRIPTOR_MARGIN = 64;

let devNull: number | null = null;

/**
 * The `stdio` option for `spawn` that gives the child `given` as its descriptors 0.. and
 * `/dev/null` at every other number the parent may hold (see the module comment). Where the
 * platform lists no descriptors (`/proc/self/fd`, `/dev/fd`), 3 + {@link DESCRIPTOR_MARGIN}
 * slots are filled.
 *
 * @example
 * ```ts
 * import * as fs from "node:fs";
 * spawn(executable, args, { stdio: closedStdio(fs) });
 * ```
 */
export function closedStdio(fs: DescriptorFs, given: readonly StdioSlot[] = ["pipe", "pipe", "pipe"]): StdioSlot[] {
  if (devNull === null) devNull = fs.openSync("/dev/null", "r");
  const placeholder = devNull;
  let highest = 2;
  for (const dir of ["/proc/self/fd", "/dev/fd"]) {
    try {
      for (const name of fs.readdirSync(dir)) {
        const n = Number(name);
        if (Number.isInteger(n) && n > highest) highest = n;
      }
      break;
    } catch {
      // not this platform's listing: try the next, else fill the margin only
    }
  }
  const slots: StdioSlot[] = [...given];
  for (let fd = slots.length; fd <= highest + DESCRIPTOR_MARGIN; fd++) slots.push(placeholder);
  return slots;
}
