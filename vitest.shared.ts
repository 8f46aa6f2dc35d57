import { basename, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultServerConditions } from "vite";
import { defineProject, type ViteUserConfig } from "vitest/config";

/**
 * Resolve workspace packages through their `@asp/source` export condition, so tests run
 * against `src/` without a prebuild (TanStack's pattern). Built `dist/` is what ships.
 */
const conditions = ["@asp/source", ...defaultServerConditions];

/** The one vitest project shape every workspace package uses. */
export function defineAspProject(
  configUrl: string,
  overrides: { name?: string; testTimeout?: number } = {},
): ViteUserConfig {
  const dir = dirname(fileURLToPath(configUrl));
  return defineProject({
    // Vite 8 transforms TS with Oxc, which applies legacy decorators only to files inside a
    // tsconfig `include`; test/ is outside the build tsconfig, so force them here (tsyringe).
    oxc: { decorator: { legacy: true, emitDecoratorMetadata: true } },
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: ["@asp/source"] } },
    test: {
      name: overrides.name ?? `${basename(dirname(dir))}/${basename(dir)}`,
      root: dir,
      include: ["test/**/*.test.ts"],
      setupFiles: [fileURLToPath(new URL("./packages/test-utils/src/setup.ts", import.meta.url))],
      testTimeout: overrides.testTimeout ?? 20_000,
    },
  });
}
