import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Verifier, VerifyResponse } from "@asp/contracts";

const SCRIPT = fileURLToPath(new URL("../fixtures/pass-reviewer.mjs", import.meta.url));

/**
 * A Reviewer port over a real subprocess (fixtures/pass-reviewer.mjs) that passes what it is
 * shown: for tests that need real review audits committed, not a judgment.
 */
export function passingReviewer(): {
  identity: { actor_id: string; session_id: string; fingerprint: string };
  verifier: Verifier;
} {
  const verifier: Verifier = {
    verify: (request) =>
      new Promise<VerifyResponse>((resolve, reject) => {
        const child = spawn(process.execPath, [SCRIPT], { stdio: ["pipe", "pipe", "ignore"] });
        let out = "";
        child.stdout.on("data", (c: Buffer) => {
          out += c.toString("utf8");
        });
        child.on("error", reject);
        child.on("close", () => {
          try {
            resolve(JSON.parse(out) as VerifyResponse);
          } catch (error) {
            reject(error);
          }
        });
        child.stdin.end(`${JSON.stringify({ subject: request.kind === "review" ? request.subject : null })}\n`);
      }),
  };
  return { identity: { actor_id: "reviewer", session_id: "rs-1", fingerprint: "model-b;cfg-1" }, verifier };
}
