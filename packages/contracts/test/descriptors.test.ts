import { describe, expect, it } from "vitest";
import { closedStdio, DESCRIPTOR_MARGIN, type DescriptorFs } from "../src/index.js";

// THREAT-MODEL invariant 12: a child gets /dev/null at every number the parent may hold.
function fakeFs(listing: Record<string, string[]>): DescriptorFs & { opened: string[] } {
  const opened: string[] = [];
  return {
    opened,
    readdirSync(path) {
      const names = listing[path];
      if (names === undefined) throw Object.assign(new Error(`ENOENT ${path}`), { code: "ENOENT" });
      return names;
    },
    openSync(path) {
      opened.push(path);
      return 99;
    },
  };
}

describe("closedStdio", () => {
  describe("when the parent holds descriptors up to 251 (/proc/self/fd)", () => {
    it("keeps the three given slots and puts the placeholder at 3 .. 251 + margin", () => {
      const slots = closedStdio(fakeFs({ "/proc/self/fd": ["0", "1", "2", "17", "251"] }));
      expect(slots.slice(0, 3)).toEqual(["pipe", "pipe", "pipe"]);
      expect(slots).toHaveLength(251 + DESCRIPTOR_MARGIN + 1);
      const rest = slots.slice(3);
      // /dev/null was opened at most once for the whole process (a previous call may have opened it)
      expect(new Set(rest).size).toBe(1);
      expect(typeof rest[0]).toBe("number");
    });
  });

  describe("when only /dev/fd lists them (macOS)", () => {
    it("reads that listing", () => {
      expect(closedStdio(fakeFs({ "/dev/fd": ["0", "1", "2", "40"] }), ["ignore", "pipe", "pipe"])).toHaveLength(
        40 + DESCRIPTOR_MARGIN + 1,
      );
    });
  });

  describe("when nothing lists them", () => {
    it("still fills the margin above stdio", () => {
      const slots = closedStdio(fakeFs({}));
      expect(slots).toHaveLength(2 + DESCRIPTOR_MARGIN + 1);
    });
  });
});
