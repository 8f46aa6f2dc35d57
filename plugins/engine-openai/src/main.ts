// The plugin entry (bundled to main.mjs): the host imports it after verifying the signature and
// the policy grant.
import { openAIEnginePlugin } from "./plugin.js";

export default openAIEnginePlugin;
