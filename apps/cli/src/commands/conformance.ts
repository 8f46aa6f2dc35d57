import { resolve } from "node:path";
import { type ConformanceReport, formatReport, runConformance } from "@asp/conformance";
import { digestPlugin, readPluginManifest } from "@asp/plugin-host";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";

/** The report with every field the provider controls (its identity, the check details) made {@link inert}. */
function inertReport(report: ConformanceReport): ConformanceReport {
  return {
    ...report,
    provider:
      report.provider === null ? null : { id: inert(report.provider.id), version: inert(report.provider.version) },
    checks: report.checks.map((c) => ({ ...c, detail: inert(c.detail) })),
  };
}

/** `asp conformance [--plugin DIR] -- CMD ARGS...`: run the provider protocol suite. */
export function registerConformance(program: Command, ctx: CliContext): void {
  program
    .command("conformance")
    .description("launch a provider and run the protocol conformance suite against it (exit 1 on any failure)")
    .argument("[command...]", "the provider command after --, e.g. -- node plugin/main.mjs")
    .option("--plugin <dir>", "test a provider plugin folder: launch its entry and bind its tree digest")
    .option("--timeout <ms>", "bound of each step in milliseconds", "5000")
    .action(async (command: string[], options: { plugin?: string; timeout: string }) => {
      const timeoutMs = Number(options.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new UsageError("ASP_CLI_USAGE", `--timeout must be a positive integer, got ${options.timeout}`);
      }
      let argv = command;
      let cwd = ctx.io.cwd;
      let subjectDigest: string | undefined;
      if (options.plugin !== undefined) {
        const d = digestPlugin(resolve(ctx.io.cwd, options.plugin));
        const { manifest, entryPath } = readPluginManifest(d.dir);
        if (manifest.kind !== "provider") {
          throw new UsageError("ASP_CLI_BAD_INPUT", `${manifest.id} is a ${manifest.kind}, not a provider`);
        }
        subjectDigest = d.digest;
        cwd = d.dir;
        if (argv.length === 0) argv = [process.execPath, entryPath];
      }
      if (argv.length === 0) {
        throw new UsageError(
          "ASP_CLI_USAGE",
          "give the provider command after --, e.g. asp conformance -- node main.mjs",
        );
      }
      const report = await runConformance({
        command: argv,
        cwd,
        env: { PATH: ctx.io.env.PATH ?? process.env.PATH ?? "" },
        timeoutMs,
        ...(subjectDigest === undefined ? {} : { subjectDigest }),
      });
      ctx.print(formatReport(inertReport(report)), report);
      if (!report.passed) ctx.setExit(EXIT.deny);
    });
}
