import type { EditPlan } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findEditConflicts } from "../src/index.js";
import { D } from "./fixtures/world.js";

type Op = EditPlan["operations"][number];
const FILE = "const a = 1;\nconst b = 2;\nconst c = 3;\n";
const BLOB = D(100);
const read = (path: string, blob: string): string | undefined =>
  path === "src/a.ts" && blob === BLOB ? FILE : undefined;

function plan(
  id: string,
  operations: Op[],
  preconditions: EditPlan["preconditions"] = [{ path: "src/a.ts", blob: BLOB }],
): EditPlan {
  return {
    proposalId: id,
    provider: { id: "p.edit", version: "1.0.0" },
    validAsOf: { baseline: D(1), changeset: null, reads: [] },
    preconditions,
    operations,
  };
}
const replace = (oldText: string, newText = "x", path = "src/a.ts"): Op => ({ op: "replace", path, oldText, newText });

// host §4, §6: two edit proposals touching overlapping blobs must not both apply.
describe("H4.3 findEditConflicts", () => {
  describe("when two plans replace text in the same file", () => {
    it("reports overlapping ranges", () => {
      const r = findEditConflicts([plan("p1", [replace("a = 1")]), plan("p2", [replace("const a")])], { read });
      expect(r).toEqual([
        { proposals: ["p1", "p2"], path: "src/a.ts", kind: "overlapping-ranges", detail: expect.any(String) },
      ]);
    });

    it("does not report disjoint ranges, even adjacent ones", () => {
      expect(
        findEditConflicts([plan("p1", [replace("const a = 1;")]), plan("p2", [replace("\nconst b")])], { read }),
      ).toEqual([]);
    });

    it("locates multi_replace edits and explicit occurrences", () => {
      const multi: Op = {
        op: "multi_replace",
        path: "src/a.ts",
        edits: [{ oldText: "const b = 2", newText: "let b = 3" }],
      };
      const third: Op = { op: "replace", path: "src/a.ts", oldText: "const", newText: "let", occurrence: 2 };
      expect(findEditConflicts([plan("p1", [multi]), plan("p2", [third])], { read })[0]?.kind).toBe(
        "overlapping-ranges",
      );
      const first: Op = { op: "replace", path: "src/a.ts", oldText: "const", newText: "let", occurrence: 1 };
      expect(findEditConflicts([plan("p1", [multi]), plan("p2", [first])], { read })).toEqual([]);
    });

    it.each([
      ["the content is not available", undefined, replace("a = 1"), replace("c = 3")],
      ["oldText is ambiguous", read, replace("const"), replace("c = 3")],
      ["oldText is not in the file", read, replace("zzz"), replace("c = 3")],
    ])("treats the edits as whole-file when %s", (_why, reader, a, b) => {
      const r = findEditConflicts([plan("p1", [a]), plan("p2", [b])], reader === undefined ? {} : { read: reader });
      expect(r.map((c) => c.kind)).toEqual(["whole-file"]);
    });
  });

  describe("when a plan operates on the whole file", () => {
    it.each([
      ["create", { op: "create", path: "src/a.ts", content: "" } as Op],
      ["delete", { op: "delete", path: "src/a.ts" } as Op],
      ["rename away", { op: "rename", from: "src/a.ts", to: "src/b.ts" } as Op],
      ["rename onto", { op: "rename", from: "src/z.ts", to: "src/a.ts" } as Op],
      ["search_replace", { op: "search_replace", path: "src/a.ts", pattern: "c", replacement: "d" } as Op],
    ])("%s conflicts with any other edit of the path", (_why, op) => {
      const r = findEditConflicts([plan("p1", [op]), plan("p2", [replace("c = 3")])], { read });
      expect(r).toEqual([expect.objectContaining({ proposals: ["p1", "p2"], path: "src/a.ts", kind: "whole-file" })]);
    });
  });

  describe("when the plans expect different contents", () => {
    it("reports a precondition mismatch", () => {
      const r = findEditConflicts(
        [plan("p1", [replace("a = 1")]), plan("p2", [replace("c = 3")], [{ path: "src/a.ts", blob: D(101) }])],
        { read },
      );
      expect(r).toEqual([expect.objectContaining({ kind: "precondition-mismatch" })]);
    });
  });

  describe("when the plans touch different files", () => {
    it("reports nothing", () => {
      const other = plan("p2", [replace("x", "y", "src/b.ts")], [{ path: "src/b.ts", blob: D(5) }]);
      expect(findEditConflicts([plan("p1", [replace("a = 1")]), other], { read })).toEqual([]);
    });
  });

  describe("when proposal ids repeat", () => {
    it("throws ASP_ARBITRATION_DUPLICATE_PROPOSAL", () => {
      expect(() => findEditConflicts([plan("p1", [replace("a")]), plan("p1", [replace("b")])])).toThrowWithCode(
        "ASP_ARBITRATION_DUPLICATE_PROPOSAL",
      );
    });
  });

  it("is order-independent and reports each pair at most once per path (fast-check)", () => {
    const opArb = fc.constantFrom<Op>(
      replace("a = 1"),
      replace("const b"),
      replace("c = 3;"),
      { op: "delete", path: "src/a.ts" },
      { op: "create", path: "src/n.ts", content: "" },
      { op: "rename", from: "src/n.ts", to: "src/m.ts" },
    );
    fc.assert(
      fc.property(fc.array(fc.array(opArb, { minLength: 1, maxLength: 3 }), { maxLength: 6 }), (opLists) => {
        const plans = opLists.map((ops, i) => plan(`p${i}`, ops));
        const forward = findEditConflicts(plans, { read });
        expect(findEditConflicts([...plans].reverse(), { read })).toEqual(forward);
        const keys = forward.map((c) => `${c.proposals.join()}@${c.path}`);
        expect(new Set(keys).size).toBe(keys.length);
      }),
    );
  });
});
