import { DEFAULT_BUDGETS } from "../src/index.js";

/** A schema-valid `auto_run_started` event carrying `selection` and `budgets`, for contract checks. */
export function runStartedEvent(selection: unknown, budgets: unknown = DEFAULT_BUDGETS): unknown {
  return {
    event_id: "ev-1",
    type: "auto_run_started",
    run: { root_frame_id: "f1", branch_id: "b1", turn_id: "t1", execution_id: "e1" },
    committed_at: "2026-01-01T00:00:00Z",
    selection,
    budgets,
  };
}
