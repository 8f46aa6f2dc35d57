import { describe, expect, it } from "vitest";
import { checkPluginOptions, checkPluginOptionsOffThread } from "../src/index.js";

const SCHEMA = { type: "object", properties: { strict: { type: "boolean" } }, additionalProperties: false };

describe("checkPluginOptionsOffThread", () => {
  it("gives the same verdicts as the in-thread check: valid, invalid with the pointer, a schema that does not compile", async () => {
    await expect(checkPluginOptionsOffThread("p", SCHEMA, { strict: true })).resolves.toBeUndefined();
    expect(() => checkPluginOptions("p", SCHEMA, { strict: true })).not.toThrow();

    await expect(checkPluginOptionsOffThread("p", SCHEMA, { strict: "yes" })).rejects.toMatchObject({
      code: "ASP_PLUGIN_BAD_OPTIONS",
      data: { id: "p" },
      message: expect.stringContaining("/strict must be boolean"),
    });
    expect(() => checkPluginOptions("p", SCHEMA, { strict: "yes" })).toThrow(/\/strict must be boolean/);

    const broken = { type: "object", properties: { x: { type: "no-such-type" } } };
    await expect(checkPluginOptionsOffThread("p", broken, {})).rejects.toMatchObject({
      code: "ASP_PLUGIN_LOAD_FAILED",
      message: expect.stringContaining("does not compile"),
    });
  });

  it("attack: a pattern that backtracks for hours is stopped at the deadline while this thread keeps running", async () => {
    const redos = { type: "object", properties: { u: { type: "string", pattern: "^(?:.|.|.)*X$" } } };
    let ticks = 0;
    const beat = setInterval(() => {
      ticks += 1;
    }, 5);
    try {
      await expect(
        checkPluginOptionsOffThread("p", redos, { u: "https://models.example.internal/v1/chat-a" }, { timeoutMs: 200 }),
      ).rejects.toMatchObject({ code: "ASP_PLUGIN_LOAD_FAILED", data: { id: "p", timeoutMs: 200 } });
    } finally {
      clearInterval(beat);
    }
    expect(ticks).toBeGreaterThan(0);
  });

  it("attack: a schema that exhausts the worker's heap is a coded refusal, not a host crash", async () => {
    // `$ref` chains compile to code; 60,000 definitions each referencing the next blow a 16 MiB heap.
    const defs: Record<string, unknown> = {};
    for (let i = 0; i < 60_000; i++)
      defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { type: "string", pattern: `^v${i}$` }] };
    defs.d60000 = { type: "string" };
    const big = { $defs: defs, $ref: "#/$defs/d0" };
    await expect(
      checkPluginOptionsOffThread("p", big, "x", { maxHeapMb: 16, timeoutMs: 60_000 }),
    ).rejects.toMatchObject({
      code: "ASP_PLUGIN_LOAD_FAILED",
      data: { id: "p" },
      message: expect.stringContaining("memory limit"),
    });
  });
});
