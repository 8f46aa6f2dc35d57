import type { Diagnostic } from "@asp/contracts";

/** One provider's fresh, validated diagnostics as arbitration sees them. */
export interface ReconcileInput {
  readonly provider: string;
  readonly declaredSources: readonly string[];
  readonly diagnostics: readonly Diagnostic[];
}

/** A diagnostic kept, or dropped with the reason. */
export interface Reconciled {
  readonly provider: string;
  readonly diagnostic: Diagnostic;
}

/** What arbitration did (host §4). */
export interface ReconcileResult {
  readonly kept: readonly Reconciled[];
  readonly dropped: ReadonlyArray<Reconciled & { readonly reason: "undeclared-source" | "duplicate" }>;
}

/**
 * Minimal host-side arbitration until `@asp/arbitration` exports `reconcile`: source ownership
 * (a diagnostic's source must be declared by its provider and its code namespaced under it)
 * and dedup by fingerprint within one provider's source. Fingerprints never dedup across
 * providers, so cross-server equality cannot change a decision.
 */
export function reconcile(inputs: readonly ReconcileInput[]): ReconcileResult {
  const kept: Reconciled[] = [];
  const dropped: Array<Reconciled & { reason: "undeclared-source" | "duplicate" }> = [];
  for (const input of inputs) {
    const declared = new Set(input.declaredSources);
    const seen = new Set<string>();
    for (const diagnostic of input.diagnostics) {
      const owned = declared.has(diagnostic.source) && diagnostic.code.startsWith(`${diagnostic.source}/`);
      if (!owned) {
        dropped.push({ provider: input.provider, diagnostic, reason: "undeclared-source" });
        continue;
      }
      const key = `${diagnostic.source}\u0000${diagnostic.fingerprint}`;
      if (seen.has(key)) {
        dropped.push({ provider: input.provider, diagnostic, reason: "duplicate" });
        continue;
      }
      seen.add(key);
      kept.push({ provider: input.provider, diagnostic });
    }
  }
  return { kept, dropped };
}
