// Where SIGINT / SIGTERM go. By default they end the command (bin.ts: exit 130 / 143, so the
// providers' process groups are killed on the way out). A command that can stop cleanly (an Auto
// Run commits user_cancelled) takes the first signal instead; the next one exits as before.

let hook: (() => void) | null = null;

/**
 * Take the next SIGINT / SIGTERM: `stop` runs once, instead of the process exiting. Returns how to
 * give it back (call it when the command no longer needs it).
 */
export function onInterrupt(stop: () => void): () => void {
  hook = stop;
  return () => {
    if (hook === stop) hook = null;
  };
}

/** Deliver a signal to the command that took it; false when none did (then the process exits). */
export function interrupt(): boolean {
  const stop = hook;
  if (stop === null) return false;
  hook = null;
  stop();
  return true;
}
