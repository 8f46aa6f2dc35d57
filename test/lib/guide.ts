import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, normalize } from "node:path";

/**
 * Guides as tests (issue 18 item 6): a guide in `docs/` is run exactly as a reader would follow it.
 *
 * Fenced blocks whose info string carries one of these words are steps; every other block is prose:
 *
 * - ```` ```sh run ```` — the block runs in `bash -eo pipefail` in the guide's folder. Attributes:
 *   `exit=N` (expected exit status, default 0), `contains=WORD` (stdout+stderr must contain it;
 *   `_` stands for a space), `cwd=SUB` (a sub-folder of the guide's folder).
 * - ```` ```ts file=PATH ```` (any language) — the block's text is written to `PATH`, relative to the
 *   guide's folder (created with its parents; an absolute or escaping path is refused).
 *
 * Example:
 *
 * ````md
 * ```json file=asp.host.json
 * { "plugins": "./plugins" }
 * ```
 * ```sh run exit=1 contains=DENY
 * npx asp gate --base HEAD~1
 * ```
 * ````
 */
export interface GuideStep {
  readonly kind: "run" | "file";
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly text: string;
  readonly attrs: Readonly<Record<string, string>>;
}

/** Parse the steps of a guide (markdown text). */
export function guideSteps(markdown: string): GuideStep[] {
  const steps: GuideStep[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(lines[i] ?? "");
    if (open === null) continue;
    const [, indent = "", fence = "```", info = ""] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] ?? "";
      if (line.trimStart().startsWith(fence) && line.trim() === fence.trim()) break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line);
    }
    const words = info.trim().split(/\s+/).filter(Boolean);
    const attrs: Record<string, string> = {};
    for (const w of words.slice(1)) {
      const eq = w.indexOf("=");
      if (eq > 0) attrs[w.slice(0, eq)] = w.slice(eq + 1);
      else attrs[w] = "";
    }
    const text = `${body.join("\n")}\n`;
    if ("run" in attrs) steps.push({ kind: "run", line: i + 1, text, attrs });
    else if (attrs.file !== undefined) steps.push({ kind: "file", line: i + 1, text, attrs });
    i = j;
  }
  return steps;
}

/** What one run step printed. */
export interface StepOutcome {
  readonly step: GuideStep;
  readonly status: number | null;
  readonly output: string;
}

/** Options of {@link runGuide}. */
export interface RunGuideOptions {
  /** The folder the guide runs in (a fresh temp folder). */
  readonly cwd: string;
  /** Environment of every command (default: this process's, without `npm_*` variables). */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * Rewrite a command block before it runs, e.g. to install the packed tarballs in place of the
   * registry versions a reader would install. Keep it narrow and say so in the test.
   */
  readonly rewrite?: (command: string) => string;
  /** Per step (default 5 minutes). */
  readonly timeoutMs?: number;
  /** Called after each step (progress for long guides). */
  readonly onStep?: (outcome: StepOutcome) => void;
}

/**
 * Run every step of the guide at `path`, in order, in `options.cwd`. Throws at the first step
 * whose exit status or output is not what the guide says, naming the guide's line and the output.
 */
export function runGuide(path: string, options: RunGuideOptions): StepOutcome[] {
  const steps = guideSteps(readFileSync(path, "utf8"));
  if (steps.length === 0) throw new Error(`${path}: no runnable steps (\`sh run\` / \`file=\` blocks)`);
  const env = options.env ?? Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  const outcomes: StepOutcome[] = [];
  for (const step of steps) {
    const where = `${path}:${step.line}`;
    if (step.kind === "file") {
      const rel = step.attrs.file ?? "";
      const target = normalize(join(options.cwd, rel));
      if (rel === "" || isAbsolute(rel) || !target.startsWith(`${normalize(options.cwd)}/`)) {
        throw new Error(`${where}: file=${rel} must be a relative path inside the guide's folder`);
      }
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, step.text);
      continue;
    }
    const command = options.rewrite ? options.rewrite(step.text) : step.text;
    const cwd = step.attrs.cwd ? join(options.cwd, step.attrs.cwd) : options.cwd;
    const r = spawnSync("bash", ["-eo", "pipefail", "-c", command], {
      cwd,
      env,
      encoding: "utf8",
      timeout: options.timeoutMs ?? 300_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const output = `${r.stdout ?? ""}${r.stderr ?? ""}`;
    const outcome: StepOutcome = { step, status: r.status, output };
    outcomes.push(outcome);
    options.onStep?.(outcome);
    const expectedExit = Number(step.attrs.exit ?? "0");
    if (r.status !== expectedExit) {
      throw new Error(
        `${where}: exit ${String(r.status)}${r.signal ? ` (${r.signal})` : ""}, the guide expects ${expectedExit}\n$ ${command}\n${output.slice(-8000)}`,
      );
    }
    const want = step.attrs.contains?.replaceAll("_", " ");
    if (want !== undefined && !output.includes(want)) {
      throw new Error(`${where}: output lacks "${want}"\n$ ${command}\n${output.slice(-8000)}`);
    }
  }
  return outcomes;
}
