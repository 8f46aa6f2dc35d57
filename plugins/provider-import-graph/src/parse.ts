import ts from "typescript";

/** One module specifier a file uses, with where it is (0-based). */
export interface ImportSite {
  readonly specifier: string;
  readonly line: number;
  readonly character: number;
  /** `import` / `export ... from` / `require` / `import()` / a `/// <reference path>`. */
  readonly kind: "import" | "reference";
}

/** One name a file exports, with where it is declared (0-based line). */
export interface ExportSite {
  readonly name: string;
  readonly line: number;
  /** e.g. `function`, `class`, `const`, `interface`, `type`, `enum`, `default`, `re-export`, `commonjs`. */
  readonly kind: string;
  /** For a re-export (`export { x } from "./y"`): the specifier it comes from. */
  readonly from?: string;
}

/** What the graph needs from one file. */
export interface ParsedModule {
  readonly imports: readonly ImportSite[];
  readonly exports: readonly ExportSite[];
  /** Each `export * from "..."`: its specifier and 0-based line. */
  readonly starExports: ReadonlyArray<{ readonly specifier: string; readonly line: number }>;
}

/** File extensions the graph reads. */
export const SOURCE_EXTENSIONS = [".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"] as const;

/** True for a TS/JS source file (declaration files included). */
export function isSourcePath(path: string): boolean {
  return SOURCE_EXTENSIONS.some((e) => path.endsWith(e));
}

function scriptKind(path: string): ts.ScriptKind {
  if (path.endsWith(".tsx")) return ts.ScriptKind.TSX;
  if (path.endsWith(".jsx")) return ts.ScriptKind.JSX;
  if (/\.[mc]?js$/.test(path)) return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

const hasModifier = (node: ts.Node, kind: ts.SyntaxKind): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node)?.some((m) => m.kind === kind) ?? false);

/**
 * Read a file's imports (static, type-only, re-exports, `require`, dynamic `import()`,
 * `/// <reference path>`) with `ts.preProcessFile`, and its exported names from the top-level
 * statements (ESM and `exports.x =` / `module.exports.x =`).
 *
 * @example
 * ```ts
 * parseModule("src/a.ts", 'import { b } from "./b.js";\nexport const a = b;\n');
 * // { imports: [{ specifier: "./b.js", line: 0, ... }], exports: [{ name: "a", line: 1, kind: "const" }], ... }
 * ```
 */
export function parseModule(path: string, text: string): ParsedModule {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, false, scriptKind(path));
  const at = (pos: number) => sf.getLineAndCharacterOfPosition(pos);
  const info = ts.preProcessFile(text, true, true);
  const imports: ImportSite[] = [];
  // A FileReference's pos may point at the opening quote; ranges cover the specifier itself.
  const specStart = (pos: number): number => (/["'`]/.test(text[pos] ?? "") ? pos + 1 : pos);
  for (const ref of info.importedFiles) {
    const p = at(specStart(ref.pos));
    imports.push({ specifier: ref.fileName, line: p.line, character: p.character, kind: "import" });
  }
  for (const ref of info.referencedFiles) {
    const p = at(specStart(ref.pos));
    imports.push({ specifier: ref.fileName, line: p.line, character: p.character, kind: "reference" });
  }
  const exports: ExportSite[] = [];
  const starExports: Array<{ specifier: string; line: number }> = [];
  const lineOf = (node: ts.Node): number => at(node.getStart(sf)).line;
  const add = (name: string, node: ts.Node, kind: string, from?: string): void => {
    exports.push(from === undefined ? { name, line: lineOf(node), kind } : { name, line: lineOf(node), kind, from });
  };
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st)) {
      const from =
        st.moduleSpecifier !== undefined && ts.isStringLiteral(st.moduleSpecifier)
          ? st.moduleSpecifier.text
          : undefined;
      if (st.exportClause === undefined) {
        if (from !== undefined) starExports.push({ specifier: from, line: lineOf(st) });
      } else if (ts.isNamedExports(st.exportClause)) {
        for (const el of st.exportClause.elements)
          add(el.name.text, el, from === undefined ? "export" : "re-export", from);
      } else {
        add(st.exportClause.name.text, st.exportClause, "re-export", from);
      }
      continue;
    }
    if (ts.isExportAssignment(st)) {
      add("default", st, "default");
      continue;
    }
    if (ts.isExpressionStatement(st) && ts.isBinaryExpression(st.expression)) {
      // CommonJS: exports.x = ... / module.exports.x = ...
      const left = st.expression.left;
      if (st.expression.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isPropertyAccessExpression(left)) {
        const target = left.expression.getText(sf);
        if (target === "exports" || target === "module.exports") add(left.name.text, st, "commonjs");
      }
      continue;
    }
    if (!hasModifier(st, ts.SyntaxKind.ExportKeyword)) continue;
    const isDefault = hasModifier(st, ts.SyntaxKind.DefaultKeyword);
    if (ts.isVariableStatement(st)) {
      const kind = st.declarationList.flags & ts.NodeFlags.Const ? "const" : "let";
      for (const decl of st.declarationList.declarations) {
        for (const name of bindingNames(decl.name)) add(name, decl, kind);
      }
      continue;
    }
    const kind = ts.isFunctionDeclaration(st)
      ? "function"
      : ts.isClassDeclaration(st)
        ? "class"
        : ts.isInterfaceDeclaration(st)
          ? "interface"
          : ts.isTypeAliasDeclaration(st)
            ? "type"
            : ts.isEnumDeclaration(st)
              ? "enum"
              : ts.isModuleDeclaration(st)
                ? "namespace"
                : "declaration";
    const name = (st as { name?: ts.Node }).name;
    const named = name !== undefined && ts.isIdentifier(name) ? name.text : undefined;
    // `export default function f` is found by its local name too; its export name is default.
    if (isDefault) add(named ?? "default", st, `default ${kind}`);
    else if (named !== undefined) add(named, st, kind);
  }
  return { imports, exports, starExports };
}

function bindingNames(name: ts.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text];
  const out: string[] = [];
  for (const el of name.elements) if (!ts.isOmittedExpression(el)) out.push(...bindingNames(el.name));
  return out;
}
