import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { type HostStatus, SCHEMA_NAMES, validate } from "@asp/contracts";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { findHostConfig } from "../host-config.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, hostFromConfig, readHostConfig } from "./host.js";

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
  readonly host:
    | { readonly composed: false; readonly note: string }
    | { readonly composed: true; readonly config: string; readonly status: HostStatus };
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
    .option("--config <path>", `${CONFIG_OPTION_HELP}: compose the host and show provider status when one is found`)
    .action(async (options: { policy: string; store: string; config?: string }) => {
      const configPath = findHostConfig(ctx, options.config)?.path ?? null;
      const config = configPath === null ? null : readHostConfig(ctx, configPath);
      const policyPath = config?.policy ?? resolve(ctx.io.cwd, options.policy);
      const storePath = config?.store ?? resolve(ctx.io.cwd, options.store);
      let host: StatusReport["host"] = {
        composed: false,
        note: "no host configuration (--config, ASP_HOST_CONFIG, ~/.config/asp/host.json, /etc/asp/host.json): providers are not shown",
      };
      if (config !== null) {
        const composed = await hostFromConfig(ctx, config);
        try {
          host = { composed: true, config: configPath as string, status: composed.status() };
        } finally {
          await composed.close();
        }
      }
      const report: StatusReport = {
        cli: { version: cliVersion(), node: process.version, platform: `${process.platform}-${process.arch}` },
        contracts: { schemas: SCHEMA_NAMES.length },
        policy: existsSync(policyPath) ? readPolicy(policyPath) : null,
        store: { path: storePath, exists: existsSync(storePath) },
        host,
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
        ...(report.host.composed
          ? [
              `host:      ${report.host.status.hostVersion} (${report.host.config}), ${report.host.status.providers.length} providers`,
              ...report.host.status.providers.map(
                (p) =>
                  `  ${inert(p.id)}@${inert(p.version)}: ${p.state}; ${Object.entries(p.families)
                    .map(([f, s]) => `${f} ${s}`)
                    .join(
                      ", ",
                    )}; restarts ${p.health.restarts}, timeouts ${p.timeouts}${p.health.quarantined ? ", QUARANTINED" : ""}; p50 ${p.latency.p50Ms ?? "-"} ms, p95 ${p.latency.p95Ms ?? "-"} ms`,
              ),
            ]
          : [`host:      ${report.host.note}`]),
      ];
      ctx.print(lines.join("\n"), report);
      if (report.policy !== null && !report.policy.valid) ctx.setExit(EXIT.usage);
    });
}
