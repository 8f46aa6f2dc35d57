// The plugin entry (bundled into main.mjs): plugin-host imports it in-process and reads its default export.
import { sandboxBubblewrap } from "./plugin.js";

export default sandboxBubblewrap;
