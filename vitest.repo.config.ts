import { defineAspProject } from "./vitest.shared.js";

/** Repository-wide checks (dependency direction, package shape, README and CI coherence). */
export default defineAspProject(new URL("./test/vitest.config.ts", import.meta.url).href, { name: "repo" });
