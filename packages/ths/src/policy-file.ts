import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Policy } from "@asp/contracts";
import { isActivePolicy, parsePolicy } from "@asp/policy";
import { ThsError } from "./errors.js";
import type { HostPolicy } from "./tokens.js";

/**
 * Load trusted policy exactly as the host does: a file path (read as JSON), a policy document,
 * or an already parsed `ActivePolicy`; validated by `@asp/policy`'s `parsePolicy` (schema,
 * gate floor, pins). The CLI's `status` and `plugin verify --policy` call this same function, so
 * a policy they accept is one the host accepts.
 * @throws ThsError `ASP_THS_BAD_POLICY` when the file cannot be read; PolicyError
 *   (`ASP_POLICY_NOT_JSON`, `ASP_POLICY_DUPLICATE_KEY`, …) when the text or document is invalid.
 */
export function loadPolicy(input: string | Policy | HostPolicy): HostPolicy {
  if (isActivePolicy(input)) return input;
  let raw: unknown = input;
  let what = "policy";
  if (typeof input === "string") {
    what = resolve(input);
    try {
      // The text, not JSON.parse's object: parsePolicy refuses duplicate keys, which
      // JSON.parse would silently resolve to the last one.
      raw = readFileSync(what, "utf8");
    } catch (cause) {
      throw new ThsError("ASP_THS_BAD_POLICY", `cannot read policy ${what}: ${(cause as Error).message}`, {
        cause,
        data: { path: what },
      });
    }
  }
  return parsePolicy(raw, {
    what: typeof input === "string" ? `policy ${what}` : "policy",
    ...(typeof input === "string" ? { origin: { kind: "file" as const, path: what } } : {}),
  });
}
