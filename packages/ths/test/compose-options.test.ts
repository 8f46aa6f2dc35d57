import { TOKENS } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { type ComposeHostOptions, composeHost } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// Issue 18 item 5: composeHost ignored options it does not know, so a typo (`provider` for
// `providers`) surfaced only as an INDETERMINATE gate, far from its cause. The trusted host
// configuration file already refuses unknown keys (ASP_THS_BAD_CONFIG); composeHost now does too.
describe("composeHost options", () => {
  const provider = manifest("fake-honest-ts", { source: "ts" });
  const policy = policyFor([provider], { callSites: ["gate"] });

  it.each([
    ["provider", "providers"],
    ["trustRoot", "trustRoots"],
    ["plugin", "plugins"],
    ["failopenSink", "failOpenSink"],
    ["registr", "register"],
  ])(
    "refuses the misspelt option %s (ASP_THS_BAD_OPTIONS), naming it and the closest known one, %s",
    async (typo, closest) => {
      const options = {
        store: "memory:",
        policy,
        clock: fakeClock,
        [typo]: [provider],
      } as unknown as ComposeHostOptions;
      const refused = composeHost(options);
      await expect(refused).rejects.toThrowWithCode("ASP_THS_BAD_OPTIONS");
      await expect(refused).rejects.toMatchObject({ data: { option: typo, closest } });
    },
  );

  it("refuses an option far from every known one without guessing, listing the known options", async () => {
    const options = { store: "memory:", policy, shell: "sh -c x" } as unknown as ComposeHostOptions;
    const refused = composeHost(options);
    await expect(refused).rejects.toThrowWithCode("ASP_THS_BAD_OPTIONS");
    await expect(refused).rejects.toMatchObject({ data: { option: "shell", closest: null } });
  });

  it("refuses options that are not an object", async () => {
    await expect(composeHost(null as unknown as ComposeHostOptions)).rejects.toThrowWithCode("ASP_THS_BAD_OPTIONS");
  });

  it("still composes and gates with correctly spelt options", async () => {
    const repo = tempRepo();
    const host = await composeHost({ store: "memory:", policy, clock: fakeClock, providers: [provider], warm: false });
    try {
      const { envelope } = await host.gate({ repo });
      expect(envelope.decision).not.toBe("indeterminate");
    } finally {
      await host.close();
    }
  });

  // The stated precedence: direct options set the defaults, then `register` runs last and wins.
  it("register overrides a direct option: the registered clock stamps the decision", async () => {
    const repo = tempRepo();
    const registered = { now: () => new Date("2031-05-06T07:08:09.000Z") };
    const host = await composeHost({
      store: "memory:",
      policy,
      clock: fakeClock,
      providers: [provider],
      warm: false,
      register: (c) => c.register(TOKENS.Clock, { useValue: registered }),
    });
    try {
      const { envelope } = await host.gate({ repo });
      expect(envelope.decidedAt).toBe("2031-05-06T07:08:09.000Z");
    } finally {
      await host.close();
    }
  });
});
