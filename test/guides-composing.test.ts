import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runGuide, type StepOutcome } from "./lib/guide.js";
import { type PackedPackage, packPublicPackages } from "./lib/pack.js";
import { ROOT } from "./lib/workspace.js";

// Issue 18 items 5 and 6: docs/composing.md, the host composer's guide, run exactly as a reader
// follows it, in an empty temp folder outside the repository, against the packed tarballs of
// the public packages. The one rewrite: in an `npm install` command, each `@asp/NAME` spec
// becomes its tarball, and the tarballs of its `@asp/*` dependencies are added (what the
// registry would resolve). Everything else (versions, commands, files) is the guide's own.

const GUIDE = join(ROOT, "docs/composing.md");
const log = (message: string): void => {
  console.log(`[guide:composing] ${message}`);
};

let work: string;
let packed: PackedPackage[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "asp-guide-composing-"));
  expect(relative(ROOT, work).startsWith("..")).toBe(true);
  packed = await packPublicPackages(join(work, "tarballs"), log);
}, 600_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** `name` and every `@asp/*` package it depends on, transitively, as tarball paths. */
function tarballsOf(name: string, byName: ReadonlyMap<string, PackedPackage>, into: Set<string>): void {
  const p = byName.get(name);
  if (p === undefined) throw new Error(`the guide installs ${name}, which is not a public package`);
  if (into.has(p.tarball)) return;
  into.add(p.tarball);
  for (const dep of Object.keys(p.manifest.dependencies ?? {}))
    if (dep.startsWith("@asp/")) tarballsOf(dep, byName, into);
}

/** The guide's only rewrite: `@asp/*` install specs -> the packed tarballs (and their `@asp/*` dependencies). */
function installFromTarballs(command: string, all: readonly PackedPackage[]): string {
  const byName = new Map(all.map((p) => [p.name, p]));
  return command
    .split("\n")
    .map((line) => {
      if (!/\bnpm (install|i|add)\b/.test(line)) return line;
      const tarballs = new Set<string>();
      const rest = line.replace(/(^|\s)(@asp\/[a-z0-9-]+)(?=\s|$)/g, (_, space: string, name: string) => {
        tarballsOf(name, byName, tarballs);
        return space;
      });
      return `${rest.trimEnd()} ${[...tarballs].map((t) => JSON.stringify(t)).join(" ")}`;
    })
    .join("\n");
}

describe("docs/composing.md (issue 18 item 6)", () => {
  it("the API reference ships in every public package (API.md in the tarball, from pnpm docs:build)", () => {
    for (const p of packed) expect(p.files, `${p.dir}: run \`pnpm docs:build\` before packing`).toContain("API.md");
  });

  it("host §1, §3: from an empty folder, a host composed with composeHost gates a git repository to DENY, then ALLOW, and its receipts verify", () => {
    const cwd = join(work, "guide");
    mkdirSync(cwd);
    const outcomes: StepOutcome[] = runGuide(GUIDE, {
      cwd,
      rewrite: (command) => installFromTarballs(command, packed),
      onStep: (o) => log(`line ${o.step.line}: exit ${String(o.status)}`),
    });
    const printed = outcomes.map((o) => o.output).join("\n");
    // The decisions the guide promises, in order, and the findings and ids behind them.
    const decisions = [...printed.matchAll(/^decision: (\w+)$/gm)].map((m) => m[1]);
    expect(decisions).toEqual(["DENY", "ALLOW"]);
    expect(printed).toContain("todo/marker b.ts");
    expect(printed).toMatch(/^status: demo\.todo@1\.0\.0 \w+/m);
    expect(printed).toMatch(/^ {2}\S+ gate allow acme-receipt-/m);
    expect(printed).toMatch(/^ {2}\S+ gate deny acme-receipt-/m);
  }, 900_000);
});
