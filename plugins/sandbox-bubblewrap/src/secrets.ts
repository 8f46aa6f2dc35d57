import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, relative, resolve } from "node:path";

/** True when `path` is `folder` or inside it (both absolute, normalized). */
export function isWithin(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * Entries of a home folder that hold credentials: a bind inside one of them is refused even
 * when the home itself is not bound (a provider root at `~/.config/x` would show `~/.config/gcloud`).
 */
export const SECRET_ENTRIES: readonly string[] = Object.freeze([
  ".ssh",
  ".aws",
  ".azure",
  ".gnupg",
  ".netrc",
  ".docker",
  ".kube",
  ".config",
  ".git-credentials",
  ".npmrc",
  ".pypirc",
  ".password-store",
  ".local/share/keyrings",
  ".terraform.d",
]);

/** The real path of `path`, or `path` made absolute when it does not exist. */
export const realOrSelf = (path: string): string => {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
};

/**
 * The home folders of this machine: `$HOME`, the user's home, `/root`, `/home` and each folder
 * in it, and the home of every login user in `/etc/passwd` (uid 0 and 1000 and above), each
 * also as its real path. Never `/`.
 */
export function machineHomes(env: NodeJS.ProcessEnv = process.env): string[] {
  const homes = new Set<string>(["/root", "/home"]);
  const add = (h: string | undefined): void => {
    if (h === undefined || !isAbsolute(h) || h === "/" || h === "/nonexistent") return;
    homes.add(h);
    homes.add(realOrSelf(h));
  };
  add(env.HOME);
  try {
    add(homedir());
  } catch {
    // no home for this uid: nothing to add
  }
  try {
    for (const name of readdirSync("/home")) add(join("/home", name));
  } catch {
    // no /home on this machine
  }
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [, , uid, , , home] = line.split(":");
      const n = Number(uid);
      if (Number.isInteger(n) && (n === 0 || (n >= 1000 && n !== 65534))) add(home);
    }
  } catch {
    // no readable passwd: $HOME and /home still count
  }
  add("/root");
  return [...homes].sort();
}

/**
 * What binding `folder` would expose of the user's secrets: the home it is or holds, or the
 * credential folder ({@link SECRET_ENTRIES}) it lies in; null when it exposes none.
 */
export function secretExposure(folder: string, homes: readonly string[]): string | null {
  for (const home of homes) {
    if (isWithin(home, folder)) return home;
    for (const entry of SECRET_ENTRIES) {
      const secret = join(home, entry);
      if (isWithin(folder, secret)) return secret;
    }
  }
  return null;
}
