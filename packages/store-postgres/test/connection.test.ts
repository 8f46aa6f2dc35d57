// issue 32 hole 10: a credential in any part of a store URL is never printed.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { poolConfig, scrub } from "../src/connection.js";
import { redactStoreLocation } from "../src/index.js";

const S = "Zq7f3c9e1";

describe("redactStoreLocation", () => {
  describe("when the location is a URL", () => {
    it.each([
      ["a userinfo password", `postgres://ci:${S}@db:5432/ev`, "postgres://ci:***@db:5432/ev"],
      ["a percent-encoded userinfo password", `postgres://ci:${S}%40x%2F@db/ev`, "postgres://ci:***@db/ev"],
      ["?password=", `postgres://ci@db/ev?password=${S}`, "postgres://ci@db/ev?password=***"],
      ["a percent-encoded ?password=", `postgres://db/ev?password=${S}%40%23`, "postgres://db/ev?password=***"],
      ["a percent-encoded key", `postgres://db/ev?pass%77ord=${S}`, "postgres://db/ev?pass%77ord=***"],
      ["an upper-case key", `postgresql://db/ev?PASSWORD=${S}`, "postgresql://db/ev?PASSWORD=***"],
      [
        "?sslpassword=",
        `postgres://db/ev?sslmode=require&sslpassword=${S}`,
        "postgres://db/ev?sslmode=require&sslpassword=***",
      ],
      ["?passfile=", `postgres://db/ev?passfile=/home/${S}/.pgpass`, "postgres://db/ev?passfile=***"],
      ["a key ending in token", `postgres://db/ev?authToken=${S}&x=1`, "postgres://db/ev?authToken=***&x=1"],
      ["a key ending in secret", `postgres://db/ev?client_secret=${S}`, "postgres://db/ev?client_secret=***"],
      ["a repeated key", `postgres://db/ev?password=${S}&password=${S}2`, "postgres://db/ev?password=***&password=***"],
      ["a fragment", `postgres://db/ev#password=${S}`, "postgres://db/ev#password=***"],
      [
        "every part at once",
        `postgres://u:${S}@db/ev?password=${S}#token=${S}`,
        "postgres://u:***@db/ev?password=***#token=***",
      ],
    ])("replaces %s with ***", (_what, url, shown) => {
      expect(redactStoreLocation(url)).toBe(shown);
    });

    it("keeps what is not a credential (user, host, port, database, sslmode, sslkey path)", () => {
      const url = "postgres://ci@db.internal:6432/evidence?sslmode=verify-full&sslkey=/etc/ssl/client.key";
      expect(redactStoreLocation(url)).toBe(url);
    });

    it("reduces a URL that does not parse to its scheme", () => {
      expect(redactStoreLocation(`postgres://u:${S}@[::1/x`)).toBe("postgres://(unparseable URL)");
    });
  });

  describe("when the location is a libpq connection string or a folder", () => {
    it.each([
      [`host=db password=${S} dbname=ev`, "host=db password=*** dbname=ev"],
      [`host=db password = '${S} x\\'y' dbname=ev`, "host=db password = *** dbname=ev"],
      [`sslpassword=${S} passfile=/p/${S}`, "sslpassword=*** passfile=***"],
    ])("redacts %s", (conninfo, shown) => {
      expect(redactStoreLocation(conninfo)).toBe(shown);
    });

    it("returns a folder path as it is", () => {
      expect(redactStoreLocation("/var/lib/asp/store")).toBe("/var/lib/asp/store");
      expect(redactStoreLocation("relative/.asp")).toBe("relative/.asp");
    });
  });

  describe("for any password", () => {
    it("no URL form carries it, raw or percent-encoded (property)", () => {
      fc.assert(
        fc.property(
          fc.string({ minLength: 6, maxLength: 24 }),
          fc.constantFrom("userinfo", "query", "ssl"),
          (pw, form) => {
            const secret = `${S}${pw}`;
            const e = encodeURIComponent(secret);
            const url =
              form === "userinfo"
                ? `postgres://ci:${e}@db/ev`
                : form === "query"
                  ? `postgres://ci@db/ev?application_name=a&password=${e}`
                  : `postgres://ci@db/ev?sslpassword=${e}&sslmode=require`;
            const shown = redactStoreLocation(url);
            expect(shown).not.toContain(S);
            expect(shown).not.toContain(e);
          },
        ),
      );
    });
  });
});

describe("scrub (driver messages)", () => {
  it("removes every credential poolConfig found in the URL, raw and percent-encoded", () => {
    const { secrets } = poolConfig(`postgres://u:${S}a@db/ev?sslpassword=${S}b&pass%77ord=${S}%40c`, {});
    expect([...secrets].sort()).toEqual([`${S}@c`, `${S}a`, `${S}b`]);
    const text = scrub(`failed: ${S}a, ${S}b, ${S}@c, ${S}%40c`, secrets);
    expect(text).not.toContain(S);
  });
});
