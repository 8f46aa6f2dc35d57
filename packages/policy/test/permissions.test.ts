import { describe, expect, it } from "vitest";
import {
  type ActivePolicy,
  classifyAction,
  DEFAULT_CREDENTIAL_FENCE,
  type PermissionAction,
  parsePolicy,
} from "../src/index.js";
import { basePolicy, policyWith } from "./fixtures/policies.js";

const policy = parsePolicy(basePolicy());

describe("classifyAction", () => {
  describe("when a rule matches", () => {
    const cases: ReadonlyArray<readonly [PermissionAction, "allow" | "ask" | "deny", number | null]> = [
      [{ tool: "read_file", path: "src/index.ts" }, "allow", 0],
      [{ tool: "read_file", path: "./src/a/../b.ts" }, "allow", 0],
      [{ tool: "write_file", path: "src/index.ts" }, "ask", 1],
      [{ tool: "shell" }, "deny", 2],
      [{ tool: "shell", path: "src/x.sh" }, "deny", 2],
      [{ tool: "fetch", network: "registry.npmjs.org" }, "allow", 3],
      [{ tool: "fetch", network: "REGISTRY.NPMJS.ORG" }, "allow", 3],
      [{ tool: "fetch", network: "evil.example" }, "ask", null],
      [{ tool: "fetch" }, "ask", null],
      [{ tool: "read_file", path: "docs/a.md" }, "ask", null],
      [{ tool: "read_file" }, "ask", null],
      [{ tool: "delete_file", path: "src/a.ts" }, "ask", null],
    ];
    it.each(cases)("%o is %s (rule %s)", (action, outcome, ruleIndex) => {
      const r = classifyAction(policy, action);
      expect(r.outcome).toBe(outcome);
      expect(r.ruleIndex).toBe(ruleIndex);
      expect(r.fenced).toBe(false);
    });
  });

  describe("when several rules match", () => {
    it("AM.invariants.6 the most restrictive outcome wins, whatever the rule order", () => {
      const rules = [
        { tool: "*", outcome: "allow" as const },
        { tool: "write_file", path: "**/*.lock", outcome: "deny" as const },
        { tool: "write_*", outcome: "ask" as const },
      ];
      for (const order of [rules, [...rules].reverse()]) {
        const p = parsePolicy(policyWith((d) => (d.permissions = { default: "deny", rules: order })));
        expect(classifyAction(p, { tool: "write_file", path: "pnpm.lock" }).outcome).toBe("deny");
        expect(classifyAction(p, { tool: "write_file", path: "src/a.ts" }).outcome).toBe("ask");
        expect(classifyAction(p, { tool: "read_file", path: "src/a.ts" }).outcome).toBe("allow");
      }
    });
  });

  // The credential fence promotes a matching allow to ask, never relaxes a deny.
  describe("when the path is credential-shaped", () => {
    const allowAll = parsePolicy(
      policyWith((d) => (d.permissions = { default: "allow", rules: [{ tool: "*", outcome: "allow" }] })),
    );
    const fenced = [
      ".env",
      "app/.env",
      ".env.production",
      "config/prod.env",
      "certs/server.pem",
      "keys/tls.key",
      "home/me/.ssh/id_rsa",
      "id_rsa.pub",
      "id_ed25519",
      "aws_credentials.json",
      "deploy/credentials/token.txt",
      ".aws/credentials",
      "home/u/.aws/config",
      ".config/gcloud/application_default_credentials.json",
      ".azure/accessTokens.json",
      ".kube/config",
      ".docker/config.json",
      ".npmrc",
      ".netrc",
      ".git-credentials",
      "APP/.ENV",
      "/home/u/.ssh/known_hosts",
    ];
    it.each(fenced)("AM.stage7.2 AM.terminals.8 promotes allow to ask for %s", (path) => {
      const r = classifyAction(allowAll, { tool: "read_file", path });
      expect(r).toMatchObject({ outcome: "ask", fenced: true });
      expect(r.fence).not.toBeNull();
    });

    it("uses the policy's own fence in addition to the built-in one", () => {
      const r = classifyAction(policy, { tool: "read_file", path: "src/db.secret.json" });
      expect(r).toMatchObject({ outcome: "ask", fenced: true, fence: "*.secret.json", ruleIndex: 0 });
    });

    it.each(["src/environment.ts", "src/keyboard.ts", "README.md", "src/envelope.ts"])("leaves %s alone", (path) => {
      expect(classifyAction(allowAll, { tool: "read_file", path }).outcome).toBe("allow");
    });

    it("AM.stage7.2 never relaxes a deny or an ask", () => {
      expect(classifyAction(policy, { tool: "shell", path: ".env" }).outcome).toBe("deny");
      expect(classifyAction(policy, { tool: "write_file", path: "src/.env" })).toMatchObject({
        outcome: "ask",
        fenced: false,
      });
    });

    const samples: Record<string, string> = {
      ".env": "a/.env",
      ".env.*": ".env.local",
      "*.env": "prod.env",
      "*.pem": "ca.pem",
      "*.key": "tls.key",
      "*.p12": "cert.p12",
      "*.pfx": "cert.pfx",
      "id_rsa*": "id_rsa",
      "id_dsa*": "id_dsa.pub",
      "id_ecdsa*": "id_ecdsa",
      "id_ed25519*": "id_ed25519",
      "*credentials*": "credentials",
      ".netrc": ".netrc",
      ".npmrc": "pkg/.npmrc",
      ".pypirc": ".pypirc",
      ".git-credentials": ".git-credentials",
      ".ssh/**": ".ssh/config",
      ".gnupg/**": ".gnupg/pubring.kbx",
      ".aws/**": ".aws/config",
      ".azure/**": ".azure/config",
      ".config/gcloud/**": ".config/gcloud/configurations/config_default",
      ".kube/**": ".kube/config",
      ".docker/config.json": ".docker/config.json",
    };
    it.each(DEFAULT_CREDENTIAL_FENCE.map((g) => [g, samples[g] as string]))(
      "built-in glob %s fences %s",
      (_glob, path) => {
        expect(path).toBeDefined();
        expect(classifyAction(allowAll, { tool: "read_file", path })).toMatchObject({ outcome: "ask", fenced: true });
      },
    );
  });

  describe("when the path leaves the workspace", () => {
    it("does not match path rules, and an allow becomes ask", () => {
      expect(classifyAction(policy, { tool: "read_file", path: "src/../../etc/passwd" }).outcome).toBe("ask");
      const allowAll = parsePolicy(policyWith((d) => (d.permissions = { default: "allow", rules: [] })));
      expect(classifyAction(allowAll, { tool: "read_file", path: "../x" })).toMatchObject({
        outcome: "ask",
        fenced: true,
      });
    });
  });

  describe("when the policy has no permissions section", () => {
    it("asks", () => {
      const bare = parsePolicy(policyWith((d) => delete d.permissions));
      expect(classifyAction(bare, { tool: "read_file", path: "src/a.ts" })).toMatchObject({
        outcome: "ask",
        rule: null,
      });
    });
  });

  describe("when the action is malformed", () => {
    it.each([
      [{ tool: "" }],
      [{ tool: "  " }],
      [{ tool: 3 }],
      [{ tool: "read_file", path: "" }],
      [{ tool: "fetch", network: 443 }],
    ])("throws ASP_POLICY_INVALID_ACTION for %o", (action) => {
      expect(() => classifyAction(policy, action as unknown as PermissionAction)).toThrowWithCode(
        "ASP_POLICY_INVALID_ACTION",
      );
    });

    it("throws ASP_POLICY_NOT_ACTIVE for a raw document", () => {
      expect(() => classifyAction(basePolicy() as unknown as ActivePolicy, { tool: "x" })).toThrowWithCode(
        "ASP_POLICY_NOT_ACTIVE",
      );
    });
  });
});
