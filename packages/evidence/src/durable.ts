import { open as openFile, rename } from "node:fs/promises";
import { join } from "node:path";

/** fsync a file or a directory (a directory's fsync makes the names in it durable). */
export async function fsyncPath(path: string): Promise<void> {
  const fh = await openFile(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Replace `dir/name` atomically and durably: write `name.tmp`, fsync it, rename it over `name`,
 * fsync `dir`. A crash leaves either the old file or the new one (and maybe the temp file).
 */
export async function replaceFile(dir: string, name: string, bytes: string | Uint8Array): Promise<void> {
  const tmp = join(dir, `${name}.tmp`);
  const fh = await openFile(tmp, "w");
  try {
    await fh.writeFile(bytes);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, join(dir, name));
  await fsyncPath(dir);
}
