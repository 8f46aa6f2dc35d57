import { randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  AutoModeError,
  type AutoRunProjection,
  type CompletionArtifact,
  codeFingerprint,
  createAutoRunner,
  createRulesGuardian,
  createScratchWorkspace,
  createScriptedEngine,
  type Engine,
  type EngineScript,
  type EngineStep,
  type Guardian,
  type GuardianDecisionView,
  type GuardianRule,
  guardianFromVerifier,
  guardianMode,
  loadAutoRunProjection,
  modelFingerprint,
  type PermissionClassifier,
  type ReviewerPort,
  readRunFacts,
  runtimeStageFlags,
  scopeReviewContent,
  verifierLaunchOf,
} from "@asp/auto-mode";
import type { HostChecks, Policy, VerifierLaunch } from "@asp/contracts";
import { canonicalize, type Digest, diffTrees, digestBytes, type Store, snapshotWorktree } from "@asp/evidence";
import {
  createTempPluginCache,
  type LoadedVerifier,
  loadPlugins,
  TOKENS as PLUGIN_TOKENS,
  PluginError,
  type PluginPorts,
  readTrustRoots,
  registerPlugins,
  removePluginCache,
} from "@asp/plugin-host";
import { classifyAction } from "@asp/policy";
import { checkFrameId, createFrameSettingsStore, type ResolvedConfiguration, resolveConfiguration } from "@asp/rollout";
import { isPostgresUrl } from "@asp/store-postgres";
import {
  assertTrustedLocations,
  type ComposedHost,
  committedTree,
  createHostChecks,
  type HostConfig,
  type LaunchedVerifier,
  launchSandbox,
  launchVerifier,
  type SandboxSet,
  storeFolders,
  THS_TOKENS,
} from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { requireHostConfig } from "../host-config.js";
import { onInterrupt } from "../interrupt.js";
import { inert as t } from "../terminal.js";
import { CONFIG_OPTION_HELP, readHostConfig, withComposedHost } from "./host.js";
import { openForReading, WAIT_OPTION_HELP } from "./store.js";

/** The file `asp auto run` adds when the repository has no change of its own (the demo's edit). */
export const DEMO_ARTIFACT_PATH = "AUTO-MODE-DEMO.md";
const DEMO_TEXT =
  "# Auto Mode demo\n\nThis file is the scripted engine's built-in, deterministic edit (`asp auto run` with no\nchanges in the worktree). The Reviewer checks it like any candidate file.\n";

/** Exit codes of `asp auto run|show`: 0 verified, 1 completed with issues, 2 any other state. */
export function autoExitCode(projection: AutoRunProjection): number {
  if (projection.state === "verified") return EXIT.ok;
  if (projection.state === "completed_with_issues") return EXIT.deny;
  return EXIT.indeterminate;
}

/** How `asp auto show` names a Repair Run's host check, and the round a repeat was decided by. */
function hostCheckText(
  check: AutoRunProjection["repair_runs"][number]["check"],
  runs: AutoRunProjection["repair_runs"],
): string {
  if (check === undefined) return "";
  const receipt = check.receipt_id === null ? "" : ` (receipt ${t(check.receipt_id)})`;
  const prior = check.repeat_of === undefined ? undefined : runs.find((r) => r.repair_run_id === check.repeat_of);
  const repeat =
    prior === undefined ? "" : `, the same plan round ${prior.round} was denied: not checked again (loop circuit)`;
  return `, host check ${t(check.decision)}${receipt}${repeat}`;
}

/** The human rendering of a projection: user truth, terminal reason, findings, how to reprint it. */
export function renderProjection(p: AutoRunProjection): string {
  const lines = [`${t(p.user_truth)}  (run ${t(p.runId)})`];
  lines.push(`state ${t(p.state ?? "-")}  terminal reason ${t(p.terminal_reason ?? "-")}`);
  if (p.candidate !== null) {
    lines.push(`candidate ${t(p.candidate.candidate_id)} (${t(p.candidate.review_status)})`);
    for (const a of p.candidate.artifact_versions) lines.push(`  artifact ${t(a.artifact_id)} ${t(a.checksum)}`);
  }
  const stop = p.terminal?.stop_reason ?? null;
  const unavailable = p.terminal?.unavailable_reason ?? null;
  if (stop !== null) lines.push(`stop reason ${t(stop)}`);
  if (unavailable !== null) lines.push(`unavailable reason ${t(unavailable)}`);
  // A finding's status is the one its durable cause gives (a review, a Repair Run, the re-review).
  const statuses = new Map(p.finding_statuses.map((s) => [s.finding_id, s]));
  for (const f of p.findings) {
    const s = statuses.get(f.finding_id);
    const status = s === undefined ? t(f.status) : `${t(s.status)}: ${t(s.cause)}`;
    lines.push(
      `${f.material ? "✖" : "·"} ${t(f.severity)} ${t(f.category)} ${t(f.claim)} [${f.evidence_refs.map(t).join(", ")}] (${status})`,
    );
  }
  for (const r of p.review_runs) {
    if (r.reviewer === null) continue;
    lines.push(
      `review ${t(r.review_run_id)} by ${t(r.reviewer.actor_id)} (${r.reviewer.launch === undefined ? "run by the host" : launchText(r.reviewer.launch)}): ${r.attempts.map((a) => t(a.outcome)).join(", ") || "no attempt"}`,
    );
    // What the Reviewer tried that its boundary refused, per attempt (the first few shown).
    for (const a of r.attempts) {
      if (a.boundary === undefined) continue;
      const shown = a.boundary.first.map((b) => `${t(b.kind)}: ${t(b.detail)}`).join("; ");
      const more =
        a.boundary.count > a.boundary.first.length ? ` (+${a.boundary.count - a.boundary.first.length} more)` : "";
      lines.push(`  attempt ${a.attempt} boundary: ${a.boundary.count} refused or failed: ${shown}${more}`);
    }
  }
  for (const r of p.repair_runs) {
    lines.push(
      `repair round ${r.round} ${t(r.outcome ?? "running")} from ${t(r.from_candidate_id)}${r.to_candidate_id === null ? "" : ` to ${t(r.to_candidate_id)}`}, ${r.turns_used} turns, checkpoint ${t(r.checkpoint.checkpoint_id)}, mutation set [${r.mutation_set.map(t).join(", ")}]${hostCheckText(r.check, p.repair_runs)}`,
    );
  }
  for (const g of p.guardian_decisions) lines.push(guardianLine(g));
  if (p.label !== p.user_truth) lines.push(`label ${t(p.label)}`);
  for (const s of p.steps) {
    if (s.phase === "turn") continue;
    const a = s.action;
    const what = a === null ? "" : ` ${t(a.tool)}${a.target === null ? "" : ` ${t(a.target)}`}`;
    const why = s.refusal === null ? "" : ` (${t(s.refusal.code)}: ${t(s.refusal.detail)})`;
    lines.push(`  ${t(s.phase)}${what}${why}`);
  }
  if (p.ledger !== null) {
    const turns = p.steps.filter((s) => s.phase === "turn").length;
    lines.push(
      `ledger: ${turns} turns, ${p.ledger.consumed.extra_tokens} extra tokens, ${p.ledger.consumed.repair_rounds} repair rounds, no-progress circuit ${t(p.ledger.circuits.no_progress)}${p.guardian === "enforce" ? `, ${p.ledger.consumed.guardian_consecutive_denials} consecutive Guardian denials, denial circuit ${t(p.ledger.circuits.guardian_denial)}` : ""}`,
    );
  }
  for (const problem of p.problems) lines.push(`  problem: ${t(problem)}`);
  lines.push(`asp auto show ${t(p.runId)}`);
  return lines.join("\n");
}

/** One Guardian decision: what it judged, what it decided and did, and the audit that records it. */
function guardianLine(g: GuardianDecisionView): string {
  const what = `${t(g.action_class)}${g.target === null ? "" : ` ${t(g.target)}`}`;
  const decided =
    g.decision === null ? `no decision (${t(g.failure ?? "failed")})` : `${t(g.decision)} (risk ${t(g.risk ?? "-")})`;
  const by = g.resolution_actor === null ? "advice only (Stage 6)" : `${t(g.resolution)} by ${t(g.resolution_actor)}`;
  const rationale = g.rationale === null ? "" : `: ${t(g.rationale)}`;
  const launch = g.launch === undefined ? "" : ` (${launchText(g.launch)})`;
  const fenced =
    g.boundary === undefined
      ? ""
      : `, boundary refused ${g.boundary.count} (${g.boundary.first.map((b) => t(b.kind)).join(", ")})`;
  return `guardian step ${g.step_ordinal} ${what}: ${decided}, ${by}${launch}${fenced}, audit ${t(g.audit_id)}${g.capability_id === null ? "" : `, capability ${t(g.capability_id)} used once`}${rationale}`;
}

/** How a verifier's process was launched, in a few words: its mode and the sandbox that confines it. */
function launchText(l: VerifierLaunch): string {
  const where = l.sandbox === null ? "no sandbox" : `sandbox ${t(l.sandbox.id)}`;
  return `${t(l.mode)}, ${where}${l.direct_write ? ", can write the worktree" : ", no worktree write"}`;
}

/**
 * The rollout configuration of a run: the trusted host configuration's `autoMode` (deployment
 * scope) under the `OPENAI4S_*` environment, and the run's `--preset` (frame scope: it selects the
 * product mode, never a stage flag; `on`/`autonomous` force `auto_fix` and `auto_review`).
 * @throws RolloutError any code of `resolveConfiguration` (a preset it does not know included).
 */
export function autoModeConfiguration(
  env: Readonly<Record<string, string | undefined>>,
  config: HostConfig,
  origin: string,
  preset?: string,
  frame?: { readonly id: string; readonly settings: Readonly<Record<string, unknown>> },
): ResolvedConfiguration {
  // The frame's stored settings, with --preset over their preset (both frame scope).
  const settings = { ...(frame?.settings ?? {}), ...(preset === undefined ? {} : { preset }) };
  const frameOrigin =
    frame === undefined || Object.keys(frame.settings).length === 0
      ? "--preset"
      : `frame ${frame.id} settings${preset === undefined ? "" : " and --preset"}`;
  return resolveConfiguration({
    env,
    ...(config.autoMode === null ? {} : { deployment: config.autoMode, deploymentOrigin: origin }),
    ...(Object.keys(settings).length === 0 ? {} : { frame: settings, frameOrigin }),
  });
}

/**
 * A root frame's stored Auto Mode settings (`PATCH /api/v1/frames/{fid}/auto-mode`), read from a
 * private read-only snapshot of the store (a serving host is never blocked); none for a store
 * that does not exist yet.
 * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a frame id outside its grammar.
 */
async function frameSettingsOf(storePath: string, fid: string): Promise<Readonly<Record<string, unknown>>> {
  checkFrameId(fid);
  const store = await openForReading(storePath);
  if (store === null) return {};
  try {
    return (await createFrameSettingsStore(store.log).load(fid))?.settings ?? {};
  } finally {
    await store.close();
  }
}

/**
 * Refuse, before anything is opened, a run the stage flags do not admit, naming the flag.
 * @throws AutoModeError `ASP_AUTO_MODE_STAGE_DISABLED` (stage 2 off; or a Reviewer asked for while
 *   neither review stage is on or `result_review_mode` is `off`).
 */
export function assertStages(resolved: ResolvedConfiguration): void {
  const how = `turn it on in the trusted host configuration ("autoMode": { "stages": { ... } }) or with its OPENAI4S_ variable (docs/host-configuration.md)`;
  if (!resolved.flags.isEnabled("stage2_auto_run_storage")) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_STAGE_DISABLED",
      `Auto Runs need stage2_auto_run_storage, which is off: ${how}`,
      {
        data: { stage: "stage2_auto_run_storage" },
      },
    );
  }
  const review =
    resolved.flags.isEnabled("stage3_scientific_review_shadow") ||
    resolved.flags.isEnabled("stage4_review_completion_gate");
  if (!review) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_STAGE_DISABLED",
      `a Reviewer runs only with stage4_review_completion_gate (or stage3_scientific_review_shadow) on, and both are off: ${how}`,
      { data: { stage: "stage4_review_completion_gate" } },
    );
  }
  const selection = resolved.selection.selection;
  if (selection.result_review_mode === "off") {
    // A --preset decides the frame's mode over "autoMode": advice about the file would not help.
    const step =
      selection.source === "frame"
        ? `--preset ${selection.preset} selects it: pass --preset on instead, or leave --preset out to use "autoMode"`
        : `set "result_review_mode": "review_only" in "autoMode", or pass --preset on (docs/host-configuration.md)`;
    throw new AutoModeError("ASP_AUTO_MODE_STAGE_DISABLED", `result_review_mode is off: ${step}`, {
      data: { stage: "result_review_mode" },
    });
  }
}

/**
 * The next step for a run whose Auto Repair is not `checkpointed`: the preset when the mode is not
 * auto_fix (naming the `--preset` the run was given, if any), else exactly the repair stages that
 * are off. Pure.
 */
export function repairStep(resolved: ResolvedConfiguration): string {
  const selection = resolved.selection.selection;
  if (selection.result_review_mode !== "auto_fix") {
    return selection.source === "frame"
      ? `pass --preset on instead of --preset ${selection.preset}`
      : `pass --preset on (or set "result_review_mode": "auto_fix" in "autoMode")`;
  }
  const off = (["stage5_auto_repair", "stage9_safe_repair_checkpoint"] as const).filter(
    (flag) => !resolved.flags.isEnabled(flag),
  );
  return `turn ${off.join(" and ")} on in the trusted host configuration ("autoMode": { "stages": { ... } }) or with its OPENAI4S_ variable`;
}

/** The names `--reviewer` accepts for a plugin id: the id, without `asp.`, without `verifier-` too. */
export function reviewerNames(id: string): string[] {
  const bare = id.startsWith("asp.") ? id.slice("asp.".length) : id;
  return [...new Set([id, bare, bare.startsWith("verifier-") ? bare.slice("verifier-".length) : bare])];
}

function badScript(path: string, why: string): never {
  throw new UsageError("ASP_CLI_BAD_INPUT", `the engine script ${path} ${why}`, { data: { path } });
}

const utf8 = new TextEncoder();

/**
 * An engine script from a JSON file: `{ actor, steps }`, completion artifacts as `{ artifact_id:
 * <repository-relative path>, version_id, text }` and evidence as `{ name, text }`.
 * @throws UsageError `ASP_CLI_BAD_INPUT` when it is unreadable or not that shape.
 */
export function readScript(path: string): EngineScript {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    badScript(path, `is not readable JSON: ${(error as Error).message}`);
  }
  const s = raw as { actor?: Record<string, unknown>; steps?: unknown };
  const actor = s?.actor;
  if (
    typeof actor !== "object" ||
    actor === null ||
    !["actor_id", "session_id", "fingerprint"].every((k) => typeof actor[k] === "string" && actor[k] !== "")
  ) {
    badScript(path, "needs an actor { actor_id, session_id, fingerprint }");
  }
  if (!Array.isArray(s.steps)) badScript(path, "needs a steps array");
  const steps = (s.steps as unknown[]).map((step, i): EngineStep => {
    const x = step as Record<string, unknown>;
    if (x?.kind !== "completion") return x as unknown as EngineStep;
    const artifacts = Array.isArray(x.artifacts) ? x.artifacts : badScript(path, `steps[${i}] needs artifacts`);
    const evidence = Array.isArray(x.evidence) ? x.evidence : [];
    return {
      kind: "completion",
      payload: typeof x.payload === "string" ? x.payload : badScript(path, `steps[${i}] needs a payload string`),
      artifacts: artifacts.map((a: Record<string, unknown>, k: number): CompletionArtifact => {
        if (typeof a?.artifact_id !== "string" || typeof a.version_id !== "string" || typeof a.text !== "string") {
          badScript(path, `steps[${i}].artifacts[${k}] needs artifact_id, version_id and text strings`);
        }
        return {
          artifact_id: a.artifact_id as string,
          version_id: a.version_id as string,
          bytes: utf8.encode(a.text as string),
        };
      }),
      evidence: evidence.map((e: Record<string, unknown>, k: number) => {
        if (typeof e?.name !== "string" || typeof e.text !== "string") {
          badScript(path, `steps[${i}].evidence[${k}] needs name and text strings`);
        }
        return { name: e.name as string, bytes: utf8.encode(e.text as string) };
      }),
    };
  });
  return {
    actor: {
      actor_id: String(actor.actor_id),
      session_id: String(actor.session_id),
      fingerprint: String(actor.fingerprint),
    },
    steps,
  };
}

/**
 * The default script: one completion whose artifacts are the repository's changed files (the
 * worktree against `HEAD` (`committedTree`), as the host snapshots them: removed files and links are left out), or,
 * when nothing changed, the built-in deterministic edit ({@link DEMO_ARTIFACT_PATH}).
 */
export async function defaultScript(repo: string, store: Store, excludes: readonly string[]): Promise<EngineScript> {
  const target = { id: store.id, objects: store.objects };
  // The same base the Reviewer's host checks lay the candidate over (a folder's subtree inside a larger repository).
  const head = await committedTree(repo, "HEAD", target, excludes);
  // Every file the agent left in the worktree is its candidate (THREAT-MODEL invariant 11): a
  // .gitignore line it wrote never hides one of them from the Reviewer. Only the host's excludes apply.
  const now = await snapshotWorktree(repo, { tracked: "index", gitignore: false, store: target, excludes });
  const changes = await diffTrees(store.objects, head, now.tree);
  const artifacts: CompletionArtifact[] = [];
  for (const c of changes.changes) {
    if (c.after === null || c.after.mode === "120000" || c.after.mode === "040000") continue;
    artifacts.push({
      artifact_id: c.path,
      version_id: c.after.digest.slice("sha256:".length, "sha256:".length + 16),
      bytes: await store.objects.readBlob(c.after.digest as Digest),
    });
  }
  if (artifacts.length === 0) {
    const bytes = utf8.encode(DEMO_TEXT);
    artifacts.push({ artifact_id: DEMO_ARTIFACT_PATH, version_id: digestBytes(bytes).slice(7, 23), bytes });
  }
  return {
    actor: {
      actor_id: "engine:scripted",
      session_id: `engine-${randomUUID()}`,
      fingerprint: codeFingerprint("asp.scripted-engine", "1"),
    },
    steps: [
      {
        kind: "completion",
        payload: `Changed ${artifacts.length} file(s): ${artifacts.map((a) => a.artifact_id).join(", ")}`,
        artifacts,
        evidence: [],
      },
    ],
  };
}

/** A temp plugin cache for this process (a database store has no folder beside it), removed at exit. */
function processPluginCache(): string {
  const dir = createTempPluginCache();
  process.once("exit", () => removePluginCache(dir));
  return dir;
}

/**
 * The verified, granted verifier plugin with `capability` that `name` names (its id, or the id
 * without `asp.` / `verifier-`), from the host configuration's plugins.
 * @throws UsageError `ASP_CLI_BAD_INPUT` when none is loaded (the loaded and the refused ones named).
 */
async function verifierFor(
  name: string,
  capability: "review" | "guardian",
  role: "Reviewer" | "Guardian",
  config: HostConfig,
  host: ComposedHost,
): Promise<{ chosen: LoadedVerifier; cacheDir: string | null }> {
  const loaded = await loadPlugins({
    dirs: config.plugins,
    trustRoots: readTrustRoots(config.trustRoots),
    policy: host.policy.document as Policy,
    // A folder store keeps its verified plugin copies beside it; a database has no beside.
    cacheDir: isPostgresUrl(config.store) ? processPluginCache() : `${resolve(host.store.location)}.plugins`,
    kinds: ["verifier"],
    pluginOptions: config.pluginOptions,
    // Never imported here: it runs in its own process under the granted sandbox (ADR 0011).
    verifierIsolation: "subprocess",
  });
  const able = loaded.verifiers.filter((v) => v.plugin.capabilities.includes(capability));
  const chosen = able.find((v) => reviewerNames(v.plugin.id).includes(name));
  if (chosen === undefined) {
    const refused = loaded.refused.map((r) => ({ id: r.id ?? r.dir, code: r.code }));
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `no verified, granted ${role} ${JSON.stringify(name)}${capability === "guardian" ? " (a verifier plugin with capability guardian)" : ""}; loaded: [${able.map((v) => v.plugin.id).join(", ")}]${refused.length > 0 ? `; refused: ${refused.map((r) => `${r.id} (${r.code})`).join(", ")}` : ""}`,
      {
        data: { [role === "Reviewer" ? "reviewer" : "guardian"]: name, loaded: able.map((v) => v.plugin.id), refused },
      },
    );
  }
  return { chosen, cacheDir: loaded.cacheDir };
}

/**
 * Launch `chosen` in its own process under the host's granted sandbox (`sandbox:bubblewrap`,
 * issue 27 item 4, ADR 0011): it sees its verified copy and the Node runtime read-only, a bounded
 * scratch `/tmp`, never the repository or the store; it reaches the host only through `ports`,
 * and the network only at its trusted `baseUrl` (plugin options), with the key named by
 * `apiKeyEnv` added by the host. Each child is pushed onto `children` for the caller to close.
 * @throws UsageError `ASP_CLI_BAD_INPUT` (`data.refused` naming the plugin's code) when it cannot
 *   be launched confined, or what it declares is refused (`ASP_PLUGIN_VERIFIER_UNSANDBOXED`,
 *   `ASP_PLUGIN_BAD_OPTIONS` ...).
 */
async function launchedVerifier(
  chosen: LoadedVerifier,
  role: "Reviewer" | "Guardian",
  config: HostConfig,
  host: ComposedHost,
  repo: string,
  ports: PluginPorts,
  children: LaunchedVerifier[],
): Promise<LaunchedVerifier> {
  const id = chosen.plugin.id;
  const sandbox = launchSandbox(host.container.resolve<SandboxSet>(THS_TOKENS.Sandboxes).sandboxes);
  const options = (config.pluginOptions[id] ?? {}) as { baseUrl?: unknown; apiKeyEnv?: unknown };
  const keyEnv = typeof options.apiKeyEnv === "string" ? options.apiKeyEnv : undefined;
  const network =
    typeof options.baseUrl === "string"
      ? {
          baseUrl: options.baseUrl,
          ...(keyEnv === undefined ? {} : { credential: { env: keyEnv, value: () => process.env[keyEnv] } }),
        }
      : undefined;
  const location = isPostgresUrl(config.store) || host.store.location === "memory:" ? null : host.store.location;
  try {
    const child = await launchVerifier(chosen, {
      sandbox,
      ports,
      deny: [repo, ...storeFolders(location)],
      ...(network === undefined ? {} : { network }),
    });
    children.push(child);
    return child;
  } catch (error) {
    if (!(error instanceof PluginError)) throw error;
    throw new UsageError("ASP_CLI_BAD_INPUT", `${role} ${id} cannot run: ${error.code}: ${error.message}`, {
      data: { [role === "Reviewer" ? "reviewer" : "guardian"]: id, refused: [{ id, code: error.code }] },
    });
  }
}

/**
 * The Reviewer `--reviewer NAME` picks: a verified, granted verifier plugin with capability
 * `review` from the host configuration's plugins, run in its own sandboxed process
 * ({@link launchedVerifier}) with the host's ports (clock, content, and the host's checks over
 * `repo`), under its own identity: actor `verifier:<id>`, a session per run, fingerprint
 * `<id>@<digest>;options=<digest of its trusted options>`.
 * @throws UsageError `ASP_CLI_BAD_INPUT` when no such Reviewer is loaded (the refused ones named)
 *   or it cannot be launched confined.
 */
async function reviewerFor(
  name: string,
  config: HostConfig,
  host: ComposedHost,
  repo: string,
  children: LaunchedVerifier[],
): Promise<ReviewerPort> {
  const { chosen } = await verifierFor(name, "review", "Reviewer", config, host);
  // Content reads only the review's own evidence, and only while it is in flight: never any
  // other blob of the store (another run's material, a guessed secret's digest).
  const scope = scopeReviewContent(host.store.objects);
  const launched = await launchedVerifier(
    chosen,
    "Reviewer",
    config,
    host,
    repo,
    {
      clock: { now: () => new Date() },
      content: scope.content,
      checks: createHostChecks({ host, store: host.store, repo, excludes: config.excludes }),
    },
    children,
  );
  const verifier = scope.bind(launched);
  const id = chosen.plugin.id;
  return {
    identity: {
      actor_id: `verifier:${id}`,
      session_id: `review-${randomUUID()}`,
      fingerprint: actorFingerprint(id, chosen.evidence.digest, config.pluginOptions[id]),
    },
    verifier,
    launch: verifierLaunchOf(launched.launch),
    boundary: launched,
  };
}

/**
 * The Guardian `--guardian NAME` picks: `rules` (built in, from `--guardian-rules`), or a
 * verified, granted verifier plugin with capability `guardian` (e.g. asp.verifier-openai), run in
 * its own sandboxed process ({@link launchedVerifier}) and shown only the host's canonical
 * request; its prompt version is the plugin's verified digest, its model the plugin's trusted
 * model option.
 * @throws UsageError `ASP_CLI_BAD_INPUT` when no such Guardian is loaded (the refused ones named)
 *   or it cannot be launched confined.
 */
async function guardianFor(
  name: string,
  flags: Pick<RunFlags, "guardianRules">,
  config: HostConfig,
  host: ComposedHost,
  repo: string,
  cwd: string,
  children: LaunchedVerifier[],
): Promise<Guardian> {
  if (name === "rules") return readGuardianRules(resolve(cwd, flags.guardianRules as string), repo);
  const { chosen } = await verifierFor(name, "guardian", "Guardian", config, host);
  // A Guardian gets a clock and nothing else: the request is all it judges.
  const verifier = await launchedVerifier(
    chosen,
    "Guardian",
    config,
    host,
    repo,
    { clock: { now: () => new Date() }, content: { read: async () => null } },
    children,
  );
  const id = chosen.plugin.id;
  const model = (config.pluginOptions[id] as { model?: unknown } | undefined)?.model;
  return guardianFromVerifier(
    verifier,
    {
      prompt_version: `${id}@${chosen.evidence.digest}`,
      model_version: typeof model === "string" && model !== "" ? model : "plugin",
    },
    verifierLaunchOf(verifier.launch),
    verifier,
  );
}

/**
 * The canonical fingerprint of a plugin actor (ADR 0009): a plugin whose trusted options name a
 * model and an endpoint (`baseUrl`, `model`) is that model (`model:<host>/<model>`), so an Engine
 * and a Reviewer on the same model compare equal; any other is its verified code and options.
 */
export function actorFingerprint(id: string, digest: string, options: unknown): string {
  const o = (options ?? {}) as { baseUrl?: unknown; model?: unknown };
  if (typeof o.baseUrl === "string" && typeof o.model === "string") {
    return modelFingerprint({ endpoint: o.baseUrl, model: o.model });
  }
  return codeFingerprint(id, digestBytes(new TextEncoder().encode(canonicalize({ digest, options: options ?? {} }))));
}

/**
 * The Engine `--engine NAME` picks: `scripted` (built in), or a verified, granted engine plugin
 * from the host configuration's plugins, under its own identity (actor `engine:<id>`, a session
 * per run, its canonical fingerprint).
 * @throws UsageError `ASP_CLI_BAD_INPUT` when no such engine plugin is loaded (the refused ones named).
 */
async function engineFor(
  name: string,
  config: HostConfig,
  host: ComposedHost,
  role: "engine" | "repair" = "engine",
): Promise<Engine> {
  const loaded = await loadPlugins({
    dirs: config.plugins,
    trustRoots: readTrustRoots(config.trustRoots),
    policy: host.policy.document as Policy,
    cacheDir: isPostgresUrl(config.store) ? processPluginCache() : `${resolve(host.store.location)}.plugins`,
    kinds: ["engine"],
    pluginOptions: config.pluginOptions,
  });
  const engines = loaded.engines ?? [];
  const chosen = engines.find(
    (e) => reviewerNames(e.plugin.id).includes(name) || `engine-${name}` === e.plugin.id.replace(/^asp\./, ""),
  );
  if (chosen === undefined) {
    const refused = loaded.refused.map((r) => ({ id: r.id ?? r.dir, code: r.code }));
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `no verified, granted engine ${JSON.stringify(name)}; loaded: [${engines.map((e) => e.plugin.id).join(", ")}]${refused.length > 0 ? `; refused: ${refused.map((r) => `${r.id} (${r.code})`).join(", ")}` : ""}: add its folder to "plugins", its grant to the policy and its options to "pluginOptions" (plugins/engine-openai/README.md)`,
      { data: { engine: name, loaded: engines.map((e) => e.plugin.id), refused } },
    );
  }
  const c = host.container.createChildContainer();
  registerPlugins(
    c,
    { providers: [], verifiers: [], sandboxes: [], engines: [chosen], refused: [], cacheDir: loaded.cacheDir },
    // An engine gets only a clock: nothing that reaches the store or the filesystem.
    { clock: { now: () => new Date() }, content: { read: async () => null } },
  );
  const [port] = c.resolveAll(PLUGIN_TOKENS.Engine);
  if (port === undefined) throw new UsageError("ASP_CLI_BAD_INPUT", `engine ${name} did not register`);
  const id = chosen.plugin.id;
  return {
    // The Repair Agent is a distinct actor and session (frozen in the run's exclusions), even on
    // the producer's plugin and model: it can never review or promote.
    actor: {
      actor_id: `${role}:${id}`,
      session_id: `${role}-${randomUUID()}`,
      fingerprint: actorFingerprint(id, chosen.evidence.digest, config.pluginOptions[id]),
    },
    run: (params) => port.run({ ...params, run: { ...params.run } }) as ReturnType<Engine["run"]>,
  };
}

/** Remove a scratch workspace, even one a command left unreadable (never fails the run). */
function removeScratch(dir: string): void {
  try {
    chmodTree(dir);
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // A leftover temp folder is not the run's failure.
  }
}

function chmodTree(dir: string): void {
  try {
    chmodSync(dir, 0o700);
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) chmodTree(join(dir, e.name));
  } catch {
    // Best effort.
  }
}

/** Deterministic permission policy over the host's trusted policy (`@asp/policy` `classifyAction`). */
function hostPermissions(host: ComposedHost): PermissionClassifier {
  return {
    // Frozen into each Guardian audit request: the pinned policy's digest.
    version: host.policy.digest,
    classify: (action, options) => {
      const d = classifyAction(host.policy, action, { fence: options.fence });
      return { outcome: d.outcome, reason: d.reason, fenced: d.fenced };
    },
  };
}

interface RunFlags {
  readonly engine: string;
  readonly task?: string;
  readonly script?: string;
  readonly preset?: string;
  readonly frame?: string;
  readonly repairEngine?: string;
  readonly repairScript?: string;
  readonly reviewer: string;
  readonly guardian?: string;
  readonly guardianRules?: string;
  readonly config?: string;
  readonly wait?: string;
}

/**
 * Whether this run needs a Guardian (Stage 6, or Stage 7 with approvals_reviewer=auto_review) and
 * the flags that name one agree: a run that needs one without `--guardian`, a Guardian flag the
 * run has no use for, and `--guardian-rules` for anything but the rules Guardian are usage errors.
 * @throws UsageError `ASP_CLI_USAGE` naming the step that fixes it.
 */
export function guardianName(
  flags: Pick<RunFlags, "guardian" | "guardianRules">,
  resolved: ResolvedConfiguration,
): string | undefined {
  const mode = guardianMode({ flags: runtimeStageFlags(resolved.flags) }, resolved.selection.selection);
  if (flags.guardianRules !== undefined && flags.guardian !== "rules") {
    throw new UsageError("ASP_CLI_USAGE", "--guardian-rules is for --guardian rules only", {
      data: { guardian: flags.guardian ?? null },
    });
  }
  if (mode === "off") {
    if (flags.guardian !== undefined) {
      throw new UsageError(
        "ASP_CLI_USAGE",
        `--guardian needs stage6_guardian_shadow, or stage7_guardian_enforcement with approvals_reviewer=auto_review, and neither applies to this run: turn one on in the trusted configuration (or pass --preset on with Stage 7 on), or drop --guardian (docs/auto-mode.md, "Guardian")`,
        { data: { guardian: flags.guardian } },
      );
    }
    return undefined;
  }
  if (flags.guardian === undefined) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      `this run's ${mode === "shadow" ? "stage6_guardian_shadow" : "stage7_guardian_enforcement with approvals_reviewer=auto_review"} needs a Guardian: pass --guardian rules --guardian-rules FILE (deterministic rules), or --guardian NAME (a verified, granted verifier plugin with capability guardian, e.g. openai) (docs/auto-mode.md, "Guardian")`,
      { data: { mode } },
    );
  }
  if (flags.guardian === "rules" && flags.guardianRules === undefined) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      "--guardian rules needs --guardian-rules FILE: a JSON file { version, rules: [{ actionClass, targets?, decision, risk, recoverable?, rationale }] } outside the repository",
      { data: { guardian: "rules" } },
    );
  }
  return flags.guardian;
}

/**
 * Read the rules Guardian's file: trusted configuration, so never from the repository under
 * evaluation.
 * @throws UsageError `ASP_CLI_BAD_INPUT` for unreadable JSON or a bad shape; ThsError
 *   `ASP_THS_UNTRUSTED_LOCATION` for a file inside the repository; AutoModeError
 *   `ASP_AUTO_MODE_INVALID_OPTION` for a rule the rules Guardian refuses.
 */
export function readGuardianRules(path: string, repo: string): Guardian {
  assertTrustedLocations(repo, { file: path });
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `Guardian rules ${path} is not readable JSON: ${(error as Error).message}`,
      {
        data: { path },
      },
    );
  }
  const r = raw as { version?: unknown; rules?: unknown };
  if (typeof r?.version !== "string" || r.version === "" || !Array.isArray(r.rules)) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `Guardian rules ${path} needs { version: string, rules: [...] } (each rule { actionClass, targets?, decision, risk, recoverable?, rationale })`,
      { data: { path } },
    );
  }
  return createRulesGuardian({ version: r.version, rules: r.rules as GuardianRule[] });
}

/**
 * The Repair Agent a run needs: none unless auto_fix runs under Stages 5 and 9 (then a Repair
 * Agent is provisioned, never a silent review_only). `--repair-engine NAME` picks it; by default
 * it is the producer's engine plugin in a new session, or, for the scripted engine, the script
 * `--repair-script` names.
 * @throws UsageError `ASP_CLI_USAGE` for a repair flag the run has no use for, or a scripted run
 *   under auto_fix without `--repair-script`.
 */
export function repairEngineName(
  flags: Pick<RunFlags, "engine" | "repairEngine" | "repairScript">,
  resolved: ResolvedConfiguration,
): string | undefined {
  const name = flags.repairEngine ?? (flags.repairScript !== undefined ? "scripted" : flags.engine);
  if (flags.repairScript !== undefined && name !== "scripted") {
    throw new UsageError("ASP_CLI_USAGE", "--repair-script is for --repair-engine scripted only", {
      data: { repairEngine: name },
    });
  }
  if (resolved.repair !== "checkpointed") {
    if (flags.repairEngine !== undefined || flags.repairScript !== undefined) {
      const step = repairStep(resolved);
      throw new UsageError(
        "ASP_CLI_USAGE",
        `--repair-engine and --repair-script need auto_fix under stage5_auto_repair and stage9_safe_repair_checkpoint, and this run's Auto Repair is ${resolved.repair}: ${step} (docs/auto-mode.md, "Repair")`,
        { data: { repair: resolved.repair } },
      );
    }
    return undefined;
  }
  if (name === "scripted" && flags.repairScript === undefined) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      `auto_fix under stage5_auto_repair and stage9_safe_repair_checkpoint needs a Repair Agent, and the scripted engine has none: pass --repair-script FILE (an engine script { actor, steps } in a session of its own), or --repair-engine NAME (docs/auto-mode.md, "Repair")`,
      { data: { repair: resolved.repair, engine: flags.engine } },
    );
  }
  return name;
}

async function autoRun(ctx: CliContext, repoArg: string, flags: RunFlags): Promise<void> {
  if (flags.engine !== "scripted" && flags.script !== undefined) {
    throw new UsageError("ASP_CLI_USAGE", "--script is for --engine scripted only", { data: { engine: flags.engine } });
  }
  const repo = resolve(ctx.io.cwd, repoArg);
  if (!existsSync(repo))
    throw new UsageError("ASP_CLI_BAD_INPUT", `no repository folder at ${repo}`, { data: { path: repo } });
  // Threat model invariant 2: the candidate never configures the host (nor the rollout) that judges it.
  const config = readHostConfig(ctx, flags.config, repo);
  const frame =
    flags.frame === undefined
      ? undefined
      : { id: flags.frame, settings: await frameSettingsOf(config.store, flags.frame) };
  const resolved = autoModeConfiguration(
    ctx.io.env,
    config,
    requireHostConfig(ctx, flags.config).path,
    flags.preset,
    frame,
  );
  assertStages(resolved);
  const repairEngine = repairEngineName(flags, resolved);
  const guardianChoice = guardianName(flags, resolved);
  const script = flags.script === undefined ? undefined : readScript(resolve(ctx.io.cwd, flags.script));
  const repairScript =
    flags.repairScript === undefined ? undefined : readScript(resolve(ctx.io.cwd, flags.repairScript));
  await withComposedHost(ctx, "auto run", config, repo, flags.wait, async (host) => {
    // The Reviewer's and the Guardian's sandboxed processes, ended with the run.
    const children: LaunchedVerifier[] = [];
    try {
      await runWith(children, host);
    } finally {
      await Promise.all(children.map((c) => c.close()));
    }
  });

  async function runWith(children: LaunchedVerifier[], host: ComposedHost): Promise<void> {
    const reviewer = await reviewerFor(flags.reviewer, config, host, repo, children);
    const guardian =
      guardianChoice === undefined
        ? undefined
        : await guardianFor(guardianChoice, flags, config, host, repo, ctx.io.cwd, children);
    const engine =
      flags.engine === "scripted"
        ? createScriptedEngine(script ?? (await defaultScript(repo, host.store, config.excludes)))
        : await engineFor(flags.engine, config, host);
    const repair =
      repairEngine === undefined
        ? undefined
        : repairEngine === "scripted"
          ? createScriptedEngine(repairScript as EngineScript)
          : await engineFor(repairEngine, config, host, "repair");
    // An Engine that acts (a plugin, or a script with action steps) gets tools that run only in a
    // scratch copy of the repository's files the host owns (never the user's worktree), without
    // the credential-shaped files; the candidate's Artifacts are what changed there.
    // The Repair Agent works in the same scratch copy (read_file, write_file, each write checked
    // against the mutation set); without one (a scripted producer that does not act) its plan is
    // its completion's Artifacts.
    const acts = flags.engine !== "scripted" || (script?.steps ?? []).some((s) => s.kind === "action");
    const scratch = mkdtempSync(join(tmpdir(), "asp-auto-workspace-"));
    const cleanup = () => removeScratch(scratch);
    process.once("exit", cleanup);
    try {
      let workspace: Awaited<ReturnType<typeof createScratchWorkspace>> | undefined;
      if (acts) {
        const target = { id: host.store.id, objects: host.store.objects };
        const start = await snapshotWorktree(repo, { tracked: "index", store: target, excludes: config.excludes });
        workspace = await createScratchWorkspace({
          dir: scratch,
          from: { objects: host.store.objects, tree: start.tree },
          omit: (path) => classifyAction(host.policy, { tool: "read_file", path }, { fence: true }).fenced,
        });
      }
      // ADR 0012: the host's required checks judge a repaired after-state before it becomes a candidate.
      const checks = createHostChecks({ host, store: host.store, repo, excludes: config.excludes });
      await runIn(ctx, host, resolved, {
        engine,
        repair,
        checks,
        reviewer,
        guardian,
        workspace,
        repo,
        task: flags.task ?? "",
        frame: flags.frame,
      });
    } finally {
      process.removeListener("exit", cleanup);
      cleanup();
    }
  }
}

async function runIn(
  ctx: CliContext,
  host: ComposedHost,
  resolved: ResolvedConfiguration,
  o: {
    engine: Engine;
    repair: Engine | undefined;
    checks: HostChecks;
    reviewer: ReviewerPort;
    guardian: Guardian | undefined;
    workspace: Awaited<ReturnType<typeof createScratchWorkspace>> | undefined;
    repo: string;
    task: string;
    frame: string | undefined;
  },
): Promise<void> {
  {
    const repo = o.repo;
    const runner = createAutoRunner({
      store: host.store,
      engine: o.engine,
      reviewers: [o.reviewer],
      flags: resolved.flags,
      ...(o.workspace === undefined ? {} : { workspace: o.workspace }),
      ...(o.repair === undefined
        ? {}
        : {
            repair: {
              engine: o.repair,
              check: (request) => o.checks.evaluate({ files: request.files, deleted: request.deleted }),
            },
          }),
      ...(o.guardian === undefined ? {} : { guardian: o.guardian }),
      permissions: hostPermissions(host),
    });
    // The user's Stop/Cancel: the first SIGINT (Ctrl-C) or SIGTERM ends the run user_cancelled,
    // committed, instead of killing the process mid-transition (a second one exits at once).
    const cancel = new AbortController();
    const release = onInterrupt(() => cancel.abort());
    const projection = await runner
      .run({
        task: o.task,
        cancel: cancel.signal,
        run: {
          root_frame_id: o.frame ?? "cli",
          branch_id: digestBytes(utf8.encode(repo)),
          turn_id: `turn-${randomUUID()}`,
          execution_id: `exec-${randomUUID()}`,
        },
        selection: resolved.selection.selection,
        budgets: resolved.budgets.values,
      })
      .finally(release);
    ctx.print(renderProjection(projection), projection);
    ctx.setExit(autoExitCode(projection));
  }
}

async function autoShow(ctx: CliContext, runId: string, flags: { readonly config?: string }): Promise<void> {
  const config = readHostConfig(ctx, flags.config);
  const store = await openForReading(config.store);
  if (store === null) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `there is no evidence store at ${config.store} yet`, {
      data: { path: config.store },
    });
  }
  try {
    if ((await readRunFacts(store.log, runId)).length === 0) {
      throw new AutoModeError("ASP_AUTO_MODE_RUN_NOT_FOUND", `the store holds no Auto Run ${runId}`, {
        data: { runId },
      });
    }
    const projection = await loadAutoRunProjection(store, runId);
    ctx.print(renderProjection(projection), projection);
    ctx.setExit(autoExitCode(projection));
  } finally {
    await store.close();
  }
}

/** `asp auto run|show`: run an Auto Run to a committed terminal state, and reprint one from the store. */
export function registerAuto(program: Command, ctx: CliContext): void {
  const auto = program.command("auto").description("Auto Mode: run an Auto Run, show one from the store");
  auto
    .command("run")
    .description(
      "run an Auto Run on REPO: engine to candidate, independent review, bounded repair under auto_fix, terminal (exit 0 verified, 1 completed with issues, 2 otherwise)",
    )
    .argument("<repo>", "the repository the candidate changes")
    .option(
      "--engine <name>",
      "the engine: scripted (built in), or a verified, granted engine plugin (e.g. openai for asp.engine-openai)",
      "scripted",
    )
    .option("--task <text>", "what the agent is asked to do (passed to the engine)")
    .option(
      "--script <file>",
      "engine script JSON { actor, steps } (default: one completion with the worktree's changes against HEAD, or a built-in demo edit)",
    )
    .option(
      "--frame <fid>",
      "the run's root frame id (default cli); the frame's stored Auto Mode settings (PATCH /api/v1/frames/{fid}/auto-mode) apply at frame scope, --preset over their preset",
    )
    .option(
      "--preset <preset>",
      "the run's product mode: off, on or autonomous (on/autonomous: auto_fix and auto_review; the stages stay the trusted configuration's)",
    )
    .option(
      "--repair-engine <name>",
      "the Repair Agent under auto_fix with Stages 5 and 9: scripted, or an engine plugin (default: the --engine plugin, in a new session)",
    )
    .option(
      "--repair-script <file>",
      "the Repair Agent's engine script JSON { actor, steps } (--repair-engine scripted)",
    )
    .requiredOption(
      "--reviewer <name>",
      "a verified, granted verifier plugin with capability review (id, or id without asp./verifier-)",
    )
    .option(
      "--guardian <name>",
      "who reviews asks under Stage 6 / Stage 7 with auto_review: rules (with --guardian-rules), or a verified, granted verifier plugin with capability guardian (e.g. openai)",
    )
    .option("--guardian-rules <file>", "the rules Guardian's JSON { version, rules } (outside the repository)")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .action((repo: string, flags: RunFlags) => autoRun(ctx, repo, flags));
  auto
    .command("show")
    .description(
      "reprint an Auto Run's projection from the store (read-only; exit 0 verified, 1 completed with issues, 2 otherwise)",
    )
    .argument("<run-id>", "the runId `asp auto run` printed")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .action((runId: string, flags: { config?: string }) => autoShow(ctx, runId, flags));
}
