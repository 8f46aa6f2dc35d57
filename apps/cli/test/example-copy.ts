import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
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
