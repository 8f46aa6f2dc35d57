import type { ProviderManifest } from "@asp/contracts";
import { digestPlugin } from "@asp/plugin-host";
import type { TrustedProvider } from "./supervisor.js";

// THREAT-MODEL invariants 3 and 4: authority comes from trusted policy over MEASURED identity
// and integrity, and what runs is what was verified. A provider's code lives in a folder (its
// `root`; for a plugin, the verified plugin folder it launches from). The host measures that
// folder with the plugin digest (`@asp/plugin-host` digestPlugin: every file, links as links,
// the executable bit) when it composes, and again before every launch and restart.
//
// A plugin provider never runs from its folder: plugin-host copies the verified bytes into a
// host-owned, read-only, content-addressed cache (`<store>.plugins/<digest>/`) and launches from
// there, so its `cwd` here is that copy, re-measured before every launch and restart; the plugin
// folder can change at any instant without changing what runs.
//
// The remaining window, for a configured provider's root only: between the measurement before a
// launch and the moment the process has read its code (node reads its entry at start and other
// modules lazily), whoever can write the folder can swap a file in and back. Measuring again
// after the answer would not close it (the swap can be undone by then). Code loaded from outside
// the root (the node binary, modules resolved from parent folders) is never measured: a root
// must hold what the provider runs (a packed plugin imports only `node:` builtins).

/** The outcome of measuring a folder against a pinned digest. */
export type RootMeasurement =
  | { readonly ok: true; readonly digest: string }
  | { readonly ok: false; readonly detail: string };

/**
 * Measure `root` with the plugin digest and compare it with `pinned`. Never throws: a missing
 * folder, an escaping link or an unreadable file is a failed measurement (fail closed).
 */
export function measureRoot(root: string, pinned: string): RootMeasurement {
  let measured: string;
  try {
    measured = digestPlugin(root).digest;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return {
      ok: false,
      detail: `root ${root} cannot be measured (${typeof code === "string" ? code : "error"}: ${(error as Error).message})`,
    };
  }
  if (measured !== pinned) {
    return { ok: false, detail: `root ${root} measures ${measured}, the pinned digest is ${pinned}` };
  }
  return { ok: true, digest: measured };
}

/**
 * A provider from trusted host configuration. Without a `root` nothing can be measured: it may
 * run, but its integrity stays unverified and its grants are not honoured. With a root, the
 * folder is measured now; a mismatch is final for this host (the provider never launches, even
 * if the folder is put back), and a match is re-checked before every launch and restart.
 */
export function configuredProvider(manifest: ProviderManifest): TrustedProvider {
  if (manifest.root === undefined) return { manifest, origin: "config", integrityVerified: false };
  const root = manifest.root;
  const atCompose = measureRoot(root, manifest.digest);
  if (!atCompose.ok) {
    const detail = `launch refused: ${atCompose.detail} (measured when the host started)`;
    return { manifest, origin: "config", integrityVerified: false, verifyLaunch: () => detail };
  }
  return {
    manifest,
    origin: "config",
    integrityVerified: true,
    verifyLaunch: () => refusal(measureRoot(root, manifest.digest)),
  };
}

/**
 * A plugin provider plugin-host verified (signature, digest, grant), re-measured before every
 * launch and restart: it launches from the host's cached copy of the verified bytes (`cwd`),
 * whose digest is its pin; a copy written to since is refused (`integrity_unverified`).
 */
export function remeasuredPlugin(provider: TrustedProvider): TrustedProvider {
  const { cwd, digest } = provider.manifest;
  return { ...provider, verifyLaunch: () => refusal(measureRoot(cwd, digest)) };
}

function refusal(m: RootMeasurement): string | null {
  return m.ok ? null : `launch refused: ${m.detail}`;
}
