import { defineAspProject } from "./vitest.shared.js";

/** Repository-wide checks in test/ (dependency direction, package shape, README and CI coherence). */
export default defineAspProject(import.meta.url, { name: "repo" });
