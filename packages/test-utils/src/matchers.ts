import { isAspError } from "@asp/contracts";

/** Result shape vitest expects from a custom matcher. */
interface MatcherResult {
  pass: boolean;
  message: () => string;
  actual?: unknown;
  expected?: unknown;
}

function describeThrown(thrown: unknown): string {
  if (isAspError(thrown)) return `${thrown.name} ${thrown.code}: ${thrown.message}`;
  if (thrown instanceof Error) return `${thrown.name} without an ASP code: ${thrown.message}`;
  return `a non-error value ${JSON.stringify(thrown)}`;
}

/**
 * `expect(fn).toThrowWithCode("ASP_X")` and `await expect(promise).rejects.toThrowWithCode("ASP_X")`.
 * Asserts on the stable code, never on message text. With `.rejects` vitest hands the
 * rejection reason itself, so a non-function `received` is treated as the thrown value.
 */
export function toThrowWithCode(received: unknown, code: string): MatcherResult {
  let thrown: unknown;
  let threw = false;
  if (typeof received === "function") {
    try {
      (received as () => unknown)();
    } catch (error) {
      threw = true;
      thrown = error;
    }
  } else {
    threw = true;
    thrown = received;
  }
  if (!threw) {
    return { pass: false, message: () => `expected function to throw an AspError with code ${code}, but it returned` };
  }
  const actualCode = isAspError(thrown) ? thrown.code : undefined;
  const pass = actualCode === code;
  return {
    pass,
    actual: actualCode,
    expected: code,
    message: () =>
      pass
        ? `expected not to throw an AspError with code ${code}`
        : `expected an AspError with code ${code}, got ${describeThrown(thrown)}`,
  };
}
