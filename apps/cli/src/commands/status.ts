import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { SCHEMA_NAMES, validate } from "@asp/contracts";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";

/** What `asp status --json` prints. */
export interface StatusReport {
  readonly cli: { readonly version: string; readonly node: string; readonly platform: string };
  readonly contracts: { readonly schemas: number };
  readonly policy:
    | { readonly path: string; readonly valid: true; readonly apiVersion: string }
    | {
        readonly path: string;
        readonly valid: false;
        readonly errors: ReadonlyArray<{ pointer: string; message: string }>;
      }
    | null;
  readonly store: { readonly path: string; readonly exists: boolean };
  readonly host: { readonly composed: false; readonly note: string };
}

function readPolicy(path: string): StatusReport["policy"] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `cannot read policy ${path} as JSON: ${(error as Error).message}`, {
      cause: error,
      data: { path },
    });
  }
  const result = validate("policy", raw);
  if (result.ok) return { path, valid: true, apiVersion: result.value.apiVersion };
  return { path, valid: false, errors: result.errors };
}

/** `asp status`: what this installation is and whether its trusted inputs parse. */
export function registerStatus(program: Command, ctx: CliContext): void {
  program
    .command("status")
    .description("show the toolkit version, schemas, trusted policy and store status")
    .option("--policy <path>", "trusted policy file to validate", "asp.policy.json")
    .option("--store <path>", "durable store directory", ".asp")
    .action((options: { policy: string; store: string }) => {
      const policyPath = resolve(ctx.io.cwd, options.policy);
      const storePath = resolve(ctx.io.cwd, options.store);
      const report: StatusReport = {
        cli: { version: cliVersion(), node: process.version, platform: `${process.platform}-${process.arch}` },
        contracts: { schemas: SCHEMA_NAMES.length },
        policy: existsSync(policyPath) ? readPolicy(policyPath) : null,
        store: { path: storePath, exists: existsSync(storePath) },
        host: { composed: false, note: "no provider host is composed yet; `asp gate` arrives with @asp/ths" },
      };
      const lines = [
        `asp ${report.cli.version} (node ${report.cli.node}, ${report.cli.platform})`,
        `contracts: ${report.contracts.schemas} schemas`,
        report.policy === null
          ? `policy:    none at ${policyPath}`
          : report.policy.valid
            ? `policy:    ${report.policy.path} valid (${report.policy.apiVersion})`
            : `policy:    ${report.policy.path} INVALID\n${report.policy.errors.map((e) => `  ${e.pointer || "/"}: ${e.message}`).join("\n")}`,
        `store:     ${report.store.path} ${report.store.exists ? "present" : "not created yet"}`,
        `host:      ${report.host.note}`,
      ];
      ctx.print(lines.join("\n"), report);
      if (report.policy !== null && !report.policy.valid) ctx.setExit(EXIT.usage);
    });
}
