import { type Assessment, validate, validateAssessment } from "@asp/contracts";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

const hex = (n: number): string => `sha256:${n.toString(16).padStart(64, "0")}`;

/** A realistic Assessment of about `bytes` bytes of JSON: TypeScript-style diagnostics with ranges and links. */
export function makeAssessment(bytes: number): Assessment {
  const assessment: Assessment = {
    provider: { id: "asp.provider-typescript", version: "0.1.0" },
    requestId: "req-bench",
    status: "complete",
    validAsOf: { baseline: hex(1), changeset: hex(2), reads: [hex(3), hex(4), hex(5)] },
    diagnostics: [],
    coverage: { sources: ["ts"], paths: 200 },
  };
  for (let i = 0; JSON.stringify(assessment).length < bytes; i++) {
    assessment.diagnostics.push({
      source: "ts",
      code: `ts/${2300 + (i % 90)}`,
      severity: i % 3 === 0 ? "error" : "warning",
      message: `Type 'string' is not assignable to type 'number' (occurrence ${i}).`,
      range: { path: `src/module-${i}.ts`, start: { line: i, character: 4 }, end: { line: i, character: 19 } },
      fingerprint: hex(1000 + i).slice(7, 39),
      codeDescription: { href: `https://typescript.tv/errors/#ts${2300 + (i % 90)}` },
    });
  }
  return assessment;
}

const suite: Suite = {
  name: "contracts",
  description: "ajv validation of a 10 KB Assessment against JSON.parse of the same bytes",
  async run(ctx) {
    const text = JSON.stringify(makeAssessment(10 * 1024));
    const value = JSON.parse(text) as unknown;
    if (!validateAssessment(value).ok) throw new Error("bench fixture is not a valid Assessment");
    ctx.progress(`assessment: ${text.length} bytes`);
    const common = {
      baselineName: "JSON.parse of the same bytes",
      baseline: () => JSON.parse(text),
      iterations: 2000,
      rounds: 21,
    };
    ctx.report(
      await compare({
        ...common,
        name: "ajv validate(assessment) 10 KB",
        subject: () => validate("assessment", value),
      }),
    );
    ctx.report(
      await compare({
        ...common,
        name: "validateAssessment 10 KB (schema + host-owned field scan)",
        subject: () => validateAssessment(value),
      }),
    );
  },
};
export default suite;
