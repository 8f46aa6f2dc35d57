import randexp from "randexp";
import type { GitleaksRule } from "./gitleaks.js";

// randexp is CommonJS (`module.exports = RandExp`); its typings declare an ES default export, so
// under NodeNext the default import is typed as the module. At run time it is the class.
const RandExp = randexp as unknown as typeof randexp.default;

// Samples of every rule of gitleaks' default configuration, generated at run time from the rule's
// own pattern: a secret drawn from the rule's secret group, placed in the contexts real files put
// a credential in (an assignment in a dozen languages and formats, under the service's name), and
// the same secret as a placeholder (its letters and digits masked) as a negative. Seeded, so the
// same gitleaks build gives the same samples; nothing of gitleaks is stored in this repository.

/** One generated file. */
export interface Sample {
  readonly rule: string;
  /** `positive` (holds a secret of the rule) or `placeholder` / `identifier` (holds none). */
  readonly kind: "positive" | "placeholder" | "identifier";
  readonly context: string;
  /** Relative path the file is written at (its name matters to path rules and to contexts). */
  readonly path: string;
  readonly text: string;
}

/** A context: how a file of that kind assigns `secret` to a name built from `name`. */
interface Context {
  readonly id: string;
  readonly file: string;
  readonly text: (name: string, secret: string) => string;
}

const upper = (s: string) => s.toUpperCase().replace(/[^A-Z0-9]/g, "_");
const camel = (s: string) => s.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase());

const CONTEXTS: readonly Context[] = [
  { id: "env", file: "app.env", text: (n, s) => `${upper(n)}_TOKEN=${s}\n` },
  { id: "shell", file: "deploy.sh", text: (n, s) => `#!/bin/sh\nexport ${upper(n)}_API_KEY="${s}"\n` },
  { id: "yaml", file: "config.yaml", text: (n, s) => `service:\n  ${n}_token: '${s}'\n` },
  { id: "json", file: "settings.json", text: (n, s) => `{\n  "${n}_secret": "${s}"\n}\n` },
  { id: "python", file: "settings.py", text: (n, s) => `${n.replace(/\W/g, "_")}_api_key = "${s}"\n` },
  { id: "js", file: "client.js", text: (n, s) => `const ${camel(n)}Token = "${s}";\n` },
  { id: "go", file: "main.go", text: (n, s) => `package main\n\nvar ${camel(n)}Key string = "${s}"\n` },
  { id: "java", file: "Config.java", text: (n, s) => `class Config {\n  String ${camel(n)}Secret = "${s}";\n}\n` },
  { id: "properties", file: "app.properties", text: (n, s) => `${n}.auth.token=${s}\n` },
  { id: "toml", file: "config.toml", text: (n, s) => `[${n}]\n${n}_token = "${s}"\n` },
  {
    id: "xml",
    file: "config.xml",
    text: (n, s) => `<config>\n  <${camel(n)}Token>${s}</${camel(n)}Token>\n</config>\n`,
  },
  { id: "make", file: "Makefile", text: (n, s) => `${upper(n)}_TOKEN ?= ${s}\n` },
];

/** The contexts a placeholder is written in (fewer than the positives: the forms matter less). */
const PLACEHOLDER_CONTEXTS = new Set(["env", "json", "yaml", "go"]);

/** A small seeded generator (mulberry32), so samples repeat exactly for a seed. */
function prng(seed: number): (a: number, b: number) => number {
  let t = seed >>> 0;
  return (a, b) => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = Math.imul(t ^ (t >>> 15), 1 | t);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    const r = ((x ^ (x >>> 14)) >>> 0) / 4294967296;
    return a + Math.floor(r * (b - a + 1));
  };
}

/**
 * The source of capture group `n` (1-based) of an RE2 pattern, or undefined. Counts only capturing
 * groups (`(` not followed by `?`, and `(?P<name>` / `(?<name>`), skipping escapes and classes.
 */
export function captureGroup(pattern: string, n: number): string | undefined {
  let count = 0;
  const stack: Array<{ capture: number; start: number }> = [];
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      i++;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      continue;
    }
    if (c === "[") {
      inClass = true;
      if (pattern[i + 1] === "^") i++;
      if (pattern[i + 1] === "]") i++;
      continue;
    }
    if (c === "(") {
      let capture = 0;
      let start = i + 1;
      if (pattern[i + 1] !== "?") capture = ++count;
      else if (pattern.startsWith("?P<", i + 1) || /^\?<[A-Za-z]/.test(pattern.slice(i + 1, i + 4))) {
        capture = ++count;
        start = pattern.indexOf(">", i) + 1;
      }
      stack.push({ capture, start });
    } else if (c === ")") {
      const open = stack.pop();
      if (open !== undefined && open.capture === n) return pattern.slice(open.start, i);
    }
  }
  return undefined;
}

/** An RE2 pattern as a JavaScript one for generation: inline flags and Go-only escapes dropped. */
export function toJsPattern(re2: string): string {
  return re2
    .replace(/\(\?[imsU-]+\)/g, "")
    .replace(/\(\?[imsU-]+:/g, "(?:")
    .replace(/\(\?P</g, "(?<")
    .replace(/\\z/g, "$")
    .replace(/\\A/g, "^");
}

/** The part of the rule that is the secret: its `secretGroup`, else its first group, else all. */
export function secretPattern(rule: GitleaksRule): string | undefined {
  if (rule.regex === undefined) return undefined;
  return captureGroup(rule.regex, rule.secretGroup ?? 1) ?? rule.regex;
}

/** The name a file would store the secret under: the rule's first word keyword, else its id's head. */
export function serviceName(rule: GitleaksRule): string {
  const word = (rule.keywords ?? []).find(
    (k) => /^[a-z][a-z0-9]{2,}$/.test(k) && rule.regex?.toLowerCase().includes(k),
  );
  return word ?? (rule.id.split("-")[0] as string);
}

function generator(pattern: string, randInt: (a: number, b: number) => number): () => string {
  const r = new RandExp(new RegExp(toJsPattern(pattern)));
  r.max = 24;
  r.randInt = randInt;
  // `.` and negated classes draw from printable ASCII without quotes and backslashes.
  r.defaultRange.subtract(0, 0x7f).add(0x30, 0x39).add(0x41, 0x5a).add(0x61, 0x7a);
  return () => r.gen();
}

/** A file name matching a rule's path pattern (for path rules), else undefined. */
function pathFor(rule: GitleaksRule, randInt: (a: number, b: number) => number): string | undefined {
  if (rule.path === undefined) return undefined;
  const name = generator(rule.path.replace(/\(\?:\^\|\\\/\)/g, ""), randInt)();
  return name.replace(/^\/+/, "").replace(/\/+/g, "/");
}

/** Mask a secret's letters and digits after its first four characters: `ghp_xxxx…`, `AKIAXXXX…`. */
export function placeholderOf(secret: string): string {
  return secret.slice(0, 4) + secret.slice(4).replace(/[a-z]/g, "x").replace(/[A-Z]/g, "X").replace(/[0-9]/g, "0");
}

/**
 * The samples of one rule: the secret in each context (positives), the secret's placeholder in four
 * of them, and an identifier-shaped value (a UUID under an `…Id` name). A rule whose
 * pattern cannot be generated from gives none (it is listed as not measured).
 */
export function samplesOf(rule: GitleaksRule, seed: number): Sample[] {
  const randInt = prng(seed);
  const pattern = secretPattern(rule);
  const filePath = pathFor(rule, randInt);
  const folder = rule.id;
  if (pattern === undefined) {
    // A path-only rule (`pkcs12-file`): the file's name is the finding.
    return filePath === undefined
      ? []
      : [
          {
            rule: rule.id,
            kind: "positive",
            context: "path",
            path: `${folder}/${filePath}`,
            text: `0\u0082${"\u0004\u0002\u0001\u0003".repeat(12)}`,
          },
        ];
  }
  let secret: string;
  let whole: string;
  try {
    secret = generator(pattern, randInt)();
    whole = generator(rule.regex as string, randInt)();
  } catch {
    return [];
  }
  const name = serviceName(rule);
  const out: Sample[] = [];
  for (const c of CONTEXTS) {
    const path = `${folder}/${c.id}/${filePath ?? c.file}`;
    out.push({ rule: rule.id, kind: "positive", context: c.id, path, text: c.text(name, secret) });
    if (!PLACEHOLDER_CONTEXTS.has(c.id)) continue;
    out.push({
      rule: rule.id,
      kind: "placeholder",
      context: c.id,
      path: `${folder}/placeholder-${c.id}/${filePath ?? c.file}`,
      text: c.text(name, placeholderOf(secret)),
    });
  }
  // The rule's whole pattern drawn as one line: the context its own regex describes.
  out.push({
    rule: rule.id,
    kind: "positive",
    context: "pattern",
    path: `${folder}/pattern/${filePath ?? "sample.txt"}`,
    text: `${whole}\n`,
  });
  const uuid = [8, 4, 4, 4, 12]
    .map((n) => Array.from({ length: n }, () => "0123456789abcdef"[randInt(0, 15)]).join(""))
    .join("-");
  out.push({
    rule: rule.id,
    kind: "identifier",
    context: "identifier",
    path: `${folder}/identifier/${filePath ?? "Jenkinsfile"}`,
    text: `withCredentials([string(credentialsId: '${uuid}', variable: '${upper(name)}_TOKEN')]) {}\n${camel(name)}CredentialsId: '${uuid}'\n`,
  });
  return out;
}
