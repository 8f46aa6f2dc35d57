import { resolve } from "node:path";
import type { AssuranceMode, ProviderManifest } from "@asp/contracts";
import type { Sandbox } from "@asp/plugin-host";
import type { LaunchSpec } from "@asp/protocol";

/** The capability a sandbox must hold (granted by trusted policy) for the host to launch providers through it. */
export const LAUNCH_CAPABILITY = "sandbox:bubblewrap";

/**
 * How one provider process was really launched (host §3): recorded by its supervisor at every
 * launch and reported per provider in the envelope and the receipt (`assurance.providers[]`).
 */
export interface LaunchRecord {
  readonly mode: AssuranceMode;
  readonly mechanism: string;
  /** The sandbox plugin that confined it (its verified id and digest), null for a plain subprocess. */
  readonly sandbox: { readonly id: string; readonly digest: string } | null;
  /** True when the process could write the real worktree. */
  readonly directWrite: boolean;
  /** Why the mode is lower than a sandbox could give (no sandbox plugin, its error code, bwrap missing...). */
  readonly reason?: string;
}

/** What a supervisor spawns and how confined it is. */
export interface ConfinedLaunch {
  readonly spec: LaunchSpec;
  readonly record: LaunchRecord;
}

/** The isolation of a plain local subprocess: it can read and write whatever its user can (host §3). */
export const PLAIN_SUBPROCESS = "plain subprocess";

/**
 * The sandbox the host launches providers through: the first sandbox plugin, in the host
 * configuration's plugin order, that implements `launch` and declares `sandbox:bubblewrap`
 * (plugin-host loads a plugin only when trusted policy grants every capability it declares,
 * so it is granted). Null when there is none.
 */
export function launchSandbox(sandboxes: readonly Sandbox[]): Sandbox | null {
  return (
    sandboxes.find(
      (s) => typeof s.launch === "function" && (s.capabilities as readonly string[]).includes(LAUNCH_CAPABILITY),
    ) ?? null
  );
}

/**
 * The folders a provider's code lives in, bound read-only: its measured root (a configured
 * provider) or verified copy (a plugin: `cwd`) and its cwd; never the executable's folder (the
 * sandbox binds the executable file itself and what it loads).
 */
export function providerCodeFolders(manifest: ProviderManifest): string[] {
  // Never the executable's folder: for `~/bin/tool` that is a folder of the home (issue 32 hole 4);
  // the sandbox binds the executable file itself and what it loads.
  const folders = [manifest.root, manifest.cwd].filter((f): f is string => f !== undefined).map((f) => resolve(f));
  return [...new Set(folders)];
}

/**
 * The store folder and its `.plugins`, `.stat-cache` and `.journal` siblings: what no provider or
 * verifier process may see (none for an in-memory or database store: `null`).
 */
export function storeFolders(storeLocation: string | null): string[] {
  if (storeLocation === null) return [];
  const s = resolve(storeLocation);
  return [s, `${s}.plugins`, `${s}.stat-cache`, `${s}.journal`];
}

/**
 * Launches providers through the chosen sandbox, shared by every supervisor of one host. It
 * denies the store folder and its `.plugins`, `.stat-cache` and `.journal` siblings, and every
 * candidate repository this host has evaluated so far (a provider is launched once per host,
 * lazily, so a later repository is denied to later launches; under bubblewrap nothing outside
 * the binds exists anyway, so the deny list only matters where a bind would contain it).
 */
export class ProviderLauncher {
  private readonly repos = new Set<string>();
  readonly sandbox: Sandbox | null;

  constructor(
    sandboxes: readonly Sandbox[],
    /** The store folder, or null for an in-memory store. */
    private readonly storeLocation: string | null,
  ) {
    this.sandbox = launchSandbox(sandboxes);
  }

  /** Deny `repo` to every launch from now on (called when an evaluation of it starts). */
  denyRepository(repo: string): void {
    this.repos.add(resolve(repo));
  }

  /** The folders no provider may see. */
  deny(): string[] {
    return [...storeFolders(this.storeLocation), ...this.repos];
  }

  /**
   * The launch to spawn for `spec` and how confined it is: the sandbox's answer (validated by
   * plugin-host), or, with no sandbox or when it throws, the plain subprocess reported as
   * `advisory` with direct write and the reason (its error code). Never throws.
   */
  async launch(spec: LaunchSpec, manifest: ProviderManifest): Promise<ConfinedLaunch> {
    const plain = (reason: string): ConfinedLaunch => ({
      spec,
      record: { mode: "advisory", mechanism: PLAIN_SUBPROCESS, sandbox: null, directWrite: true, reason },
    });
    const sandbox = this.sandbox;
    if (sandbox === null || sandbox.launch === undefined) {
      return plain(`no sandbox plugin granted ${LAUNCH_CAPABILITY}: a plain subprocess can write the worktree`);
    }
    try {
      const r = await sandbox.launch({
        executable: spec.executable,
        args: [...spec.args],
        cwd: spec.cwd,
        env: { ...spec.env },
        readOnly: providerCodeFolders(manifest),
        deny: this.deny(),
      });
      return {
        spec: { executable: r.executable, args: [...r.args], cwd: r.cwd, env: { ...r.env } },
        record: {
          mode: r.mode,
          mechanism: r.mechanism,
          sandbox: { id: sandbox.id, digest: sandbox.digest },
          directWrite: r.directWrite,
          ...(r.reason === undefined ? {} : { reason: r.reason }),
        },
      };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      return plain(
        `sandbox ${sandbox.id} refused the launch (${typeof code === "string" ? code : "error"}): a plain subprocess can write the worktree`,
      );
    }
  }
}
