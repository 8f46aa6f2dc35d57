import { mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderManifest } from "@asp/contracts";
import { manifest, tempRepo } from "./helpers.js";

/** A trusted manifest for an edit fixture (`fake-edit-*`): capability `edit`, no sources. */
export function editManifest(file: string, options: { id?: string; args?: string[] } = {}): ProviderManifest {
  return { ...manifest(file, options), capabilities: ["edit"], diagnosticSources: [] };
}

/** A repository for apply tests: text files, a binary blob and a tracked symbolic link to outside. */
export function applyRepo(files: Record<string, string> = {}): string {
  const repo = tempRepo({
    "src/a.ts": "export const a = 1;\n",
    "README.md": "# demo\n",
    ...files,
  });
  writeFileSync(join(repo, "bin.dat"), Buffer.from([0xff, 0xfe, 0x61, 0x00, 0x80]));
  symlinkSync(mkdtempSync(join(tmpdir(), "asp-link-target-")), join(repo, "link"));
  return repo;
}

/** Every regular file under `dir` with its bytes (hex), to prove nothing was written. */
export function bytesOf(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, prefix)).sort()) {
    const rel = prefix === "" ? name : `${prefix}/${name}`;
    const st = statSync(join(dir, rel), { throwIfNoEntry: false });
    if (st === undefined) continue;
    if (st.isDirectory()) {
      if (rel !== "link") Object.assign(out, bytesOf(dir, rel));
    } else out[rel] = readFileSync(join(dir, rel)).toString("hex");
  }
  return out;
}

/** A replace intent for the honest fixtures. */
export const replaceIntent = (path: string, oldText: string, newText: string) => ({
  kind: "replace",
  arguments: { path, oldText, newText },
});
