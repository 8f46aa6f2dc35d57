import { existsSync } from "node:fs";
import { userInfo } from "node:os";
import { resolve } from "node:path";
import { type HostStatus, isAspError, SCHEMA_NAMES } from "@asp/contracts";
import type { ActivePolicy } from "@asp/policy";
import { isPostgresUrl, redactStoreLocation } from "@asp/store-postgres";
import { HOST_INFO, type HostConfig, loadPolicy, type ProviderSet, readHealthStatus, THS_TOKENS } from "@asp/ths";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { EXIT } from "../exit-codes.js";
import { findHostConfig } from "../host-config.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, hostFromConfig, readHostConfig, trustedPolicy } from "./host.js";
import { openForReading, openForWriting, parseWait, WAIT_OPTION_HELP } from "./store.js";

/** One problem that makes the trusted policy unusable, with its stable code. */
export interface PolicyProblemReport {
  readonly code: string;
  readonly pointer: string;
  readonly message: string;
}

/** What `asp status --json` prints. */
export interface StatusReport {
  readonly cli: { readonly version: string; readonly node: string; readonly platform: string };
  readonly contracts: { readonly schemas: number };
  readonly policy:
    | { readonly path: string; readonly valid: true; readonly apiVersion: string; readonly digest: string }
    | { readonly path: string; readonly valid: false; readonly errors: readonly PolicyProblemReport[] }
    | null;
  readonly store: { readonly path: string; readonly exists: boolean };
  readonly host:
    | { readonly composed: false; readonly note: string }
    | {
        readonly composed: true;
        /** The host configuration file used. */
        readonly config: string;
        /** Per-provider health from the store; no provider is launched to produce it. */
        readonly status: HostStatus;
      };
}

/**
 * The policy file validated exactly as the host loads it (`loadPolicy` of `@asp/ths`: schema,
 * gate floor, pins, launch-instruction scan), so `status` never calls valid what the host refuses.
 */
async function readPolicy(
  path: string,
  load: () => Promise<string | ActivePolicy> | string,
): Promise<NonNullable<StatusReport["policy"]>> {
  try {
    const policy = loadPolicy(await load());
    return { path, valid: true, apiVersion: policy.document.apiVersion, digest: policy.digest };
  } catch (error) {
    if (!isAspError(error) || error.category !== "input") throw error;
    const listed = Array.isArray(error.data?.errors) ? (error.data.errors as Array<Partial<PolicyProblemReport>>) : [];
    const errors = listed.map((e) => ({
      code: typeof e.code === "string" ? e.code : error.code,
      pointer: typeof e.pointer === "string" ? e.pointer : "",
      message: typeof e.message === "string" ? e.message : error.message,
    }));
    return {
      path,
      valid: false,
      errors: errors.length > 0 ? errors : [{ code: error.code, pointer: "", message: error.message }],
    };
  }
}

/**
 * Provider health as the store recorded it (host §8), read without launching any provider: the
 * host is composed (policy loaded as the host loads it, plugins verified) but never warmed, over
 * a read-only snapshot of the store. A store that does not exist yet is not created: every
 * figure is then zero.
 */
async function storedStatus(ctx: CliContext, config: HostConfig, repo: string): Promise<HostStatus> {
  // Read-only: a private snapshot of the store, so `status` never waits for (or blocks) a gate.
  const store = await openForReading(config.store);
  let composed: Awaited<ReturnType<typeof hostFromConfig>>;
  try {
    composed = await hostFromConfig(ctx, config, { warm: false, store: store ?? "memory:" }, repo);
  } catch (error) {
    await store?.close();
    throw error;
  }
  try {
    return await readHealthStatus({
      log: composed.store.log,
      providers: composed.container.resolve<ProviderSet>(THS_TOKENS.Providers).providers.map((p) => p.manifest),
      hostVersion: HOST_INFO.version,
      policyDigest: composed.policy.digest,
      now: new Date(),
    });
  } finally {
    try {
      await composed.close();
    } finally {
      await store?.close();
    }
  }
}

function providerLine(p: HostStatus["providers"][number]): string {
  const families = Object.entries(p.families)
    .map(([f, s]) => `${f} ${s}`)
    .join(", ");
  const outcomes =
    p.outcomes === undefined
      ? ""
      : `; runs ${Object.entries(p.outcomes)
          .map(([k, n]) => `${k} ${n}`)
          .join(", ")}`;
  const quarantined = p.health.quarantined ? ", QUARANTINED" : "";
  return (
    `  ${inert(p.id)}@${inert(p.version)}: ${p.state}; ${families}; ${p.health.consecutiveFailures} consecutive failures${quarantined}` +
    `${outcomes}; restarts ${p.health.restarts}, timeouts ${p.timeouts}; p50 ${p.latency.p50Ms ?? "-"} ms, p95 ${p.latency.p95Ms ?? "-"} ms`
  );
}

/** `asp status`: what this installation is, whether its trusted policy loads, and provider health from the store. */
export function registerStatus(program: Command, ctx: CliContext): void {
  program
    .command("status")
    .description(
      "show the toolkit version, schemas, trusted policy, store and per-provider health (never launches a provider)",
    )
    .option("--policy <path>", "trusted policy file to validate when there is no host configuration", "asp.policy.json")
    .option(
      "--store <path>",
      "durable store directory (or postgres:// URL) when there is no host configuration",
      ".asp",
    )
    .option("--config <path>", `${CONFIG_OPTION_HELP}: show per-provider health from the store when one is found`)
    .action(async (options: { policy: string; store: string; config?: string }) => {
      const configPath = findHostConfig(ctx, options.config)?.path ?? null;
      const config = configPath === null ? null : readHostConfig(ctx, configPath);
      // A base-revision policy is read through git from the repository `status` runs in.
      const configured = config?.policy ?? resolve(ctx.io.cwd, options.policy);
      const policyPath =
        typeof configured === "string" ? configured : `git ${configured.git}:${configured.path} (of ${ctx.io.cwd})`;
      const storePath =
        config?.store ?? (isPostgresUrl(options.store) ? options.store : resolve(ctx.io.cwd, options.store));
      const policy =
        typeof configured !== "string" || existsSync(configured)
          ? await readPolicy(policyPath, () => (config === null ? policyPath : trustedPolicy(config, ctx.io.cwd)))
          : null;
      let host: StatusReport["host"] = {
        composed: false,
        note: "no host configuration (--config, ASP_HOST_CONFIG, ~/.config/asp/host.json, /etc/asp/host.json): provider health is not shown",
      };
      if (config !== null && configPath !== null) {
        host =
          policy?.valid === true
            ? {
                composed: true,
                config: configPath,
                status: await storedStatus(ctx, config, ctx.io.cwd),
              }
            : { composed: false, note: "the trusted policy is missing or does not load: provider health is not shown" };
      }
      const report: StatusReport = {
        cli: { version: cliVersion(), node: process.version, platform: `${process.platform}-${process.arch}` },
        contracts: { schemas: SCHEMA_NAMES.length },
        policy,
        // A database store is shown with its credentials redacted; it exists once migrated.
        store: { path: redactStoreLocation(storePath), exists: isPostgresUrl(storePath) || existsSync(storePath) },
        host,
      };
      const lines = [
        `asp ${report.cli.version} (node ${report.cli.node}, ${report.cli.platform})`,
        `contracts: ${report.contracts.schemas} schemas`,
        report.policy === null
          ? `policy:    none at ${policyPath}`
          : report.policy.valid
            ? `policy:    ${report.policy.path} valid (${report.policy.apiVersion}) ${report.policy.digest}`
            : `policy:    ${report.policy.path} INVALID\n${report.policy.errors.map((e) => `  ${e.code} ${inert(e.pointer || "/")}: ${inert(e.message)}`).join("\n")}`,
        `store:     ${report.store.path} ${report.store.exists ? "present" : "not created yet"}`,
        ...(report.host.composed
          ? [
              `host:      ${report.host.status.hostVersion}, ${report.host.status.providers.length} providers (health from the store; none launched)`,
              ...report.host.status.providers.map(providerLine),
            ]
          : [`host:      ${report.host.note}`]),
      ];
      ctx.print(lines.join("\n"), report);
      if (report.policy !== null && !report.policy.valid) ctx.setExit(EXIT.usage);
    });
}

/**
 * `asp quarantine reset ID`: lift a provider's quarantine in the configured store (host §8), once
 * its cause is gone. Composes the host without launching a provider, records the reset (by
 * `cli:<user>`) with the cleared health, and prints what it did. A server holding the store
 * answers `POST /api/v1/providers/{id}/quarantine/reset` instead.
 */
export function registerQuarantine(program: Command, ctx: CliContext): void {
  const quarantine = program.command("quarantine").description("lift a provider's quarantine (host §8)");
  quarantine
    .command("reset <provider-id>")
    .description(
      "lift the provider's quarantine once its cause is gone: recorded in the store, and it launches again on the next run",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .action(async (id: string, flags: { config?: string; wait?: string }) => {
      const config = readHostConfig(ctx, flags.config);
      const store = await openForWriting(ctx, "quarantine reset", config.store, parseWait(flags.wait));
      try {
        const host = await hostFromConfig(ctx, config, { store, warm: false });
        try {
          let who = "unknown";
          try {
            who = userInfo().username;
          } catch {
            // No user name on this system: recorded as unknown.
          }
          const reset = await host.resetQuarantine(id, `cli:${who}`);
          const text = reset.lifted
            ? `${inert(id)}: quarantine lifted (cleared ${reset.clearedFailures} consecutive failures, recorded at seq ${reset.seq}); it launches again on the next run`
            : `${inert(id)}: not quarantined; nothing changed`;
          ctx.print(text, reset);
        } finally {
          await host.close();
        }
      } finally {
        await store.close();
      }
    });
}
