// Fake credentials, generated at run time so no secret-shaped literal sits in the repository.
// A tiny seeded PRNG keeps every run reproducible.

export const UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
export const UPPER_DIGITS = `${UPPER}0123456789`;
export const ALNUM = `${UPPER}abcdefghijklmnopqrstuvwxyz0123456789`;
export const BASE64 = `${ALNUM}+/`;
export const HEX = "0123456789abcdef";

/** Mulberry32: a deterministic stream of numbers in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `n` characters of `alphabet`, from `seed`; always contains a digit when the alphabet has one. */
export function fake(alphabet: string, n: number, seed: number): string {
  const next = prng(seed);
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(next() * alphabet.length)];
  const digit = [...alphabet].find((c) => /[0-9]/.test(c));
  if (digit !== undefined && !/[0-9]/.test(s)) s = `${s.slice(0, -1)}${digit}`;
  return s;
}

/** One sample per format the plugin shipped with first: the line to plant, the secret in it, the rule that finds it. */
export function samples(seed = 1): Array<{ rule: string; line: string; secret: string }> {
  const aws = `AKIA${fake(UPPER_DIGITS, 16, seed)}`;
  const awsSecret = fake(BASE64, 40, seed + 1);
  const ghp = `ghp_${fake(ALNUM, 36, seed + 2)}`;
  const ghFine = `github_pat_${fake(ALNUM, 22, seed + 3)}_${fake(ALNUM, 59, seed + 4)}`;
  const gitlab = `glpat-${fake(ALNUM, 20, seed + 5)}`;
  const slack = `xoxb-${fake("0123456789", 12, seed + 6)}-${fake("0123456789", 13, seed + 7)}-${fake(ALNUM, 24, seed + 8)}`;
  const webhook = `T${fake(UPPER_DIGITS, 8, seed + 9)}/B${fake(UPPER_DIGITS, 10, seed + 10)}/${fake(ALNUM, 24, seed + 11)}`;
  const stripe = `sk_live_${fake(ALNUM, 24, seed + 12)}`;
  const b64url = (s: string) => Buffer.from(s).toString("base64url");
  const jwt = `${b64url('{"alg":"HS256","typ":"JWT"}')}.${b64url(`{"sub":"${fake(ALNUM, 10, seed + 13)}"}`)}.${fake(ALNUM, 43, seed + 14)}`;
  const generic = fake(BASE64, 32, seed + 15);
  const keyBody = Array.from({ length: 4 }, (_, i) => fake(BASE64, 64, seed + 20 + i)).join("\n");
  const pem = `-----BEGIN RSA PRIVATE KEY-----\n${keyBody}\n-----END RSA PRIVATE KEY-----`;
  return [
    { rule: "private-key", line: pem, secret: `\n${keyBody}\n` },
    { rule: "aws-access-key-id", line: `aws_access_key_id = ${aws}`, secret: aws },
    { rule: "aws-secret-access-key", line: `aws_secret_access_key = "${awsSecret}"`, secret: awsSecret },
    { rule: "secretlint-github", line: `GITHUB_TOKEN=${ghp}`, secret: ghp },
    { rule: "secretlint-github", line: `const t = "${ghFine}";`, secret: ghFine },
    { rule: "secretlint-gitlab", line: `gitlab: ${gitlab}`, secret: gitlab },
    { rule: "secretlint-slack", line: `slack_bot: "${slack}"`, secret: slack },
    {
      rule: "secretlint-slack",
      line: `url = "https://hooks.slack.com/services/${webhook}"`,
      secret: `https://hooks.slack.com/services/${webhook}`,
    },
    { rule: "stripe-secret-key", line: `Stripe(${JSON.stringify(stripe)})`, secret: stripe },
    { rule: "jwt", line: `Authorization: Bearer ${jwt}`, secret: jwt },
    { rule: "high-entropy-assignment", line: `DB_PASSWORD = "${generic}"`, secret: generic },
  ];
}
