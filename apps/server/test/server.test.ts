import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { git } from "@asp/test-utils";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, SERVER_ERROR_CODES, SERVER_ROUTES, tokenDigest } from "../src/index.js";
import { bearer, exampleHost, FAKE_AWS_KEY, secretOf, TOKENS } from "./helpers.js";

let env: Awaited<ReturnType<typeof exampleHost>>;
let app: FastifyInstance;

beforeAll(async () => {
  env = await exampleHost();
  app = await env.serve();
}, 120_000);
afterAll(async () => {
  await env?.close();
});

/** A concrete URL of a route (path parameters filled with a value that exists). */
const urlOf = (path: string): string =>
  path
    .replace(":name", "demo")
    .replace("/providers/:id/", "/providers/asp.provider-secrets/")
    .replace(":id", "nosuchreceipt")
    .replace(":fid", "f1")
    .replace(":version_id", "v0")
    .replace(":run_id", `sha256:${"0".repeat(64)}`)
    // The event stream never ends by itself: a query its schema refuses answers (400) once authorized.
    .replace(/^\/api\/v1\/events$/, "/api/v1/events?after=-1");

const gate = (body: unknown, token = "evaluator", name = "demo") =>
  app.inject({
    method: "POST",
    url: `/api/v1/repositories/${name}/evaluate`,
    headers: bearer(token),
    payload: body as object,
  });

describe("@asp/server routes (issue 28)", () => {
  it("answers exactly the routes of SERVER_ROUTES; unversioned, alias and other-version paths are 404 ASP_SERVER_NOT_FOUND", async () => {
    for (const r of SERVER_ROUTES) expect(app.hasRoute({ method: r.method, url: r.path }), r.path).toBe(true);
    for (const url of ["/status", "/api/status", "/api/v2/status", "/api/v1/status/", "/api/v1/Status", "/v1/status"]) {
      const res = await app.inject({ method: "GET", url, headers: bearer("admin") });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toMatchObject({ code: "ASP_SERVER_NOT_FOUND" });
    }
    // No implicit HEAD twin of a GET route.
    const head = await app.inject({ method: "HEAD", url: "/api/v1/status", headers: bearer("reader") });
    expect(head.statusCode).toBe(404);
  });

  it("authorization matrix: no header or an unknown token is 401, a token without the route's scope 403, with it the route runs", async () => {
    for (const r of SERVER_ROUTES) {
      const url = urlOf(r.path);
      const payload = r.method === "POST" ? { callSite: "interactive" } : r.method === "PATCH" ? {} : undefined;
      const call = (headers: Record<string, string>) =>
        app.inject({ method: r.method, url, headers, ...(payload === undefined ? {} : { payload }) });
      for (const headers of [{}, { authorization: "Bearer not-a-token" }, { authorization: secretOf("reader") }]) {
        const res = await call(headers);
        expect(res.statusCode, `${r.path} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.json().code).toBe("ASP_SERVER_UNAUTHORIZED");
      }
      for (const [id, scopes] of Object.entries(TOKENS)) {
        const res = await call(bearer(id));
        if (scopes.includes(r.scope)) {
          expect([401, 403], `${r.path} as ${id}`).not.toContain(res.statusCode);
        } else {
          expect(res.statusCode, `${r.path} as ${id}`).toBe(403);
          expect(res.json()).toEqual({ code: "ASP_SERVER_FORBIDDEN", message: expect.stringContaining(r.scope) });
        }
      }
    }
  }, 120_000);

  it("a gate on a clean change allows and receipts it; the receipt is listed, shown, verified and the head moves", async () => {
    const before = (await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json();
    const res = await gate({ callSite: "gate", base: "HEAD" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.decision).toBe("allow");
    expect(body.envelope.decision).toBe("allow");
    const id = body.receipt.receiptId as string;
    const shown = await app.inject({ url: `/api/v1/receipts/${id}`, headers: bearer("reader") });
    expect(shown.statusCode).toBe(200);
    expect(shown.json().receipt.receiptId).toBe(id);
    expect(shown.json().envelope.decision).toBe("allow");
    const list = (await app.inject({ url: "/api/v1/receipts?limit=500", headers: bearer("reader") })).json();
    expect(list.receipts.map((r: { receipt: { receiptId: string } }) => r.receipt.receiptId)).toContain(id);
    const verify = (await app.inject({ url: "/api/v1/receipts/verify", headers: bearer("reader") })).json();
    expect(verify.ok).toBe(true);
    const after = (await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json();
    expect(after.head.seq).toBeGreaterThan(before.head?.seq ?? 0);
    // An unknown receipt is the host's own 404.
    const missing = await app.inject({ url: "/api/v1/receipts/nosuchreceipt", headers: bearer("reader") });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe("ASP_THS_RECEIPT_NOT_FOUND");
  }, 120_000);

  it("a gate on a change that commits a secret denies with its gating finding", async () => {
    writeFileSync(join(env.repo, "leak.env"), `AWS_ACCESS_KEY_ID=${FAKE_AWS_KEY}\n`);
    try {
      const res = await gate({ callSite: "gate", base: "HEAD" });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.decision).toBe("deny");
      const gating = body.envelope.findings.filter((f: { disposition: string }) => f.disposition === "gating");
      expect(gating.map((f: { diagnostic: { range?: { path: string } } }) => f.diagnostic.range?.path)).toContain(
        "leak.env",
      );
    } finally {
      git(env.repo, "clean", "-fdq");
    }
  }, 120_000);

  it("evaluations sent together run one at a time over the one store and all decide; the chain still verifies", async () => {
    const answers = await Promise.all([1, 2, 3].map(() => gate({ callSite: "gate", base: "HEAD" })));
    expect(answers.map((a) => a.json().decision)).toEqual(["allow", "allow", "allow"]);
    const ids = new Set(answers.map((a) => a.json().receipt.receiptId));
    expect(ids.size).toBe(3);
    expect((await app.inject({ url: "/api/v1/receipts/verify", headers: bearer("reader") })).json().ok).toBe(true);
  }, 180_000);

  it("receipts page with a cursor: limit and before walk newest first with no duplicate and no gap", async () => {
    const all = (await app.inject({ url: "/api/v1/receipts?limit=500", headers: bearer("reader") })).json().receipts;
    expect(all.length).toBeGreaterThanOrEqual(3);
    const seen: number[] = [];
    let before: number | null = null;
    do {
      const page: { receipts: Array<{ seq: number }>; next: number | null } = (
        await app.inject({
          url: `/api/v1/receipts?limit=2${before === null ? "" : `&before=${before}`}`,
          headers: bearer("reader"),
        })
      ).json();
      seen.push(...page.receipts.map((r: { seq: number }) => r.seq));
      before = page.next;
    } while (before !== null);
    expect(seen).toEqual(all.map((r: { seq: number }) => r.seq));
  });

  describe("refuses bad requests with a code and evaluates nothing", () => {
    it.each<[string, unknown, string, number]>([
      ["a client-chosen path", { callSite: "gate", repo: "/etc" }, "ASP_SERVER_BAD_REQUEST", 400],
      ["an unknown call-site", { callSite: "yolo" }, "ASP_SERVER_BAD_REQUEST", 400],
      ["a base that is an option", { callSite: "gate", base: "--output=/tmp/x" }, "ASP_SERVER_BAD_REQUEST", 400],
      ["no call-site", {}, "ASP_SERVER_BAD_REQUEST", 400],
    ])("%s", async (_why, body, code, status) => {
      const head = (await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json();
      const res = await gate(body);
      expect(res.statusCode).toBe(status);
      expect(res.json()).toEqual({ code, message: expect.any(String) });
      expect((await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json()).toEqual(head);
    });

    it("a repository name trusted configuration does not list (a path included) is never evaluated", async () => {
      expect((await gate({ callSite: "gate" }, "evaluator", "other")).json().code).toBe(
        "ASP_SERVER_UNKNOWN_REPOSITORY",
      );
      const traversal = await gate({ callSite: "gate" }, "evaluator", "..%2F..%2Fetc");
      expect([400, 404]).toContain(traversal.statusCode);
      expect(["ASP_SERVER_BAD_REQUEST", "ASP_SERVER_NOT_FOUND"]).toContain(traversal.json().code);
    });

    it.each<[string, string, string, number, string]>([
      ["a body that is not JSON", "text/plain", "callSite=gate", 415, "ASP_SERVER_UNSUPPORTED_MEDIA_TYPE"],
      ["malformed JSON", "application/json", '{"callSite": ', 400, "ASP_SERVER_BAD_REQUEST"],
      [
        "a poisoned prototype key",
        "application/json",
        '{"callSite":"gate","__proto__":{"polluted":true}}',
        400,
        "ASP_SERVER_BAD_REQUEST",
      ],
    ])("%s is refused", async (_why, type, payload, status, code) => {
      const res = await app.inject({
        method: "POST",
        url: "/api/v1/repositories/demo/evaluate",
        headers: { ...bearer("evaluator"), "content-type": type },
        payload,
      });
      expect(res.statusCode).toBe(status);
      expect(res.json().code).toBe(code);
      expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    });

    it("a body over the server's bodyLimit is 413", async () => {
      const small = await env.serve({ bodyLimit: 128 });
      const big = await small.inject({
        method: "POST",
        url: "/api/v1/repositories/demo/evaluate",
        headers: bearer("evaluator"),
        payload: { callSite: "gate", base: "x".repeat(200) },
      });
      expect(big.statusCode).toBe(413);
      expect(big.json().code).toBe("ASP_SERVER_BODY_TOO_LARGE");
    });
  });

  it("POST …/providers/{id}/quarantine/reset is admin only; a provider that is not quarantined is left as it is; an unknown one is 404", async () => {
    const url = (id: string) => `/api/v1/providers/${id}/quarantine/reset`;
    const head = (await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json();
    const ok = await app.inject({ method: "POST", url: url("asp.provider-secrets"), headers: bearer("admin") });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({
      provider: "asp.provider-secrets",
      lifted: false,
      clearedFailures: null,
      seq: null,
    });
    expect(ok.json().status).toMatchObject({ id: "asp.provider-secrets" });
    expect((await app.inject({ url: "/api/v1/receipts/head", headers: bearer("reader") })).json()).toEqual(head);
    const unknown = await app.inject({ method: "POST", url: url("asp.nope"), headers: bearer("admin") });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe("ASP_THS_UNKNOWN_PROVIDER");
    expect(
      (await app.inject({ method: "POST", url: url("asp.provider-secrets"), headers: bearer("reader") })).statusCode,
    ).toBe(403);
    expect((await app.inject({ method: "POST", url: url("..%2Fx"), headers: bearer("admin") })).statusCode).toBe(400);
  });

  it("no answer carries a configured token, its digest or the store's location", async () => {
    const bodies = await Promise.all(
      SERVER_ROUTES.filter((r) => r.method === "GET").map(
        async (r) => (await app.inject({ url: urlOf(r.path), headers: bearer("reader") })).body,
      ),
    );
    for (const body of bodies) {
      for (const id of Object.keys(TOKENS)) {
        expect(body).not.toContain(secretOf(id));
        expect(body).not.toContain(tokenDigest(secretOf(id)));
      }
      expect(body).not.toContain(join(env.root, "store"));
    }
  });

  it("serves over a real loopback socket", async () => {
    const listening = await env.serve();
    await listening.listen({ host: "127.0.0.1", port: 0 });
    const address = listening.server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    const res = await fetch(`http://127.0.0.1:${address.port}/api/v1/repositories`, { headers: bearer("reader") });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ repositories: ["demo"] });
    const denied = await fetch(`http://127.0.0.1:${address.port}/api/v1/status`);
    expect(denied.status).toBe(401);
    expect(denied.headers.get("content-type")).toMatch(/application\/json/);
  });

  it("createServer refuses options it cannot serve truthfully, with ASP_SERVER_BAD_OPTIONS", async () => {
    const base = { host: env.host, tokens: [] };
    await expect(createServer({ ...base, repositories: {} })).rejects.toThrowWithCode("ASP_SERVER_BAD_OPTIONS");
    await expect(createServer({ ...base, repositories: { demo: join(env.root, "nope") } })).rejects.toThrowWithCode(
      "ASP_SERVER_BAD_OPTIONS",
    );
    await expect(createServer({ ...base, repositories: { "../x": env.repo } })).rejects.toThrowWithCode(
      "ASP_SERVER_BAD_OPTIONS",
    );
    const digest = tokenDigest("same");
    await expect(
      createServer({
        host: env.host,
        repositories: { demo: env.repo },
        tokens: [
          { id: "a", digest, scopes: ["read"] },
          { id: "b", digest, scopes: ["admin"] },
        ],
      }),
    ).rejects.toThrowWithCode("ASP_SERVER_BAD_OPTIONS");
    expect(SERVER_ERROR_CODES).toContain("ASP_SERVER_BAD_OPTIONS");
  });
});
