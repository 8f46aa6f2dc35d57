import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Policy } from "@asp/contracts";
import { isActivePolicy, parsePolicy } from "@asp/policy";
import { ThsError } from "./errors.js";
import type { HostPolicy } from "./tokens.js";

/**
 * Load trusted policy exactly as the host does: a file path (read as JSON), a policy document,
 * or an already parsed `ActivePolicy`; validated by `@asp/policy`'s `parsePolicy` (schema,
 * gate floor, pins). The CLI's `status` and `plugin verify --policy` call this same function, so
 * a policy they accept is one the host accepts.
 * @throws ThsError `ASP_THS_BAD_POLICY` when the file cannot be read; PolicyError
 *   (`ASP_POLICY_NOT_JSON`, `ASP_POLICY_DUPLICATE_KEY`, …) when the text or document is invalid.
 */
export function loadPolicy(input: string | Policy | HostPolicy): HostPolicy {
  if (isActivePolicy(input)) return input;
  let raw: unknown = input;
  let what = "policy";
  if (typeof input === "string") {
    what = resolve(input);
    try {
      // The text, not JSON.parse's object: parsePolicy refuses duplicate keys, which
      // JSON.parse would silently resolve to the last one.
      raw = readFileSync(what, "utf8");
    } catch (cause) {
      throw new ThsError("ASP_THS_BAD_POLICY", `cannot read policy ${what}: ${(cause as Error).message}`, {
        cause,
        data: { path: what },
      });
    }
  }
  return parsePolicy(raw, {
    what: typeof input === "string" ? `policy ${what}` : "policy",
    ...(typeof input === "string" ? { origin: { kind: "file" as const, path: what } } : {}),
  });
}

// Threat model invariant 14: a trusted revision is one the change cannot write. A full object id
// names exactly one commit (content-addressed: nothing the candidate commits can take its name;
// git reads a full hex id as an object id before any ref of that name). A remote-tracking ref
// moves only when the operator fetches; it is trusted when what it tracks is a protected branch.
// Everything else resolves through state the candidate's checkout can move: `HEAD` and `@`,
// every `~`, `^`, `@{…}` or `:` suffix, local branches and tags, `FETCH_HEAD`, `ORIG_HEAD`, …
const FULL_COMMIT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const REMOTE_TRACKING_REF = /^refs\/remotes\/(?:[A-Za-z0-9_-][A-Za-z0-9._-]*\/)+[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/**
 * True when `revision` is a form the change under evaluation cannot write (threat model
 * invariant 14): a full 40-hex (or 64-hex, SHA-256 repositories) lower-case commit id, or a
 * remote-tracking ref `refs/remotes/<remote>/<branch>` (trusted only as far as the operator's
 * fetch of a protected branch makes it so).
 */
export function isTrustedPolicyRevision(revision: string): boolean {
  if (FULL_COMMIT_ID.test(revision)) return true;
  return (
    REMOTE_TRACKING_REF.test(revision) &&
    !revision.includes("..") &&
    !revision.split("/").some((part) => part.endsWith(".lock") || part.endsWith("."))
  );
}

/**
 * Refuse a base-revision policy whose revision the candidate could write (threat model
 * invariant 14): `HEAD~1`, `main`, `FETCH_HEAD`, a short id, a tag … Returns the revision.
 * @throws ThsError `ASP_THS_POLICY_REVISION_UNTRUSTED`, with the next step: pin the full commit
 *   id of the protected branch (`git rev-parse refs/remotes/origin/main`).
 * @example
 * ```ts
 * checkPolicyRevision("3f2c…e91a"); // a full commit id: returned
 * checkPolicyRevision("HEAD~1"); // throws ASP_THS_POLICY_REVISION_UNTRUSTED
 * ```
 */
export function checkPolicyRevision(revision: string, what = "host configuration"): string {
  if (isTrustedPolicyRevision(revision)) return revision;
  throw new ThsError(
    "ASP_THS_POLICY_REVISION_UNTRUSTED",
    `${what}: policy.git ${JSON.stringify(revision)} is a revision the change under evaluation can write ` +
      "(HEAD-relative, a local branch or tag, FETCH_HEAD, a short id …), so it cannot name the trusted policy. " +
      "Pin a full commit id of the protected branch instead: run `git rev-parse refs/remotes/origin/main` " +
      '(after `git fetch origin main`) and set "policy": { "git": "<the 40-hex id it prints>", "path": … }, ' +
      'or name the remote-tracking ref itself ("git": "refs/remotes/origin/main").',
    { data: { pointer: "/policy/git", revision } },
  );
}
