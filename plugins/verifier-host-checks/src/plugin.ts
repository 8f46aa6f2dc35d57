import type { HostChecks, Verifier } from "@asp/contracts";
import { createDependencyRef, defineVerifier, type VerifierPlugin } from "@asp/sdk";
import { reviewWithHostChecks } from "./review.js";

/** The plugin id, as in `asp-plugin.json`. */
export const PLUGIN_ID = "asp.verifier-host-checks";

/**
 * The one port it asks for: the host's checks. It reads no content itself (the host reads the
 * blobs it evaluates), so it is not given the content reader: least authority.
 */
const DEPS = { checks: createDependencyRef<HostChecks>("asp.plugin.HostChecks") };

/**
 * The Reviewer over the two ports: reviews only (a guardian request is refused with a throw,
 * which the host records as a failure, never as an allow).
 */
export function createHostChecksVerifier(ports: { readonly checks: HostChecks }): Verifier {
  return {
    verify: async (request) => {
      if (request.kind !== "review") throw new Error("asp.verifier-host-checks reviews only");
      return reviewWithHostChecks(request.subject, ports);
    },
  };
}

/**
 * The plugin declaration the entry exports: a verifier granted `review`, depending on
 * `asp.plugin.HostChecks` only. Nothing runs until the host calls `init`;
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
