import { type ChildProcess, spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { Transform, type TransformCallback } from "node:stream";
import {
  CancellationTokenSource,
  createMessageConnection,
  type MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";

/** Why the byte stream from a provider was rejected before JSON-RPC saw it. */
export type FrameViolation =
  | { readonly kind: "oversize"; readonly bytes: number }
  | { readonly kind: "framing"; readonly detail: string };

const MAX_HEADER_BYTES = 8 * 1024;
const HEADER_END = Buffer.from("\r\n\r\n", "ascii");

/**
 * Sits between a provider's stdout and the JSON-RPC reader. It reads the `Content-Length`
 * framing itself so the raw size of every message is known before its body is buffered: an
 * oversize message is skipped (never parsed) and reported; broken framing stops the stream.
 */
export class FrameGuard extends Transform {
  private buf: Buffer = Buffer.alloc(0);
  private bodyLeft = -1;
  private skipLeft = 0;
  private broken = false;

  constructor(
    private readonly maxBytes: number,
    private readonly onViolation: (v: FrameViolation) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.broken) {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      this.drain();
    }
    callback();
  }

  private fail(detail: string): void {
    this.broken = true;
    this.buf = Buffer.alloc(0);
    this.onViolation({ kind: "framing", detail });
  }

  private drain(): void {
    for (;;) {
      if (this.skipLeft > 0) {
        const n = Math.min(this.skipLeft, this.buf.length);
        this.skipLeft -= n;
        this.buf = this.buf.subarray(n);
        if (this.skipLeft > 0) return;
        continue;
      }
      if (this.bodyLeft >= 0) {
        const n = Math.min(this.bodyLeft, this.buf.length);
        if (n > 0) this.push(Buffer.from(this.buf.subarray(0, n)));
        this.bodyLeft -= n;
        this.buf = this.buf.subarray(n);
        if (this.bodyLeft > 0) return;
        this.bodyLeft = -1;
        continue;
      }
      if (this.buf.length === 0) return;
      const end = this.buf.indexOf(HEADER_END);
      if (end < 0) {
        if (this.buf.length > MAX_HEADER_BYTES) this.fail("no header terminator within 8 KiB");
        return;
      }
      let length = -1;
      for (const line of this.buf.subarray(0, end).toString("latin1").split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon < 0) {
          this.fail(`not a header line: ${JSON.stringify(line.slice(0, 80))}`);
          return;
        }
        if (line.slice(0, colon).trim().toLowerCase() !== "content-length") continue;
        const value = line.slice(colon + 1).trim();
        if (!/^\d{1,15}$/.test(value)) {
          this.fail(`bad Content-Length ${JSON.stringify(value.slice(0, 40))}`);
          return;
        }
        length = Number(value);
      }
      if (length < 0) {
        this.fail("message without Content-Length");
        return;
      }
      const header = Buffer.from(this.buf.subarray(0, end + HEADER_END.length));
      this.buf = this.buf.subarray(end + HEADER_END.length);
      if (length > this.maxBytes) {
        this.onViolation({ kind: "oversize", bytes: length });
        this.skipLeft = length;
        continue;
      }
      this.push(header);
      this.bodyLeft = length;
    }
  }
}

/** How a host -> provider call failed. */
export interface CallFailure {
  readonly kind: "timeout" | "cancelled" | "exited" | "oversize" | "framing" | "unparseable" | "response-error";
  readonly detail: string;
  /** JSON-RPC error code, for `response-error`. */
  readonly code?: number;
}

/** The result of one host -> provider call. Never a thrown error. */
export type CallResult<T> =
  | { readonly ok: true; readonly value: T; readonly ms: number }
  | { readonly ok: false; readonly failure: CallFailure; readonly ms: number };

/** Structured launch: an absolute executable, an argv array, a trusted cwd and an explicit environment. */
export interface LaunchSpec {
  readonly executable: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
}

/** How a provider process ended. */
export interface ExitInfo {
  readonly code: number | null;
  readonly signal: string | null;
  /** The spawn error, when the executable could not be started at all. */
  readonly spawnError?: string;
}

const STDERR_TAIL = 4096;

/**
 * One provider process and its JSON-RPC connection. Adds what vscode-jsonrpc lacks: a timeout
 * on every call (with `$/cancelRequest`), a response-size bound, and failure of every pending
 * call when the process exits or its stream turns to garbage.
 */
export class ProviderConnection {
  readonly child: ChildProcess;
  readonly connection: MessageConnection;
  private readonly pending = new Set<(failure: CallFailure) => void>();
  private exitInfo: ExitInfo | null = null;
  private readonly exitWaiters: Array<(info: ExitInfo) => void> = [];
  private stderrTail = "";

  private constructor(
    spec: LaunchSpec,
    maxResponseBytes: number,
    private readonly onExit: (info: ExitInfo) => void,
  ) {
    // host §2: structured argv, no shell, trusted cwd, explicit minimal environment.
    this.child = spawn(spec.executable, [...spec.args], {
      cwd: spec.cwd,
      env: { ...spec.env },
      shell: false,
      stdio: ["pipe", "pipe", "pipe"],
      windowsHide: true,
    });
    const guard = new FrameGuard(maxResponseBytes, (v) => {
      if (v.kind === "oversize") {
        this.failPending({ kind: "oversize", detail: `response of ${v.bytes} bytes exceeds ${maxResponseBytes}` });
      } else {
        this.failPending({ kind: "framing", detail: v.detail });
      }
    });
    this.child.stdout?.pipe(guard);
    this.child.stdin?.on("error", () => {
      // EPIPE after the provider died: the exit handler reports it.
    });
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    const reader = new StreamMessageReader(guard);
    // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe", so stdin exists.
    const writer = new StreamMessageWriter(this.child.stdin!);
    reader.onError((error) => this.failPending({ kind: "unparseable", detail: error.message.slice(0, 500) }));
    this.connection = createMessageConnection(reader, writer);
    this.connection.onError(() => {
      // reader errors are handled above; writer errors mean the process is gone (exit handler).
    });
    this.child.on("error", (error) => this.exited({ code: null, signal: null, spawnError: error.message }));
    this.child.on("exit", (code, signal) => this.exited({ code, signal }));
    this.connection.listen();
  }

  /** Spawn the process and start listening. Never throws: a failed spawn ends as an exit. */
  static launch(spec: LaunchSpec, maxResponseBytes: number, onExit: (info: ExitInfo) => void): ProviderConnection {
    return new ProviderConnection(spec, maxResponseBytes, onExit);
  }

  /** The last few KiB the provider wrote to stderr (bounded; for diagnosis only). */
  get stderr(): string {
    return this.stderrTail;
  }

  /** Exit status, or `null` while the process runs. */
  get exit(): ExitInfo | null {
    return this.exitInfo;
  }

  private exited(info: ExitInfo): void {
    if (this.exitInfo !== null) return;
    this.exitInfo = info;
    const how =
      info.spawnError !== undefined
        ? `could not start: ${info.spawnError}`
        : `exited with ${info.signal ?? `code ${info.code}`}`;
    this.failPending({ kind: "exited", detail: how });
    this.connection.dispose();
    for (const w of this.exitWaiters.splice(0)) w(info);
    this.onExit(info);
  }

  private failPending(failure: CallFailure): void {
    for (const abort of [...this.pending]) abort(failure);
  }

  /** Call `method` and wait at most `timeoutMs`; on timeout the provider gets `$/cancelRequest`. */
  call<T>(method: string, params: unknown, timeoutMs: number, signal?: AbortSignal): Promise<CallResult<T>> {
    const start = performance.now();
    return new Promise<CallResult<T>>((resolve) => {
      const ms = (): number => performance.now() - start;
      if (this.exitInfo !== null) {
        resolve({ ok: false, failure: { kind: "exited", detail: "the provider is not running" }, ms: 0 });
        return;
      }
      const cancel = new CancellationTokenSource();
      let settled = false;
      const onAbort = (): void => {
        cancel.cancel(); // sends $/cancelRequest
        abort({ kind: "cancelled", detail: `${method} was cancelled by the host` });
      };
      const finish = (result: CallResult<T>): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.pending.delete(abort);
        cancel.dispose();
        resolve(result);
      };
      const abort = (failure: CallFailure): void => finish({ ok: false, failure, ms: ms() });
      this.pending.add(abort);
      signal?.addEventListener("abort", onAbort, { once: true });
      const timer = setTimeout(
        () => {
          cancel.cancel(); // sends $/cancelRequest
          abort({ kind: "timeout", detail: `no answer to ${method} within ${Math.round(timeoutMs)} ms` });
        },
        Math.max(1, timeoutMs),
      );
      if (signal?.aborted) {
        onAbort();
        return;
      }
      try {
        const sent =
          params === undefined || params === null
            ? this.connection.sendRequest<T>(method, cancel.token)
            : this.connection.sendRequest<T>(method, params, cancel.token);
        sent.then(
          (value) => finish({ ok: true, value, ms: ms() }),
          (error: unknown) =>
            abort(
              error instanceof ResponseError
                ? { kind: "response-error", code: error.code, detail: String(error.message).slice(0, 500) }
                : { kind: "exited", detail: String((error as Error)?.message ?? error).slice(0, 500) },
            ),
        );
      } catch (error) {
        abort({ kind: "exited", detail: String((error as Error)?.message ?? error).slice(0, 500) });
      }
    });
  }

  /** Send a notification; silently dropped when the process is gone. */
  notify(method: string, params: unknown): void {
    if (this.exitInfo !== null) return;
    this.connection.sendNotification(method, params).catch(() => {});
  }

  /** `shutdown` then `exit`, bounded by `timeoutMs`; the process is killed if it lingers. */
  async shutdown(timeoutMs: number): Promise<ExitInfo> {
    if (this.exitInfo !== null) return this.exitInfo;
    const exited = new Promise<ExitInfo>((resolve) => this.exitWaiters.push(resolve));
    const deadline = performance.now() + timeoutMs;
    await this.call("shutdown", null, timeoutMs);
    this.notify("exit", null);
    const left = Math.max(1, deadline - performance.now());
    const timer = setTimeout(() => this.kill(), left);
    const info = await exited;
    clearTimeout(timer);
    return info;
  }

  /** Kill the process now (SIGKILL). */
  kill(): void {
    if (this.exitInfo === null) this.child.kill("SIGKILL");
  }
}
