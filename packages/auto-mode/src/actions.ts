import type { EngineToolSpec, PermissionOutcome, ProposedAction } from "@asp/contracts";
import { type Digest, digest, digestBytes } from "@asp/evidence";

/**
 * The tools the host offers an Engine when the run has a workspace. The host alone runs them:
 * `read_file` reads the run's scratch workspace (the candidate's files), `write_file` writes into
 * it through the host's path-checked writer, `run_command` runs one argv under the command
 * sandbox (bubblewrap: no network, only the workspace writable). Any other tool is refused.
 */
export const HOST_TOOLS: ReadonlyArray<EngineToolSpec> = Object.freeze([
  Object.freeze({
    name: "read_file",
    description: "Read a file of the workspace (a path relative to the workspace root).",
    parameters: {
      type: "object",
      properties: { path: { type: "string" } },
      required: ["path"],
      additionalProperties: false,
    },
  }),
  Object.freeze({
    name: "write_file",
    description: "Write a whole file of the workspace (a path relative to the workspace root) with the given text.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, content: { type: "string" } },
      required: ["path", "content"],
      additionalProperties: false,
    },
  }),
  Object.freeze({
    name: "run_command",
    description:
      "Run one command (argv: the program and its arguments, no shell) in the workspace, without network access.",
    parameters: {
      type: "object",
      properties: { argv: { type: "array", items: { type: "string" }, minItems: 1 } },
      required: ["argv"],
      additionalProperties: false,
    },
  }),
]);

/** The host tool names. */
export type HostToolName = "read_file" | "write_file" | "run_command";

/**
 * A proposed action after canonicalization: the host's tool name, the canonical target (a
 * normalized workspace-relative path, or the program name), the arguments its digest covers (a
 * write's content by digest) and that digest. Two proposals with the same effect (a path spelled
 * `./a/../b.txt` or `b.txt`, arguments in another order, the content in another JSON form) have
 * the same digest.
 */
export interface CanonicalAction {
  readonly tool: HostToolName;
  readonly target: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** `sha256:` digest of `{ tool, target, arguments }`. */
  readonly digest: Digest;
  /** A write's bytes (not part of the record; its digest is). */
  readonly content?: Uint8Array;
  /** A command's argv. */
  readonly argv?: ReadonlyArray<string>;
  /** What deterministic policy classifies: `tool` (`run_command:<program>` for commands) and `path`. */
  readonly permission: { readonly tool: string; readonly path?: string };
}

/**
 * Why a proposal was refused before classification: an unknown tool, a target that cannot be
 * canonicalized (both `policy_requires_explicit_setup`), or a path that leaves the workspace (a
 * path escape: `safety_boundary`).
 */
export type CanonicalRefusal = "unknown_tool" | "not_canonical" | "path_escape";

/** The result of {@link canonicalizeAction}. */
export type Canonicalized =
  | { readonly ok: true; readonly action: CanonicalAction }
  | {
      readonly ok: false;
      readonly refusal: CanonicalRefusal;
      readonly detail: string;
      /** The digest of what was proposed (tool and arguments as given), for the refusal audit. */
      readonly digest: Digest;
    };

const utf8 = new TextEncoder();
const PROGRAM = /^[A-Za-z0-9._+-]{1,128}$/;

/** A workspace-relative path, normalized; or why it is not one. */
function workspacePath(value: unknown): { path: string } | { refusal: CanonicalRefusal; detail: string } {
  if (typeof value !== "string" || value.length === 0 || value.length > 4096) {
    return { refusal: "not_canonical", detail: "path is not a non-empty string" };
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
  if (/[\u0000-\u001f\u007f\\]/.test(value)) {
    return { refusal: "not_canonical", detail: "path holds a control character or a backslash" };
  }
  if (value.startsWith("/") || value.startsWith("~")) return { refusal: "path_escape", detail: "path is absolute" };
  const out: string[] = [];
  for (const segment of value.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length === 0) return { refusal: "path_escape", detail: "path climbs out of the workspace" };
      out.pop();
    } else out.push(segment);
  }
  if (out.length === 0) return { refusal: "not_canonical", detail: "path names the workspace itself" };
  const owned = out.find((s) => s.toLowerCase() === ".git" || s.toLowerCase() === ".asp");
  if (owned !== undefined) {
    return { refusal: "path_escape", detail: `path is inside a host-owned ${owned} folder` };
  }
  return { path: out.join("/") };
}

function proposedDigest(p: ProposedAction): Digest {
  try {
    return digest({ type: "auto-action-proposed", tool: String(p?.tool), arguments: p?.arguments ?? null });
  } catch {
    return digest({ type: "auto-action-proposed", tool: String(p?.tool), arguments: "<not canonical JSON>" });
  }
}

/**
 * Canonicalize a proposed action and compute its digest. Pure, total over any input.
 *
 * @example
 * ```ts
 * canonicalizeAction({ tool: "read_file", arguments: { path: "./src/../a.txt" } }); // ok, target "a.txt"
 * canonicalizeAction({ tool: "write_file", arguments: { path: "../x", content: "" } }); // path_escape
 * ```
 */
export function canonicalizeAction(p: ProposedAction): Canonicalized {
  const refuse = (refusal: CanonicalRefusal, detail: string): Canonicalized => ({
    ok: false,
    refusal,
    detail,
    digest: proposedDigest(p),
  });
  const args = p?.arguments;
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return refuse("not_canonical", "arguments are not a JSON object");
  }
  const a = args as Record<string, unknown>;
  const tool = p.tool;
  const make = (
    name: HostToolName,
    target: string,
    canonical: Record<string, unknown>,
    extra: Partial<CanonicalAction>,
  ): Canonicalized => ({
    ok: true,
    action: {
      tool: name,
      target,
      arguments: canonical,
      digest: digest({ type: "auto-action", tool: name, target, arguments: canonical }),
      permission: { tool: name, path: target },
      ...extra,
    },
  });
  if (tool === "read_file" || tool === "write_file") {
    const extraKeys = Object.keys(a).filter((k) => k !== "path" && !(tool === "write_file" && k === "content"));
    if (extraKeys.length > 0) return refuse("not_canonical", `unknown argument ${extraKeys[0]}`);
    const path = workspacePath(a.path);
    if ("refusal" in path) return refuse(path.refusal, path.detail);
    if (tool === "read_file") return make("read_file", path.path, { path: path.path }, {});
    if (typeof a.content !== "string" || a.content.length > 8 * 1024 * 1024) {
      return refuse("not_canonical", "content is not a string of at most 8 MiB");
    }
    const bytes = utf8.encode(a.content);
    return make("write_file", path.path, { path: path.path, content_digest: digestBytes(bytes) }, { content: bytes });
  }
  if (tool === "run_command") {
    const extraKeys = Object.keys(a).filter((k) => k !== "argv");
    if (extraKeys.length > 0) return refuse("not_canonical", `unknown argument ${extraKeys[0]}`);
    const argv = a.argv;
    if (
      !Array.isArray(argv) ||
      argv.length === 0 ||
      argv.length > 256 ||
      !argv.every((x) => typeof x === "string" && x.length <= 4096 && !x.includes("\u0000"))
    ) {
      return refuse("not_canonical", "argv is not a non-empty list of strings");
    }
    const program = argv[0] as string;
    // A bare program name: a path (./x, /usr/bin/x) is not a canonical target the policy can name.
    if (!PROGRAM.test(program)) return refuse("not_canonical", "argv[0] is not a bare program name");
    const list = [...(argv as string[])];
    return {
      ok: true,
      action: {
        tool: "run_command",
        target: program,
        arguments: { argv: list },
        digest: digest({ type: "auto-action", tool: "run_command", target: program, arguments: { argv: list } }),
        argv: list,
        permission: { tool: `run_command:${program}` },
      },
    };
  }
  return refuse("unknown_tool", `the host offers no tool ${JSON.stringify(String(tool)).slice(0, 80)}`);
}

/** What deterministic policy decided about one action (the `@asp/policy` `classifyAction` shape). */
export interface ActionClassification {
  readonly outcome: PermissionOutcome;
  readonly reason: string;
  /** True when the credential fence promoted an allow to ask (Stage 7 only). */
  readonly fenced: boolean;
}

/**
 * The deterministic permission policy port: classify one canonical action. The host wires
 * `@asp/policy` `classifyAction` over its trusted policy; `fence` is true only under Stage 7
 * (the credential-shaped file fence runs nowhere else).
 */
export interface PermissionClassifier {
  /**
   * The pinned policy's version (e.g. its digest), frozen into each Guardian audit request
   * (`policy_version`); default `unversioned`.
   */
  readonly version?: string;
  classify(
    action: { readonly tool: string; readonly path?: string },
    options: { readonly fence: boolean },
  ): ActionClassification;
}

/** What a command run under the sandbox gave. */
export interface CommandResult {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Every workspace file the command created, changed or removed (the runner classifies each as a write). */
  readonly changedPaths: ReadonlyArray<string>;
}

/**
 * The run's workspace: the host's own tool adapters over a scratch copy of the candidate's files.
 * Each throws `AutoModeError` `ASP_AUTO_MODE_PATH_ESCAPE` when the resolved file would leave the
 * workspace (a link, a planted folder): the safety boundary; `run` throws
 * `ASP_AUTO_MODE_SANDBOX_UNAVAILABLE` when it cannot confine the command (nothing ran).
 */
export interface ActionWorkspace {
  /** The file's bytes, or null when there is no such file. */
  read(path: string): Promise<Uint8Array | null>;
  /** Write the whole file; `changed` when its bytes differ from before (a durable delta). */
  write(path: string, bytes: Uint8Array): Promise<{ readonly changed: boolean }>;
  /**
   * Remove a file (never a folder, never through a link); `changed` when there was one. Only the
   * host calls it, to roll a Repair back to its checkpoint: no Engine is offered a removal tool.
   */
  remove?(path: string): Promise<{ readonly changed: boolean }>;
  run(argv: ReadonlyArray<string>, signal: AbortSignal): Promise<CommandResult>;
  /**
   * Every file that differs from the workspace's starting state, whoever changed it (an adapter or
   * a command), in path order: created or changed files with their bytes (the candidate's
   * Artifacts), removed files with `bytes: null` (named in the candidate's `changes` manifest, so a
   * Reviewer sees a deletion too).
   */
  changes(): Promise<ReadonlyArray<{ readonly path: string; readonly bytes: Uint8Array | null }>>;
}
