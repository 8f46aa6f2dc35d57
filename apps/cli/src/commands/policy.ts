import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { CALL_SITES } from "@asp/contracts";
import {
  type ActivePolicy,
  applyFloor,
  assessPolicyChange,
  failPolicyTable,
  type PolicyChangeAssessment,
  PolicyError,
  requiredAssurance,
  requiredRequirements,
  validatePolicy,
} from "@asp/policy";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert as t } from "../terminal.js";

function readText(cwd: string, file: string): string {
  try {
    return readFileSync(resolve(cwd, file), "utf8");
  } catch (error) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `cannot read policy ${file}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
      {
        cause: error,
        data: { path: file },
      },
    );
  }
}

/**
 * Parse a policy file given on the command line. Invalid policy throws the PolicyError of the
 * first problem (exit 64); in human mode every problem is listed on stderr first, so one run
 * shows all of them (under --json they are in the error's `data.errors`).
 */
function load(ctx: CliContext, file: string): ActivePolicy {
  const result = validatePolicy(readText(ctx.io.cwd, file), {
    origin: { kind: "file", path: resolve(ctx.io.cwd, file) },
    what: `policy ${file}`,
  });
  if (result.ok) return result.policy;
  const first = result.problems[0];
  if (!ctx.json()) {
    ctx.io.stderr(`${t(file)}: ${result.problems.length} problem${result.problems.length > 1 ? "s" : ""}\n`);
    for (const p of result.problems) ctx.io.stderr(`  ${t(p.pointer || "/")}  ${t(p.code)}  ${t(p.message)}\n`);
  }
  throw new PolicyError(
    first?.code ?? "ASP_POLICY_INVALID_VALUE",
    `policy ${file} is invalid: ${first?.pointer || "/"} ${first?.message ?? ""}`.trim(),
    { data: { path: file, pointer: first?.pointer ?? "", errors: result.problems } },
  );
}

/** What `asp policy validate --json` prints. */
export interface PolicyValidateReport {
  readonly path: string;
  readonly valid: true;
  readonly apiVersion: string;
  readonly digest: string;
  readonly requirements: Readonly<Record<string, ReadonlyArray<string>>>;
  readonly providers: number;
  readonly grants: ReadonlyArray<{
    provider: string;
    version: string;
    requirement: string;
    callSites: ReadonlyArray<string>;
  }>;
  readonly assurance: Readonly<Record<string, string>>;
  readonly failPolicy: ReturnType<typeof failPolicyTable>;
}

function validateReport(file: string, policy: ActivePolicy): PolicyValidateReport {
  const doc = policy.document;
  return {
    path: file,
    valid: true,
    apiVersion: doc.apiVersion,
    digest: policy.digest,
    requirements: Object.fromEntries(CALL_SITES.map((s) => [s, requiredRequirements(policy, s).map((r) => r.id)])),
    providers: doc.providers.length,
    grants: doc.grants.map((g) => ({
      provider: g.provider,
      version: g.version,
      requirement: g.requirement,
      callSites: g.callSites,
    })),
    assurance: Object.fromEntries(CALL_SITES.map((s) => [s, requiredAssurance(policy, s)])),
    failPolicy: failPolicyTable(policy),
  };
}

function formatValidate(r: PolicyValidateReport): string {
  const lines = [`${t(r.path)}: valid ${t(r.apiVersion)}`, `digest       ${t(r.digest)}`];
  for (const site of CALL_SITES) {
    const ids = r.requirements[site] ?? [];
    lines.push(
      `${site.padEnd(12)} requires ${ids.length === 0 ? "nothing" : ids.map(t).join(", ")}; assurance ${t(r.assurance[site] ?? "")}`,
    );
  }
  lines.push(`providers    ${r.providers} pinned, ${r.grants.length} grant${r.grants.length === 1 ? "" : "s"}`);
  for (const g of r.grants)
    lines.push(`  ${t(g.provider)}@${t(g.version)} -> ${t(g.requirement)} at ${g.callSites.map(t).join(", ")}`);
  if (r.grants.length === 0) lines.push("  no grants: no provider can satisfy a required gate (indeterminate)");
  return lines.join("\n");
}

function formatDiff(baseFile: string, candidateFile: string, r: PolicyChangeAssessment): string {
  // The candidate policy is the change's own file: every field it controls is made inert.
  const lines = [
    `base       ${t(r.base)}  ${t(baseFile)}`,
    `candidate  ${t(r.candidate)}  ${t(candidateFile)}  (pending)`,
    "",
  ];
  if (r.attempts.length === 0) lines.push("self-authorization attempts: none");
  else {
    lines.push(`self-authorization attempts (${r.attempts.length}):`);
    for (const a of r.attempts)
      lines.push(`  ${t(a.kind).padEnd(28)} ${t(a.document)} ${t(a.pointer)}  ${t(a.detail)}`);
  }
  const other = r.changes.filter((c) => !c.selfAuthorization);
  lines.push("", other.length === 0 ? "other changes: none" : `other changes (${other.length}):`);
  for (const c of other)
    lines.push(`  ${t(c.change).padEnd(8)} ${t(c.section)} ${t(c.key)}  (${t(c.document)} ${t(c.pointer)})`);
  lines.push(
    "",
    r.selfAuthorizing
      ? "result: the candidate self-authorizes; evaluated under the base policy it degrades coverage (policy-self-authorization) and a gate is indeterminate or deny"
      : "result: no self-authorization; the candidate can take effect once it is the base policy",
  );
  return lines.join("\n");
}

/** `asp policy validate|digest|diff`: check trusted policy files and what a candidate changes. */
export function registerPolicy(program: Command, ctx: CliContext): void {
  const policy = program.command("policy").description("validate trusted policy, print its digest, diff a candidate");
  policy
    .command("validate")
    .description("validate a policy file and summarize what it requires and grants (exit 64 when invalid)")
    .argument("<file>", "policy JSON file")
    .action((file: string) => {
      const report = validateReport(file, load(ctx, file));
      ctx.print(formatValidate(report), report);
    });
  policy
    .command("digest")
    .description("print the policy digest (sha256 of the canonical document) of a valid policy file")
    .argument("<file>", "policy JSON file")
    .action((file: string) => {
      const active = load(ctx, file);
      ctx.print(`${t(active.digest)}  ${t(file)}`, { path: file, digest: active.digest });
    });
  policy
    .command("diff")
    .description(
      "list every self-authorization attempt and other change of CANDIDATE against BASE (exit 1 when it self-authorizes)",
    )
    .argument("<base>", "the trusted base policy (e.g. the target branch's)")
    .argument("<candidate>", "the candidate policy (e.g. the changeset's)")
    .option("--floor <file>", "an organization floor policy that tightens the base")
    .action((baseFile: string, candidateFile: string, options: { floor?: string }) => {
      const base = load(ctx, baseFile);
      const deciding = options.floor === undefined ? base : applyFloor(base, load(ctx, options.floor));
      const result = assessPolicyChange(deciding, load(ctx, candidateFile));
      ctx.print(formatDiff(baseFile, candidateFile, result), {
        base: { path: baseFile, digest: result.base },
        candidate: { path: candidateFile, digest: result.candidate, status: result.status },
        ...(options.floor === undefined ? {} : { floor: options.floor }),
        selfAuthorizing: result.selfAuthorizing,
        attempts: result.attempts,
        changes: result.changes,
        degraded: result.degraded,
      });
      ctx.setExit(result.selfAuthorizing ? EXIT.deny : EXIT.ok);
    });
}
