// The Reviewer against a real loopback HTTP server speaking the chat-completions API: every
// answer the server can give is either a validated verdict or a coded error, never a pass.
import { answerTokens, isEligibleReviewer, parseVerdict, type ReviewerPort, runAttempt } from "@asp/auto-mode";
import { type EvidenceSnapshot, validate } from "@asp/contracts";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { OpenAIReviewerError } from "../src/errors.js";
import { openAIReviewerFingerprint, openAIReviewerIdentity } from "../src/identity.js";
import { type OpenAIReviewerOptions, resolveOptions } from "../src/options.js";
import { PROMPT_LIMITS } from "../src/prompt.js";
import { createOpenAIReviewer } from "../src/reviewer.js";
import {
  type Answer,
  type ChatServer,
  closedPort,
  completionBody,
  hang,
  issues,
  pass,
  raw,
  reply,
  stallBody,
  startChatServer,
  subject,
} from "./helpers.js";

const KEY = "sk-test-9f8e7d6c5b4a39281706";
const ENV = { ASP_TEST_OPENAI_KEY: KEY };

let server: ChatServer;
beforeEach(async () => {
  server = await startChatServer();
});
afterEach(async () => {
  await server.close();
});

function options(over: Partial<OpenAIReviewerOptions> = {}): OpenAIReviewerOptions {
  return { baseUrl: server.baseUrl, model: "test-model", apiKeyEnv: "ASP_TEST_OPENAI_KEY", ...over };
}

/** Review the default subject (or `s`) with a Reviewer over the test server. */
async function review(over: Partial<OpenAIReviewerOptions> = {}, s = subject(), signal?: AbortSignal) {
  const reviewer = createOpenAIReviewer({ options: options(over), content: s.content, env: ENV });
  return reviewer.verify({ kind: "review", subject: s.subject, ...(signal ? { signal } : {}) });
}

/** The thrown error, asserting it is this package's coded error. */
async function failure(p: Promise<unknown>): Promise<OpenAIReviewerError> {
  const error = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpenAIReviewerError);
  return error as OpenAIReviewerError;
}

/** The JSON document of the user message of the `i`th request the server received. */
function userDoc(i: number): { refs: unknown[] } {
  const body = server.received[i]?.body as { messages?: Array<{ content: string }> } | undefined;
  return JSON.parse(body?.messages?.[1]?.content ?? "null") as { refs: unknown[] };
}

const snapshotOf = (s = subject()) => s.subject.snapshot as EvidenceSnapshot;

describe("verifier-openai Reviewer", () => {
  describe("when the server answers a valid verdict", () => {
    it("AM.states.3: a pass verdict is a ReviewResponse parseVerdict accepts; the request is the documented one", async () => {
      server.answer(reply(pass()));
      const answer = await review({ temperature: 0, maxTokens: 512 });
      expect(answer).toEqual({ kind: "review", verdict: "pass", findings: [] });
      expect(parseVerdict(answer, snapshotOf())).toEqual({ verdict: "pass", findings: [], rationale: null });
      const [r] = server.received;
      expect(r?.method).toBe("POST");
      expect(r?.url).toBe("/v1/chat/completions");
      expect(r?.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r?.headers["content-type"]).toBe("application/json");
      const body = r?.body as {
        model: string;
        temperature: number;
        max_completion_tokens: number;
        messages: Array<{ role: string; content: string }>;
        response_format: { type: string; json_schema: { name: string; strict: boolean; schema: unknown } };
      };
      expect(body.model).toBe("test-model");
      expect(body.temperature).toBe(0);
      expect(body.max_completion_tokens).toBe(512);
      expect(body.response_format.type).toBe("json_schema");
      expect(body.response_format.json_schema.strict).toBe(true);
      expect(body.response_format.json_schema.schema).toMatchObject({
        required: ["verdict", "findings", "rationale"],
        additionalProperties: false,
      });
      expect(body.messages.map((m) => m.role)).toEqual(["system", "user"]);
      const doc = JSON.parse(body.messages[1]?.content ?? "") as { payload: { text: string }; refs: unknown[] };
      expect(doc.payload).toEqual({ text: "The answer is 42." });
      expect(doc.refs).toEqual([
        { name: "artifact:result.csv", kind: "blob", text: "x,y\n1,2\n" },
        { name: "notes", kind: "blob", text: "derivation" },
      ]);
    });

    it("AM.findings.3: an issues verdict's findings carry title, claim, category, severity and refs that parseVerdict accepts", async () => {
      server.answer(reply(issues(["artifact:result.csv", "payload", "payload"])));
      const answer = await review();
      // The server's finding, its refs de-duplicated, and no rationale (not in ReviewResponse).
      const sent = (issues() as { findings: object[] }).findings[0];
      expect(answer).toEqual({
        kind: "review",
        verdict: "issues",
        findings: [{ ...sent, evidence_refs: ["artifact:result.csv", "payload"] }],
      });
      const parsed = parseVerdict(answer, snapshotOf());
      expect(parsed?.verdict).toBe("issues");
      expect(parsed?.findings[0]?.evidence_refs).toEqual(["artifact:result.csv", "payload"]);
    });

    it("AM.budgets.6: the usage the endpoint reports goes with the answer (the host spends it from the extra-token budget), and a malformed one is left out", async () => {
      const body = completionBody(JSON.stringify(pass())) as Record<string, unknown>;
      server.answer(
        raw(
          200,
          JSON.stringify({ ...body, usage: { prompt_tokens: 1200, completion_tokens: 34, total_tokens: 1234 } }),
        ),
      );
      const answer = await review();
      expect(answer).toEqual({
        kind: "review",
        verdict: "pass",
        findings: [],
        usage: { input_tokens: 1200, output_tokens: 34 },
      });
      // The answer with its usage still passes the host's closed verify-response schema.
      expect(validate("plugin-verify-response", answer).ok).toBe(true);
      expect(answerTokens(answer)).toBe(1234);
      server.answer(raw(200, JSON.stringify({ ...body, usage: { prompt_tokens: -1, completion_tokens: "many" } })));
      expect(await review()).toEqual({ kind: "review", verdict: "pass", findings: [] });
    });

    it("temperature is not sent unless configured", async () => {
      await review();
      expect(server.received[0]?.body).not.toHaveProperty("temperature");
    });
  });

  describe("when the answer is not an admissible verdict", () => {
    it.each([
      ["a body that is not JSON", raw(200, "<html>bad gateway</html>")],
      ["a body that is not UTF-8", raw(200, new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]))],
      ["no choices", raw(200, JSON.stringify({ id: "x", choices: [] }))],
      ["content null", raw(200, JSON.stringify(completionBody(null)))],
      ["content that is not JSON", reply("Looks good to me!")],
      [
        "an answer cut off at the token limit",
        raw(200, JSON.stringify({ choices: [{ message: { content: '{"verdict":"pa' }, finish_reason: "length" }] })),
      ],
    ])("%s is ASP_OPENAI_MALFORMED_RESPONSE", async (_, answer) => {
      server.answer(answer);
      expect((await failure(review())).code).toBe("ASP_OPENAI_MALFORMED_RESPONSE");
    });

    it.each([
      ["an unknown verdict", { ...(pass() as object), verdict: "ok" }],
      ["no rationale", { verdict: "pass", findings: [] }],
      ["an extra field", { ...(pass() as object), decision: "allow" }],
      ["a category outside [a-z0-9_.-]", bad({ category: "Bad Category" })],
      ["an unknown severity", bad({ severity: "blocker" })],
      ["an empty claim", bad({ claim: "" })],
      ["a finding without evidence_refs", bad({ evidence_refs: undefined })],
      ["a ref that is not a string", bad({ evidence_refs: [7] })],
      ["the verdict as an array", [pass()]],
    ])("%s is ASP_OPENAI_SCHEMA_INVALID", async (_, verdict) => {
      server.answer(reply(verdict));
      expect((await failure(review())).code).toBe("ASP_OPENAI_SCHEMA_INVALID");
    });

    it.each([
      ["a refusal", raw(200, JSON.stringify(completionBody(null, { refusal: "I can't help with that." })))],
      [
        "a content filter stop",
        raw(200, JSON.stringify({ choices: [{ message: { content: "" }, finish_reason: "content_filter" }] })),
      ],
    ])("%s is ASP_OPENAI_REFUSAL", async (_, answer) => {
      server.answer(answer);
      expect((await failure(review())).code).toBe("ASP_OPENAI_REFUSAL");
    });

    it("AM.states.8: a finding citing a ref the snapshot does not hold passes the transport but parseVerdict refuses it (unparseable)", async () => {
      server.answer(reply(issues(["artifact:invented.csv"])));
      const answer = await review();
      expect(parseVerdict(answer, snapshotOf())).toBeNull();
      const s = subject();
      const port: ReviewerPort = {
        identity: openAIReviewerIdentity(options(), { sessionId: "rs-1" }),
        verifier: createOpenAIReviewer({ options: options(), content: s.content, env: ENV }),
      };
      const result = await runAttempt(port, snapshotOf(s), s.subject, 30_000);
      expect(result.outcome).toBe("unparseable");
    });

    it("an oversized body stops reading at the bound: ASP_OPENAI_RESPONSE_TOO_LARGE", async () => {
      server.answer(raw(200, JSON.stringify(completionBody("x".repeat(5 * 1024 * 1024)))));
      expect((await failure(review())).code).toBe("ASP_OPENAI_RESPONSE_TOO_LARGE");
    });
  });

  describe("when the server fails, stalls or is not there", () => {
    it.each([
      [500, "ASP_OPENAI_HTTP_STATUS"],
      [503, "ASP_OPENAI_HTTP_STATUS"],
      [401, "ASP_OPENAI_HTTP_STATUS"],
      [429, "ASP_OPENAI_RATE_LIMITED"],
    ])("HTTP %i is %s, with the status in data", async (status, code) => {
      server.answer(raw(status, JSON.stringify({ error: { message: "nope", type: "server_error" } })));
      const e = await failure(review());
      expect(e.code).toBe(code);
      expect(e.data).toEqual({ status, attempt_outcome: "provider_failed" });
    });

    it("a refused connection (closed port) is ASP_OPENAI_CONNECTION_FAILED", async () => {
      const port = await closedPort();
      const e = await failure(review({ baseUrl: `http://127.0.0.1:${port}/v1` }));
      expect(e.code).toBe("ASP_OPENAI_CONNECTION_FAILED");
      expect(e.data).toEqual({ reason: "ECONNREFUSED", attempt_outcome: "provider_failed" });
    });

    it.each([
      ["never answers", hang],
      ["sends headers then stalls the body", stallBody],
    ])("a server that %s: the own timeout fires (ASP_OPENAI_TIMEOUT) and the request is aborted", async (_, answer) => {
      server.answer(answer);
      expect((await failure(review({ timeoutMs: 300 }))).code).toBe("ASP_OPENAI_TIMEOUT");
      expect(await server.received[0]?.aborted).toBe(true);
    });

    it("the caller's signal aborts the request: ASP_OPENAI_ABORTED", async () => {
      server.answer(hang);
      const controller = new AbortController();
      const pending = review({}, subject(), controller.signal);
      await expect.poll(() => server.received.length).toBe(1);
      controller.abort();
      expect((await failure(pending)).code).toBe("ASP_OPENAI_ABORTED");
      expect(await server.received[0]?.aborted).toBe(true);
    });

    it("AM.states.8: under the runner's attempt deadline a slow server is a timeout outcome, and its request is aborted", async () => {
      server.answer(hang);
      const s = subject();
      const port: ReviewerPort = {
        identity: openAIReviewerIdentity(options(), { sessionId: "rs-1" }),
        verifier: createOpenAIReviewer({ options: options(), content: s.content, env: ENV }),
      };
      expect((await runAttempt(port, snapshotOf(s), s.subject, 300)).outcome).toBe("timeout");
      expect(await server.received[0]?.aborted).toBe(true);
    });

    it("a redirect is never followed (the key would travel with it): ASP_OPENAI_HTTP_STATUS", async () => {
      const other = await startChatServer();
      try {
        server.answer(raw(307, "", { location: `${other.baseUrl}/chat/completions` }));
        const e = await failure(review());
        expect(e.code).toBe("ASP_OPENAI_HTTP_STATUS");
        expect(e.data).toEqual({ status: 307, attempt_outcome: "provider_failed" });
        expect(other.received).toHaveLength(0);
      } finally {
        await other.close();
      }
    });
  });

  describe("the API key", () => {
    it("is read from the named variable at each request; unset or empty: ASP_OPENAI_NO_API_KEY and nothing is sent", async () => {
      const s = subject();
      for (const env of [{}, { ASP_TEST_OPENAI_KEY: "" }]) {
        const reviewer = createOpenAIReviewer({ options: options(), content: s.content, env });
        const e = await failure(reviewer.verify({ kind: "review", subject: s.subject }));
        expect(e.code).toBe("ASP_OPENAI_NO_API_KEY");
        expect(e.data).toEqual({ apiKeyEnv: "ASP_TEST_OPENAI_KEY", attempt_outcome: "provider_failed" });
      }
      expect(server.received).toHaveLength(0);
    });

    it("a key that would split the header is refused without quoting it", async () => {
      const s = subject();
      const evil = `${KEY}\r\nx-injected: 1`;
      const reviewer = createOpenAIReviewer({
        options: options(),
        content: s.content,
        env: { ASP_TEST_OPENAI_KEY: evil },
      });
      const e = await failure(reviewer.verify({ kind: "review", subject: s.subject }));
      expect(e.code).toBe("ASP_OPENAI_NO_API_KEY");
      expect(JSON.stringify({ ...e.toJSON(), stack: e.stack })).not.toContain(KEY);
      expect(server.received).toHaveLength(0);
    });

    // A server that echoes the Authorization header back in every kind of failing answer.
    const echo =
      (status: number, wrap: (auth: string) => string): Answer =>
      (res, r) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(wrap(r.headers.authorization ?? ""));
      };
    it.each([
      ["a 500 body", echo(500, (a) => JSON.stringify({ error: { message: a } }))],
      ["a 429 body", echo(429, (a) => JSON.stringify({ error: { message: a } }))],
      ["a malformed body", echo(200, (a) => `not json ${a}`)],
      ["content that is not JSON", echo(200, (a) => JSON.stringify(completionBody(`sure ${a}`)))],
      [
        "schema-invalid content",
        echo(200, (a) => JSON.stringify(completionBody(JSON.stringify({ verdict: a, findings: [], rationale: a })))),
      ],
      ["a refusal", echo(200, (a) => JSON.stringify(completionBody(null, { refusal: a })))],
    ])("is never in a thrown error, even when the server echoes it in %s", async (_, answer) => {
      server.answer(answer);
      const e = await failure(review());
      expect(server.received[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
      const seen = JSON.stringify({
        json: e.toJSON(),
        message: e.message,
        data: e.data,
        stack: e.stack,
        cause: String(e.cause),
      });
      expect(seen).not.toContain(KEY);
    });

    it("is never in the refused-connection or timeout errors either", async () => {
      const port = await closedPort();
      const refused = await failure(review({ baseUrl: `http://127.0.0.1:${port}/v1` }));
      server.answer(hang);
      const timedOut = await failure(review({ timeoutMs: 200 }));
      for (const e of [refused, timedOut]) {
        expect(JSON.stringify({ json: e.toJSON(), stack: e.stack, cause: String(e.cause) })).not.toContain(KEY);
      }
    });
  });

  describe("what is sent", () => {
    it("bounds each text, marks what is truncated, and omits binary blobs", async () => {
      const big = "a".repeat(PROMPT_LIMITS.refChars + 50);
      const s = subject({ artifact: big });
      await review({}, s);
      const doc = userDoc(0);
      expect(doc.refs[0]).toEqual({
        name: "artifact:result.csv",
        kind: "blob",
        text: big.slice(0, PROMPT_LIMITS.refChars),
        truncated: true,
      });
      const bin = subject({ artifact: new Uint8Array([0x89, 0x50, 0, 1, 2]) });
      await review({}, bin);
      const doc2 = userDoc(1);
      expect(doc2.refs[0]).toEqual({ name: "artifact:result.csv", kind: "blob", omitted: "binary, 5 bytes" });
    });

    it("a snapshot blob the content reader does not hold is ASP_OPENAI_BAD_REQUEST before any request", async () => {
      const s = subject({ refs: [{ name: "artifact:gone", kind: "blob", digest: `sha256:${"f".repeat(64)}` }] });
      expect((await failure(review({}, s))).code).toBe("ASP_OPENAI_BAD_REQUEST");
      expect(server.received).toHaveLength(0);
    });

    it.each([
      ["a request of an unknown kind", { kind: "audit", subject: subject().subject }],
      ["a subject without a snapshot", { kind: "review", subject: { candidate_id: "c", payload: "p" } }],
      ["a string subject", { kind: "review", subject: "hello" }],
    ])("%s is ASP_OPENAI_BAD_REQUEST", async (_, request) => {
      const reviewer = createOpenAIReviewer({ options: options(), content: subject().content, env: ENV });
      expect((await failure(reviewer.verify(request as never))).code).toBe("ASP_OPENAI_BAD_REQUEST");
    });
  });
});

describe("verifier-openai options and identity", () => {
  const base = { baseUrl: "https://api.example.test/v1/", model: "gpt-x", apiKeyEnv: "OPENAI_API_KEY" };

  it("normalizes the base URL and fills the defaults", () => {
    expect(resolveOptions(base)).toEqual({
      baseUrl: "https://api.example.test/v1",
      model: "gpt-x",
      apiKeyEnv: "OPENAI_API_KEY",
      timeoutMs: 60_000,
      maxTokens: 4_096,
      temperature: null,
    });
  });

  it.each([
    ["a file: URL", { ...base, baseUrl: "file:///etc/passwd" }, "baseUrl"],
    ["an ftp: URL", { ...base, baseUrl: "ftp://api.example.test/v1" }, "baseUrl"],
    // Built at run time: a literal credential URL is what the repository's own secrets scan flags.
    [
      "credentials in the URL",
      { ...base, baseUrl: ["https://user", "secret@api.example.test/v1"].join(":") },
      "baseUrl",
    ],
    ["a query", { ...base, baseUrl: "https://api.example.test/v1?key=secret" }, "baseUrl"],
    ["the key itself as an option", { ...base, apiKey: "sk-123" }, "apiKey"],
    ["no model", { baseUrl: base.baseUrl, apiKeyEnv: "K" }, "model"],
    ["a variable name that is not one", { ...base, apiKeyEnv: "$(whoami)" }, "apiKeyEnv"],
    ["a negative timeout", { ...base, timeoutMs: -1 }, "timeoutMs"],
  ])("refuses %s: ASP_OPENAI_BAD_OPTIONS naming the key", (_, o, key) => {
    let error: unknown;
    try {
      resolveOptions(o);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OpenAIReviewerError);
    expect((error as OpenAIReviewerError).code).toBe("ASP_OPENAI_BAD_OPTIONS");
    expect((error as OpenAIReviewerError).data).toEqual({ key, attempt_outcome: "provider_failed" });
    expect(JSON.stringify((error as OpenAIReviewerError).toJSON())).not.toContain("secret");
  });

  it("fingerprint = openai:<model>@<base host> plus a digest of everything that shapes an answer", () => {
    const fp = openAIReviewerFingerprint(base);
    expect(fp).toMatch(/^openai:gpt-x@api\.example\.test;cfg=[0-9a-f]{16}$/);
    expect(openAIReviewerFingerprint({ ...base, apiKeyEnv: "OTHER" })).toBe(fp);
    for (const other of [
      { ...base, model: "gpt-y" },
      { ...base, baseUrl: "https://proxy.example.test/v1" },
      { ...base, baseUrl: "https://api.example.test/v2" },
      { ...base, temperature: 0.7 },
      { ...base, maxTokens: 10 },
    ]) {
      expect(openAIReviewerFingerprint(other)).not.toBe(fp);
    }
  });

  it("AM.states.5: the identity is eligible under distinct_fingerprint exactly when the producer's fingerprint differs", () => {
    const reviewer = openAIReviewerIdentity(base, { sessionId: "review-1" });
    expect(reviewer).toMatchObject({ actor_id: "asp.verifier-openai", session_id: "review-1", model: "gpt-x" });
    const producer = { actor_id: "agent", session_id: "s-main", fingerprint: "openai:gpt-y@api.example.test;cfg=0" };
    const input = { policy: "distinct_fingerprint" as const, producer, excluded: [] };
    expect(isEligibleReviewer(reviewer, input)).toBe(true);
    expect(
      isEligibleReviewer(reviewer, { ...input, producer: { ...producer, fingerprint: reviewer.fingerprint } }),
    ).toBe(false);
  });
});

function bad(over: Record<string, unknown>): unknown {
  const v = issues() as { findings: Array<Record<string, unknown>> };
  const f = { ...v.findings[0], ...over };
  for (const k of Object.keys(over)) if (over[k] === undefined) delete f[k];
  return { ...v, findings: [f] };
}
