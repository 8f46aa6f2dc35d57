import type { Hasher } from "./hash.js";
import type { Clock, FactLog, InjectionToken, ObjectStore } from "./store.js";

/**
 * DI tokens of the seams this package owns (DESIGN §3). `Symbol.for` keys, so two copies of the
 * package agree on them. The host registers `openStore(...)`'s parts under them; tests register
 * `createMemoryStore()`'s.
 */
export const TOKENS = {
  FactLog: Symbol.for("asp.evidence.FactLog") as InjectionToken<FactLog>,
  ObjectStore: Symbol.for("asp.evidence.ObjectStore") as InjectionToken<ObjectStore>,
  Hasher: Symbol.for("asp.evidence.Hasher") as InjectionToken<Hasher>,
  Clock: Symbol.for("asp.evidence.Clock") as InjectionToken<Clock>,
} as const;
