// A minimal host for subprocess tests: launches a built provider with structured argv, speaks
// JSON-RPC with LSP framing over its stdio, and serves host/readBlob / host/readTree from an
// in-memory object map. Everything the provider writes to stdout is kept (redaction tests grep it).
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createHash } from "node:crypto";

export type TreeEntry = { name: string; mode: "100644" | "100755" | "120000" | "040000"; digest: string };
export type StoredObject = { kind: "blob"; bytes: Uint8Array } | { kind: "tree"; entries: TreeEntry[] };
export type Files = Record<string, string | Uint8Array>;

export const blobDigest = (bytes: Uint8Array): string => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** Store `files` as blobs and trees in `objects`; return the root tree digest. */
export function buildTree(files: Files, objects: Map<string, StoredObject>): string {
  interface Dir {
    files: Map<string, Uint8Array>;
    dirs: Map<string, Dir>;
  }
  const root: Dir = { files: new Map(), dirs: new Map() };
  for (const [path, content] of Object.entries(files)) {
    const parts = path.split("/");
    let dir = root;
    for (const name of parts.slice(0, -1)) {
      let next = dir.dirs.get(name);
      if (next === undefined) {
        next = { files: new Map(), dirs: new Map() };
        dir.dirs.set(name, next);
      }
      dir = next;
    }
    const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
    dir.files.set(parts.at(-1) as string, bytes);
  }
  const encode = (dir: Dir): string => {
    const entries: TreeEntry[] = [];
    for (const [name, bytes] of dir.files) {
      const d = blobDigest(bytes);
      objects.set(d, { kind: "blob", bytes });
      entries.push({ name, mode: "100644", digest: d });
    }
    for (const [name, sub] of dir.dirs) entries.push({ name, mode: "040000", digest: encode(sub) });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const digest = `sha256:${createHash("sha256").update(JSON.stringify(entries)).digest("hex")}`;
    objects.set(digest, { kind: "tree", entries });
    return digest;
  };
  return encode(root);
}

export interface Change {
  path: string;
  kind: "added" | "modified" | "deleted";
  before: string | null;
  after: string | null;
}

/** A base and an after tree with the changeset between them, all in one object map. */
export function fixture(baseFiles: Files, afterFiles: Files) {
  const objects = new Map<string, StoredObject>();
  const base = buildTree(baseFiles, objects);
  const after = buildTree(afterFiles, objects);
  const digestOf = (c: string | Uint8Array) => blobDigest(typeof c === "string" ? new TextEncoder().encode(c) : c);
  const changes: Change[] = [];
  for (const path of [...new Set([...Object.keys(baseFiles), ...Object.keys(afterFiles)])].sort()) {
    const b = baseFiles[path];
    const a = afterFiles[path];
    const before = b === undefined ? null : digestOf(b);
    const afterD = a === undefined ? null : digestOf(a);
    if (before === afterD) continue;
    changes.push({
      path,
      kind: before === null ? "added" : afterD === null ? "deleted" : "modified",
      before,
      after: afterD,
    });
  }
  const digest = `sha256:${createHash("sha256").update(JSON.stringify({ base, after, changes })).digest("hex")}`;
  return { objects, base, after, changeset: { digest, base, after, changes } };
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: RpcError) => void;
}

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** A provider subprocess and the host side of its connection. */
export class ProviderProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every byte the provider wrote to stdout. */
  readonly stdout: Buffer[] = [];
  stderr = "";
  /** Blob digests served per requestId. */
  readonly served = new Map<string, Set<string>>();
  readonly exited: Promise<number | null>;
  private buffer = Buffer.alloc(0);
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    command: readonly string[],
    private readonly objects: ReadonlyMap<string, StoredObject>,
    options: { cwd?: string } = {},
  ) {
    const [exe, ...args] = command as [string, ...string[]];
    this.child = spawn(exe, args, {
      cwd: options.cwd ?? process.cwd(),
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exited = new Promise((resolve) => this.child.on("exit", (code) => resolve(code)));
    this.child.stderr.on("data", (c: Buffer) => {
      this.stderr += c.toString("utf8");
    });
    this.child.stdout.on("data", (c: Buffer) => {
      this.stdout.push(c);
      this.buffer = Buffer.concat([this.buffer, c]);
      this.drain();
    });
    this.child.stdin.on("error", () => {});
  }

  /** Everything written to stdout so far, as text. */
  output(): string {
    return Buffer.concat(this.stdout).toString("utf8");
  }

  private drain(): void {
    for (;;) {
      const sep = this.buffer.indexOf("\r\n\r\n");
      if (sep < 0) return;
      const header = this.buffer.subarray(0, sep).toString("latin1");
      const m = /content-length:\s*(\d+)/i.exec(header);
      if (m === null) throw new Error(`bad header ${header}`);
      const len = Number(m[1]);
      if (this.buffer.length < sep + 4 + len) return;
      const body = this.buffer.subarray(sep + 4, sep + 4 + len).toString("utf8");
      this.buffer = this.buffer.subarray(sep + 4 + len);
      this.dispatch(JSON.parse(body));
    }
  }

  private send(message: unknown): void {
    const body = Buffer.from(JSON.stringify(message), "utf8");
    this.child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "latin1"), body]));
  }

  private dispatch(msg: {
    id?: number;
    method?: string;
    params?: { requestId?: string; digest?: string };
    result?: unknown;
    error?: { code: number; message: string };
  }): void {
    if (msg.method !== undefined && msg.id !== undefined) {
      const digest = msg.params?.digest ?? "";
      const o = this.objects.get(digest);
      if (msg.method === "host/readBlob" && o?.kind === "blob") {
        const set = this.served.get(msg.params?.requestId ?? "") ?? new Set();
        set.add(digest);
        this.served.set(msg.params?.requestId ?? "", set);
        const b = Buffer.from(o.bytes);
        this.send({ jsonrpc: "2.0", id: msg.id, result: { digest, size: b.length, base64: b.toString("base64") } });
      } else if (msg.method === "host/readTree" && o?.kind === "tree") {
        this.send({ jsonrpc: "2.0", id: msg.id, result: { digest, entries: o.entries } });
      } else {
        this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32001, message: `${digest} is not in the baseline` } });
      }
      return;
    }
    if (msg.id === undefined) return;
    const p = this.pending.get(msg.id);
    if (p === undefined) return;
    this.pending.delete(msg.id);
    if (msg.error !== undefined) p.reject(new RpcError(msg.error.code, msg.error.message));
    else p.resolve(msg.result);
  }

  request<T = unknown>(method: string, params?: unknown): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
    });
  }

  notify(method: string, params?: unknown): void {
    this.send({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) });
  }

  /** `initialize` + `initialized`; returns the initialize result. */
  async initialize(): Promise<{
    provider: { id: string; version: string };
    diagnosticSources: string[];
    capabilities: string[];
  }> {
    const r = await this.request<{
      provider: { id: string; version: string };
      diagnosticSources: string[];
      capabilities: string[];
    }>("initialize", { protocolVersion: "1.0", host: { name: "test-host", version: "1.0.0" }, processId: process.pid });
    this.notify("initialized", { grants: [] });
    return r;
  }

  /** `shutdown` + `exit`; resolves with the exit code. */
  async shutdown(): Promise<number | null> {
    await this.request("shutdown");
    this.notify("exit");
    return this.exited;
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

/**
 * The built entry `dist/main.js` of the package at `dir`, rebuilt with `tsc -b` when a file in
 * src/ is newer (the root test script builds first, so this only runs in a bare `vitest`).
 */
export async function builtEntry(dir: string): Promise<string> {
  const { existsSync, readdirSync, statSync } = await import("node:fs");
  const { join } = await import("node:path");
  const { execFileSync } = await import("node:child_process");
  const entry = join(dir, "dist", "main.js");
  const newest = (d: string): number =>
    Math.max(
      0,
      ...readdirSync(d, { withFileTypes: true }).map((e) =>
        e.isDirectory() ? newest(join(d, e.name)) : statSync(join(d, e.name)).mtimeMs,
      ),
    );
  if (!existsSync(entry) || statSync(entry).mtimeMs < newest(join(dir, "src"))) {
    const tsc = join(dir, "..", "..", "node_modules", "typescript", "bin", "tsc");
    execFileSync(process.execPath, [tsc, "-b"], { cwd: dir, stdio: "inherit" });
  }
  return entry;
}
