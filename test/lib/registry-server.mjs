// A minimal npm registry for the packed tarballs in one folder (test/lib/registry.ts starts it).
// It serves a packument per package (GET /@scope%2fname or /@scope/name) and the tarballs
// (GET /-/FILE.tgz), and answers 404 to everything else, so npm resolves exactly these packages
// from here while every other package comes from the configured registry. Prints its URL.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";

const dir = process.argv[2];
if (dir === undefined) throw new Error("usage: registry-server.mjs TARBALL_DIR");
const packages = new Map();
let base = "";
for (const file of readdirSync(dir)
  .filter((f) => f.endsWith(".tgz"))
  .sort()) {
  const bytes = readFileSync(join(dir, file));
  const manifest = JSON.parse(
    execFileSync("tar", ["-xOzf", join(dir, file), "package/package.json"], { encoding: "utf8" }),
  );
  packages.set(manifest.name, {
    manifest,
    file,
    bytes,
    integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    shasum: createHash("sha1").update(bytes).digest("hex"),
  });
}

function packument(p) {
  const { manifest } = p;
  return {
    _id: manifest.name,
    name: manifest.name,
    "dist-tags": { latest: manifest.version },
    versions: {
      [manifest.version]: {
        ...manifest,
        _id: `${manifest.name}@${manifest.version}`,
        dist: { tarball: `${base}/-/${p.file}`, integrity: p.integrity, shasum: p.shasum },
      },
    },
  };
}

const server = createServer((req, res) => {
  const url = decodeURIComponent((req.url ?? "/").split("?")[0] ?? "/");
  if (url.startsWith("/-/")) {
    const p = [...packages.values()].find((q) => `/-/${q.file}` === url);
    if (p !== undefined) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": p.bytes.length });
      res.end(p.bytes);
      return;
    }
  } else {
    const p = packages.get(url.slice(1));
    if (p !== undefined) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(packument(p)));
      return;
    }
  }
  res.writeHead(404, { "content-type": "application/json" });
  res.end('{"error":"not found"}');
});
server.listen(0, "127.0.0.1", () => {
  base = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(`${base}\n`);
});
