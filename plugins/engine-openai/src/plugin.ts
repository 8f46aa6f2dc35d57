import { createDependencyRef, defineEngine, type EnginePlugin } from "@asp/sdk";
import { createOpenAIEngine } from "./engine.js";
import type { OpenAIEngineOptions } from "./options.js";
import { OPTIONS_SCHEMA } from "./options.js";

/** The plugin id, as in `asp-plugin.json`. */
export const PLUGIN_ID = "asp.engine-openai";

/**
 * The plugin declaration the entry exports: an engine granted `engine`, depending on the host's
 * clock only (to read a `Retry-After` given as an HTTP date). Its options ({@link OPTIONS_SCHEMA})
 * come from trusted host configuration and are validated by the host before `init`. Nothing runs,
 * and no environment variable is read, until the host calls `init` and then `run`.
 */
export const openAIEnginePlugin: EnginePlugin = defineEngine({
  id: PLUGIN_ID,
  capabilities: ["engine"],
  optionsSchema: OPTIONS_SCHEMA,
  register(reg) {
    reg.registerInit({
      deps: { clock: createDependencyRef<{ now(): Date }>("asp.plugin.Clock") },
      init: (deps, ctx) =>
        createOpenAIEngine({ options: ctx.options as OpenAIEngineOptions, now: () => deps.clock.now().getTime() }),
    });
  },
});
