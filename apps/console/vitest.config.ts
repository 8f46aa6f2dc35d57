import { defineAspProject } from "../../vitest.shared.js";

export default defineAspProject(import.meta.url);
