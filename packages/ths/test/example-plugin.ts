import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Policy } from "@asp/contracts";

// The real, built and signed example secrets provider (`pnpm build`), verified against the
// example trust root and pinned by the example policy: the plugin the plugin tests attack.

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The packed, signed plugin folder. */
export const SIGNED = join(ROOT, "plugins", "provider-secrets", "dist", "plugin");
/** The example trust root that signed it. */
export const TRUST_ROOT = join(ROOT, "examples", "keys", "example.key.pub");
/** The id it declares. */
export const ID = "asp.provider-secrets";
/** A made-up key in the shape of an AWS access key id. */
export const FAKE_AWS_KEY = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");

/** The example policy, narrowed to the one requirement the secrets provider answers. */
export function secretsPolicy(): Policy {
  const p = JSON.parse(readFileSync(join(ROOT, "examples", "asp.policy.json"), "utf8")) as Policy;
  return {
    ...p,
    requirements: p.requirements.filter((r) => r.id === "secrets"),
    grants: p.grants.filter((g) => g.provider === ID),
  };
}
