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

/**
 * The `conformance` object to pin next to the provider's `providers[]` entry in trusted policy
 * (docs/policy.md "Conformance results"), when the report is bound to a measured digest.
 */
function pinText(report: ConformanceReport): string {
  if (report.subjectDigest === null) return "";
  const conformance = {
    result: report.passed ? "pass" : "fail",
    suite: report.suite,
    subjectDigest: report.subjectDigest,
    digest: report.digest,
  };
  return `\npin in trusted policy, in the providers[] entry whose digest is ${report.subjectDigest}:\n  "conformance": ${JSON.stringify(conformance)}`;
}

/** `asp conformance [--plugin DIR | --root DIR] -- CMD ARGS...`: run the provider protocol suite. */
export function registerConformance(program: Command, ctx: CliContext): void {
  program
    .command("conformance")
    .description("launch a provider and run the protocol conformance suite against it (exit 1 on any failure)")
    .argument("[command...]", "the provider command after --, e.g. -- node plugin/main.mjs")
    .option("--plugin <dir>", "test a provider plugin folder: launch its entry and bind its tree digest")
    .option(
      "--root <dir>",
      "bind the tree digest of a configured provider's root folder (its manifest's root) to the report; give the command after --",
    )
    .option("--timeout <ms>", "bound of each step in milliseconds", "5000")
    .action(async (command: string[], options: { plugin?: string; root?: string; timeout: string }) => {
      const timeoutMs = Number(options.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new UsageError("ASP_CLI_USAGE", `--timeout must be a positive integer, got ${options.timeout}`);
      }
      let argv = command;
      let cwd = ctx.io.cwd;
      let subjectDigest: string | undefined;
      let subjectDir: string | undefined;
      if (options.plugin !== undefined && options.root !== undefined) {
        throw new UsageError("ASP_CLI_USAGE", "give --plugin or --root, not both");
      }
      if (options.root !== undefined) {
        const d = digestPlugin(resolve(ctx.io.cwd, options.root));
        subjectDigest = d.digest;
        subjectDir = d.dir;
      }
      if (options.plugin !== undefined) {
        const d = digestPlugin(resolve(ctx.io.cwd, options.plugin));
        const { manifest, entryPath } = readPluginManifest(d.dir);
        if (manifest.kind !== "provider") {
          throw new UsageError("ASP_CLI_BAD_INPUT", `${manifest.id} is a ${manifest.kind}, not a provider`);
        }
        subjectDigest = d.digest;
        subjectDir = d.dir;
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
      // The result is bound to what was measured before the run: a provider that rewrote its own
      // folder while it was tested has no result to pin (issue 32: conformance bound to the digest).
      if (subjectDir !== undefined && digestPlugin(subjectDir).digest !== subjectDigest) {
        throw new UsageError(
          "ASP_CLI_BAD_INPUT",
          `${subjectDir} changed while it was tested: its digest is no longer ${subjectDigest}; run asp conformance again`,
        );
      }
      ctx.print(`${formatReport(inertReport(report))}${pinText(report)}`, report);
      if (!report.passed) ctx.setExit(EXIT.deny);
    });
}
