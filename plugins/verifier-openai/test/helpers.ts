// A real loopback HTTP server speaking the chat-completions API, in the test process, whose
// answer each test scripts; and the review subjects and Guardian requests the host sends.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ActorIdentity, type EngineStep, guardianRequestOf } from "@asp/auto-mode";
import type { RunIdentity } from "@asp/contracts";
import type { AutoModeSelection } from "@asp/rollout";

/** One request the server received. */
export interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
  /** Resolves true when the client closed the connection before the server finished answering. */
  readonly aborted: Promise<boolean>;
}

/** How the server answers one request. */
export type Answer = (res: ServerResponse, request: Received) => void;

/** A running loopback chat-completions server. */
export interface ChatServer {
  /** `http://127.0.0.1:PORT/v1`: the `baseUrl` option. */
  readonly baseUrl: string;
  readonly received: Received[];
  /** Answer the next requests with `answer` (the last one given stays in force). */
  answer(answer: Answer): void;
  close(): Promise<void>;
}

/** Start a server on 127.0.0.1, port 0. */
export async function startChatServer(answer: Answer = reply(pass())): Promise<ChatServer> {
  let current = answer;
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = null;
      }
      const aborted = new Promise<boolean>((resolve) => {
        res.on("close", () => resolve(!res.writableFinished));
      });
      const r: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, aborted };
      received.push(r);
      current(res, r);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    received,
    answer: (a) => {
      current = a;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on: bound, then closed (connection refused). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A chat-completions body whose one choice carries `content`. */
export function completionBody(content: string | null, extra: Record<string, unknown> = {}): unknown {
  return {
    id: "chatcmpl-test",
    object: "chat.completion",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, message: { role: "assistant", content, refusal: null, ...extra }, finish_reason: "stop" }],
  };
}

/** Answer 200 with a completion whose content is `verdict` (JSON-encoded unless a string). */
export function reply(verdict: unknown): Answer {
  const content = typeof verdict === "string" ? verdict : JSON.stringify(verdict);
  return raw(200, JSON.stringify(completionBody(content)));
}

/** Answer `status` with exactly `body`. */
export function raw(status: number, body: string | Uint8Array, headers: Record<string, string> = {}): Answer {
  return (res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(body);
  };
}

/** Never answer (the client's deadline must fire). */
export const hang: Answer = () => {};

/** Send the headers, then stall the body. */
export const stallBody: Answer = (res) => {
  res.writeHead(200, { "content-type": "application/json" });
  res.write('{"choices":[');
};

/** A pass verdict. */
export function pass(): unknown {
  return { verdict: "pass", findings: [], rationale: "The payload follows from the artifact." };
}

/** An issues verdict with one material finding resting on `refs`. */
export function issues(refs: string[] = ["artifact:result.csv"]): unknown {
  return {
    verdict: "issues",
    findings: [
      {
        severity: "major",
        category: "correctness",
        title: "Wrong sum",
        claim: "The payload states 42 but the artifact sums to 3.",
        evidence_refs: refs,
      },
    ],
    rationale: "The number does not follow.",
  };
}

const enc = new TextEncoder();

/** An in-memory content port over `blobs` (digest -> text), for calling the Reviewer directly. */
export function memoryContent(blobs: Record<string, string | Uint8Array>) {
  return {
    read: async (digest: string) => {
      const b = blobs[digest];
      return b === undefined ? null : typeof b === "string" ? enc.encode(b) : b;
    },
  };
}

const D = (n: number) => `sha256:${String(n).repeat(64).slice(0, 64)}`;

/** A review subject as the runner sends it: payload, one artifact and one evidence blob. */
export function subject(
  over: {
    payload?: string;
    artifact?: string | Uint8Array;
    refs?: Array<{ name: string; kind: string; digest: string }>;
  } = {},
) {
  const blobs: Record<string, string | Uint8Array> = {
    [D(1)]: over.payload ?? "The answer is 42.",
    [D(2)]: over.artifact ?? "x,y\n1,2\n",
    [D(3)]: "derivation",
  };
  const refs = over.refs ?? [
    { name: "payload", kind: "blob", digest: D(1) },
    { name: "artifact:result.csv", kind: "blob", digest: D(2) },
    { name: "notes", kind: "blob", digest: D(3) },
  ];
  return {
    content: memoryContent(blobs),
    subject: {
      candidate_id: "candidate:test",
      payload: over.payload ?? "The answer is 42.",
      snapshot: {
        digest: D(9),
        run: { root_frame_id: "f", branch_id: "b", turn_id: "t", execution_id: "e" },
        candidate_id: "candidate:test",
        complete: true as const,
        refs,
        labels: {},
        created_at: "2026-01-01T00:00:00.000Z",
      },
    },
  };
}

/** The Auto Run the runner tests drive: its identity, producer, review-only selection and one completion. */
export const AUTO_RUN: {
  readonly run: RunIdentity;
  readonly producer: ActorIdentity;
  readonly reviewOnly: AutoModeSelection;
  readonly completion: EngineStep;
} = {
  run: { root_frame_id: "frame-1", branch_id: "branch-1", turn_id: "turn-1", execution_id: "exec-1" },
  producer: { actor_id: "agent-main", session_id: "session-main", fingerprint: "model-a;cfg-1" },
  reviewOnly: {
    preset: "off",
    result_review_mode: "review_only",
    approvals_reviewer: "user",
    source: "frame",
    normalized: false,
  },
  completion: {
    kind: "completion",
    payload: "The answer is 42.",
    artifacts: [{ artifact_id: "result.csv", version_id: "v1", bytes: enc.encode("x,y\n40,2\n") }],
    evidence: [{ name: "notes", bytes: enc.encode("42 = 40 + 2") }],
  },
};

/** A Guardian answer (allow, low risk, unless overridden). */
export function decision(over: Record<string, unknown> = {}): Record<string, unknown> {
  return { decision: "allow", risk: "low", recoverable: false, rationale: "A read-only status query.", ...over };
}

/**
 * A Guardian request as the host sends it: the subject is `@asp/auto-mode`'s canonical request of
 * one ask (`guardianRequestOf`), and the digest and class beside it are the subject's own.
 */
export function guardianRequest(
  over: { tool?: string; target?: string | null; policyReason?: string; digest?: string } = {},
) {
  const subject = guardianRequestOf({
    run: AUTO_RUN.run,
    askDecisionId: "step:ask-1",
    action: {
      tool: over.tool ?? "run_command",
      target: over.target === undefined ? "git" : over.target,
      action_digest: over.digest ?? `sha256:${"a".repeat(64)}`,
    },
    policyReason: over.policyReason ?? "run_command:git is not in the allow list",
    policyVersion: "policy:v7",
  });
  return {
    kind: "guardian" as const,
    actionDigest: subject.action.action_digest,
    actionClass: subject.action.action_class,
    subject,
  };
}
