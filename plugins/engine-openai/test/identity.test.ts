import { describe, expect, it } from "vitest";
import { openAIEngineFingerprint } from "../src/identity.js";

const BASE = { baseUrl: "https://api.example.test/v1/", model: "gpt-x", apiKeyEnv: "OPENAI_API_KEY" };

describe("openAIEngineFingerprint", () => {
  it("names the model and the endpoint's host, and digests the configuration", () => {
    expect(openAIEngineFingerprint(BASE)).toMatch(/^openai-engine:gpt-x@api\.example\.test;cfg=[0-9a-f]{16}$/);
  });

  it("is another fingerprint for another model, endpoint, temperature, system prompt or turn limit", () => {
    const base = openAIEngineFingerprint(BASE);
    for (const over of [
      { model: "gpt-y" },
      { baseUrl: "https://other.example.test/v1" },
      { temperature: 0 },
      { systemPrompt: "Be terse." },
      { maxTurns: 3 },
    ]) {
      expect(openAIEngineFingerprint({ ...BASE, ...over }), JSON.stringify(over)).not.toBe(base);
    }
  });

  it("does not depend on the key's variable name, the stall deadline or a trailing slash", () => {
    const base = openAIEngineFingerprint(BASE);
    expect(openAIEngineFingerprint({ ...BASE, apiKeyEnv: "OTHER_KEY", requestTimeoutMs: 5 })).toBe(base);
    expect(openAIEngineFingerprint({ ...BASE, baseUrl: "https://api.example.test/v1" })).toBe(base);
  });

  it("refuses options resolveOptions refuses (ASP_ENGINE_OPENAI_BAD_OPTIONS)", () => {
    expect(() => openAIEngineFingerprint({ ...BASE, baseUrl: "ftp://x.test" })).toThrowWithCode(
      "ASP_ENGINE_OPENAI_BAD_OPTIONS",
    );
  });
});
