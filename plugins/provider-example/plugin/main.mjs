// A complete ASP check provider. The host launches it as `node main.mjs` from this folder and
// speaks JSON-RPC over stdio; the SDK handles framing, initialize, cancellation and validAsOf.
import { defineProvider } from "@asp/sdk";

const MARKER = /\bTODO\b/;

defineProvider({
  initialize: { provider: { id: "provider-example", version: "1.0.0" }, diagnosticSources: ["todo"] },

  async assess(ctx) {
    const diagnostics = [];
    for (const change of ctx.changes) {
      if (change.after === null || ctx.signal.aborted) continue;
      // Content comes only from the host (host/readBlob), never from the disk.
      const lines = (await ctx.readText(change.after)).split("\n");
      lines.forEach((line, i) => {
        if (!MARKER.test(line)) return;
        diagnostics.push({
          source: "todo",
          code: "todo/marker",
          severity: "warning",
          message: "A TODO marker was added; resolve it or track it in an issue.",
          range: { path: change.path, start: { line: i, character: 0 }, end: { line: i, character: line.length } },
          fingerprint: `${change.path}:${line.trim()}`,
        });
      });
    }
    return { status: ctx.signal.aborted ? "incomplete" : "complete", diagnostics, coverage: { sources: ["todo"] } };
  },
}).listen();
