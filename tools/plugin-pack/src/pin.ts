import { readFileSync, writeFileSync } from "node:fs";
import { type Policy, validate } from "@asp/contracts";
import { PackError } from "./errors.js";
import type { PackResult } from "./pack.js";

/** What {@link pinPlugins} changed. */
export interface PinResult {
  readonly policy: Policy;
  readonly changed: boolean;
}

/**
 * Pin packed plugins in a trusted policy: a `plugins[]` grant (id + digest + capabilities) for
 * each; for providers also the `providers[]` pin (id + version + digest) and a gate-authority
 * grant for every requirement whose capability the provider declares and whose sources it
 * declares (call-sites as the requirement lists them). Pure: returns the new policy.
 */
export function pinPolicy(policy: Policy, packs: ReadonlyArray<PackResult>): Policy {
  let plugins = [...(policy.plugins ?? [])];
  let providers = [...policy.providers];
  let grants = [...policy.grants];
  for (const pack of [...packs].sort((a, b) => a.id.localeCompare(b.id))) {
    const m = pack.manifest;
    plugins = plugins.filter((p) => p.id !== m.id);
    plugins.push({ id: m.id, digest: pack.digest, capabilities: [...m.capabilities] });
    if (m.kind !== "provider") continue;
    providers = providers.filter((p) => p.id !== m.id);
    providers.push({ id: m.id, version: m.version, digest: pack.digest });
    grants = grants.filter((g) => g.provider !== m.id);
    for (const requirement of policy.requirements) {
      const declaresCapability = (m.capabilities as readonly string[]).includes(requirement.capability);
      const coversSources = requirement.sources.every((s) => m.diagnosticSources.includes(s));
      if (!declaresCapability || !coversSources) continue;
      grants.push({
        provider: m.id,
        version: m.version,
        digest: pack.digest,
        requirement: requirement.id,
        callSites: [...requirement.callSites],
      });
    }
  }
  const byId = <T extends { id: string }>(xs: T[]) => xs.sort((a, b) => a.id.localeCompare(b.id));
  grants.sort((a, b) => `${a.provider} ${a.requirement}`.localeCompare(`${b.provider} ${b.requirement}`));
  return { ...policy, providers: byId(providers), grants, plugins: byId(plugins) };
}

/**
 * Read the policy at `path`, pin `packs` into it, and write it back unless `check` is set.
 *
 * @throws PackError `ASP_PACK_BAD_POLICY` when the file is not a valid policy (before or after pinning).
 */
export function pinPlugins(
  path: string,
  packs: ReadonlyArray<PackResult>,
  options: { check?: boolean } = {},
): PinResult {
  const text = readFileSync(path, "utf8");
  const before = validate("policy", JSON.parse(text));
  if (!before.ok) {
    throw new PackError(
      "ASP_PACK_BAD_POLICY",
      `${path} is not a valid policy: ${before.errors[0]?.pointer} ${before.errors[0]?.message}`,
      {
        data: { path, errors: before.errors },
      },
    );
  }
  const policy = pinPolicy(before.value, packs);
  const after = validate("policy", policy);
  if (!after.ok) {
    throw new PackError(
      "ASP_PACK_BAD_POLICY",
      `pinning made ${path} invalid: ${after.errors[0]?.pointer} ${after.errors[0]?.message}`,
      {
        data: { path, errors: after.errors },
      },
    );
  }
  const next = `${JSON.stringify(policy, null, 2)}\n`;
  const changed = next !== text;
  if (changed && options.check !== true) writeFileSync(path, next);
  return { policy, changed };
}
