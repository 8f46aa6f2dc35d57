import { readFileSync, writeFileSync } from "node:fs";

/**
 * Rewrite the policy file at `file` without the `secrets` requirement and its grant: a valid
 * policy, and a weaker one (what a candidate would like the host to trust; issue 32 hole 3, §7).
 */
export function dropSecrets(file: string): void {
  const policy = JSON.parse(readFileSync(file, "utf8")) as {
    requirements: Array<{ id: string }>;
    grants: Array<{ requirement: string }>;
  };
  policy.requirements = policy.requirements.filter((r) => r.id !== "secrets");
  policy.grants = policy.grants.filter((g) => g.requirement !== "secrets");
  writeFileSync(file, JSON.stringify(policy, null, 2));
}
