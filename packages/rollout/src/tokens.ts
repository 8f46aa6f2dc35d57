import type { InjectionToken } from "@asp/evidence";
import type { StageFlags } from "./flags.js";
import type { SelectionStore } from "./persist.js";
import type { ResolvedConfiguration } from "./resolve.js";

/**
 * Dependency-injection tokens for the seams `@asp/rollout` owns (DESIGN §3). A composed host
 * registers the resolved values once (`container.register(ROLLOUT_TOKENS.StageFlags, { useValue })`)
 * and consumers `@inject` them; nothing here is a module-level singleton. `Symbol.for` keys, so
 * two copies of the package agree on them.
 */
export const ROLLOUT_TOKENS = {
  /** The host's resolved {@link StageFlags}. */
  StageFlags: Symbol.for("asp.rollout.StageFlags") as InjectionToken<StageFlags>,
  /** The host's deployment-level {@link ResolvedConfiguration}. */
  ResolvedConfiguration: Symbol.for("asp.rollout.ResolvedConfiguration") as InjectionToken<ResolvedConfiguration>,
  /** The Stage 2 {@link SelectionStore} over the host's fact log. */
  SelectionStore: Symbol.for("asp.rollout.SelectionStore") as InjectionToken<SelectionStore>,
} as const;
