import { Transform, type TransformCallback } from "node:stream";

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
 * The size judged is the framed `Content-Length`, never a re-serialization of the parsed
 * value: whitespace and escapes a provider pads its answer with count (host §8).
 *
 * Internal to `@asp/protocol` (`ProviderConnection` is the public way in); tests import
 * it from `src`.
 */
export class FrameGuard extends Transform {
  private buf: Buffer = Buffer.alloc(0);
  private bodyLeft = -1;
  private skipLeft = 0;
  private broken = false;

  /**
   * @param maxBytes - the largest `Content-Length` passed on; a larger message is skipped.
   * @param onViolation - told of every oversize message and of broken framing.
   * @param onFrame - told the framed size of every message (passed or skipped).
   */
  constructor(
    private readonly maxBytes: number,
    private readonly onViolation: (v: FrameViolation) => void,
    private readonly onFrame: (bytes: number) => void = () => {},
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
      this.onFrame(length);
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
