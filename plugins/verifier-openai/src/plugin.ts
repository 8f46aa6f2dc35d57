import { createDependencyRef, defineVerifier, type VerifierPlugin } from "@asp/sdk";
import type { OpenAIReviewerOptions } from "./options.js";
import { OPTIONS_SCHEMA } from "./options.js";
import type { ContentPort } from "./prompt.js";
import { createOpenAIReviewer } from "./reviewer.js";

/** The plugin id, as in `asp-plugin.json`. */
export const PLUGIN_ID = "asp.verifier-openai";

/**
 * The plugin declaration the entry exports: a verifier granted `review` and `guardian` (the same
 * capabilities as `asp-plugin.json`, which the host checks it against), depending on the host's
 * content reader (snapshot blobs by digest) and clock. Its options ({@link OPTIONS_SCHEMA}) come
 * from trusted host configuration and are validated by the host before `init`. Nothing runs, and
 * no environment variable is read, until the host calls `init` and then `verify`.
 */
export const openAIReviewerPlugin: VerifierPlugin = defineVerifier({
  id: PLUGIN_ID,
  capabilities: ["review", "guardian"],
  optionsSchema: OPTIONS_SCHEMA,
  register(reg) {
    reg.registerInit({
      deps: {
        content: createDependencyRef<ContentPort>("asp.plugin.ContentReader"),
        // Declared so a host composing Reviewers hands every one the same clock; the HTTP
        // deadline itself is a timer, which the host's clock cannot drive.
        clock: createDependencyRef<{ now(): Date }>("asp.plugin.Clock"),
      },
      init: (deps, ctx) =>
        createOpenAIReviewer({ options: ctx.options as OpenAIReviewerOptions, content: deps.content }),
    });
  },
});
