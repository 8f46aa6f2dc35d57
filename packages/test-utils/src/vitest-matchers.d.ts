// Types of the matchers registered by ./setup.ts. Every package's tsconfig.test.json includes this file.
import "vitest";

declare module "vitest" {
  interface Matchers<T = unknown> {
    /** Asserts an AspError with this exact `code` was thrown (or rejected). */
    toThrowWithCode(code: string): T;
  }
}
