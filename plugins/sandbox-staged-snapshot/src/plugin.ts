import { defineSandbox, type SandboxPlugin } from "@asp/sdk";
import { createStagedSnapshot } from "./sandbox.js";

/** The plugin id, as in `asp-plugin.json`. */
export const PLUGIN_ID = "asp.sandbox-staged-snapshot";

/**
 * The plugin declaration the entry exports: a sandbox granted `sandbox:staged_snapshot`, with no
 * dependencies (the writes to stage come in the request). Nothing runs until the host calls `init`.
 */
export const stagedSnapshotPlugin: SandboxPlugin = defineSandbox({
  id: PLUGIN_ID,
  capabilities: ["sandbox:staged_snapshot"],
  register(reg) {
    reg.registerInit({ deps: {}, init: () => createStagedSnapshot() });
  },
});
