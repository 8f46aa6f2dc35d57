import "reflect-metadata";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { PluginCapability, Policy } from "@asp/contracts";
import {
  digestPlugin,
  type LoadedVerifier,
  loadPlugins,
  readTrustRoots,
  registerPlugins,
  type Sandbox,
  signPlugin,
  TOKENS,
  writeKeyPair,
} from "@asp/plugin-host";
import { container } from "tsyringe";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type LaunchedVerifier, type LaunchVerifierOptions, launchVerifier, underBaseUrl } from "../src/index.js";
import { freshDirs, writeVerifierPlugin } from "./helpers.js";

const fresh = freshDirs("asp-ths-verifier-launch-");

/** The default verifier entry: its verdict follows `options.strict`, its finding's title carries the clock's time. */
const DEFAULT_ENTRY = (
  id: string,
): string => `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/VerifierPlugin", id: ${JSON.stringify(id)}, capabilities: ["review"],
  optionsSchema: { type: "object", properties: { strict: { type: "boolean" } }, additionalProperties: false },
  register(reg) {
    reg.registerInit({
      deps: { clock: { $$type: "@asp/DependencyRef", key: "asp.plugin.Clock" } },
      init: ({ clock }, ctx) => ({
        verify: async () => ({ kind: "review", verdict: ctx.options.strict ? "issues" : "pass",
          findings: [{ severity: "info", category: "timing", claim: "checked", evidence_refs: [], title: "checked at " + clock.now().toISOString() }] }),
      }),
    });
  },
};
`;

function grantPolicy(dir: string, id: string, capabilities: PluginCapability[]): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id, digest: digestPlugin(dir).digest, capabilities }],
  };
}

// Verifiers out of process (issue 27 item 4, ADR 0011): the wire, the host-side checks of every
// callback, and the failure records. Here the child runs through PASS-THROUGH sandboxes (fault
// injection: they claim confinement and launch the child as asked), so these tests run on any
// machine; the real confinement under bubblewrap is verifier-sandbox.test.ts.

const imported = (): Record<string, boolean> =>
  ((globalThis as { __aspImported?: Record<string, boolean> }).__aspImported ?? {}) as Record<string, boolean>;

/** FAKE (fault injection): a sandbox that says it confines and launches the child unchanged. */
const passThroughSandbox: Sandbox = {
  id: "asp.fake-pass-through",
  version: "1.0.0",
  digest: `sha256:${"a".repeat(64)}`,
  capabilities: ["sandbox:bubblewrap"],
  launch: async (r) => ({ ...r, mode: "isolated", mechanism: "fake pass-through (test)", directWrite: false }),
};

/** FAKE (fault injection): a sandbox that cannot confine (bwrap missing), as sandbox-bubblewrap reports it. */
const advisorySandbox: Sandbox = {
  ...passThroughSandbox,
  id: "asp.fake-advisory",
  launch: async (r) => ({
    ...r,
    mode: "advisory",
    mechanism: "plain subprocess",
    directWrite: true,
    reason: "bwrap is not installed",
  }),
};

const NOW = new Date("2026-01-02T03:04:05.000Z");
const clock = { now: () => NOW };
const PORTS = { clock, content: { read: async () => null } };
const live: LaunchedVerifier[] = [];
afterEach(async () => {
  for (const v of live.splice(0)) await v.close();
});

/** A signed verifier folder whose entry is `entry` (default: the helpers' verifier), loaded for a subprocess. */
async function loaded(
  id: string,
  entry?: string,
  pluginOptions: Record<string, unknown> = {},
): Promise<LoadedVerifier> {
  const key = join(fresh("key"), "team");
  writeKeyPair(key);
  const caps: PluginCapability[] = ["review", "guardian"];
  const dir = writeVerifierPlugin(join(fresh("plugin"), id), id, entry ?? DEFAULT_ENTRY(id), caps);
  signPlugin(dir, key);
  const result = await loadPlugins({
    dirs: [dir],
    trustRoots: readTrustRoots([`${key}.pub`]),
    policy: grantPolicy(dir, id, caps),
    cacheDir: fresh("cache"),
    verifierIsolation: "subprocess",
    pluginOptions: { [id]: pluginOptions },
  });
  expect(result.refused).toEqual([]);
  const [v] = result.verifiers;
  if (v === undefined) throw new Error("not loaded");
  return v;
}

async function launched(v: LoadedVerifier, options: Partial<LaunchVerifierOptions> = {}): Promise<LaunchedVerifier> {
  const r = await launchVerifier(v, { sandbox: passThroughSandbox, ports: PORTS, deny: [], ...options });
  live.push(r);
  return r;
}

/** A verifier entry: `body` is the code of `verify(req, ports)`, `deps` the port keys it asks for. */
function entryOf(id: string, body: string, deps: Record<string, string> = {}): string {
  const refs = Object.entries(deps)
    .map(([name, key]) => `${name}: { $$type: "@asp/DependencyRef", key: ${JSON.stringify(key)} }`)
    .join(", ");
  return `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/VerifierPlugin", id: ${JSON.stringify(id)}, capabilities: ["review"],
  register(reg) {
    reg.registerInit({ deps: { ${refs} }, init: (ports, ctx) => ({ verify: async (req) => { ${body} } }) });
  },
};
`;
}

/** The first finding's claim (or title) of a review answer. */
const first = (answer: unknown): { claim: string; title: string } =>
  ((answer as { findings?: { claim: string; title: string }[] }).findings ?? [])[0] ?? { claim: "", title: "" };

const pass = (claim: string) =>
  `return { kind: "review", verdict: "pass", findings: [{ severity: "info", category: "probe", claim: ${claim}, evidence_refs: [], title: "probe" }] };`;

/** Write one raw JSON-RPC request to stdout, as a hostile plugin can (it shares the child's process). */
const raw = (id: number, method: string, params: string) =>
  `{ const body = JSON.stringify({ jsonrpc: "2.0", id: ${id}, method: ${JSON.stringify(method)}, params: ${params} }); process.stdout.write("Content-Length: " + Buffer.byteLength(body) + "\\r\\n\\r\\n" + body); }`;

describe("loading a verifier for a subprocess", () => {
  it("never imports its entry into the host, and registerPlugins refuses to run it here (ASP_PLUGIN_OUT_OF_PROCESS)", async () => {
    const v = await loaded("verifier-never-imported");
    expect(v.isolation).toBe("subprocess");
    expect(v.entryPath).toBe(join(v.cached, "main.mjs"));
    expect(imported()["verifier-never-imported"]).toBeUndefined();
    const child = container.createChildContainer();
    registerPlugins(child, { providers: [], verifiers: [v], sandboxes: [], refused: [], cacheDir: null }, PORTS);
    expect(() => child.resolveAll(TOKENS.Verifier)).toThrow(
      expect.objectContaining({ code: "ASP_PLUGIN_OUT_OF_PROCESS" }),
    );
  });
});

describe("launchVerifier (issue 27 item 4)", { timeout: 30_000 }, () => {
  it("refuses to run a verifier unconfined: no sandbox, a sandbox that throws, or one that would write the worktree", async () => {
    const v = await loaded("verifier-unconfined");
    const code = { code: "ASP_PLUGIN_VERIFIER_UNSANDBOXED" };
    await expect(launchVerifier(v, { sandbox: null, ports: PORTS, deny: [] })).rejects.toMatchObject(code);
    await expect(launchVerifier(v, { sandbox: advisorySandbox, ports: PORTS, deny: [] })).rejects.toMatchObject(code);
    const throwing: Sandbox = {
      ...passThroughSandbox,
      launch: async () => {
        throw Object.assign(new Error("no"), { code: "ASP_BWRAP_SECRET_FOLDER" });
      },
    };
    await expect(launchVerifier(v, { sandbox: throwing, ports: PORTS, deny: [] })).rejects.toMatchObject(code);
  });

  it("answers through the child with the host's clock and its validated options, and reports the launch's assurance", async () => {
    const v = await loaded("verifier-child-answers", undefined, { strict: true });
    const r = await launched(v);
    expect(r.launch).toEqual({
      mode: "isolated",
      mechanism: "fake pass-through (test)",
      sandbox: { id: passThroughSandbox.id, digest: passThroughSandbox.digest },
      directWrite: false,
    });
    const answer = await r.verify({ kind: "review", subject: {} });
    expect(answer).toMatchObject({ kind: "review", verdict: "issues" });
    // The child's clock is the host's (a fixed fake here), plus the few ms the call took.
    const title = first(answer).title;
    expect(Date.parse(title.replace("checked at ", "")) - NOW.getTime()).toBeLessThan(60_000);
    expect(Date.parse(title.replace("checked at ", "")) - NOW.getTime()).toBeGreaterThanOrEqual(0);
    expect(imported()["verifier-child-answers"]).toBeUndefined();
    expect(r.attempts()).toEqual([]);
  });

  it("checks what the child declares: options against its schema, only verifier ports, the checks port only where supplied", async () => {
    await expect(launched(await loaded("verifier-bad-options", undefined, { strict: "yes" }))).rejects.toMatchObject({
      code: "ASP_PLUGIN_BAD_OPTIONS",
    });
    const forbidden = await loaded(
      "verifier-forbidden-port",
      entryOf("verifier-forbidden-port", pass('"x"'), { log: "asp.evidence.FactLog" }),
    );
    await expect(launched(forbidden)).rejects.toMatchObject({ code: "ASP_PLUGIN_FORBIDDEN_PORT" });
    const checks = await loaded(
      "verifier-needs-checks",
      entryOf("verifier-needs-checks", pass('"x"'), { checks: "asp.plugin.HostChecks" }),
    );
    await expect(launched(checks)).rejects.toMatchObject({ code: "ASP_PLUGIN_PORT_UNAVAILABLE" });
    const lying = await loaded(
      "verifier-lies-about-id",
      entryOf("verifier-lies-about-id", pass('"x"')).replace('id: "verifier-lies-about-id"', 'id: "asp.other"'),
    );
    await expect(launched(lying)).rejects.toMatchObject({ code: "ASP_PLUGIN_LOAD_FAILED" });
  });

  it("attack: a declared optionsSchema built to backtrack forever never blocks the host; the check is cut at its deadline", async () => {
    // The child reports the schema, so its author picks the regular expression ajv runs on the
    // trusted options: `(?:.|.|.)*X` on a 40-character URL is 3^40 steps. Checked on the host's
    // own thread this froze every other run; off it, the deadline fires and the launch is refused.
    const id = "verifier-redos-schema";
    const entry = entryOf(id, pass('"x"')).replace(
      'capabilities: ["review"],',
      'capabilities: ["review"], optionsSchema: { type: "object", properties: { baseUrl: { type: "string", pattern: "^(?:.|.|.)*X$" } } },',
    );
    const v = await loaded(id, entry, { baseUrl: "https://models.example.internal/v1/chat-a" });
    let ticks = 0;
    const beat = setInterval(() => {
      ticks += 1;
    }, 5);
    try {
      const refused = await launched(v, { optionsCheckTimeoutMs: 300 }).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: "ASP_PLUGIN_LOAD_FAILED", data: { id, timeoutMs: 300 } });
      expect(String((refused as Error).message)).toMatch(/optionsSchema.*300 ms/);
    } finally {
      clearInterval(beat);
    }
    // The host's event loop kept turning while the schema was being checked.
    expect(ticks).toBeGreaterThan(0);
    // A schema that is merely big to compile, or a pattern that is fine, still checks as before.
    const fine = await loaded(
      "verifier-fine-pattern",
      entryOf("verifier-fine-pattern", pass('"x"')).replace(
        'capabilities: ["review"],',
        'capabilities: ["review"], optionsSchema: { type: "object", properties: { baseUrl: { type: "string", pattern: "^https://" } } },',
      ),
      { baseUrl: "http://plain.example/v1" },
    );
    await expect(launched(fine)).rejects.toMatchObject({
      code: "ASP_PLUGIN_BAD_OPTIONS",
      message: expect.stringContaining("/baseUrl"),
    });
  });

  it("reads content only through the granted port, by digest", async () => {
    const digest = `sha256:${"b".repeat(64)}`;
    const v = await loaded(
      "verifier-reads",
      entryOf(
        "verifier-reads",
        `const b = await ports.content.read(${JSON.stringify(digest)}); ${pass("new TextDecoder().decode(b)")}`,
        { content: "asp.plugin.ContentReader" },
      ),
    );
    const seen: string[] = [];
    const r = await launched(v, {
      ports: {
        clock,
        content: {
          read: async (d) => {
            seen.push(d);
            return new TextEncoder().encode("blob bytes");
          },
        },
      },
    });
    const answer = await r.verify({ kind: "review", subject: {} });
    expect(first(answer).claim).toBe("blob bytes");
    expect(seen).toEqual([digest]);
  });

  it("attack: raw JSON-RPC callbacks for ports it was not granted are refused host-side and recorded", async () => {
    const v = await loaded(
      "verifier-raw-callbacks",
      entryOf(
        "verifier-raw-callbacks",
        `${raw(9001, "host/checks.evaluate", "{ files: [] }")} ${raw(9002, "host/content.read", `{ digest: "sha256:${"c".repeat(64)}" }`)} ${pass('"done"')}`,
      ),
    );
    let evaluated = 0;
    const r = await launched(v, {
      ports: {
        ...PORTS,
        checks: {
          evaluate: async () => {
            evaluated++;
            return { decision: "allow" as const, receipt_id: "r", findings: [] };
          },
        },
      },
    });
    await r.verify({ kind: "review", subject: {} });
    expect(evaluated).toBe(0);
    expect(r.attempts().map((a) => a.kind)).toEqual(["port_denied", "port_denied"]);
    expect(r.attempts().map((a) => a.at)).toEqual([NOW.toISOString(), NOW.toISOString()]);
  });

  it("attack: a flood of refused callbacks keeps the first 100 and counts every one", async () => {
    const v = await loaded(
      "verifier-floods",
      entryOf(
        "verifier-floods",
        `for (let i = 0; i < 150; i++) ${raw(9100, "host/checks.evaluate", "{ files: [] }").replace("id: 9100", "id: 9100 + i")} ${pass('"done"')}`,
      ),
    );
    const r = await launched(v);
    await r.verify({ kind: "review", subject: {} });
    expect(r.attempts()).toHaveLength(100);
    expect(r.attemptCount()).toBe(150);
  });

  describe("network only through the host", () => {
    let server: Server;
    let base = "";
    const seen: { url: string | undefined; authorization: string | undefined; echo?: string }[] = [];
    const held: (() => void)[] = [];
    let hold = 4;
    beforeAll(async () => {
      server = createServer((req: IncomingMessage, res) => {
        const echo = req.headers["x-echo"];
        seen.push({
          url: req.url,
          authorization: req.headers.authorization,
          ...(typeof echo === "string" ? { echo } : {}),
        });
        req.resume();
        req.on("end", () => {
          const answer = () => {
            res.writeHead(200, { "content-type": "application/json" });
            res.end(JSON.stringify({ ok: true }));
          };
          if (req.url?.startsWith("/v1/echo") === true) {
            res.writeHead(400, { "content-type": "application/json" });
            res.end(JSON.stringify({ error: `bad key ${req.headers.authorization}` }));
            return;
          }
          // Under /v1/held the answers wait until `hold` requests are open, then all go out.
          if (req.url?.startsWith("/v1/held") !== true) return answer();
          held.push(answer);
          if (held.length >= hold) for (const a of held.splice(0)) a();
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("POSTs to the granted endpoint with the key added host-side; the child only ever holds a placeholder", async () => {
      seen.length = 0;
      const v = await loaded(
        "verifier-posts",
        entryOf(
          "verifier-posts",
          `const res = await fetch(req.subject.url + "/chat/completions", { method: "POST", headers: { authorization: "Bearer " + process.env.MY_KEY, "x-echo": "org " + process.env.MY_KEY, "content-type": "application/json" }, body: "{}" });
           const body = await res.json();
           ${pass("JSON.stringify({ status: res.status, body, key: process.env.MY_KEY })")}`,
        ),
      );
      const r = await launched(v, {
        network: { baseUrl: base, credential: { env: "MY_KEY", value: () => "sk-real-secret-123" } },
      });
      const answer = await r.verify({ kind: "review", subject: { url: base } });
      const claim = JSON.parse(first(answer).claim ?? "{}");
      expect(claim.status).toBe(200);
      expect(claim.body).toEqual({ ok: true });
      expect(claim.key).toBe("asp-host-held-credential");
      expect(seen).toEqual([{ url: "/v1/chat/completions", authorization: "Bearer sk-real-secret-123" }]);
      expect(r.attempts()).toEqual([]);
    });

    it("attack: any other origin or path, a GET, or no grant at all is refused, recorded, and never sent", async () => {
      seen.length = 0;
      const v = await loaded(
        "verifier-exfiltrates",
        entryOf(
          "verifier-exfiltrates",
          `const out = [];
           for (const [url, method] of req.subject.tries) {
             try { const r = await fetch(url, { method, body: method === "POST" ? "{}" : undefined }); out.push(r.status); }
             catch (e) { out.push(e.cause?.code ?? "threw"); }
           }
           ${pass("JSON.stringify(out)")}`,
        ),
      );
      const origin = new URL(base).origin;
      const tries = [
        [`${origin}/other`, "POST"],
        [`${origin}/v10/x`, "POST"],
        ["http://example.invalid/v1", "POST"],
        [`${base}/chat/completions`, "GET"],
        // Out of the granted path by traversal, plain or encoded for a server to decode later.
        [`${base}/../other`, "POST"],
        [`${base}/%2e%2e/other`, "POST"],
        [`${base}/..%2fother`, "POST"],
        [`${base}/..%5Cother`, "POST"],
      ];
      const r = await launched(v, { network: { baseUrl: base } });
      const answer = await r.verify({ kind: "review", subject: { tries } });
      expect(JSON.parse(first(answer).claim ?? "[]")).toEqual(Array(tries.length).fill("ASP_PLUGIN_NETWORK_DENIED"));
      expect(r.attempts().map((a) => a.kind)).toEqual(Array(tries.length).fill("network_denied"));
      const none = await launched(
        await loaded(
          "verifier-no-network",
          entryOf(
            "verifier-no-network",
            `try { await fetch(req.subject.url, { method: "POST", body: "{}" }); } catch (e) { ${pass("e.cause.code")} }`,
          ),
        ),
      );
      const a = await none.verify({ kind: "review", subject: { url: base } });
      expect(first(a).claim).toBe("ASP_PLUGIN_NETWORK_DENIED");
      expect(none.attempts().map((x) => x.kind)).toEqual(["network_denied"]);
      expect(seen).toEqual([]);
    });

    it("attack: an endpoint that echoes the key back hands the child only the placeholder", async () => {
      const v = await loaded(
        "verifier-echo",
        entryOf(
          "verifier-echo",
          `const res = await fetch(req.subject.url, { method: "POST", headers: { authorization: "Bearer " + process.env.MY_KEY }, body: "{}" });
           ${pass("await res.text()")}`,
        ),
      );
      const r = await launched(v, {
        network: { baseUrl: base, credential: { env: "MY_KEY", value: () => "sk-real-secret-123" } },
      });
      const claim = first(await r.verify({ kind: "review", subject: { url: `${base}/echo` } })).claim;
      expect(claim).toBe(JSON.stringify({ error: "bad key Bearer asp-host-held-credential" }));
    });

    it("attack: at most 4 requests to the endpoint at once; more are refused and recorded, none is sent", async () => {
      seen.length = 0;
      hold = 4;
      const v = await loaded(
        "verifier-floods",
        entryOf(
          "verifier-floods",
          `const all = await Promise.allSettled(Array.from({ length: 6 }, () => fetch(req.subject.url, { method: "POST", body: "{}" }).then((r) => r.status)));
           ${pass("JSON.stringify(all.map((r) => r.status === 'fulfilled' ? r.value : r.reason.cause.code))")}`,
        ),
      );
      const r = await launched(v, { network: { baseUrl: base } });
      const answer = await r.verify({ kind: "review", subject: { url: `${base}/held` } });
      expect(JSON.parse(first(answer).claim)).toEqual([
        200,
        200,
        200,
        200,
        "ASP_PLUGIN_NETWORK_DENIED",
        "ASP_PLUGIN_NETWORK_DENIED",
      ]);
      expect(seen).toHaveLength(4);
      expect(r.attempts().map((a) => a.kind)).toEqual(["network_denied", "network_denied"]);
    });

    it("underBaseUrl: same origin, at or under the path on a / boundary, no user info", () => {
      expect(underBaseUrl("https://api.x/v1", "https://api.x/v1")).toBe(true);
      expect(underBaseUrl("https://api.x/v1/chat", "https://api.x/v1/")).toBe(true);
      expect(underBaseUrl("https://api.x/v10", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("http://api.x/v1", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://u:p@api.x/v1", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x:444/v1", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("not a url", "https://api.x/v1")).toBe(false);
      // Traversal: resolved by parsing, or refused when encoded so a server could decode it later.
      expect(underBaseUrl("https://api.x/v1/../admin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/%2e%2e/admin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/..%2fadmin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/..%2Fadmin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/..%5cadmin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/%2E%2E%2fadmin", "https://api.x/v1")).toBe(false);
      expect(underBaseUrl("https://api.x/v1/chat?x=%2f", "https://api.x/v1")).toBe(true);
    });
  });

  it("a verify that throws, an answer that does not validate, and a child that dies are coded failures, each recorded", async () => {
    const thrower = await launched(
      await loaded("verifier-throws", entryOf("verifier-throws", 'throw new Error("model down");')),
    );
    await expect(thrower.verify({ kind: "review", subject: {} })).rejects.toMatchObject({
      code: "ASP_PLUGIN_VERIFIER_FAILED",
      data: { kind: "failed" },
    });
    expect(thrower.attempts().map((a) => a.kind)).toEqual(["failed"]);
    expect(thrower.attempts()[0]?.detail).toContain("model down");

    // A plugin's own coded error keeps its code and the attempt outcome it names (labels only;
    // an outcome that is not one of the three is dropped, never a pass).
    const labelled = await launched(
      await loaded(
        "verifier-labels",
        entryOf(
          "verifier-labels",
          'throw Object.assign(new Error("bad json"), { code: "ACME_BAD_JSON", data: { attempt_outcome: req.subject.outcome, secret: "x" } });',
        ),
      ),
    );
    await expect(labelled.verify({ kind: "review", subject: { outcome: "unparseable" } })).rejects.toMatchObject({
      data: { kind: "failed", plugin_code: "ACME_BAD_JSON", attempt_outcome: "unparseable" },
    });
    const forged = await labelled.verify({ kind: "review", subject: { outcome: "verdict" } }).catch((e) => e);
    expect(forged.data).toEqual({ id: "verifier-labels", kind: "failed", plugin_code: "ACME_BAD_JSON" });

    const liar = await launched(
      await loaded(
        "verifier-bad-answer",
        entryOf("verifier-bad-answer", 'return { kind: "review", verdict: "pass", findings: [], decision: "ALLOW" };'),
      ),
    );
    await expect(liar.verify({ kind: "review", subject: {} })).rejects.toMatchObject({ code: "ASP_PLUGIN_BAD_OUTPUT" });

    const dies = await launched(await loaded("verifier-dies", entryOf("verifier-dies", "process.exit(3);")));
    await expect(dies.verify({ kind: "review", subject: {} })).rejects.toMatchObject({
      code: "ASP_PLUGIN_VERIFIER_FAILED",
      data: { kind: "exited" },
    });
    expect(dies.attempts().map((a) => a.kind)).toEqual(["exited"]);
    await expect(dies.verify({ kind: "review", subject: {} })).rejects.toMatchObject({
      code: "ASP_PLUGIN_VERIFIER_FAILED",
    });
  });

  it("the request's signal cancels a verify in the child (the plugin sees its own signal abort)", async () => {
    const v = await launched(
      await loaded(
        "verifier-hangs",
        entryOf(
          "verifier-hangs",
          'await new Promise((_, reject) => req.signal.addEventListener("abort", () => reject(new Error("aborted")))); return null;',
        ),
      ),
    );
    const abort = new AbortController();
    const pending = v.verify({ kind: "review", subject: {}, signal: abort.signal });
    abort.abort();
    await expect(pending).rejects.toMatchObject({ code: "ASP_PLUGIN_VERIFIER_FAILED", data: { kind: "cancelled" } });
    expect(v.attempts().map((a) => a.kind)).toEqual(["cancelled"]);
    // The cancelled child is ended, not left calling back: the next verify finds it gone.
    await expect(v.verify({ kind: "review", subject: {} })).rejects.toMatchObject({ data: { kind: "exited" } });
  });
});
