/**
 * The `asp` exit-code convention. Scripts and CI read these; they never change meaning.
 * 0 allow / ok, 1 deny, 2 indeterminate, 64 bad usage or input (EX_USAGE), 70 internal error (EX_SOFTWARE).
 */
export const EXIT = Object.freeze({
  ok: 0,
  allow: 0,
  deny: 1,
  indeterminate: 2,
  usage: 64,
  internal: 70,
} as const);

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
