#!/usr/bin/env node
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { isAspError } from "@asp/contracts";
import { packPlugin } from "./pack.js";
import { pinPlugins } from "./pin.js";

/**
 * asp-plugin-pack [DIR] --key KEY [--json]
 *   bundle + sign the plugin package DIR (default: the current folder) into DIR/dist/plugin.
 * asp-plugin-pack pin --policy FILE --key KEY DIR... [--check] [--json]
 *   pack each DIR and pin it in the trusted policy FILE; with --check only report (exit 1 if stale).
 * Exit: 0 ok, 1 --check found a stale pin, 64 bad input, 70 internal error.
 */
const usage =
  "usage: asp-plugin-pack [DIR] --key KEY [--json] | asp-plugin-pack pin --policy FILE --key KEY DIR... [--check] [--json]";

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      key: { type: "string" },
      policy: { type: "string" },
      check: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
    },
  });
  const key = values.key ?? process.env.ASP_PLUGIN_SIGNING_KEY;
  if (key === undefined) {
    process.stderr.write(`asp-plugin-pack: a signing key is required (--key or ASP_PLUGIN_SIGNING_KEY)\n${usage}\n`);
    return 64;
  }
  const pinning = positionals[0] === "pin";
  const dirs = (pinning ? positionals.slice(1) : positionals.length > 0 ? positionals : ["."]).map((d) => resolve(d));
  if (pinning && (values.policy === undefined || dirs.length === 0)) {
    process.stderr.write(`asp-plugin-pack: pin needs --policy FILE and at least one plugin package\n${usage}\n`);
    return 64;
  }
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

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (isAspError(error)) {
      process.stderr.write(`asp-plugin-pack: ${error.code}: ${error.message}\n`);
      process.exitCode = error.category === "input" ? 64 : 70;
    } else {
      process.stderr.write(`asp-plugin-pack: internal error: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 70;
    }
  },
);
