import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PluginCapability } from "@asp/contracts";

/**
 * Write an (unsigned) verifier plugin into `dir`: its manifest (`id`, version 1.0.0, `entry`
 * `main.mjs`, `capabilities`) and `entry` as `main.mjs`. Sign it with `@asp/plugin-host`
 * `signPlugin` and grant its digest in a policy to load it.
 */
export function writeVerifierPlugin(
  dir: string,
  id: string,
  entry: string,
  capabilities: readonly PluginCapability[] = ["review"],
): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "asp-plugin.json"),
    JSON.stringify({
      id,
      version: "1.0.0",
      kind: "verifier",
      entry: "main.mjs",
      capabilities,
      diagnosticSources: [],
      protocolVersion: "1.0",
      engines: { node: ">=20" },
    }),
  );
  writeFileSync(join(dir, "main.mjs"), entry);
  return dir;
}
