import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { git } from "@asp/test-utils";
import { describe, expect, it } from "vitest";
import { exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { runBinary } from "./helpers.js";

// Issue 11, as a new user found it: on a copy of the example with a committed fake key and a
// persistent store, `asp gate` (no --base) said DENY, then ALLOW on the same command. The
// trusted base only moves on an allow at the gate, so the deny holds until the key is gone.
describe("asp gate without --base on a persistent store", () => {
  it("H5.5 host §5 / invariant 1: denies on every run until the key is removed, then allows on every run", () => {
    const { repo, config } = exampleCopy();
    writeFileSync(join(repo, "src", "upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "add a key");
    const gate = () => runBinary(["gate", "--config", config, "--repo", repo]);
    const check = () => runBinary(["check", "--config", config, "--repo", repo]);

    // A check in between records its own receipt but never moves the trusted base.
    for (const run of [gate, check, gate]) {
      const r = run();
      if (run === gate) {
        expect(r.stdout, r.stderr).toMatch(/^DENY \(gate\)/);
        expect(r.code).toBe(1);
      }
    }

    rmSync(join(repo, "src", "upload.ts"));
    for (let i = 0; i < 2; i++) {
      const r = gate();
      expect(r.stdout, r.stderr).toMatch(/^ALLOW \(gate\)/);
      expect(r.code).toBe(0);
    }
  }, 300_000);
});
