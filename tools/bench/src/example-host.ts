import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
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

/**
 * Write `<dir>/asp.host.json`: examples/asp.host.json itself (its plugins, sandboxes, policy and
 * `autoMode`) with its store moved to `<dir>/store`, its paths made absolute, and `extra` fields
 * over it; returns its path.
 */
export function exampleConfigCopy(dir: string, extra: Readonly<Record<string, unknown>> = {}): string {
  const examples = join(ROOT, "examples");
  const example = JSON.parse(readFileSync(join(examples, "asp.host.json"), "utf8")) as {
    policy: string;
    trustRoots: string[];
    plugins: string[];
  } & Record<string, unknown>;
  const path = join(dir, "asp.host.json");
  writeFileSync(
    path,
    JSON.stringify({
      ...example,
      store: join(dir, "store"),
      policy: resolve(examples, example.policy),
      trustRoots: example.trustRoots.map((p) => resolve(examples, p)),
      plugins: example.plugins.map((p) => resolve(examples, p)),
      ...extra,
    }),
  );
  return path;
}

/** Run a whole process; resolve with its exit code and stdout (a nonzero exit is an answer here). */
export function runProcess(file: string, args: readonly string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((done) => {
    execFile(
      file,
      args,
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1;
        done({ code, stdout });
      },
    );
  });
}
