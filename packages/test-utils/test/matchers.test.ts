import { AspError } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { toThrowWithCode } from "../src/matchers.js";

describe("toThrowWithCode", () => {
  it("passes when the thrown AspError carries the code", () => {
    expect(() => {
      throw new AspError("ASP_X", "boom");
    }).toThrowWithCode("ASP_X");
  });

  it("fails on another code, a plain Error, and no throw at all", () => {
    expect(
      toThrowWithCode(() => {
        throw new AspError("ASP_Y", "boom");
      }, "ASP_X").pass,
    ).toBe(false);
    expect(
      toThrowWithCode(() => {
        throw new Error("boom");
      }, "ASP_X").pass,
    ).toBe(false);
    expect(toThrowWithCode(() => 1, "ASP_X").pass).toBe(false);
  });

  it("works with rejected promises", async () => {
    await expect(Promise.reject(new AspError("ASP_Z", "late"))).rejects.toThrowWithCode("ASP_Z");
  });
});
