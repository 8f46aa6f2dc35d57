import type { PluginKind } from "./plugin-new.js";

// The files `asp plugin new` writes, per kind. Each project builds, tests, packs, signs and is
// checked with no edits (apps/cli/test/plugin-new.test.ts compiles, packs and checks each).

/**
 * Versions of the tools the scaffold's package.json pins. They are this repository's own
 * (root package.json devDependencies; `apps/cli/test/plugin-new.test.ts` keeps them equal), so a
 * scaffold builds and tests with exactly what the toolkit is built and tested with.
 */
export const SCAFFOLD_TOOL_VERSIONS = Object.freeze({
  typescript: "6.0.3",
  vitest: "4.1.12",
  "@types/node": "20.19.43",
});

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** Keys and builds stay out of git. */
const GITIGNORE = "node_modules/\ndist/\n*.key\n";

/** Strict NodeNext, `src/` -> `dist/`, the same for every kind. */
const TSCONFIG = json({
  compilerOptions: {
    target: "ES2022",
    lib: ["ES2022"],
    module: "NodeNext",
    moduleResolution: "NodeNext",
    types: ["node"],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    verbatimModuleSyntax: true,
    skipLibCheck: true,
    rootDir: "src",
    outDir: "dist",
  },
  include: ["src"],
});

/** package.json: the SDK, the toolkit's tools at their pinned versions, the same scripts for every kind but `conformance`. */
function packageJson(
  name: string,
  sdk: string,
  toolkit: string,
  kind: { readonly description: string; readonly conformance: string },
): string {
  return json({
    name,
    version: "0.1.0",
    private: true,
    description: kind.description,
    type: "module",
    engines: { node: ">=20.19.0" },
    scripts: {
      build: "tsc -p tsconfig.json",
      test: "vitest run",
      conformance: kind.conformance,
      "pack:plugin": "asp-plugin-pack .",
      sign: "asp plugin sign dist/plugin",
      digest: "asp plugin digest dist/plugin",
    },
    dependencies: { "@asp/sdk": sdk },
    devDependencies: {
      "@asp/cli": toolkit,
      "@asp/plugin-pack": toolkit,
      ...SCAFFOLD_TOOL_VERSIONS,
    },
    aspPlugin: { entry: "dist/main.js" },
  });
}

/** The manifest the host verifies; `entry` is the packed bundle's name in `dist/plugin/`. */
function manifestJson(
  name: string,
  kind: PluginKind,
  capabilities: readonly string[],
  diagnosticSources: readonly string[],
): string {
  return json({
    id: name,
    version: "0.1.0",
    kind,
    entry: "main.js",
    capabilities,
    diagnosticSources,
    protocolVersion: "1.0",
    engines: { node: ">=20.19.0" },
  });
}

/** The files of a provider project, by path, in the order they are written. */
function providerFiles(name: string, sdk: string, toolkit: string): Record<string, string> {
  const source = name;
  return {
    "package.json": packageJson(name, sdk, toolkit, {
      description: "An ASP check provider: flags added TODO lines (scaffolded by asp plugin new).",
      conformance: "asp conformance -- node dist/main.js",
    }),
    "tsconfig.json": TSCONFIG,
    "asp-plugin.json": manifestJson(name, "provider", ["check"], [source]),
    "src/main.ts": `// An ASP check provider. The host launches the packed bundle (dist/plugin/main.js) as a
// subprocess and speaks JSON-RPC over stdio; the SDK handles framing, initialize, cancellation
// and validAsOf. Keep id, version and diagnosticSources equal to asp-plugin.json.
import { type AssessOutcome, defineProvider } from "@asp/sdk";

const MARKER = /\\bTODO\\b/;

defineProvider({
  initialize: { provider: { id: ${JSON.stringify(name)}, version: "0.1.0" }, diagnosticSources: [${JSON.stringify(source)}] },

  async assess(ctx): Promise<AssessOutcome> {
    const diagnostics: NonNullable<AssessOutcome["diagnostics"]>[number][] = [];
    for (const change of ctx.changes) {
      if (change.after === null || ctx.signal.aborted) continue;
      // Content comes only from the host (host/readBlob), never from the disk.
      const lines = (await ctx.readText(change.after)).split("\\n");
      lines.forEach((line, i) => {
        if (!MARKER.test(line)) return;
        diagnostics.push({
          source: ${JSON.stringify(source)},
          code: ${JSON.stringify(`${source}/todo`)},
          severity: "error",
          message: "A TODO marker was added; resolve it or track it in an issue.",
          range: { path: change.path, start: { line: i, character: 0 }, end: { line: i, character: line.length } },
          fingerprint: \`\${change.path}:\${line.trim()}\`,
        });
      });
    }
    return {
      status: ctx.signal.aborted ? "incomplete" : "complete",
      diagnostics,
      coverage: { sources: [${JSON.stringify(source)}] },
    };
  },
}).listen();
`,
    "test/main.test.ts": `import { fileURLToPath } from "node:url";
import { builtEntry, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterEach, describe, expect, it } from "vitest";

// Drives the built provider (dist/main.js, rebuilt when src/ is newer) as the host does: a
// subprocess speaking the real protocol, content served from an in-memory repository.
const entry = builtEntry(fileURLToPath(new URL("..", import.meta.url)));
let host: TestHost | undefined;

afterEach(async () => {
  await host?.shutdown();
  host = undefined;
});

async function assess(before: Record<string, string>, after: Record<string, string>) {
  host = new TestHost(entry, { repo: new MemoryRepo() });
  await host.initialize();
  const cs = host.repo.changeset(before, after);
  const assessment = await host.assess({ baseline: cs.after, changeset: cs });
  return { assessment, reads: host.reads(assessment.requestId) };
}

describe(${JSON.stringify(name)}, () => {
  it("flags a TODO line the change adds", async () => {
    const { assessment, reads } = await assess({ "a.ts": "x\\n" }, { "a.ts": "x // TODO\\n" });
    expect(assessment.status).toBe("complete");
    expect(assessment.diagnostics.map((d) => d.code)).toEqual([${JSON.stringify(`${source}/todo`)}]);
    // validAsOf.reads lists exactly the blobs the provider read through the host.
    expect(assessment.validAsOf.reads).toEqual(reads);
  });

  it("passes a change without TODO", async () => {
    const { assessment } = await assess({ "a.ts": "x\\n" }, { "a.ts": "y\\n" });
    expect(assessment.diagnostics).toEqual([]);
  });
});
`,
    "README.md": providerReadme(name),
    ".gitignore": GITIGNORE,
  };
}

function providerReadme(name: string): string {
  return `# ${name}

An ASP check provider scaffolded by \`asp plugin new\`: it flags lines with \`TODO\` that a change
adds (diagnostic source \`${name}\`, code \`${name}/todo\`, severity \`error\`). Edit \`src/main.ts\`; keep
\`asp-plugin.json\` (the manifest the host verifies) in step with it.

\`\`\`sh
npm install
npm run build                      # tsc -> dist/main.js
npm test                           # vitest, driving dist/main.js with @asp/sdk/testing
npm run conformance                # the host's protocol suite against dist/main.js
npx asp plugin keygen --out ../keys/team              # once; never commit the secret key
npm run pack:plugin -- --key ../keys/team            # bundle + sign -> dist/plugin/ (what a host runs)
npx asp conformance --plugin dist/plugin              # the packed plugin, digest bound
npx asp plugin digest dist/plugin --requirement todo  # the policy entries that admit it
\`\`\`

\`npm run sign -- --key KEY\` signs \`dist/plugin\` again (packing already signs it). To give the plugin
gate authority, pin it into a trusted policy with \`asp plugin pin\` and load \`dist/plugin\` from a
host configuration: see the toolkit's docs/plugins.md.
`;
}

/** The commands of an in-process plugin project, from install to the packed plugin checked as a host loads it. */
function inProcessCommands(): string {
  return `\`\`\`sh
npm install
npm run build                      # tsc -> dist/main.js
npm test                           # vitest, calling the port as the host does (register, init)
npx asp plugin keygen --out ../keys/team              # once; never commit the secret key
npm run pack:plugin -- --key ../keys/team            # bundle + sign -> dist/plugin/ (what a host loads)
npm run conformance -- --trust ../keys/team.pub      # asp plugin check: load dist/plugin as the host does, call the port once
npx asp plugin digest dist/plugin                     # the plugins[] entry that admits it
\`\`\`

\`npm run sign -- --key KEY\` signs \`dist/plugin\` again (packing already signs it). A host loads the
plugin only when its trusted policy grants the id, digest and every capability (\`asp plugin pin
dist/plugin --policy FILE\`) and its configuration names \`dist/plugin\`: see the toolkit's docs/plugins.md.
`;
}

/** The head of an in-process plugin's test: imports, and `instantiate()` calling register then init as the host does. */
function testPrelude(port: "Verifier" | "Sandbox", guard: string, kind: string): string {
  return `import { ${guard}, type ${port} } from "@asp/sdk";
import { describe, expect, it } from "vitest";
import plugin from "../src/main.js";

/** The port as the host builds it: register, then init (this ${kind} asks for no ports). */
function instantiate(): ${port} {
  let port: ${port} | undefined;
  plugin.register({
    registerInit: (i) => {
      port = i.init({} as never, { id: plugin.id, options: undefined });
    },
  });
  if (port === undefined) throw new Error("register did not call registerInit");
  return port;
}
`;
}

/** The files of a verifier project (a Reviewer and a Guardian), by path, in the order they are written. */
function verifierFiles(name: string, sdk: string, toolkit: string): Record<string, string> {
  const id = JSON.stringify(name);
  return {
    "package.json": packageJson(name, sdk, toolkit, {
      description:
        "An ASP verifier: reviews subjects for TODO markers and denies force pushes (scaffolded by asp plugin new).",
      conformance: "asp plugin check dist/plugin",
    }),
    "tsconfig.json": TSCONFIG,
    "asp-plugin.json": manifestJson(name, "verifier", ["review", "guardian"], []),
    "src/main.ts": `// An ASP verifier plugin: a Reviewer and a Guardian. The host verifies the packed folder
// (dist/plugin: signature, digest, policy grant), imports main.js in-process from its read-only
// copy, calls register, then init when it composes. Every answer is validated against the
// contracts schema before the host uses it, and the host alone decides what a verdict means.
// Keep id and capabilities equal to asp-plugin.json.
import {
  defineVerifier,
  type GuardianRequest,
  type GuardianResponse,
  type ReviewFinding,
  type ReviewRequest,
  type ReviewResponse,
  type Verifier,
} from "@asp/sdk";

/** Action classes the Guardian always denies. */
export const DENIED_ACTION_CLASSES: readonly string[] = ["git.force_push"];

const MARKER = /\\bTODO\\b/;

/**
 * The subject's texts by ref name: a string subject is the ref "subject", an object's string
 * fields are refs named by their keys. Adapt this to the subject your engine sends.
 */
function textsOf(subject: unknown): Array<[string, string]> {
  if (typeof subject === "string") return [["subject", subject]];
  if (typeof subject !== "object" || subject === null) return [];
  return Object.entries(subject).filter((e): e is [string, string] => typeof e[1] === "string");
}

/** Reviewer: one finding per ref whose text holds a TODO marker, resting on that ref. */
export function review(request: ReviewRequest): ReviewResponse {
  const findings = textsOf(request.subject)
    .filter(([, text]) => MARKER.test(text))
    .map(
      ([ref]): ReviewFinding => ({
        severity: "major",
        category: "unfinished_work",
        claim: "The candidate leaves a TODO marker in " + ref + ".",
        evidence_refs: [ref],
        title: "TODO left in " + ref,
      }),
    );
  return { kind: "review", verdict: findings.length > 0 ? "issues" : "pass", findings };
}

/** Guardian: deny the named action classes, allow the rest as low risk. */
export function guard(request: GuardianRequest): GuardianResponse {
  const denied = DENIED_ACTION_CLASSES.includes(request.actionClass);
  return {
    kind: "guardian",
    decision: denied ? "deny" : "allow",
    risk: denied ? "high" : "low",
    recoverable: !denied,
    rationale: request.actionClass + (denied ? " is never allowed by " : " is not a class denied by ") + ${id},
  };
}

/** The verifier port: what init returns. It asks the host for no ports (deps: {}). */
export const verifier: Verifier = {
  verify: async (request) => (request.kind === "review" ? review(request) : guard(request)),
};

export default defineVerifier({
  id: ${id},
  capabilities: ["review", "guardian"],
  register(reg) {
    reg.registerInit({ deps: {}, init: () => verifier });
  },
});
`,
    "test/main.test.ts": `${testPrelude("Verifier", "isVerifierPlugin", "verifier")}
describe(${id}, () => {
  it("is a branded verifier declaration for review and guardian", () => {
    expect(isVerifierPlugin(plugin)).toBe(true);
    expect(plugin.capabilities).toEqual(["review", "guardian"]);
  });

  it("review: flags a subject whose text holds TODO, resting on that ref", async () => {
    const r = await instantiate().verify({ kind: "review", subject: { diff: "+ x // TODO\\n", notes: "ok" } });
    expect(r).toMatchObject({ kind: "review", verdict: "issues" });
    expect(r.kind === "review" ? r.findings : []).toEqual([
      expect.objectContaining({ category: "unfinished_work", evidence_refs: ["diff"] }),
    ]);
  });

  it("review: passes a subject without TODO", async () => {
    expect(await instantiate().verify({ kind: "review", subject: "all done\\n" })).toEqual({
      kind: "review",
      verdict: "pass",
      findings: [],
    });
  });

  it("guardian: denies git.force_push, allows other classes", async () => {
    const ask = (actionClass: string) =>
      instantiate().verify({ kind: "guardian", actionDigest: "sha256:" + "0".repeat(64), actionClass, subject: {} });
    expect(await ask("git.force_push")).toMatchObject({ kind: "guardian", decision: "deny", recoverable: false });
    expect(await ask("fs.write")).toMatchObject({ kind: "guardian", decision: "allow", risk: "low" });
  });
});
`,
    "README.md": `# ${name}

An ASP verifier plugin scaffolded by \`asp plugin new --kind verifier\`: a Reviewer that flags a
subject whose text holds \`TODO\` (category \`unfinished_work\`, the ref as evidence) and a Guardian
that denies the action class \`git.force_push\`. Edit \`src/main.ts\`; keep \`asp-plugin.json\` (the
manifest the host verifies) in step with it.

${inProcessCommands()}`,
    ".gitignore": GITIGNORE,
  };
}

/** The files of an honest minimal sandbox project, by path, in the order they are written. */
function sandboxFiles(name: string, sdk: string, toolkit: string): Record<string, string> {
  const id = JSON.stringify(name);
  return {
    "package.json": packageJson(name, sdk, toolkit, {
      description: "An ASP sandbox that confines nothing and says so (scaffolded by asp plugin new).",
      conformance: "asp plugin check dist/plugin",
    }),
    "tsconfig.json": TSCONFIG,
    "asp-plugin.json": manifestJson(name, "sandbox", ["sandbox:content_api"], []),
    "src/main.ts": `// An honest minimal ASP sandbox plugin. The host verifies the packed folder (dist/plugin),
// imports main.js in-process from its read-only copy and validates every answer against the
// sandbox's grant (checkLaunchResult): a launch may report "isolated" or "mediated-write" only
// when the policy granted sandbox:bubblewrap, and never with direct write.
//
// This sandbox confines nothing, so it says so: launch returns the provider's launch unchanged,
// reported "advisory" with direct write and the reason. Give it a real mechanism (namespaces, a
// read-only bind of request.readOnly, nothing of request.deny) before you report more, and
// declare sandbox:bubblewrap only then: the host launches providers only through a sandbox that
// declares it. Keep id and capabilities equal to asp-plugin.json.
import { defineSandbox, type Sandbox } from "@asp/sdk";

/** The sandbox port: what init returns. */
export const sandbox: Sandbox = {
  async launch(request) {
    return {
      executable: request.executable,
      args: [...request.args],
      cwd: request.cwd,
      env: { ...request.env },
      mode: "advisory",
      mechanism: ${JSON.stringify(`${name}: none, the provider runs as a plain subprocess`)},
      directWrite: true,
      reason: ${JSON.stringify(`${name} does not confine the process: it can read and write whatever the host user can`)},
    };
  },
};

export default defineSandbox({
  id: ${id},
  capabilities: ["sandbox:content_api"],
  register(reg) {
    reg.registerInit({ deps: {}, init: () => sandbox });
  },
});
`,
    "test/main.test.ts": `${testPrelude("Sandbox", "isSandboxPlugin", "sandbox")}
const request = {
  executable: "/usr/bin/node",
  args: ["/opt/asp/plugins/demo/main.js"],
  cwd: "/opt/asp/plugins/demo",
  env: { PATH: "/usr/bin:/bin" },
  readOnly: ["/opt/asp/plugins/demo"],
  deny: ["/srv/repo", "/var/lib/asp/store"],
};

describe(${id}, () => {
  it("is a branded sandbox declaration", () => {
    expect(isSandboxPlugin(plugin)).toBe(true);
  });

  it("launches the provider unchanged and reports it advisory, with direct write and why", async () => {
    const r = await instantiate().launch?.(request);
    expect(r).toMatchObject({
      executable: request.executable,
      args: request.args,
      cwd: request.cwd,
      env: request.env,
      mode: "advisory",
      directWrite: true,
    });
    expect(r?.reason).toMatch(/does not confine/);
  });
});
`,
    "README.md": `# ${name}

An ASP sandbox plugin scaffolded by \`asp plugin new --kind sandbox\`. It is honest and minimal: its
\`launch\` returns the provider's launch unchanged and reports it \`advisory\` with direct write and
the reason, because it confines nothing. It declares \`sandbox:content_api\`; the host launches
providers only through a sandbox that declares and is granted \`sandbox:bubblewrap\`, and accepts
\`isolated\` or \`mediated-write\` only under that grant and without direct write. Give it a real
mechanism before you claim more. Edit \`src/main.ts\`; keep \`asp-plugin.json\` (the manifest the
host verifies) in step with it.

${inProcessCommands()}`,
    ".gitignore": GITIGNORE,
  };
}

/** The project files of each kind. */
export const FILES_OF: Readonly<
  Record<PluginKind, (name: string, sdk: string, toolkit: string) => Record<string, string>>
> = {
  provider: providerFiles,
  verifier: verifierFiles,
  sandbox: sandboxFiles,
};
