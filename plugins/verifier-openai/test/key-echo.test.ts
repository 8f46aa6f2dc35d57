// issue 32 hole 11: an endpoint that echoes the API key back inside its verdict (a finding's
// title, claim or refs, the rationale), raw or encoded, never gets the key into the returned
// ReviewResponse nor into the Auto Run's durable records.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAutoRunner, createScriptedEngine, type ReviewerPort } from "@asp/auto-mode";
import type { ReviewResponse } from "@asp/contracts";
import { type Digest, openStore } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openAIReviewerIdentity } from "../src/identity.js";
import type { OpenAIReviewerOptions } from "../src/options.js";
import { createOpenAIReviewer } from "../src/reviewer.js";
import { type Answer, AUTO_RUN, type ChatServer, completionBody, startChatServer, subject } from "./helpers.js";

// `/`, `+` and `=` make every encoding differ from the raw key (percent, base64 and base64url).
const KEY = "sk-proj_T3st/Key+9f8e=7d6c5b4a39281706";
const ENV = { ASP_TEST_OPENAI_KEY: KEY };
const MARKER = "[redacted:api-key]";

const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
const b64url = (s: string): string => Buffer.from(s, "utf8").toString("base64url");
const hex = (s: string): string => Buffer.from(s, "utf8").toString("hex");
const pctAll = (s: string): string =>
  [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
/** Each character as a JSON `\uXXXX` escape: what a JSON parser turns back into the key. */
const jsonEscaped = (s: string): string =>
  [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");

/** The encodings a hostile server echoes, by name. */
const ECHOES: ReadonlyArray<readonly [string, (key: string) => string]> = [
  ["raw", (k) => k],
  ["base64", b64],
  ["base64 without padding", (k) => b64(k).replace(/=+$/, "")],
  ["base64url", b64url],
  ["base64 of 'Bearer <key>' (another alignment)", (k) => b64(`Bearer ${k}`)],
  ["base64 of 'authorization: Bearer <key>'", (k) => b64(`authorization: Bearer ${k}`)],
  ["percent-encoded", encodeURIComponent],
  ["every byte percent-encoded", pctAll],
  ["every byte percent-encoded, upper case", (k) => pctAll(k).toUpperCase()],
  ["hex", hex],
  ["HEX", (k) => hex(k).toUpperCase()],
  ["reversed", (k) => [...k].reverse().join("")],
];

/**
 * What must never be seen: each encoding of the key, and for base64 the stretch of characters
 * that only the key's bytes determine at each of the three byte alignments.
 */
function forbidden(key: string): string[] {
  const out = new Set<string>();
  for (const [, f] of ECHOES) out.add(f(key));
  for (const pad of ["", "x", "xy"]) {
    const bytes = Buffer.concat([Buffer.from(pad), Buffer.from(key)]);
    for (const enc of ["base64", "base64url"] as const) {
      const text = bytes.toString(enc);
      const from = Math.ceil((pad.length * 8) / 6);
      const to = Math.floor((bytes.length * 8) / 6);
      out.add(text.slice(from, to));
    }
  }
  out.add(key.slice(8, 30)); // a long stretch of the raw key
  return [...out];
}

function expectNoKey(value: unknown, what: string): void {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  for (const f of forbidden(KEY)) expect(text, `${what} carries ${f}`).not.toContain(f);
}

/** The key the request carried: the server learns it from the Authorization header. */
const keyOf = (auth: string | undefined): string => (auth ?? "").replace(/^Bearer /, "");

/** An issues verdict whose every free-text field (and rationale) holds `echo(key)`. */
function echoing(echo: (key: string) => string, refs?: (key: string) => string[]): Answer {
  return (res, r) => {
    const e = echo(keyOf(r.headers.authorization));
    const verdict = {
      verdict: "issues",
      findings: [
        {
          severity: "major",
          category: "correctness",
          title: `the key is ${e}`,
          claim: `The payload is wrong; also, your key: ${e}.`,
          evidence_refs: refs?.(keyOf(r.headers.authorization)) ?? ["artifact:result.csv"],
        },
      ],
      rationale: e,
    };
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(completionBody(JSON.stringify(verdict))));
  };
}

let server: ChatServer;
beforeEach(async () => {
  server = await startChatServer();
});
afterEach(async () => {
  await server.close();
});

function options(): OpenAIReviewerOptions {
  return { baseUrl: server.baseUrl, model: "test-model", apiKeyEnv: "ASP_TEST_OPENAI_KEY", timeoutMs: 10_000 };
}

async function review(s = subject()): Promise<ReviewResponse> {
  const reviewer = createOpenAIReviewer({ options: options(), content: s.content, env: ENV });
  return (await reviewer.verify({ kind: "review", subject: s.subject })) as ReviewResponse;
}

describe("verifier-openai when the endpoint echoes the API key in its verdict", () => {
  it.each(ECHOES)("a key echoed %s in a finding's title and claim is scrubbed from the answer", async (_, echo) => {
    server.answer(echoing(echo));
    const answer = await review();
    expect(server.received[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(answer.kind).toBe("review");
    expect(answer.verdict).toBe("issues");
    expectNoKey(answer, "the ReviewResponse");
    expect(answer.findings[0]?.title).toContain(MARKER);
    expect(answer.findings[0]?.claim).toContain(MARKER);
  });

  it("a key echoed inside the content's JSON as \\u escapes is scrubbed too", async () => {
    server.answer((res, r) => {
      const e = jsonEscaped(keyOf(r.headers.authorization));
      const content = `{"verdict":"issues","findings":[{"severity":"minor","category":"leak","title":"${e}","claim":"k ${e}","evidence_refs":["payload"]}],"rationale":"${e}"}`;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(completionBody(content)));
    });
    const answer = await review();
    expectNoKey(answer, "the ReviewResponse");
    expect(answer.findings[0]?.title).toBe(MARKER);
  });

  it("a key echoed in evidence_refs is scrubbed (and the ref then names nothing in the snapshot)", async () => {
    server.answer(echoing(b64url, (k) => ["payload", k, b64(k)]));
    const answer = await review();
    expectNoKey(answer, "the ReviewResponse");
    expect(answer.findings[0]?.evidence_refs).toEqual(["payload", MARKER]);
  });

  it("a key echoed in the verdict or category field is never a verdict: the answer is refused, with no key", async () => {
    for (const field of ["verdict", "category"]) {
      server.answer((res, r) => {
        const k = keyOf(r.headers.authorization);
        const finding = { severity: "major", category: "x", title: "t", claim: "c", evidence_refs: ["payload"] };
        const v = {
          verdict: "issues",
          findings: [{ ...finding, ...(field === "category" ? { category: `a${hex(k)}` } : {}) }],
          rationale: "",
        };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(completionBody(JSON.stringify(field === "verdict" ? { ...v, verdict: k } : v))));
      });
      const error = await review().then(
        () => null,
        (e: unknown) => e as { code: string; toJSON(): unknown; stack?: string },
      );
      expect(error?.code).toBe("ASP_OPENAI_SCHEMA_INVALID");
      expectNoKey({ json: error?.toJSON(), stack: error?.stack }, "the error");
    }
  });
});

describe("verifier-openai key echo through the Auto Mode runner", () => {
  const { run: RUN, producer: PRODUCER, reviewOnly: REVIEW_ONLY, completion: COMPLETION } = AUTO_RUN;

  function filesUnder(dir: string): string[] {
    return readdirSync(dir).flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? filesUnder(p) : [p];
    });
  }

  it("no Auto Run record, projection or store file holds the key the server echoed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-verifier-openai-echo-"));
    const store = await openStore(join(dir, "store"));
    try {
      server.answer(echoing((k) => `${k} ${b64(k)} ${encodeURIComponent(k)} ${hex(k)}`));
      const o = options();
      const reviewer: ReviewerPort = {
        identity: openAIReviewerIdentity(o, { sessionId: "review-1" }),
        verifier: createOpenAIReviewer({
          options: o,
          env: ENV,
          content: {
            read: async (d: Digest) => ((await store.objects.has("blob", d)) ? store.objects.readBlob(d) : null),
          },
        }),
      };
      const runner = createAutoRunner({
        store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [COMPLETION] }),
        reviewers: [reviewer],
        flags: createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]),
        attemptTimeoutMs: 30_000,
      });
      const projection = await runner.run({ run: RUN, selection: REVIEW_ONLY });
      expect(projection.state).toBe("completed_with_issues");
      expectNoKey(projection, "the projection");
      const entries = await store.log.list();
      expect(entries.length).toBeGreaterThan(0);
      expectNoKey(entries, "the fact log");
      expect(JSON.stringify(entries)).toContain(MARKER);
    } finally {
      await store.close();
    }
    // The level store's own files (its write-ahead log holds the appended batches as written).
    const bytes = filesUnder(join(dir, "store")).map((f) => readFileSync(f).toString("latin1"));
    expectNoKey(bytes.join("\n"), "the store's files");
    rmSync(dir, { recursive: true, force: true });
  });
});
