import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** A local npm registry serving packed tarballs (see `registry-server.mjs`). */
export interface LocalRegistry {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** Stop the server process. */
  close(): void;
}

/**
 * Serve every `*.tgz` in `tarballDir` as an npm registry, in a child process (so it answers while
 * the caller blocks in `spawnSync`, as `runGuide` does). Rejects when it does not start.
 */
export async function startRegistry(tarballDir: string): Promise<LocalRegistry> {
  const child: ChildProcess = spawn(process.execPath, [join(import.meta.dirname, "registry-server.mjs"), tarballDir], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    let err = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const line = out.split("\n")[0];
      if (out.includes("\n") && line !== undefined) resolve(line.trim());
    });
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString();
    });
    child.on("exit", (code) => reject(new Error(`registry-server exited ${String(code)}: ${err}`)));
  });
  return {
    url,
    close: () => {
      child.kill();
    },
  };
}

/**
 * Write an npm user configuration at `path` that takes the `@asp` scope from `registryUrl` and
 * keeps the rest of the user's own `~/.npmrc` (registry, cache, proxies), for `npm_config_userconfig`.
 */
export function scopedNpmrc(path: string, registryUrl: string): string {
  const own = join(homedir(), ".npmrc");
  const base = existsSync(own) ? readFileSync(own, "utf8").replace(/^@asp:registry=.*$/gm, "") : "";
  writeFileSync(
    path,
    `${base.trimEnd()}\n@asp:registry=${registryUrl}/\nfund=false\naudit=false\nupdate-notifier=false\n`,
  );
  return path;
}
