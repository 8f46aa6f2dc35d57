import type { Policy } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  type ActivePolicy,
  assessPolicyChange,
  POLICY_REQUIREMENT,
  parsePolicy,
  SELF_AUTHORIZATION_KINDS,
  type SelfAuthorizationKind,
} from "../src/index.js";
import { basePolicy, D, policyWith, SECRETS, TS } from "./fixtures/policies.js";

const base = parsePolicy(basePolicy());
const candidate = (edit: (p: Policy) => void): ActivePolicy => parsePolicy(policyWith(edit));

// host §7: every way a candidate may try to authorize its own changeset, one row each.
const ATTEMPTS: ReadonlyArray<readonly [SelfAuthorizationKind, string, (p: Policy) => void, string]> = [
  [
    "grants-new-provider",
    "pins and grants a provider the base does not know",
    (p) => {
      p.providers.push({ id: "asp.provider-lax", version: "9.9.9", digest: D(40) });
      p.grants.push({
        provider: "asp.provider-lax",
        version: "9.9.9",
        digest: D(40),
        requirement: "types",
        callSites: ["gate"],
      });
    },
    "/grants/2",
  ],
  [
    "grants-new-provider",
    "re-pins a granted provider at a new digest",
    (p) => {
      p.providers[0] = { ...TS, digest: D(41) };
      p.grants[0] = { ...(p.grants[0] as Policy["grants"][number]), digest: D(41) };
    },
    "/grants/0",
  ],
  [
    "adds-blocking-authority",
    "extends a granted provider to another requirement",
    (p) => {
      p.grants.push({
        provider: TS.id,
        version: TS.version,
        digest: TS.digest,
        requirement: "secrets",
        callSites: ["gate"],
      });
    },
    "/grants/2/callSites/0",
  ],
  [
    "adds-blocking-authority",
    "extends a grant to another call-site",
    (p) => {
      (p.grants[1] as Policy["grants"][number]).callSites = ["gate", "sweep"];
    },
    "/grants/1/callSites/1",
  ],
  [
    "lowers-assurance",
    "lowers gate assurance",
    (p) => {
      (p.assurance ?? {}).gate = "advisory";
    },
    "/assurance/gate",
  ],
  ["lowers-assurance", "drops an assurance section below the base", (p) => delete p.assurance, "/assurance/sweep"],
  [
    "removes-requirement",
    "removes a required requirement",
    (p) => {
      p.requirements = p.requirements.filter((r) => r.id !== "secrets");
      p.grants = p.grants.filter((g) => g.requirement !== "secrets");
    },
    "/requirements/1",
  ],
  [
    "weakens-requirement",
    "drops the gate call-site of a requirement",
    (p) => {
      (p.requirements[1] as Policy["requirements"][number]).callSites = ["sweep"];
      p.grants = p.grants.filter((g) => g.requirement !== "secrets");
    },
    "/requirements/1/callSites",
  ],
  [
    "weakens-requirement",
    "drops a source of a requirement",
    (p) => {
      p.requirements[0] = { ...(p.requirements[0] as Policy["requirements"][number]), sources: ["tsx"] };
    },
    "/requirements/0/sources",
  ],
  [
    "weakens-requirement",
    "changes the capability of a requirement",
    (p) => {
      (p.requirements[0] as Policy["requirements"][number]).capability = "inspect";
    },
    "/requirements/0/capability",
  ],
  [
    "opens-fail-policy-cell",
    "opens a sweep cell",
    (p) => {
      p.failPolicy = { ...p.failPolicy, crashed: { sweep: "open" } };
    },
    "/failPolicy/crashed/sweep",
  ],
  [
    "weakens-fail-policy-cell",
    "relaxes a gate deny to indeterminate",
    (p) => {
      p.failPolicy = { timed_out: { interactive: "open", gate: "indeterminate" } };
    },
    "/failPolicy/timed_out/gate",
  ],
  [
    "selects-host-implementation",
    "selects another host implementation",
    (p) => {
      p.host = { implementation: "acme.lenient-host", version: "1.0.0" };
    },
    "/host",
  ],
  ["selects-host-implementation", "drops the host pin", (p) => delete p.host, "/host"],
  ["lifts-severity-cap", "removes the cap on ungranted providers", (p) => delete p.severityCaps, "/severityCaps/0"],
  [
    "lifts-severity-cap",
    "raises a cap",
    (p) => {
      p.severityCaps = [{ authority: "ungranted", maxSeverity: "error" }];
    },
    "/severityCaps/0",
  ],
  [
    "widens-permissions",
    "loosens the default",
    (p) => {
      (p.permissions as NonNullable<Policy["permissions"]>).default = "allow";
    },
    "/permissions/default",
  ],
  [
    "widens-permissions",
    "adds an allow rule",
    (p) => {
      p.permissions?.rules.push({ tool: "shell", path: "scripts/**", outcome: "allow" });
    },
    "/permissions/rules/4",
  ],
  [
    "widens-permissions",
    "drops a deny rule",
    (p) => {
      (p.permissions as NonNullable<Policy["permissions"]>).rules =
        p.permissions?.rules.filter((r) => r.outcome !== "deny") ?? [];
    },
    "/permissions/rules/2",
  ],
  [
    "widens-permissions",
    "shrinks the credential fence",
    (p) => {
      (p.permissions as NonNullable<Policy["permissions"]>).credentialFence = [];
    },
    "/permissions/credentialFence/0",
  ],
  [
    "grants-plugin",
    "lets a new plugin load",
    (p) => {
      p.plugins?.push({ id: "acme.guardian", digest: D(42), capabilities: ["guardian"] });
    },
    "/plugins/1",
  ],
  [
    "grants-plugin",
    "gives a plugin more capabilities",
    (p) => {
      p.plugins = [{ id: "asp.verifier-rules", digest: D(9), capabilities: ["review", "guardian"] }];
    },
    "/plugins/0/capabilities",
  ],
];

describe("assessPolicyChange", () => {
  it("has a row for every self-authorization kind", () => {
    expect(new Set(ATTEMPTS.map(([kind]) => kind))).toEqual(new Set(SELF_AUTHORIZATION_KINDS));
  });

  describe("H7.3 when the candidate self-authorizes", () => {
    it.each(ATTEMPTS)("%s: %s", (kind, _why, edit, pointer) => {
      const r = assessPolicyChange(base, candidate(edit));
      expect(r.status).toBe("pending");
      expect(r.selfAuthorizing).toBe(true);
      expect(r.attempts).toContainEqual(expect.objectContaining({ kind, pointer }));
      // host §7: degraded coverage with reason policy-self-authorization, one entry per attempt
      expect(r.degraded).toHaveLength(r.attempts.length);
      for (const d of r.degraded) {
        expect(d).toMatchObject({
          reason: "policy-self-authorization",
          failClass: "policy_self_authorization",
          failOpen: false,
        });
        expect(d.requirement ?? d.provider).toBeDefined();
      }
      expect(r.changes.some((c) => c.selfAuthorization)).toBe(true);
    });

    it("names the requirement and provider in the degraded entry when there is one", () => {
      const r = assessPolicyChange(base, candidate(ATTEMPTS[0]?.[2] as (p: Policy) => void));
      expect(r.degraded[0]).toMatchObject({ requirement: "types", provider: "asp.provider-lax" });
      const lowered = assessPolicyChange(
        base,
        candidate((p) => {
          (p.assurance ?? {}).gate = "advisory";
        }),
      );
      expect(lowered.degraded[0]?.requirement).toBe(POLICY_REQUIREMENT);
    });
  });

  describe("when the candidate only tightens or edits neutral fields", () => {
    const NEUTRAL: ReadonlyArray<readonly [string, (p: Policy) => void]> = [
      ["nothing", () => {}],
      [
        "the description",
        (p) => {
          p.description = "reworded";
        },
      ],
      [
        "a new requirement without grants",
        (p) => void p.requirements.push({ id: "lint", capability: "check", sources: ["eslint"], callSites: ["gate"] }),
      ],
      [
        "a requirement gaining a call-site",
        (p) => {
          (p.requirements[1] as Policy["requirements"][number]).callSites = ["interactive", "gate", "sweep"];
        },
      ],
      ["a removed grant", (p) => void p.grants.pop()],
      [
        "a new pin without a grant",
        (p) => void p.providers.push({ id: "asp.provider-lint", version: "1.0.0", digest: D(43) }),
      ],
      [
        "a stricter fail-policy cell",
        (p) => {
          p.failPolicy = {
            timed_out: { interactive: "open", gate: "deny" },
            crashed: { gate: "deny", interactive: "indeterminate" },
          };
        },
      ],
      [
        "stronger assurance",
        (p) => {
          p.assurance = { interactive: "gated", gate: "isolated", sweep: "mediated-write" };
        },
      ],
      [
        "a lower cap",
        (p) => {
          p.severityCaps = [{ authority: "ungranted", maxSeverity: "info" }];
        },
      ],
      [
        "a new deny rule and fence entry",
        (p) => {
          p.permissions?.rules.push({ tool: "fetch", network: "*.evil.example", outcome: "deny" });
          p.permissions?.credentialFence?.push("*.kdbx");
        },
      ],
      [
        "a removed plugin",
        (p) => {
          p.plugins = [];
        },
      ],
      [
        "budgets",
        (p) => {
          p.budgets = { editRetries: 1 };
        },
      ],
      [
        "spelling out a built-in default cell",
        (p) => {
          p.failPolicy = { ...p.failPolicy, stale: { gate: "indeterminate" } };
        },
      ],
      ["a reordered document", (p) => void p.requirements.reverse()],
    ];
    it.each(NEUTRAL)("%s is no self-authorization", (_why, edit) => {
      const r = assessPolicyChange(base, candidate(edit));
      expect(r.attempts).toEqual([]);
      expect(r.selfAuthorizing).toBe(false);
      expect(r.degraded).toEqual([]);
      expect(r.changes.every((c) => !c.selfAuthorization)).toBe(true);
    });

    it("still lists the plain changes", () => {
      const r = assessPolicyChange(
        base,
        candidate((p) => {
          p.description = "reworded";
          p.grants.pop();
          p.budgets = { editRetries: 1 };
        }),
      );
      expect(r.changes.map((c) => `${c.section}:${c.change}:${c.key}`)).toEqual([
        "description:changed:description",
        `grants:removed:${SECRETS.id} -> secrets`,
        "budgets:removed:callbacksPerRequest",
        "budgets:added:editRetries",
        "budgets:removed:timeoutMs",
      ]);
    });
  });

  describe("when several attempts are combined", () => {
    it("reports each of them", () => {
      const r = assessPolicyChange(
        base,
        candidate((p) => {
          for (const [, , edit] of ATTEMPTS.filter(
            ([k]) => k === "lowers-assurance" || k === "selects-host-implementation",
          ))
            edit(p);
        }),
      );
      expect(new Set(r.attempts.map((a) => a.kind))).toEqual(
        new Set(["lowers-assurance", "selects-host-implementation"]),
      );
    });
  });

  describe("when an argument is not an active policy", () => {
    it("throws ASP_POLICY_NOT_ACTIVE: a raw candidate is never compared unparsed", () => {
      expect(() => assessPolicyChange(base, basePolicy() as unknown as ActivePolicy)).toThrowWithCode(
        "ASP_POLICY_NOT_ACTIVE",
      );
    });
  });
});
