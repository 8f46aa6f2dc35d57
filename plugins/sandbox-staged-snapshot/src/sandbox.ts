import type { RecoverRequest, RecoverResult, Sandbox, StageRequest, StageResult } from "@asp/contracts";
import { recoverRequest } from "./recover.js";
import { stageRequest } from "./stage.js";

/** A named step of stage() or recover(), numbered from 1 in the order it completed. */
export interface StagedStep {
  readonly index: number;
  readonly name: string;
}

/** Options of {@link createStagedSnapshot}. */
export interface StagedSnapshotOptions {
  /**
   * FAULT INJECTION ONLY. Called after each step completes, synchronously, before the next one
   * starts: the crash-consistency tests SIGKILL the process from here. The plugin entry never
   * sets it, and nothing in the plugin reads an environment variable for it.
   */
  readonly faultHook?: (step: StagedStep) => void;
}

/** The sandbox port of this plugin: `stage` and `recover` (it confines no launches). */
export type StagedSnapshotSandbox = Required<Pick<Sandbox, "stage" | "recover">>;

/**
 * Create the staged-snapshot sandbox: `stage` publishes an apply through a staged copy and a
 * journal, `recover` finishes or undoes one a crash interrupted. A crash at any instant leaves
 * the worktree at B or B' once `recover` has run.
 *
 * @throws StagedError from `stage` / `recover` (see their codes in the package README): the
 *   returned promises reject with it.
 * @example
 * ```ts
 * const sandbox = createStagedSnapshot();
 * await sandbox.recover({ root, journalDir });
 * const result = await sandbox.stage({ root, journalDir, writes: [{ path: "a.txt", content: bytes }] });
 * ```
 */
export function createStagedSnapshot(options: StagedSnapshotOptions = {}): StagedSnapshotSandbox {
  const reporter = () => {
    let index = 0;
    const hook = options.faultHook;
    return (name: string) => {
      index += 1;
      hook?.({ index, name });
    };
  };
  return Object.freeze({
    stage: async (request: StageRequest): Promise<StageResult> => stageRequest(request, reporter()),
    recover: async (request: RecoverRequest): Promise<RecoverResult> => recoverRequest(request, reporter()),
  });
}
