import { type Static, Type } from "@sinclair/typebox";
import { FINDING_SEVERITIES, GUARDIAN_DECISIONS, REVIEW_VERDICTS, RISK_LEVELS } from "../vocabularies.js";
import { AssuranceModeT, Closed, StringEnum, TransactionGuaranteeT } from "./common.js";

// What an in-process verifier or sandbox plugin returns. The host validates every answer
// against these closed schemas before using it (issue 12 item 4): a plugin's answer is
// untrusted data, like a provider's.

const Text = (maxLength: number) => Type.String({ maxLength });

/** A Reviewer's answer: a verdict and bounded findings. */
const ReviewResponse = Type.Object(
  {
    kind: Type.Literal("review"),
    verdict: StringEnum(REVIEW_VERDICTS),
    findings: Type.Array(
      Type.Object(
        {
          severity: StringEnum(FINDING_SEVERITIES),
          category: Type.String({ minLength: 1, maxLength: 128, pattern: "^[a-z][a-z0-9_.-]*$" }),
          claim: Type.String({ minLength: 1, maxLength: 10_000 }),
          evidence_refs: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
            maxItems: 1_000,
            uniqueItems: true,
          }),
          title: Type.String({ minLength: 1, maxLength: 1_000 }),
          detail: Type.Optional(Text(10_000)),
          path: Type.Optional(Text(4_096)),
        },
        Closed,
      ),
      { maxItems: 1_000 },
    ),
    /**
     * The tokens the answer cost, as the model endpoint reported them: Auto Mode meters them
     * against the run's extra-token budget (a Reviewer that cannot say reports nothing).
     */
    usage: Type.Optional(
      Type.Object(
        {
          input_tokens: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }),
          output_tokens: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }),
        },
        Closed,
      ),
    ),
  },
  Closed,
);

/** A Guardian's answer about one permission request. */
const GuardianResponse = Type.Object(
  {
    kind: Type.Literal("guardian"),
    decision: StringEnum(GUARDIAN_DECISIONS),
    risk: StringEnum(RISK_LEVELS),
    recoverable: Type.Boolean(),
    rationale: Text(10_000),
  },
  Closed,
);

/** A verifier plugin's answer (`Verifier.verify`). */
export const PluginVerifyResponseSchema = Type.Union([ReviewResponse, GuardianResponse]);
export type PluginVerifyResponse = Static<typeof PluginVerifyResponseSchema>;

/** What a sandbox plugin reports it achieved (`Sandbox.stage`); the guarantee is checked against its grant. */
export const PluginStageResultSchema = Type.Object(
  {
    applied: Type.Boolean(),
    guarantee: TransactionGuaranteeT,
    detail: Type.Optional(Text(10_000)),
  },
  Closed,
);
export type PluginStageResult = Static<typeof PluginStageResultSchema>;

/**
 * What a sandbox plugin made of a provider launch (`Sandbox.launch`); the mode is checked against
 * the sandbox's grant, and the executable must be absolute (no shell, no PATH lookup).
 */
export const PluginLaunchResultSchema = Type.Object(
  {
    executable: Type.String({ minLength: 2, maxLength: 4096, pattern: "^/" }),
    args: Type.Array(Type.String({ maxLength: 65_536 }), { maxItems: 4096 }),
    cwd: Type.String({ minLength: 1, maxLength: 4096, pattern: "^/" }),
    env: Type.Record(Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]*$" }), Type.String({ maxLength: 65_536 })),
    mode: AssuranceModeT,
    mechanism: Type.String({ minLength: 1, maxLength: 500 }),
    directWrite: Type.Boolean(),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  },
  Closed,
);
export type PluginLaunchResult = Static<typeof PluginLaunchResultSchema>;

/** What a sandbox plugin's `recover` did with an interrupted stage. */
export const PluginRecoverResultSchema = Type.Object(
  {
    outcome: StringEnum(["none", "rolled_back", "rolled_forward"]),
    detail: Type.Optional(Text(10_000)),
  },
  Closed,
);
export type PluginRecoverResult = Static<typeof PluginRecoverResultSchema>;
