import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  type ConfigurationReport,
  configurationReport,
  formatSource,
  type ResolveConfigurationInputs,
  resolveConfiguration,
} from "@asp/rollout";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { inert as t } from "../terminal.js";

/** Options of `asp config show`. */
interface ShowOptions {
  readonly deployment?: string;
  readonly project?: string;
  readonly frame?: string;
  readonly legacyReviewAuto?: string;
  readonly rootFrame: string;
  readonly imported?: boolean;
  readonly freshContinuation?: boolean;
  readonly envAlias?: string;
}

function readJson(cwd: string, path: string, what: string): unknown {
  const full = resolve(cwd, path);
  try {
    return JSON.parse(readFileSync(full, "utf8"));
  } catch (error) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `cannot read the ${what} configuration ${path} as JSON: ${(error as Error).message}`,
      {
        cause: error,
        data: { path, scope: what },
      },
    );
  }
}

function pad(text: string, width: number): string {
  return text.length >= width ? `${text} ` : text.padEnd(width);
}

/**
 * The human rendering of a configuration report: one line per flag (on or off, built or not,
 * and its source), selection value and budget.
 */
export function formatReport(report: ConfigurationReport): string {
  const lines: string[] = [
    "Stage flags (each independent, default off; only a built stage can be turned on)",
    `  built: ${report.built_stages.map(t).join(", ")}`,
  ];
  for (const [flag, state] of Object.entries(report.stages)) {
    lines.push(
      `  ${pad(t(flag), 34)}${pad(state.enabled ? "on" : "off", 5)}${pad(state.built ? "built" : "not built", 11)}${t(formatSource(state.source))}`,
    );
  }
  const s = report.selection;
  lines.push("", `Selection (winning source: ${t(s.source)})`);
  for (const key of ["preset", "result_review_mode", "approvals_reviewer"] as const) {
    lines.push(`  ${pad(key, 22)}${pad(t(s[key].value), 13)}${t(formatSource(s[key].source))}`);
  }
  for (const n of s.normalizations) lines.push(`  normalized: ${t(n.key)} ${t(n.from)} -> ${t(n.to)} (preset on)`);
  lines.push("", "Budgets (value / ceiling; consumed only while an owning stage is on)");
  for (const [limit, b] of Object.entries(report.budgets)) {
    const value = `${b.value} / ${b.ceiling}${b.unit === "seconds" ? " s" : b.unit === "multiplier" ? "x" : ""}`;
    lines.push(
      `  ${pad(t(limit), 35)}${pad(value, 14)}${pad(b.active ? "active" : "inactive", 9)}${t(formatSource(b.source))}`,
    );
  }
  return lines.join("\n");
}

/**
 * `asp config show`: the resolved Auto Mode rollout configuration, each value with its source and
 * which stages are built. A refused configuration (an unbuilt stage turned on is
 * `ASP_ROLLOUT_STAGE_NOT_BUILT`, whose message ends with the step that turns it off) prints the
 * coded error and exits 64, like every input error.
 */
export function registerConfig(program: Command, ctx: CliContext): void {
  const config = program.command("config").description("inspect the Auto Mode rollout configuration");
  config
    .command("show")
    .description(
      "print every stage flag (and whether its stage is built), the Auto Mode selection and every budget, with the source of each value",
    )
    .option("--deployment <file>", "trusted deployment configuration (JSON, AutoModeConfig shape)")
    .option("--project <file>", "project configuration (JSON; may not set stages)")
    .option("--frame <file>", "frame configuration (JSON; may not set stages)")
    .option(
      "--legacy-review-auto <bool>",
      "the legacy review:auto:<root_frame_id> value (true/false, 1/0, on/off, yes/no)",
    )
    .option("--root-frame <id>", "root frame id naming the legacy review:auto setting", "cli")
    .option("--imported", "resolve for an imported (quarantined) session")
    .option("--fresh-continuation", "the imported session has an explicit fresh continuation")
    .option("--env-alias <prefix>", "host alias prefix for the OPENAI4S_ variables (e.g. ASP_)")
    .action((options: ShowOptions) => {
      const cwd = ctx.io.cwd;
      const inputs: ResolveConfigurationInputs = {
        env: ctx.io.env,
        ...(options.envAlias === undefined ? {} : { aliasPrefix: options.envAlias }),
        ...(options.deployment === undefined
          ? {}
          : { deployment: readJson(cwd, options.deployment, "deployment"), deploymentOrigin: options.deployment }),
        ...(options.project === undefined
          ? {}
          : { project: readJson(cwd, options.project, "project"), projectOrigin: options.project }),
        ...(options.frame === undefined
          ? {}
          : { frame: readJson(cwd, options.frame, "frame"), frameOrigin: options.frame }),
        ...(options.legacyReviewAuto === undefined
          ? {}
          : { legacyReviewAuto: { rootFrameId: options.rootFrame, value: options.legacyReviewAuto } }),
        ...(options.imported === true
          ? { session: { imported: true, freshContinuation: options.freshContinuation === true } }
          : {}),
      };
      const report = configurationReport(resolveConfiguration(inputs));
      ctx.print(formatReport(report), report);
    });
}
