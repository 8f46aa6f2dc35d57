import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  assertTrustedLocations,
  manifestLocationsInside,
  type ProviderLaunch,
  untrustedLocations,
} from "../src/index.js";
import { isInsidePath } from "../src/trusted-location.js";

/** A real tree: `<root>/repo` (the candidate) and `<root>/trusted` (the installation), both real paths. */
function tree(): { root: string; repo: string; trusted: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "asp-ths-trusted-")));
  const repo = join(root, "repo");
  const trusted = join(root, "trusted");
  mkdirSync(repo);
  mkdirSync(trusted);
  writeFileSync(join(repo, "asp.host.json"), "{}");
  writeFileSync(join(repo, "asp.policy.json"), "{}");
  writeFileSync(join(repo, "evil.mjs"), "");
  writeFileSync(join(trusted, "asp.host.json"), "{}");
  writeFileSync(join(trusted, "policy.json"), "{}");
  writeFileSync(join(trusted, "team.pub"), "{}");
  writeFileSync(join(trusted, "main.mjs"), "");
  mkdirSync(join(trusted, "plugins"));
  return { root, repo, trusted };
}

function provider(trusted: string, over: Partial<ProviderLaunch> = {}): ProviderLaunch {
  return {
    id: "acme.ts",
    executable: process.execPath,
    args: [join(trusted, "main.mjs"), "--source", "ts"],
    cwd: trusted,
    ...over,
  };
}

function fields(repo: string, locations: Parameters<typeof untrustedLocations>[1]): string[] {
  return untrustedLocations(repo, locations).map((l) => l.field);
}

describe("trusted locations", () => {
  describe("when every trusted input lies outside the repository", () => {
    it("finds nothing (the installation layout is accepted)", () => {
      const { repo, trusted } = tree();
      const all = {
        file: join(trusted, "asp.host.json"),
        store: join(trusted, ".asp/store"),
        policy: join(trusted, "policy.json"),
        trustRoots: [join(trusted, "team.pub")],
        plugins: [join(trusted, "plugins")],
        providers: [provider(trusted)],
      };
      expect(untrustedLocations(repo, all)).toEqual([]);
      expect(() => assertTrustedLocations(repo, all)).not.toThrow();
    });

    it("host §2: a postgres:// store is a database, never a location inside the repository", () => {
      const { repo } = tree();
      expect(fields(repo, { store: "postgres://asp@db/evidence" })).toEqual([]);
    });

    it("a sibling whose name starts with the repository's name is outside (repo-other, repo/../x)", () => {
      const { root, repo } = tree();
      mkdirSync(join(root, "repo-other"));
      writeFileSync(join(root, "repo-other", "p.json"), "{}");
      expect(fields(repo, { policy: join(root, "repo-other", "p.json"), store: join(repo, "..", "store") })).toEqual(
        [],
      );
    });
  });

  describe("when a trusted input lies inside the repository", () => {
    it("H2a.2 threat model invariant 2: the repository's own asp.host.json and asp.policy.json are refused with the code", () => {
      const { repo } = tree();
      const trusted = { file: join(repo, "asp.host.json"), policy: join(repo, "asp.policy.json") };
      expect(fields(repo, trusted)).toEqual(["config", "policy"]);
      expect(() => assertTrustedLocations(repo, trusted)).toThrowWithCode("ASP_THS_UNTRUSTED_LOCATION");
    });

    it("the error names every offending field and path", () => {
      const { repo, trusted } = tree();
      try {
        assertTrustedLocations(repo, {
          policy: join(repo, "asp.policy.json"),
          trustRoots: [join(trusted, "team.pub"), join(repo, "team.pub")],
          plugins: [join(repo, "plugins")],
        });
        expect.unreachable();
      } catch (error) {
        const data = (error as { data: { locations: Array<{ field: string; path: string }> } }).data;
        expect(data.locations.map((l) => [l.field, l.path])).toEqual([
          ["policy", join(repo, "asp.policy.json")],
          ["trustRoots[1]", join(repo, "team.pub")],
          ["plugins[0]", join(repo, "plugins")],
        ]);
      }
    });

    it("a folder named ..x inside the repository is inside", () => {
      const { repo } = tree();
      mkdirSync(join(repo, "..x"));
      writeFileSync(join(repo, "..x", "policy.json"), "{}");
      expect(fields(repo, { policy: join(repo, "..x", "policy.json") })).toEqual(["policy"]);
    });

    it("a store that does not exist yet is placed by its nearest existing ancestor (the candidate could plant one)", () => {
      const { repo } = tree();
      expect(fields(repo, { store: join(repo, ".asp", "store") })).toEqual(["store"]);
      expect(fields(repo, { store: repo })).toEqual(["store"]);
    });
  });

  describe("when symlinks are involved", () => {
    it("a symlink outside the repository pointing into it is inside (real paths are compared)", () => {
      const { repo, trusted } = tree();
      symlinkSync(join(repo, "asp.policy.json"), join(trusted, "linked-policy.json"));
      symlinkSync(repo, join(trusted, "linked-dir"));
      const hits = untrustedLocations(repo, {
        policy: join(trusted, "linked-policy.json"),
        plugins: [join(trusted, "linked-dir", "plugins")],
      });
      expect(hits).toEqual([
        { field: "policy", path: join(trusted, "linked-policy.json"), inside: join(repo, "asp.policy.json") },
        { field: "plugins[0]", path: join(trusted, "linked-dir", "plugins"), inside: join(repo, "plugins") },
      ]);
    });

    it("a dangling symlink outside the repository pointing into it is inside (the store would be created there)", () => {
      const { repo, trusted } = tree();
      symlinkSync(join(repo, ".asp-store"), join(trusted, "store"));
      expect(fields(repo, { store: join(trusted, "store") })).toEqual(["store"]);
    });

    it("a path that runs through a symlink the repository carries is inside, wherever it ends", () => {
      const { repo, trusted } = tree();
      // trusted/hop -> repo/redirect -> trusted: the end is outside, but the candidate chose it.
      symlinkSync(trusted, join(repo, "redirect"));
      symlinkSync(join(repo, "redirect"), join(trusted, "hop"));
      const hits = untrustedLocations(repo, { policy: join(trusted, "hop", "policy.json") });
      expect(hits).toEqual([
        { field: "policy", path: join(trusted, "hop", "policy.json"), inside: join(repo, "redirect") },
      ]);
    });

    it("a repository given through a symlink is compared by its real path", () => {
      const { root, repo } = tree();
      symlinkSync(repo, join(root, "repo-link"));
      expect(fields(join(root, "repo-link"), { policy: join(repo, "asp.policy.json") })).toEqual(["policy"]);
      expect(fields(repo, { policy: join(root, "repo-link", "asp.policy.json") })).toEqual(["policy"]);
    });

    it("a symlink loop cannot be shown to lie outside, so it is refused", () => {
      const { repo, trusted } = tree();
      symlinkSync(join(trusted, "b"), join(trusted, "a"));
      symlinkSync(join(trusted, "a"), join(trusted, "b"));
      expect(untrustedLocations(repo, { policy: join(trusted, "a") })).toEqual([
        { field: "policy", path: join(trusted, "a"), inside: null },
      ]);
    });
  });

  describe("provider launch manifests", () => {
    it("H2a.4 host §2: an executable inside the repository is refused", () => {
      const { repo, trusted } = tree();
      const m = provider(trusted, { executable: join(repo, "evil.mjs") });
      expect(manifestLocationsInside(repo, m).map((l) => l.field)).toEqual(["providers[acme.ts].executable"]);
    });

    it("H1.3 H2a.4 host §1/§2: a measured root inside the repository is refused (the candidate would choose what is measured)", () => {
      const { repo, trusted } = tree();
      const m = provider(trusted, { root: repo });
      expect(manifestLocationsInside(repo, m).map((l) => l.field)).toEqual(["providers[acme.ts].root"]);
    });

    it("H2a.4 host §2: a cwd inside the repository is refused, and relative arguments then name paths inside it too", () => {
      const { repo, trusted } = tree();
      expect(manifestLocationsInside(repo, provider(trusted, { cwd: repo })).map((l) => l.field)).toEqual([
        "providers[acme.ts].cwd",
        "providers[acme.ts].args[1]",
        "providers[acme.ts].args[2]",
      ]);
    });

    it("an argument naming a file inside the repository is refused: absolute, relative to the cwd, or --opt=PATH", () => {
      const { repo, trusted } = tree();
      const m = provider(trusted, {
        args: [join(repo, "evil.mjs"), "--source", "ts", "../repo/evil.mjs", `--config=${join(repo, "asp.host.json")}`],
      });
      expect(manifestLocationsInside(repo, m)).toEqual([
        { field: "providers[acme.ts].args[0]", path: join(repo, "evil.mjs"), inside: join(repo, "evil.mjs") },
        { field: "providers[acme.ts].args[3]", path: join(repo, "evil.mjs"), inside: join(repo, "evil.mjs") },
        {
          field: "providers[acme.ts].args[4]",
          path: join(repo, "asp.host.json"),
          inside: join(repo, "asp.host.json"),
        },
      ]);
    });

    it("plain word arguments resolve below the trusted cwd and are never a false alarm", () => {
      const { repo, trusted } = tree();
      const m = provider(trusted, { args: [join(trusted, "main.mjs"), "--id", "repo", "--level=warn", "", "."] });
      expect(manifestLocationsInside(repo, m)).toEqual([]);
    });

    it("untrustedLocations checks every configured provider", () => {
      const { repo, trusted } = tree();
      expect(
        fields(repo, {
          providers: [provider(trusted), provider(trusted, { id: "bad", executable: join(repo, "evil.mjs") })],
        }),
      ).toEqual(["providers[bad].executable"]);
    });
  });

  describe("isInsidePath", () => {
    it.each([
      ["/r", "/r", true],
      ["/r", "/r/a", true],
      ["/r", "/r/..x", true],
      ["/r", "/r/..x/y", true],
      ["/r", "/r/...", true],
      ["/r", "/rx", false],
      ["/r", "/", false],
      ["/r", "/other/r", false],
      ["/r/a", "/r", false],
    ])("isInsidePath(%s, %s) is %s", (root, path, inside) => {
      expect(isInsidePath(root, path)).toBe(inside);
    });
  });
});
