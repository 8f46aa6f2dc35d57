/**
 * Dependency-injection tokens for the seams `@asp/rollout` owns (DESIGN §3). A composed host
 * registers the resolved values once (`container.register(ROLLOUT_TOKENS.StageFlags, { useValue })`)
 * and consumers `@inject` them; nothing here is a module-level singleton. `Symbol.for` keeps the
 * tokens identical across copies of this package.
 */
export const ROLLOUT_TOKENS = Object.freeze({
  /** The resolved {@link StageFlags} of this host. */
  StageFlags: Symbol.for("@asp/rollout.StageFlags"),
  /** The host's {@link ResolvedConfiguration} (deployment-level resolution). */
  ResolvedConfiguration: Symbol.for("@asp/rollout.ResolvedConfiguration"),
});
