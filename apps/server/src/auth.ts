import { timingSafeEqual } from "node:crypto";
import { digestBytes, SERVER_SCOPES, type ServerScope } from "@asp/contracts";
import { ServerError } from "./errors.js";

/** A bearer token trusted configuration accepts: its id, the digest of its secret, its scopes. */
export interface ServerToken {
  readonly id: string;
  /** `sha256:` and the hex digest of the token's UTF-8 bytes; the secret itself is never configured. */
  readonly digest: string;
  readonly scopes: readonly ServerScope[];
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** `sha256:<hex>` of a token's UTF-8 bytes: what a host configuration's `server.tokens[].digest` holds. */
export function tokenDigest(token: string): string {
  return digestBytes(new TextEncoder().encode(token));
}

/**
 * Check a token list: well-formed digests, each once, known scopes.
 * @throws ServerError `ASP_SERVER_BAD_OPTIONS`.
 */
export function checkTokens(tokens: readonly ServerToken[]): readonly ServerToken[] {
  const seen = new Set<string>();
  for (const t of tokens) {
    if (typeof t.digest !== "string" || !DIGEST.test(t.digest)) {
      throw new ServerError("ASP_SERVER_BAD_OPTIONS", `token ${t.id}: digest must be sha256:<64 hex>`, {
        data: { token: t.id },
      });
    }
    if (seen.has(t.digest)) {
      throw new ServerError("ASP_SERVER_BAD_OPTIONS", `token ${t.id}: the same token is configured twice`, {
        data: { token: t.id },
      });
    }
    seen.add(t.digest);
    for (const s of t.scopes) {
      if (!(SERVER_SCOPES as readonly string[]).includes(s)) {
        throw new ServerError("ASP_SERVER_BAD_OPTIONS", `token ${t.id}: unknown scope ${s}`, { data: { token: t.id } });
      }
    }
  }
  return tokens;
}

/**
 * The token an `Authorization` header carries, found among `tokens` by comparing digests in
 * constant time: every configured digest is compared, whether or not an earlier one matched, so
 * the answer's timing says nothing of which tokens exist.
 *
 * @throws ServerError `ASP_SERVER_UNAUTHORIZED` (no bearer header, or no token matches),
 *   `ASP_SERVER_FORBIDDEN` (a token without `scope`).
 */
export function authorize(header: string | undefined, tokens: readonly ServerToken[], scope: ServerScope): ServerToken {
  const match = /^Bearer ([\x21-\x7e]{1,4096})$/.exec(header ?? "");
  if (match === null) {
    throw new ServerError("ASP_SERVER_UNAUTHORIZED", "send Authorization: Bearer <token>");
  }
  const presented = Buffer.from(tokenDigest(match[1] as string), "utf8");
  let found: ServerToken | null = null;
  for (const t of tokens) {
    const equal = timingSafeEqual(presented, Buffer.from(t.digest, "utf8"));
    if (equal && found === null) found = t;
  }
  if (found === null) throw new ServerError("ASP_SERVER_UNAUTHORIZED", "the token is not one this server accepts");
  if (!found.scopes.includes(scope)) {
    throw new ServerError("ASP_SERVER_FORBIDDEN", `token ${found.id} lacks the ${scope} scope this route needs`, {
      data: { scope },
    });
  }
  return found;
}
