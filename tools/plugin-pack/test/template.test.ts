import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { builtEntry, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { expect, it } from "vitest";

const TEMPLATE = fileURLToPath(new URL("../../../plugins/provider-example", import.meta.url));

// The SDK README's builtEntry example, run on the template as an author copies it (issue 18:
// it failed there, looking for dist/main.js and a TypeScript build the template does not have).
it("the SDK README builtEntry example works on the template: its entry is plugin/main.mjs", async () => {
  expect(builtEntry(TEMPLATE)).toBe(join(TEMPLATE, "plugin", "main.mjs"));
  const repo = new MemoryRepo();
  const host = new TestHost(builtEntry(TEMPLATE), { repo });
  await host.initialize();
  const cs = repo.changeset({ "a.ts": "x\n" }, { "a.ts": "x // TODO\n", "run.sh": { content: "", mode: "100755" } });
  const assessment = await host.assess({ baseline: cs.after, changeset: cs });
  expect(assessment.diagnostics.map((d) => d.code)).toEqual(["todo/marker"]);
  expect(assessment.validAsOf.reads).toEqual(host.reads(assessment.requestId));
  expect(await host.shutdown()).toBe(0);
});
