import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { BUDGET_LIMITS, STAGE_FLAGS } from "@asp/contracts";
import { BUILT_STAGES } from "@asp/rollout";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/exit-codes.js";
import { runCli } from "../src/main.js";

type Env = Record<string, string | undefined>;

async function run(argv: string[], env: Env = {}, cwd = process.cwd()) {
  let stdout = "";
  let stderr = "";
  const code = await runCli(argv, {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    cwd,
    env,
  });
  return { code, stdout, stderr };
}

function workdir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-config-"));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

describe("asp config show", () => {
  describe("when nothing is configured", () => {
    it("prints every flag off, the built-in selection and every budget at its ceiling", async () => {
      const r = await run(["config", "show", "--json"]);
      expect(r.code).toBe(EXIT.ok);
      const report = JSON.parse(r.stdout);
      expect(Object.keys(report.stages)).toEqual([...STAGE_FLAGS]);
      expect(report.built_stages).toEqual([
        "stage2_auto_run_storage",
        "stage3_scientific_review_shadow",
        "stage4_review_completion_gate",
        "stage5_auto_repair",
        "stage6_guardian_shadow",
        "stage7_guardian_enforcement",
        "stage8_loop_circuits",
        "stage9_safe_repair_checkpoint",
      ]);
      for (const flag of STAGE_FLAGS) expect(report.stages[flag].built).toBe(BUILT_STAGES.includes(flag));
      expect(Object.keys(report.budgets)).toEqual([...BUDGET_LIMITS]);
      expect(report.selection).toMatchObject({ source: "built_in", preset: { value: "off" } });
      expect(report.budgets.wall_time_s).toMatchObject({ value: 900, source: { kind: "built_in" } });
    });

    it("prints a human table by default", async () => {
      const r = await run(["config", "show"]);
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("stage12_restart_recovery");
      expect(r.stdout).toContain(
        "  built: stage2_auto_run_storage, stage3_scientific_review_shadow, stage4_review_completion_gate, stage5_auto_repair, stage6_guardian_shadow, stage7_guardian_enforcement, stage8_loop_circuits, stage9_safe_repair_checkpoint",
      );
      expect(r.stdout).toMatch(/^ {2}stage2_auto_run_storage +off +built +built-in default$/m);
      expect(r.stdout).toMatch(/^ {2}stage7_guardian_enforcement +off +built +built-in default$/m);
      expect(r.stdout).toMatch(/^ {2}stage10_effect_reconciliation +off +not built +built-in default$/m);
      expect(r.stdout).toContain("Selection (winning source: built_in)");
      expect(r.stdout).toMatch(/guardian_window_size\s+50 \/ 50/);
    });
  });

  describe("when the environment and files configure values", () => {
    it("reports each value with the source it came from", async () => {
      const cwd = workdir({
        "deploy.json": { preset: "on", stages: { stage4_review_completion_gate: true }, budgets: { wall_time_s: 600 } },
        "project.json": { budgets: { max_extra_cells: 10 } },
        "frame.json": { result_review_mode: "review_only", approvals_reviewer: "auto_review" },
      });
      const r = await run(
        [
          "config",
          "show",
          "--deployment",
          "deploy.json",
          "--project",
          "project.json",
          "--frame",
          "frame.json",
          "--json",
        ],
        { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1", OPENAI4S_AUTO_MAX_REPAIR_ROUNDS: "1" },
        cwd,
      );
      expect(r.code).toBe(EXIT.ok);
      const report = JSON.parse(r.stdout);
      expect(report.stages.stage2_auto_run_storage).toMatchObject({
        enabled: true,
        source: { kind: "env", key: "OPENAI4S_STAGE2_AUTO_RUN_STORAGE" },
      });
      expect(report.stages.stage4_review_completion_gate.source).toEqual({
        kind: "deployment",
        key: "stages.stage4_review_completion_gate",
        origin: "deploy.json",
      });
      expect(report.selection).toMatchObject({
        source: "frame",
        preset: { value: "off" },
        result_review_mode: { value: "review_only", source: { kind: "frame", origin: "frame.json" } },
      });
      expect(report.budgets.wall_time_s.source).toMatchObject({ kind: "deployment", origin: "deploy.json" });
      expect(report.budgets.max_repair_rounds).toMatchObject({ value: 1, source: { kind: "env" } });
      expect(report.budgets.max_extra_cells).toMatchObject({ value: 10, source: { kind: "project" } });
      expect(report.budgets.wall_time_s.active).toBe(true);
    });

    it("AM.select.4 maps the legacy review:auto boolean to review_only", async () => {
      const r = await run(["config", "show", "--legacy-review-auto", "true", "--root-frame", "f9", "--json"]);
      const report = JSON.parse(r.stdout);
      expect(report.selection).toMatchObject({
        source: "legacy_review_auto",
        result_review_mode: { value: "review_only", source: { key: "review:auto:f9" } },
        approvals_reviewer: { value: "user" },
      });
    });

    it("AM.select.1 forces everything off for an imported session", async () => {
      const cwd = workdir({ "frame.json": { preset: "on" } });
      const r = await run(["config", "show", "--frame", "frame.json", "--imported", "--json"], {}, cwd);
      expect(JSON.parse(r.stdout).selection).toMatchObject({ source: "imported_quarantine", preset: { value: "off" } });
      const fresh = await run(
        ["config", "show", "--frame", "frame.json", "--imported", "--fresh-continuation", "--json"],
        {},
        cwd,
      );
      expect(JSON.parse(fresh.stdout).selection).toMatchObject({ source: "frame", preset: { value: "on" } });
    });

    it("reports a preset normalization in both outputs", async () => {
      const cwd = workdir({ "project.json": { preset: "on", approvals_reviewer: "user" } });
      const json = JSON.parse((await run(["config", "show", "--project", "project.json", "--json"], {}, cwd)).stdout);
      expect(json.selection.normalizations).toEqual([{ key: "approvals_reviewer", from: "user", to: "auto_review" }]);
      const human = await run(["config", "show", "--project", "project.json"], {}, cwd);
      expect(human.stdout).toContain("normalized: approvals_reviewer user -> auto_review");
    });

    it("reads a host alias prefix", async () => {
      const r = await run(["config", "show", "--env-alias", "ASP_", "--json"], {
        ASP_STAGE8_LOOP_CIRCUITS: "on",
      });
      expect(JSON.parse(r.stdout).stages.stage8_loop_circuits).toMatchObject({ enabled: true, built: true });
    });

    it("accepts an unbuilt stage set off, and says it is not built", async () => {
      const cwd = workdir({ "deploy.json": { stages: { stage11_portable_runs: false } } });
      const r = await run(
        ["config", "show", "--deployment", "deploy.json", "--json"],
        { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "0" },
        cwd,
      );
      expect(r.code).toBe(EXIT.ok);
      const report = JSON.parse(r.stdout);
      expect(report.stages.stage11_portable_runs).toMatchObject({
        enabled: false,
        built: false,
        source: { kind: "deployment", origin: "deploy.json" },
      });
      expect(report.stages.stage10_effect_reconciliation).toMatchObject({
        enabled: false,
        built: false,
        source: { kind: "env" },
      });
    });
  });

  describe("when the usage is bad", () => {
    it("exits 64 on an unknown option and on a missing subcommand", async () => {
      const unknown = await run(["config", "show", "--nope", "--json"]);
      expect(unknown.code).toBe(EXIT.usage);
      expect(JSON.parse(unknown.stdout).error.code).toBe("ASP_CLI_USAGE");
      expect((await run(["config"])).code).toBe(EXIT.usage);
    });
  });

  describe("when the configuration is bad", () => {
    it.each([
      [{ OPENAI4S_STAGE1_TRUSTED_DELIVERY: "maybe" }, "ASP_ROLLOUT_BAD_BOOLEAN"],
      [{ OPENAI4S_STAGE1_TRUSTED_DELIVERY: "" }, "ASP_ROLLOUT_EMPTY_VALUE"],
      [{ OPENAI4S_AUTO_MAX_REVIEW_ROUNDS: "5" }, "ASP_ROLLOUT_BUDGET_LOOSENED"],
      [{ OPENAI4S_AUTO_GUARDIAN_WINDOW_SIZE: "20" }, "ASP_ROLLOUT_WINDOW_FIXED"],
      [{ OPENAI4S_AUTO_WALL_TIMEOUT: "1" }, "ASP_ROLLOUT_UNKNOWN_KEY"],
    ])("exits 64 with `asp: CODE: message` for %j", async (env, code) => {
      const r = await run(["config", "show"], env);
      expect(r.code).toBe(EXIT.usage);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(new RegExp(`^asp: ${code}: `));
    });

    it("prints a JSON error naming the key and source under --json", async () => {
      const cwd = workdir({ "project.json": { result_review_mode: "autofix" } });
      const r = await run(["config", "show", "--project", "project.json", "--json"], {}, cwd);
      expect(r.code).toBe(EXIT.usage);
      expect(JSON.parse(r.stdout).error).toMatchObject({
        code: "ASP_ROLLOUT_UNKNOWN_VALUE",
        data: { key: "result_review_mode", source: "project" },
      });
    });

    it("exits 64 with ASP_CLI_BAD_INPUT for an unreadable file", async () => {
      const cwd = workdir({ "deploy.json": "{ nope" });
      const r = await run(["config", "show", "--deployment", "deploy.json", "--json"], {}, cwd);
      expect(r.code).toBe(EXIT.usage);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_CLI_BAD_INPUT");
      const missing = await run(["config", "show", "--deployment", "missing.json"], {}, cwd);
      expect(missing.code).toBe(EXIT.usage);
      expect(missing.stderr).toMatch(/^asp: ASP_CLI_BAD_INPUT: /);
    });

    // issue 25: a stage that is not built, turned on, would show "on" and change nothing.
    it("refuses an unbuilt stage turned on by a variable with the step that turns it off", async () => {
      const r = await run(["config", "show"], { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "1" });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/^asp: ASP_ROLLOUT_STAGE_NOT_BUILT: stage10_effect_reconciliation /);
      expect(r.stderr).toContain("Turn it off: unset OPENAI4S_STAGE10_EFFECT_RECONCILIATION\n");
      const json = await run(["config", "show", "--json"], { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "1" });
      expect(json.code).toBe(EXIT.usage);
      expect(JSON.parse(json.stdout).error).toMatchObject({
        code: "ASP_ROLLOUT_STAGE_NOT_BUILT",
        data: {
          key: "OPENAI4S_STAGE10_EFFECT_RECONCILIATION",
          source: "env",
          stage: "stage10_effect_reconciliation",
          built: [...BUILT_STAGES],
        },
      });
    });

    it("refuses an unbuilt stage turned on by the deployment file or a host alias, naming where", async () => {
      const cwd = workdir({
        "deploy.json": { stages: { stage2_auto_run_storage: true, stage11_portable_runs: true } },
      });
      const file = await run(["config", "show", "--deployment", "deploy.json", "--json"], {}, cwd);
      expect(file.code).toBe(EXIT.usage);
      const error = JSON.parse(file.stdout).error;
      expect(error).toMatchObject({
        code: "ASP_ROLLOUT_STAGE_NOT_BUILT",
        data: { key: "stages.stage11_portable_runs", source: "deployment", origin: "deploy.json" },
      });
      expect(error.message).toContain(
        "Turn it off: remove stages.stage11_portable_runs from deploy.json (or set it to false)",
      );
      const alias = await run(["config", "show", "--env-alias", "ASP_"], { ASP_STAGE12_RESTART_RECOVERY: "yes" });
      expect(alias.code).toBe(EXIT.usage);
      expect(alias.stderr).toMatch(
        /^asp: ASP_ROLLOUT_STAGE_NOT_BUILT: .*Turn it off: unset ASP_STAGE12_RESTART_RECOVERY$/m,
      );
    });

    it("refuses stage flags in a project file", async () => {
      const cwd = workdir({ "project.json": { stages: { stage5_auto_repair: true } } });
      const r = await run(["config", "show", "--project", "project.json"], {}, cwd);
      expect(r.code).toBe(EXIT.usage);
      expect(r.stderr).toMatch(/^asp: ASP_ROLLOUT_KEY_NOT_ALLOWED: /);
    });
  });

  describe("when run as the built binary", () => {
    it("prints the resolved configuration from the real process environment", () => {
      const bin = fileURLToPath(new URL("../dist/bin.js", import.meta.url));
      const r = spawnSync(process.execPath, [bin, "config", "show", "--json"], {
        encoding: "utf8",
        env: {
          PATH: process.env.PATH,
          OPENAI4S_STAGE8_LOOP_CIRCUITS: "yes",
          OPENAI4S_AUTO_NO_PROGRESS_TURN_LIMIT: "4",
        },
      });
      expect(r.status).toBe(0);
      const report = JSON.parse(r.stdout);
      expect(report.stages.stage8_loop_circuits).toMatchObject({ enabled: true, source: { kind: "env" } });
      expect(report.budgets.no_progress_turn_limit).toMatchObject({ value: 4, active: true });
      const bad = spawnSync(process.execPath, [bin, "config", "show"], {
        encoding: "utf8",
        env: { PATH: process.env.PATH, OPENAI4S_STAGE8_LOOP_CIRCUITS: "enabled" },
      });
      expect(bad.status).toBe(64);
      expect(bad.stderr).toMatch(/^asp: ASP_ROLLOUT_BAD_BOOLEAN: OPENAI4S_STAGE8_LOOP_CIRCUITS/);
      const unbuilt = spawnSync(process.execPath, [bin, "config", "show"], {
        encoding: "utf8",
        env: { PATH: process.env.PATH, OPENAI4S_STAGE1_TRUSTED_DELIVERY: "1" },
      });
      expect(unbuilt.status).toBe(64);
      expect(unbuilt.stdout).toBe("");
      expect(unbuilt.stderr).toMatch(/^asp: ASP_ROLLOUT_STAGE_NOT_BUILT: stage1_trusted_delivery /);
      expect(unbuilt.stderr).toContain("Turn it off: unset OPENAI4S_STAGE1_TRUSTED_DELIVERY\n");
    });
  });
});
