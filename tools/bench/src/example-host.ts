import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (suites run from `tools/bench/dist/suites`). */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The built `asp` binary. */
export const BIN = join(ROOT, "apps", "cli", "dist", "bin.js");
/** The four signed example provider plugins. */
export const EXAMPLE_PROVIDERS = [
  "provider-typescript",
  "provider-secrets",
  "provider-text-edit",
  "provider-import-graph",
] as const;

/**
 * Write `<dir>/<name>.json`: a trusted host configuration with a store of its own
 * (`<dir>/store-<name>`), the example policy and trust root, the built signed `plugins`, and
 * `extra` fields; returns its path.
 */
export function exampleHostConfig(
  dir: string,
  name: string,
  plugins: readonly string[],
  extra: Readonly<Record<string, unknown>> = {},
): string {
  const examples = join(ROOT, "examples");
  const path = join(dir, `${name}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      store: join(dir, `store-${name}`),
      ...extra,
      policy: join(examples, "asp.policy.json"),
      trustRoots: [join(examples, "keys", "example.key.pub")],
      plugins: plugins.map((p) => join(ROOT, "plugins", p, "dist", "plugin")),
      providers: [],
    }),
  );
  return path;
}
