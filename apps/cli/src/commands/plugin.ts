import { resolve } from "node:path";
import { CALL_SITES, type CallSite, type Digest, type PluginManifest, type Policy } from "@asp/contracts";
import {
  assertRequirementsExist,
  digestPlugin,
  type GrantRequest,
  PLUGIN_REFUSAL_CODES,
  type PolicySnippet,
  pinInPolicy,
  pinPolicyFile,
  policySnippet,
  readPluginManifest,
  readTrustRoots,
  signPlugin,
  verifyPlugin,
  writeKeyPair,
} from "@asp/plugin-host";
import { loadPolicy } from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";
import { registerPluginCheck } from "./plugin-check.js";
import { registerPluginNew } from "./plugin-new.js";

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

/**
 * `--call-sites gate,sweep`: a comma-separated list of call-sites from the contracts vocabulary.
 *
 * @throws UsageError `ASP_CLI_USAGE` naming the unknown call-site and the known ones.
 */
function parseCallSites(value: string): CallSite[] {
  const sites = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  const unknown = sites.find((s) => !(CALL_SITES as readonly string[]).includes(s));
  if (sites.length === 0 || unknown !== undefined) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      `--call-sites ${JSON.stringify(value)}: ${unknown === undefined ? "no call-site" : `unknown call-site ${JSON.stringify(unknown)}`}; use a comma-separated list of ${CALL_SITES.join(", ")}`,
      { data: { callSites: value, known: CALL_SITES } },
    );
  }
  return [...new Set(sites)] as CallSite[];
}

/** A placeholder requirement id for the grant skeleton when `--requirement` is not given. */
const REQUIREMENT_PLACEHOLDER = "<requirement>";

/** The plugin at `dir` (its tree digest and manifest) and the policy entries that admit it. */
function snippetOf(
  cwd: string,
  dir: string,
  requirements: readonly string[],
  callSites: readonly CallSite[],
): {
  dir: string;
  files: number;
  manifest: PluginManifest;
  digest: Digest;
  grants: GrantRequest[];
  snippet: PolicySnippet;
} {
  const d = digestPlugin(resolve(cwd, dir));
  const { manifest } = readPluginManifest(d.dir);
  const grants = requirements.map((requirement) => ({ requirement, callSites }));
  return {
    dir: d.dir,
    files: d.files,
    manifest,
    digest: d.digest,
    grants,
    snippet: policySnippet(manifest, d.digest, grants),
  };
}

/** The snippet as the policy arrays it goes into, ready to merge into a policy document. */
const asPolicyArrays = (s: PolicySnippet) => ({
  providers: s.provider === null ? [] : [s.provider],
  grants: s.grants,
  plugins: [s.plugin],
});

const TREE_DIGEST_NOTE =
  "the digest is the plugin's tree digest: every file in the folder except asp-plugin.sig, the digest asp-plugin.sig signs";

/** `asp plugin new | check | keygen | sign | digest | pin | verify`: sign plugins, pin them in policy, check them as the host would. */
export function registerPlugin(program: Command, ctx: CliContext): void {
  const plugin = program
    .command("plugin")
    .description("scaffold, sign and pin plugins, and verify them as the host would load them");

  registerPluginNew(plugin, ctx);
  registerPluginCheck(plugin, ctx);

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
    .description(
      "print the plugin's tree digest and the policy entries that admit it: the provider pin, a grant skeleton, the plugins[] entry",
    )
    .argument("<dir>", "the plugin folder")
    .option("--requirement <id>", "name the requirement in the grant skeleton (repeatable)", collect)
    .option("--call-sites <list>", "call-sites of the grant skeleton, comma-separated", "gate")
    .action((dir: string, options: { requirement?: string[]; callSites: string }) => {
      const callSites = parseCallSites(options.callSites);
      const named = options.requirement ?? [];
      const d = digestPlugin(resolve(ctx.io.cwd, dir));
      const { manifest } = readPluginManifest(d.dir);
      const { digest, files } = d;
      // Without --requirement a provider still gets a skeleton, with a placeholder to replace.
      const requirements = named.length > 0 || manifest.kind !== "provider" ? named : [REQUIREMENT_PLACEHOLDER];
      const snippet = policySnippet(
        manifest,
        digest,
        requirements.map((requirement) => ({ requirement, callSites })),
      );
      const human = [
        `${inert(manifest.id)}@${inert(manifest.version)} (${inert(manifest.kind)}) ${inert(digest)} (${files} files)`,
        `  ${TREE_DIGEST_NOTE}`,
        "",
      ];
      if (snippet.provider !== null) {
        human.push(
          "provider pin (add to the trusted policy's providers[]):",
          JSON.stringify(snippet.provider, null, 2),
          "",
        );
        human.push(
          `grant skeleton (add to grants[]; the requirement must be defined in requirements[] and required at ${callSites.join(", ")}):`,
          ...snippet.grants.map((g) => JSON.stringify(g, null, 2)),
          "",
        );
      }
      human.push("plugin grant (add to plugins[]):", JSON.stringify(snippet.plugin, null, 2), "");
      human.push(
        `or write them into a policy: asp plugin pin ${inert(dir)} --policy FILE${snippet.provider === null ? "" : ` --requirement ${inert(named[0] ?? "R")} --call-sites ${callSites.join(",")}`}`,
      );
      ctx.print(human.join("\n"), {
        dir: d.dir,
        id: manifest.id,
        version: manifest.version,
        kind: manifest.kind,
        digest,
        digestOf: "tree",
        files,
        grant: snippet.plugin,
        policy: asPolicyArrays(snippet),
      });
    });

  plugin
    .command("pin")
    .description(
      "write the plugin's provider pin, grant and plugins[] entry into a trusted policy file, validated as the host validates it",
    )
    .argument("<dir>", "the plugin folder")
    .requiredOption("--policy <file>", "the trusted policy file to update (it must already define the requirement)")
    .option("--requirement <id>", "grant the provider this requirement (repeatable)", collect)
    .option("--call-sites <list>", "call-sites of the grant, comma-separated", "gate")
    .option("--dry-run", "print the resulting policy and write nothing", false)
    .action((dir: string, options: { policy: string; requirement?: string[]; callSites: string; dryRun: boolean }) => {
      const callSites = parseCallSites(options.callSites);
      const { manifest, digest, grants, snippet } = snippetOf(ctx.io.cwd, dir, options.requirement ?? [], callSites);
      const r = pinPolicyFile(
        resolve(ctx.io.cwd, options.policy),
        (policy) => {
          assertRequirementsExist(policy, grants, manifest);
          return pinInPolicy(policy, [snippet]);
        },
        { write: !options.dryRun },
      );
      const what = `${inert(manifest.id)}@${inert(manifest.version)} ${inert(digest)}`;
      const status = options.dryRun
        ? `dry run: ${r.changed ? "would pin" : "already pins"} ${what} in ${inert(r.path)} (nothing written)`
        : r.changed
          ? `pinned ${what} in ${inert(r.path)}`
          : `${inert(r.path)} already pins ${what}`;
      ctx.print(
        [
          status,
          `  policy digest ${inert(r.policyDigest)} (validated as the host loads it)`,
          ...(options.dryRun ? ["", r.text.trimEnd()] : []),
        ].join("\n"),
        {
          path: r.path,
          id: manifest.id,
          version: manifest.version,
          digest,
          changed: r.changed,
          written: r.written,
          dryRun: options.dryRun,
          policyDigest: r.policyDigest,
          pinned: asPolicyArrays(snippet),
          ...(options.dryRun ? { policy: r.policy } : {}),
        },
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
