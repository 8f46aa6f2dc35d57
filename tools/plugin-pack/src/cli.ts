#!/usr/bin/env node
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { isAspError } from "@asp/contracts";
import { PackError } from "./errors.js";
import { packPlugin } from "./pack.js";
import { pinPlugins } from "./pin.js";

/**
 * asp-plugin-pack [DIR] --key KEY [--json]
 *   bundle + sign the plugin package DIR (default: the current folder) into DIR/dist/plugin.
 * asp-plugin-pack pin --policy FILE --key KEY DIR... [--check] [--json]
 *   pack each DIR and pin it in the trusted policy FILE; with --check only report (exit 1 if stale).
 * Exit: 0 ok, 1 --check found a stale pin, 64 bad input, 70 internal error.
 */
const USAGE = `usage:
  asp-plugin-pack [DIR] --key KEY [--json]
      bundle the plugin package DIR (default: .) with its dependencies into DIR/dist/plugin/ and
      sign it. DIR holds package.json and the manifest: asp-plugin.json, or plugin/asp-plugin.json
      (the template layout) with its entry beside it; see aspPlugin in tools/plugin-pack/README.md.
  asp-plugin-pack pin --policy FILE --key KEY DIR... [--check] [--json]
      pack each DIR and pin it in the trusted policy FILE (plugins[], providers[], and grants for
      the requirements it can serve); --check only reports, exit 1 when FILE is stale.

options:
  --key KEY      secret key from \`asp plugin keygen --out KEY\` (or ASP_PLUGIN_SIGNING_KEY)
  --policy FILE  trusted policy to pin into (pin only)
  --check        do not write; exit 1 if FILE does not pin these digests (pin only)
  --json         machine-readable output
  -h, --help     this text

exit: 0 ok, 1 --check found a stale pin, 64 bad input, 70 internal error
`;

const usageError = (message: string, next: string): PackError => new PackError("ASP_PACK_USAGE", message, { next });

async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw usageError((error as Error).message, "see asp-plugin-pack --help");
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const key = values.key ?? process.env.ASP_PLUGIN_SIGNING_KEY;
  if (key === undefined) {
    throw usageError(
      "a signing key is required",
      "pass --key KEY or set ASP_PLUGIN_SIGNING_KEY (make one with `asp plugin keygen --out KEY`)",
    );
  }
  const pinning = positionals[0] === "pin";
  const dirs = (pinning ? positionals.slice(1) : positionals.length > 0 ? positionals : ["."]).map((d) => resolve(d));
  if (pinning && (values.policy === undefined || dirs.length === 0)) {
    throw usageError(
      "pin needs --policy FILE and at least one plugin package",
      "run asp-plugin-pack pin --policy FILE --key KEY DIR...",
    );
  }
  if (!pinning && values.check) throw usageError("--check applies to pin only", "drop --check, or use pin --check");
  const packs = [];
  for (const dir of dirs) packs.push(await packPlugin(dir, resolve(key)));
  const report: Record<string, unknown> = {
    plugins: packs.map(({ id, version, dir, digest }) => ({ id, version, dir, digest })),
  };
  let code = 0;
  if (pinning && values.policy !== undefined) {
    const pinned = pinPlugins(resolve(values.policy), packs, { check: values.check });
    report.policy = { path: resolve(values.policy), changed: pinned.changed, written: pinned.changed && !values.check };
    if (values.check && pinned.changed) code = 1;
  }
  if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    for (const p of packs) process.stdout.write(`packed ${p.id}@${p.version} ${p.digest} -> ${p.dir}\n`);
    const policy = report.policy as { path: string; changed: boolean; written: boolean } | undefined;
    if (policy) {
      process.stdout.write(
        policy.changed
          ? values.check
            ? `STALE: ${policy.path} does not pin these digests; run without --check to update it\n`
            : `pinned in ${policy.path}\n`
          : `${policy.path} already pins these digests\n`,
      );
    }
  }
  return code;
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      key: { type: "string" },
      policy: { type: "string" },
      check: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (isAspError(error)) {
      // Every PackError message ends with its next step; another package's error gets one here.
      const next = error instanceof PackError ? "" : "; next: see asp-plugin-pack --help";
      process.stderr.write(`asp-plugin-pack: ${error.code}: ${error.message}${next}\n`);
      process.exitCode = error.category === "input" ? 64 : 70;
    } else {
      process.stderr.write(`asp-plugin-pack: internal error: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 70;
    }
  },
);
