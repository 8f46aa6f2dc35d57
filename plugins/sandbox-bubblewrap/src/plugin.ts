import { defineSandbox, type SandboxPlugin } from "@asp/sdk";
import { realHost } from "./bwrap.js";
import { OPTIONS_SCHEMA } from "./limits.js";
import { createBubblewrapSandbox } from "./sandbox.js";

/** The plugin id, as in its signed manifest. */
export const PLUGIN_ID = "asp.sandbox-bubblewrap";

/**
 * The sandbox plugin declaration (capability `sandbox:bubblewrap`): nothing runs on import;
 * the host validates its options against {@link OPTIONS_SCHEMA} (the resource budget), calls
 * `register`, then `init` when it composes.
 */
export const sandboxBubblewrap: SandboxPlugin = defineSandbox({
  id: PLUGIN_ID,
  capabilities: ["sandbox:bubblewrap"],
  optionsSchema: OPTIONS_SCHEMA,
  register(reg) {
    reg.registerInit({ deps: {}, init: (_deps, ctx) => createBubblewrapSandbox(realHost(), ctx.options) });
  },
});
