import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { MemoryRepo } from "./memory-repo.js";

/** The built plugin entry; the protocol tests drive it as a real subprocess. */
export const ENTRY = fileURLToPath(new URL("../dist/main.js", import.meta.url));

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error & { code?: number }) => void;
}

/**
 * A minimal host: LSP-framed JSON-RPC over the provider's stdio, serving `host/readBlob` and
 * `host/readTree` from a {@link MemoryRepo} and recording every callback.
 */
export class TestHost {
  readonly child: ChildProcessWithoutNullStreams;
  readonly callbacks: Array<{ method: string; requestId: string; digest: string }> = [];
  readonly exited: Promise<number | null>;
  #buffer = Buffer.alloc(0);
  #next = 1;
  #pending = new Map<number, Pending>();

  constructor(
    readonly repo: MemoryRepo,
    args: readonly string[] = [],
  ) {
    if (!existsSync(ENTRY))
      throw new Error(`${ENTRY} is missing: run \`pnpm --filter @asp/provider-import-graph build\``);
    this.child = spawn(process.execPath, [ENTRY, ...args], { stdio: ["pipe", "pipe", "pipe"] });
    this.exited = new Promise((resolve) => this.child.on("exit", (code) => resolve(code)));
    this.child.stdout.on("data", (chunk: Buffer) => this.#onData(chunk));
    this.child.stdin.on("error", () => {});
  }

  #send(message: object): void {
    const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", ...message }), "utf8");
    this.child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "ascii"), body]));
  }

  #onData(chunk: Buffer): void {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      const end = this.#buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const header = this.#buffer.subarray(0, end).toString("ascii");
      const length = Number(/content-length: *(\d+)/i.exec(header)?.[1]);
      if (this.#buffer.length < end + 4 + length) return;
      const body = this.#buffer.subarray(end + 4, end + 4 + length).toString("utf8");
      this.#buffer = this.#buffer.subarray(end + 4 + length);
      this.#onMessage(JSON.parse(body) as Record<string, unknown>);
    }
  }

  #onMessage(m: Record<string, unknown>): void {
    if (typeof m.method === "string" && m.id !== undefined) {
      const params = m.params as { requestId: string; digest: string };
      this.callbacks.push({ method: m.method, requestId: params.requestId, digest: params.digest });
      try {
        this.#send({ id: m.id, result: this.#serve(m.method, params.digest) });
      } catch (error) {
        this.#send({ id: m.id, error: { code: -32001, message: (error as Error).message } });
      }
      return;
    }
    const p = this.#pending.get(m.id as number);
    if (p === undefined) return;
    this.#pending.delete(m.id as number);
    if (m.error !== undefined) {
      const e = m.error as { code: number; message: string };
      p.reject(Object.assign(new Error(e.message), { code: e.code }));
    } else p.resolve(m.result);
  }

  #serve(method: string, digest: string): unknown {
    if (method === "host/readTree") {
      const entries = this.repo.trees.get(digest);
      if (entries === undefined) throw new Error(`${digest} is not a tree of the request's baseline`);
      return { digest, entries };
    }
    if (method === "host/readBlob") {
      const text = this.repo.blobs.get(digest);
      if (text === undefined || this.repo.refuse.has(digest)) throw new Error(`${digest} refused`);
      const bytes = Buffer.from(text, "utf8");
      return { digest, size: bytes.length, base64: bytes.toString("base64") };
    }
    throw new Error(`unknown callback ${method}`);
  }

  request<T>(method: string, params?: unknown): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#send(params === undefined ? { id, method } : { id, method, params });
    });
  }

  notify(method: string, params?: unknown): void {
    this.#send(params === undefined ? { method } : { method, params });
  }

  /** `initialize` + `initialized`; returns the initialize result. */
  async start(): Promise<Record<string, unknown>> {
    const init = await this.request<Record<string, unknown>>("initialize", {
      protocolVersion: "1.0",
      host: { name: "test-host", version: "1.0.0" },
      processId: process.pid,
    });
    this.notify("initialized", { grants: [] });
    return init;
  }

  /** `shutdown` + `exit`; resolves with the exit code. */
  async stop(): Promise<number | null> {
    await this.request("shutdown");
    this.notify("exit");
    return this.exited;
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}
