import { defineSandbox, type SandboxPlugin } from "@asp/sdk";
import { createBubblewrapSandbox } from "./sandbox.js";

/** The plugin id, as in its signed manifest. */
export const PLUGIN_ID = "asp.sandbox-bubblewrap";

/**
 * The sandbox plugin declaration (capability `sandbox:bubblewrap`): nothing runs on import;
 * the host calls `register`, then `init` when it composes.
 */
export const sandboxBubblewrap: SandboxPlugin = defineSandbox({
  id: PLUGIN_ID,
  capabilities: ["sandbox:bubblewrap"],
  register(reg) {
    reg.registerInit({ deps: {}, init: () => createBubblewrapSandbox() });
  },
});
