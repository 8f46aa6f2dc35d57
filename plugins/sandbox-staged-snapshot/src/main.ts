// The plugin entry (bundled to main.mjs): the host imports it after verifying the signature and
// the policy grant. No fault hook here: production never injects one.
import { stagedSnapshotPlugin } from "./plugin.js";

export default stagedSnapshotPlugin;
