import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git } from "@asp/test-utils";
import { REPO_ROOT } from "./helpers.js";

/** The four signed example plugins, as `pnpm build` leaves them. */
export const EXAMPLE_PLUGINS = [
  "provider-typescript",
  "provider-secrets",
  "provider-text-edit",
  "provider-import-graph",
];

/** The two signed example sandbox plugins: provider confinement and staged apply (issue 13). */
export const EXAMPLE_SANDBOXES = ["sandbox-bubblewrap", "sandbox-staged-snapshot"];

/** A made-up key in the shape of an AWS access key id: AKIA + 16 uppercase letters and digits. */
export const FAKE_AWS_KEY = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");

/**
 * A copy of examples/demo-repo as a git repository (one commit), beside a trusted host
 * configuration of its own (outside the repository) with a fresh persistent store, the example
 * policy, the demo trust root and the signed example plugins (with `sandboxes`, also the two
 * sandbox plugins, as examples/asp.host.json names them).
 */
export function exampleCopy(options: { readonly sandboxes?: boolean } = {}): {
  root: string;
  repo: string;
  config: string;
} {
  const examples = join(REPO_ROOT, "examples");
  const root = mkdtempSync(join(tmpdir(), "asp-e2e-"));
  const repo = join(root, "demo-repo");
  cpSync(join(examples, "demo-repo"), repo, { recursive: true });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "base");
  const config = join(root, "asp.host.json");
  writeFileSync(
    config,
    JSON.stringify({
      store: join(root, "store"),
      policy: join(examples, "asp.policy.json"),
      trustRoots: [join(examples, "keys", "example.key.pub")],
      plugins: [...(options.sandboxes === true ? EXAMPLE_SANDBOXES : []), ...EXAMPLE_PLUGINS].map((p) =>
        join(REPO_ROOT, "plugins", p, "dist", "plugin"),
      ),
      providers: [],
    }),
  );
  return { root, repo, config };
}

/** Stages 2 and 4 on, review only: what examples/asp.host.json sets for `asp auto run`. */
export const AUTO_MODE = {
  stages: { stage2_auto_run_storage: true, stage4_review_completion_gate: true },
  result_review_mode: "review_only",
};

/**
 * {@link exampleCopy} with the two sandbox plugins (a Reviewer or Guardian plugin runs only under
 * sandbox-bubblewrap, ADR 0011) whose host configuration also loads `plugins` (folders) and sets
 * `extra` top-level fields (`autoMode`, `pluginOptions` ...): the trusted configuration of an Auto
 * Run test.
 */
export function autoModeCopy(
  plugins: readonly string[],
  extra: Readonly<Record<string, unknown>>,
): { root: string; repo: string; config: string } {
  const copy = exampleCopy({ sandboxes: true });
  const config = JSON.parse(readFileSync(copy.config, "utf8")) as { plugins: string[] };
  writeFileSync(copy.config, JSON.stringify({ ...config, plugins: [...config.plugins, ...plugins], ...extra }));
  return copy;
}
