import type { Verifier } from "@asp/contracts";
import type { ContentReader, HostChecks } from "@asp/plugin-host";
import { createDependencyRef, defineVerifier, type VerifierPlugin } from "@asp/sdk";
import { reviewWithHostChecks } from "./review.js";

/** The plugin id, as in `asp-plugin.json`. */
export const PLUGIN_ID = "asp.verifier-host-checks";

/** The ports it asks for: the host's checks and read-only content by digest. */
const DEPS = {
  checks: createDependencyRef<HostChecks>("asp.plugin.HostChecks"),
  content: createDependencyRef<ContentReader>("asp.plugin.ContentReader"),
};

/**
 * The Reviewer over the two ports: reviews only (a guardian request is refused with a throw,
 * which the host records as a failure, never as an allow).
 */
export function createHostChecksVerifier(ports: {
  readonly checks: HostChecks;
  readonly content: ContentReader;
}): Verifier {
  return {
    verify: async (request) => {
      if (request.kind !== "review") throw new Error("asp.verifier-host-checks reviews only");
      return reviewWithHostChecks(request.subject, ports);
    },
  };
}

/**
 * The plugin declaration the entry exports: a verifier granted `review`, depending on
 * `asp.plugin.HostChecks` and `asp.plugin.ContentReader`. Nothing runs until the host calls `init`;
 * a host that supplies no checks refuses it there (`ASP_PLUGIN_PORT_UNAVAILABLE`).
 */
export const hostChecksPlugin: VerifierPlugin = defineVerifier({
  id: PLUGIN_ID,
  capabilities: ["review"],
  register(reg) {
    reg.registerInit({
      deps: DEPS,
      init: (deps) => createHostChecksVerifier(deps),
    });
  },
});
