import { describe, expect, it } from "vitest";
import { AspError, assertValid, ContractsError, isAspError } from "../src/index.js";
import { VALID } from "./fixtures/valid.js";

describe("AspError", () => {
  it("carries code, cause, data and category, and serializes without the cause", () => {
    const cause = new Error("disk");
    const error = new AspError("ASP_TEST_CODE", "what went wrong", {
      cause,
      data: { path: "x" },
      category: "internal",
    });
    expect(error.code).toBe("ASP_TEST_CODE");
    expect(error.cause).toBe(cause);
    expect(error.category).toBe("internal");
    expect(error.toJSON()).toEqual({ code: "ASP_TEST_CODE", message: "what went wrong", data: { path: "x" } });
    expect(JSON.parse(JSON.stringify(error))).toEqual(error.toJSON());
  });
  it("defaults to the input category and names subclasses", () => {
    const error = new ContractsError("ASP_CONTRACTS_INVALID", "bad");
    expect(error.category).toBe("input");
    expect(error.name).toBe("ContractsError");
  });
  it("is recognised by brand across package copies, not by instanceof", () => {
    const foreign = { $$type: "@asp/Error", code: "ASP_OTHER", message: "from another copy" };
    expect(isAspError(foreign)).toBe(true);
    expect(isAspError(new Error("plain"))).toBe(false);
    expect(isAspError(null)).toBe(false);
  });
});

describe("assertValid", () => {
  it("returns the typed value when valid", () => {
    expect(assertValid("policy", VALID.policy).apiVersion).toBe("asp.policy/v1");
  });
  it("throws ASP_CONTRACTS_INVALID with every error pointer in data", () => {
    expect(() => assertValid("policy", { apiVersion: "x" })).toThrowWithCode("ASP_CONTRACTS_INVALID");
    try {
      assertValid("policy", { apiVersion: "x" });
    } catch (error) {
      expect((error as ContractsError).data?.errors).toEqual(
        expect.arrayContaining([{ pointer: "/requirements", message: "is required" }]),
      );
    }
  });
});
