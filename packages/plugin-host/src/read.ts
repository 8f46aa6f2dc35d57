import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/** Options of {@link readRegularFile}. */
export interface ReadRegularFileOptions {
  /** Refuse a file larger than this many bytes (`EFBIG`). */
  readonly maxBytes: number;
  /** Refuse a symbolic link (`ELOOP`) instead of following it. */
  readonly noFollow?: boolean;
}

const fail = (path: string, code: string, why: string): never => {
  throw Object.assign(new Error(`${path} ${why}`), { code });
};

/**
 * Read a file of a plugin folder, which is untrusted bytes at every instant: opened without
 * blocking, so a named pipe cannot stall the host, then accepted only when the opened thing is
 * a regular file of at most `maxBytes` (a device such as `/dev/zero` or a huge file is refused
 * before anything is read). Reads exactly the size it saw.
 *
 * @throws Error with a Node `code`: the `open` errno (`ENOENT`, `ELOOP`, ...), `EINVAL` when it
 *   is not a regular file, `EFBIG` when it is too large.
 */
export function readRegularFile(path: string, options: ReadRegularFileOptions): Buffer {
  // O_NONBLOCK / O_NOFOLLOW are undefined on Windows, where a plain read-only open is used.
  const flags =
    constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (options.noFollow === true ? (constants.O_NOFOLLOW ?? 0) : 0);
  const fd = openSync(path, flags);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) fail(path, "EINVAL", "is not a regular file");
    if (stat.size > options.maxBytes) fail(path, "EFBIG", `is larger than ${options.maxBytes} bytes`);
    const bytes = Buffer.alloc(stat.size);
    let read = 0;
    while (read < bytes.length) {
      const n = readSync(fd, bytes, read, bytes.length - read, read);
      if (n === 0) break;
      read += n;
    }
    return read === bytes.length ? bytes : bytes.subarray(0, read);
  } finally {
    closeSync(fd);
  }
}
