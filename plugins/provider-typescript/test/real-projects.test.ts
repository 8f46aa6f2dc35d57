import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTypeScriptChecker } from "../src/index.js";
import { findingsOf, runTsc, snapshotFixture } from "./env-fixture.js";
import { prepareRealProject, type RealProject, readSpec, realProjectNames } from "./real-project.js";

// Issue 26 item 2: parity with each project's own tsc on real public projects of different
// shapes (test/fixtures/real-projects/*/project.json says which and how). Each is fetched from
// the npm registry at pinned integrity and installed from its committed lockfile; the project's
// own node_modules/typescript runs over the folder, the checker over the snapshotted tree and
// dependency environment, and the (file, line, column, code) sets must be equal: clean, and
// again after five injected errors of different kinds.

/** Each case runs a real install, the project's tsc and a check on a shared machine: generous, never asserted on. */
const SLOW = { timeout: 300_000 };

/** The findings as a set, sorted. */
const unique = (findings: readonly string[]): string[] => [...new Set(findings)].sort();

const log = (line: string): void => {
  console.log(`[real-projects] ${line}`);
};

describe.each(realProjectNames().map((name) => ({ name, about: readSpec(name).about })))(
  "parity with the project's own tsc on $name ($about)",
  SLOW,
  ({ name }) => {
    let project: RealProject;
    // One checker per project: the second case is a warm re-check after the edits, as in a gate.
    let checker: ReturnType<typeof createTypeScriptChecker>;
    beforeAll(async () => {
      project = await prepareRealProject(name, log);
      checker = createTypeScriptChecker({ scope: "all", project: project.spec.tsc.project });
    }, SLOW.timeout);
    afterAll(() => project?.remove());

    const theirs = (): string[] => {
      project.clean();
      const found = runTsc(project.dir, project.spec.tsc.mode, project.spec.tsc.project, project.tsc);
      project.clean();
      // A set, as issue 26 asks: tsc -b prints a file's error once per project that compiles it.
      return unique(found);
    };
    const ours = async () => {
      const snap = await snapshotFixture(project.dir, project.spec.roots);
      return checker.check({ tree: snap.tree, environment: snap.environment }, snap.repo.source());
    };

    it("host §9: clean, as the project's own tsc says, and the answer names the compiler its lockfile installs", async () => {
      expect(theirs()).toEqual([]);
      const r = await ours();
      expect(unique(findingsOf(r.diagnostics))).toEqual([]);
      expect(r.status).toBe("complete");
      expect(r.tool?.name).toBe("typescript");
      expect(r.tool?.version).toBe(project.spec.compiler);
    });

    it("host §9: five injected errors of different kinds: the same (file, line, column, code) as the project's tsc", async () => {
      project.inject();
      const expected = theirs();
      log(`${name}: the project's tsc reports ${expected.join(", ")}`);
      // The edits are real errors of five different kinds, as the project's tsc reports them.
      expect(new Set(expected.map((f) => f.slice(f.lastIndexOf(" ") + 1))).size).toBeGreaterThanOrEqual(5);
      const r = await ours();
      expect(unique(findingsOf(r.diagnostics))).toEqual(expected);
      expect(r.status).toBe("complete");
      expect(r.tool?.version).toBe(project.spec.compiler);
    });
  },
);
