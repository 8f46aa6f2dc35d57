import { resolve } from "node:path";
import type { Policy } from "@asp/contracts";
import {
  digestPlugin,
  PLUGIN_REFUSAL_CODES,
  readPluginManifest,
  readTrustRoots,
  signPlugin,
  verifyPlugin,
  writeKeyPair,
} from "@asp/plugin-host";
import { loadPolicy } from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";

/** A refused plugin exits 1 with a report; bad input exits 64. */
const REFUSALS: ReadonlySet<string> = PLUGIN_REFUSAL_CODES;

/**
 * The policy whose plugin grants `--policy` checks, loaded exactly as the host loads it
 * (`loadPolicy` from `@asp/ths`: schema, duplicate ids, pins, gate floor), so a policy this
 * command accepts is one the host accepts. Invalid policy throws `ASP_POLICY_*` or
 * `ASP_THS_BAD_POLICY` (exit 64).
 */
function readPolicy(cwd: string, path: string): Policy {
  return loadPolicy(resolve(cwd, path)).document as Policy;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** `asp plugin keygen | sign | verify | digest`: sign plugins and check them as the host would. */
export function registerPlugin(program: Command, ctx: CliContext): void {
  const plugin = program.command("plugin").description("sign plugins and verify them as the host would load them");

  plugin
    .command("keygen")
    .description("generate an ed25519 key pair: PATH (secret, mode 0600) and PATH.pub")
    .requiredOption("--out <path>", "where to write the secret key; the public key goes to PATH.pub")
    .action((options: { out: string }) => {
      const k = writeKeyPair(resolve(ctx.io.cwd, options.out));
      ctx.print(
        [
          `key ${inert(k.keyId)}`,
          `  secret key  ${k.secretKeyPath} (mode 0600: keep it private, never commit it)`,
          `  public key  ${k.publicKeyPath} (give it to hosts as a trust root)`,
        ].join("\n"),
        { keyId: k.keyId, secretKeyPath: k.secretKeyPath, publicKeyPath: k.publicKeyPath },
      );
    });

  plugin
    .command("sign")
    .description("write DIR/asp-plugin.sig: an ed25519 signature over the plugin's id, version and tree digest")
    .argument("<dir>", "the plugin folder (with asp-plugin.json)")
    .requiredOption("--key <path>", "the secret key written by `asp plugin keygen`")
    .action((dir: string, options: { key: string }) => {
      const r = signPlugin(resolve(ctx.io.cwd, dir), resolve(ctx.io.cwd, options.key));
      ctx.print(
        [
          `signed ${inert(r.id)}@${inert(r.version)}`,
          `  digest     ${inert(r.digest)}`,
          `  key        ${inert(r.keyId)}`,
          `  signature  ${inert(r.path)}`,
        ].join("\n"),
        { id: r.id, version: r.version, digest: r.digest, keyId: r.keyId, signaturePath: r.path },
      );
    });

  plugin
    .command("digest")
    .description("print the plugin's tree digest and the policy grant that would admit it")
    .argument("<dir>", "the plugin folder")
    .action((dir: string) => {
      const d = digestPlugin(resolve(ctx.io.cwd, dir));
      const { manifest } = readPluginManifest(d.dir);
      const grant = { id: manifest.id, digest: d.digest, capabilities: manifest.capabilities };
      ctx.print(
        [
          `${inert(manifest.id)}@${inert(manifest.version)} ${inert(d.digest)} (${d.files} files)`,
          "",
          "policy grant (add to the trusted policy's plugins[]):",
          JSON.stringify(grant, null, 2),
        ].join("\n"),
        { dir: d.dir, id: manifest.id, version: manifest.version, digest: d.digest, files: d.files, grant },
      );
    });

  plugin
    .command("verify")
    .description("verify a plugin as the host loads it: signature, trust, revocation, expiry, digest, grant")
    .argument("<dir>", "the plugin folder")
    .requiredOption("--trust <pub>", "a trusted public key or trust file (repeatable)", collect)
    .option(
      "--policy <file>",
      "trusted policy whose plugins[] grant is checked (validated exactly as the host loads it)",
    )
    .action((dir: string, options: { trust: string[]; policy?: string }) => {
      const trustRoots = readTrustRoots(options.trust.map((t) => resolve(ctx.io.cwd, t)));
      const policy = options.policy === undefined ? null : readPolicy(ctx.io.cwd, options.policy);
      const abs = resolve(ctx.io.cwd, dir);
      try {
        const v = verifyPlugin(abs, { trustRoots, policy });
        const e = v.evidence;
        ctx.print(
          [
            `OK ${inert(v.manifest.id)}@${inert(v.manifest.version)} (${inert(v.manifest.kind)})`,
            `  identity   verified (key ${inert(e.keyId)})`,
            `  integrity  verified (${inert(e.digest)})`,
            `  grant      ${e.authorityGrant === "verified" ? `verified (${e.capabilities.map(inert).join(", ")})` : "not checked (no --policy)"}`,
          ].join("\n"),
          {
            ok: true,
            dir: v.dir,
            id: v.manifest.id,
            version: v.manifest.version,
            kind: v.manifest.kind,
            evidence: e,
          },
        );
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (typeof code !== "string" || !REFUSALS.has(code)) throw error;
        const message = (error as Error).message;
        ctx.print(`REFUSED ${inert(dir)}: ${inert(code)}: ${inert(message)}`, { ok: false, dir: abs, code, message });
        ctx.setExit(EXIT.deny);
      }
    });
}
