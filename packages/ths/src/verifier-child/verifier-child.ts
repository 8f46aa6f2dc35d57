/**
 * The generic entry a verifier plugin runs in when the host launches it out of its own process
 * (`@asp/ths` `launchVerifier`, ADR 0011). Bundled into `dist/verifier-child-bundle/main.mjs`
 * with its connection (`@asp/protocol`) and nothing else, so under a sandbox only that folder,
 * the plugin's verified copy and the Node runtime need to exist.
 *
 * It speaks JSON-RPC on stdin / stdout (the providers' framing):
 * - host -> child `verifier/describe { entry, now }`: import the verified entry, check its branded
 *   declaration, run its `register` phase and say what it declared (id, capabilities, options
 *   schema, the port keys its `init` depends on). The host checks all of it.
 * - host -> child `verifier/init { options, now }`: call `init` with proxy ports.
 * - host -> child `verifier/verify { request, now }`: one `verify`; `$/cancelRequest` aborts it.
 * - child -> host `host/content.read`, `host/checks.evaluate`, `host/http.post`: the only ways out.
 *   The host answers each only when the plugin was granted it.
 *
 * Nothing here is trusted by the host: a plugin runs in this same process and can replace any of
 * it. The sandbox and the host's checks of every callback are the boundary.
 */
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { CancellationTokenSource, createStreamConnection, ResponseError } from "@asp/protocol";
import { VERIFIER_FAILED, VERIFIER_METHODS } from "./wire.js";

interface Captured {
  readonly deps: Record<string, { readonly key: string }>;
  readonly init: (deps: Record<string, unknown>, ctx: { id: string; options: unknown }) => unknown;
}

function fail(message: string, error?: unknown): ResponseError<{ code?: string; attempt_outcome?: string }> {
  // Labels only, never the error's data: its code and the attempt outcome it names, if well-formed.
  const e = error as { code?: unknown; data?: { attempt_outcome?: unknown } } | undefined;
  const code = typeof e?.code === "string" && /^[A-Z][A-Z0-9_]{0,63}$/.test(e.code) ? e.code : undefined;
  const outcome = e?.data?.attempt_outcome;
  return new ResponseError(VERIFIER_FAILED, message.slice(0, 2000), {
    ...(code === undefined ? {} : { code }),
    ...(typeof outcome === "string" && /^[a-z_]{1,32}$/.test(outcome) ? { attempt_outcome: outcome } : {}),
  });
}

function messageOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e?.code === "string" ? `${e.code}: ` : "";
  return `${code}${typeof e?.message === "string" ? e.message : String(error)}`;
}

/** Keep stdout for the wire: console output of the plugin goes to stderr. */
function keepStdout(): void {
  const toErr = (...args: unknown[]): void => {
    process.stderr.write(`${args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ")}\n`);
  };
  console.log = toErr;
  console.info = toErr;
  console.debug = toErr;
}

/** Request headers as a plain object, from a record, an array of pairs or anything with forEach (a Headers). */
function headersOf(h: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === null || h === undefined) return out;
  if (Array.isArray(h)) {
    for (const [name, value] of h as [unknown, unknown][]) out[String(name).toLowerCase()] = String(value);
  } else if (typeof (h as { forEach?: unknown }).forEach === "function") {
    (h as { forEach(cb: (value: string, name: string) => void): void }).forEach((value, name) => {
      out[name.toLowerCase()] = value;
    });
  } else if (typeof h === "object") {
    for (const [name, value] of Object.entries(h as Record<string, unknown>)) out[name.toLowerCase()] = String(value);
  }
  return out;
}

/** The part of a fetch Response a client reads: status, headers.get, body (a web stream), text / json / arrayBuffer. */
function hostResponse(answer: { status: number; headers: Record<string, string>; body: string }) {
  const bytes = new TextEncoder().encode(answer.body);
  const headers = new Map(Object.entries(answer.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v)]));
  let used = false;
  const take = (): Uint8Array => {
    if (used) throw new TypeError("Body is unusable: Body has already been read");
    used = true;
    return bytes;
  };
  let stream: ReadableStream<Uint8Array> | null = null;
  return {
    status: answer.status,
    statusText: "",
    ok: answer.status >= 200 && answer.status <= 299,
    redirected: false,
    type: "basic",
    url: "",
    headers: Object.freeze({
      get: (name: string) => headers.get(name.toLowerCase()) ?? null,
      has: (name: string) => headers.has(name.toLowerCase()),
      forEach: (cb: (value: string, name: string) => void) => {
        for (const [k, v] of headers) cb(v, k);
      },
    }),
    get bodyUsed() {
      return used;
    },
    get body(): ReadableStream<Uint8Array> {
      stream ??= new ReadableStream<Uint8Array>({
        start(controller) {
          const b = take();
          if (b.byteLength > 0) controller.enqueue(b);
          controller.close();
        },
      });
      return stream;
    },
    text: async () => new TextDecoder().decode(take()),
    json: async () => JSON.parse(new TextDecoder().decode(take())) as unknown,
    arrayBuffer: async () => {
      const b = take();
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    },
  };
}

function main(): void {
  keepStdout();
  const conn = createStreamConnection(process.stdin, process.stdout);

  // The host's clock, carried by every request: its time when it sent it, plus the monotonic time since.
  let base = Date.now();
  let at = performance.now();
  const setNow = (now: unknown): void => {
    if (typeof now === "number" && Number.isFinite(now)) {
      base = now;
      at = performance.now();
    }
  };
  const clock = Object.freeze({ now: () => new Date(base + (performance.now() - at)) });

  // Network only through the host: a fetch that asks it to POST (the host checks the origin).
  // Neither undici's Headers nor its Response is touched: loading undici compiles its WebAssembly
  // HTTP parser, which a sandbox's address-space bound can make fail and kill the process.
  globalThis.fetch = (async (input: unknown, init?: RequestInit): Promise<Response> => {
    const url =
      typeof input === "string" ? input : input instanceof URL ? input.href : String((input as { url?: unknown })?.url);
    const headers = headersOf(init?.headers);
    const body = typeof init?.body === "string" ? init.body : init?.body == null ? "" : String(init.body);
    const cancel = new CancellationTokenSource();
    const signal = init?.signal ?? undefined;
    const aborted = (): unknown => signal?.reason ?? new DOMException("This operation was aborted", "AbortError");
    if (signal?.aborted) throw aborted();
    const onAbort = (): void => cancel.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const answer = (await conn.sendRequest(
        VERIFIER_METHODS.httpPost,
        { url, method: (init?.method ?? "GET").toUpperCase(), headers, body },
        cancel.token,
      )) as { status: number; headers: Record<string, string>; body: string };
      if (signal?.aborted) throw aborted();
      return hostResponse(answer) as unknown as Response;
    } catch (error) {
      if (signal?.aborted) throw aborted();
      const code = error instanceof ResponseError ? String((error.data as { code?: unknown })?.code ?? "") : "";
      throw new TypeError("fetch failed", {
        cause: { code: /^[A-Z0-9_a-z]{1,64}$/.test(code) ? code : "ASP_PLUGIN_NETWORK_DENIED" },
      });
    } finally {
      signal?.removeEventListener("abort", onAbort);
      cancel.dispose();
    }
  }) as typeof fetch;

  let declared: { id: string; captured: Captured } | null = null;
  let instance: { verify: (request: unknown) => unknown } | null = null;

  conn.onRequest(VERIFIER_METHODS.describe, async (params: { entry?: unknown; brand?: unknown; now?: unknown }) => {
    setNow(params?.now);
    if (declared !== null) throw fail("describe was already called");
    if (typeof params?.entry !== "string") throw fail("describe needs the entry path");
    // The brand its default export must carry comes from the host (declared once, in @asp/contracts).
    const brand = typeof params.brand === "string" ? params.brand : "";
    let mod: { default?: unknown };
    try {
      mod = (await import(pathToFileURL(params.entry).href)) as { default?: unknown };
    } catch (error) {
      throw fail(`importing the entry failed: ${messageOf(error)}`);
    }
    const decl = mod.default as
      | { $$type?: unknown; id?: unknown; capabilities?: unknown; optionsSchema?: unknown; register?: unknown }
      | undefined;
    if (typeof decl !== "object" || decl === null || decl.$$type !== brand || brand === "") {
      throw fail(`the entry's default export is not a verifier declaration (${brand})`);
    }
    if (typeof decl.register !== "function") throw fail("the declaration has no register()");
    const captured: Captured[] = [];
    try {
      (decl.register as (reg: unknown) => void)({ registerInit: (c: Captured) => captured.push(c) });
    } catch (error) {
      throw fail(`register() threw: ${messageOf(error)}`);
    }
    const first = captured[0];
    if (captured.length !== 1 || first === undefined) {
      throw fail(`register() must call registerInit exactly once (called ${captured.length} times)`);
    }
    if (typeof first.init !== "function" || typeof first.deps !== "object" || first.deps === null) {
      throw fail("registerInit needs { deps: { name: DependencyRef }, init: function }");
    }
    const deps: Record<string, string> = {};
    for (const [name, ref] of Object.entries(first.deps)) {
      if (typeof ref?.key !== "string")
        throw fail("registerInit needs { deps: { name: DependencyRef }, init: function }");
      deps[name] = ref.key;
    }
    declared = { id: String(decl.id), captured: first };
    return {
      id: decl.id,
      capabilities: decl.capabilities,
      ...(decl.optionsSchema === undefined ? {} : { optionsSchema: decl.optionsSchema }),
      deps,
    };
  });

  conn.onRequest(VERIFIER_METHODS.init, (params: { options?: unknown; ports?: unknown; now?: unknown }) => {
    setNow(params?.now);
    if (declared === null) throw fail("init before describe");
    if (instance !== null) throw fail("init was already called");
    const granted = new Set(Array.isArray(params?.ports) ? (params.ports as unknown[]).map(String) : []);
    const proxies: Record<string, unknown> = {
      "asp.plugin.Clock": clock,
      "asp.plugin.ContentReader": Object.freeze({
        read: async (digest: string) => {
          const r = (await conn.sendRequest(VERIFIER_METHODS.contentRead, { digest })) as { base64: string } | null;
          return r === null ? null : new Uint8Array(Buffer.from(r.base64, "base64"));
        },
      }),
      "asp.plugin.HostChecks": Object.freeze({
        evaluate: (p: unknown) => conn.sendRequest(VERIFIER_METHODS.checksEvaluate, p),
      }),
    };
    const deps: Record<string, unknown> = {};
    for (const [name, ref] of Object.entries(declared.captured.deps)) {
      if (!granted.has(ref.key)) throw fail(`the host does not supply ${ref.key}`);
      deps[name] = proxies[ref.key];
    }
    let made: unknown;
    try {
      made = declared.captured.init(Object.freeze(deps), { id: declared.id, options: params?.options });
    } catch (error) {
      throw fail(`init of ${declared.id} failed: ${messageOf(error)}`);
    }
    if (typeof (made as { verify?: unknown } | null)?.verify !== "function") {
      throw fail(`init of ${declared.id} did not return an object with verify()`);
    }
    instance = made as { verify: (request: unknown) => unknown };
    return null;
  });

  conn.onRequest(VERIFIER_METHODS.verify, async (params: { request?: unknown; now?: unknown }, token) => {
    setNow(params?.now);
    if (instance === null) throw fail("verify before init");
    const abort = new AbortController();
    const sub = token.onCancellationRequested(() =>
      abort.abort(new DOMException("cancelled by the host", "AbortError")),
    );
    try {
      return await instance.verify({ ...(params?.request as object), signal: abort.signal });
    } catch (error) {
      throw fail(messageOf(error), error);
    } finally {
      sub.dispose();
    }
  });

  conn.onRequest(VERIFIER_METHODS.shutdown, () => null);
  conn.onNotification(VERIFIER_METHODS.exit, () => process.exit(0));
  conn.onClose(() => process.exit(0));
  conn.listen();
}

main();
