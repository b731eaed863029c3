/*
 * Public symbols of JavaScript and TypeScript files and whether each has a doc comment,
 * read with the TypeScript compiler's parser (JSDoc through `ts.getJSDocCommentsAndTags`).
 * Counted: ES exports (declarations, `export { a }` of local declarations, public members
 * of exported classes) and CommonJS exports (`module.exports = …`, `exports.x = …`, the
 * properties of an exported object literal, and `X.name = …` / `X.prototype.name = …`
 * assignments or `defineGetter(X, "name", …)`-style calls on an exported object `X`, as
 * express's `res.status = function status(code)` does). Re-exports of other modules
 * (`export … from`, `exports.x = require(…)`) are counted where they are defined. Overloads
 * and merged declarations of one name are one symbol, documented when any is; so is an alias
 * chain (`a.x = a.y = function …`), under its first name. Class fields count only when their
 * value is a function (a method); properties do not. A class member that implements or
 * overrides a documented member of an interface or class declared in the same file, or of a
 * global interface of TypeScript's standard library (`class $URL implements URL`, the name
 * neither declared nor imported in the file), is documented, as editors and TypeDoc show the
 * inherited doc; an interface or class imported by name from a relative path of the project
 * counts too (its own members; there is no type checker to follow further). Names
 * starting with `_`, and symbols tagged `@private`, `@internal`, `@ignore` or
 * `@api private`, are not public API.
 */
// Reads TypeScript's own lib.*.d.ts files in the service's node_modules, never a working copy
// (its files come as text from health/files.ts).
// eslint-disable-next-line no-restricted-imports -- the service's own files, not a working copy
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import ts from "typescript";

export interface DocSymbol {
  name: string;
  line: number;
  documented: boolean;
}

function scriptKind(file: string): ts.ScriptKind {
  if (/\.tsx$/.test(file)) return ts.ScriptKind.TSX;
  if (/\.[cm]?ts$/.test(file)) return ts.ScriptKind.TS;
  if (/\.jsx$/.test(file)) return ts.ScriptKind.JSX;
  return ts.ScriptKind.JS;
}

function jsDocs(node: ts.Node): ts.JSDoc[] {
  return ts.getJSDocCommentsAndTags(node).filter((d): d is ts.JSDoc => ts.isJSDoc(d));
}

function hasDoc(node: ts.Node): boolean {
  return jsDocs(node).some((doc) => {
    const text = ts.getTextOfJSDocComment(doc.comment)?.trim() ?? "";
    // A block of tags only (`@param x`, `@returns`) documents too; an empty `/** */` not.
    return text !== "" || (doc.tags?.length ?? 0) > 0;
  });
}

function isPrivateDoc(node: ts.Node): boolean {
  for (const doc of jsDocs(node))
    for (const tag of doc.tags ?? []) {
      const name = tag.tagName.text;
      if (name === "private" || name === "internal" || name === "ignore") return true;
      if (name === "api" && /\bprivate\b/.test(ts.getTextOfJSDocComment(tag.comment) ?? ""))
        return true;
    }
  return false;
}

function hasModifier(node: ts.Node, kind: ts.SyntaxKind): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);
}

/** `module.exports` or `exports`. */
function isModuleExports(node: ts.Expression): boolean {
  if (ts.isIdentifier(node)) return node.text === "exports";
  return (
    ts.isPropertyAccessExpression(node) &&
    ts.isIdentifier(node.expression) &&
    node.expression.text === "module" &&
    node.name.text === "exports"
  );
}

/** The targets and final value of `a = b = c = value`. */
function assignmentChain(expr: ts.Expression): { targets: ts.Expression[]; value: ts.Expression } {
  const targets: ts.Expression[] = [];
  let value = expr;
  while (ts.isBinaryExpression(value) && value.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
    targets.push(value.left);
    value = value.right;
  }
  return { targets, value };
}

function isRequireCall(node: ts.Expression): boolean {
  return (
    ts.isCallExpression(node) &&
    ts.isIdentifier(node.expression) &&
    node.expression.text === "require"
  );
}

function isDefinition(node: ts.Expression): boolean {
  return (
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isClassExpression(node) ||
    ts.isObjectLiteralExpression(node)
  );
}

let libInterfaces: Map<string, Map<string, boolean>> | null = null;

/**
 * Members of a global interface of TypeScript's standard library (lib.dom.d.ts, lib.es*.d.ts,
 * shipped with the compiler) and whether each has a doc comment, read once on first use.
 */
export function libMemberDocs(name: string): Array<[string, boolean]> {
  if (!libInterfaces) {
    libInterfaces = new Map();
    const dir = path.dirname(createRequire(import.meta.url).resolve("typescript"));
    for (const file of readdirSync(dir)) {
      if (!/^lib\.(dom|es\d+|es5|esnext)[\w.]*\.d\.ts$/.test(file)) continue;
      const lib = ts.createSourceFile(
        file,
        readFileSync(path.join(dir, file), "utf8"),
        ts.ScriptTarget.Latest,
        true,
      );
      for (const statement of lib.statements) {
        if (!ts.isInterfaceDeclaration(statement)) continue;
        const members = libInterfaces.get(statement.name.text) ?? new Map<string, boolean>();
        for (const member of statement.members)
          if (member.name && ts.isIdentifier(member.name))
            members.set(member.name.text, members.get(member.name.text) || hasDoc(member));
        libInterfaces.set(statement.name.text, members);
      }
    }
  }
  return [...(libInterfaces.get(name) ?? new Map<string, boolean>())];
}

/** One JavaScript or TypeScript file's syntax tree, with parent links. */
function parseFile(fileName: string, text: string): ts.SourceFile {
  return ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, scriptKind(fileName));
}

/** The named members an interface or class declares itself, and whether each is documented. */
function ownMemberDocs(decl: ts.InterfaceDeclaration | ts.ClassDeclaration): MemberDocs {
  const members: MemberDocs = [];
  for (const member of decl.members as ts.NodeArray<ts.ClassElement | ts.TypeElement>)
    if (member.name && (ts.isIdentifier(member.name) || ts.isStringLiteral(member.name)))
      members.push([member.name.text, hasDoc(member)]);
  return members;
}

/** Members of a type, by name, and whether each has a doc comment. */
export type MemberDocs = Array<[string, boolean]>;

/**
 * The members of a type another file of the project declares: `specifier` as written in
 * the importing file's `import`, `name` the imported (not local) name; null when unknown.
 */
export type ImportedTypeDocs = (specifier: string, name: string) => MemberDocs | null;

/** The interfaces and classes declared at the top of one file, with their own members' docs. */
export function declaredTypeDocs(fileName: string, text: string): Map<string, MemberDocs> {
  const source = parseFile(fileName, text);
  const types = new Map<string, MemberDocs>();
  for (const statement of source.statements)
    if (
      (ts.isInterfaceDeclaration(statement) || ts.isClassDeclaration(statement)) &&
      statement.name
    ) {
      const members = types.get(statement.name.text) ?? [];
      types.set(statement.name.text, [...members, ...ownMemberDocs(statement)]);
    }
  return types;
}

/** Local declarations by name, with the node their doc comment sits on. */
type Locals = Map<string, { node: ts.Node; value: ts.Node | undefined }>;

function localDeclarations(source: ts.SourceFile): Locals {
  const locals: Locals = new Map();
  for (const statement of source.statements) {
    if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isEnumDeclaration(statement)) &&
      statement.name
    )
      locals.set(statement.name.text, { node: statement, value: statement });
    else if (ts.isVariableStatement(statement))
      for (const decl of statement.declarationList.declarations)
        if (ts.isIdentifier(decl.name))
          locals.set(decl.name.text, { node: statement, value: decl.initializer });
  }
  return locals;
}

/** Imported names: the module and the name it exports (null: default or namespace). */
type ImportedNames = Map<string, { specifier: string; name: string | null }>;

function importedNames(source: ts.SourceFile): ImportedNames {
  const imported: ImportedNames = new Map();
  for (const statement of source.statements)
    if (
      ts.isImportDeclaration(statement) &&
      statement.importClause &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      const clause = statement.importClause;
      const specifier = statement.moduleSpecifier.text;
      if (clause.name) imported.set(clause.name.text, { specifier, name: null });
      if (clause.namedBindings && ts.isNamedImports(clause.namedBindings))
        for (const element of clause.namedBindings.elements)
          imported.set(element.name.text, {
            specifier,
            name: (element.propertyName ?? element.name).text,
          });
      else if (clause.namedBindings)
        imported.set(clause.namedBindings.name.text, { specifier, name: null });
    }
  return imported;
}

/** A CommonJS assignment chain at the top of a file (`a = b = value`). */
interface ExportChain {
  statement: ts.Node;
  targets: ts.Expression[];
  value: ts.Expression;
}

/**
 * CommonJS: which local names are the exported object (`var app = exports = module.exports =
 * {}`), and the file's assignment chains.
 */
function commonJsExports(source: ts.SourceFile): { exported: Set<string>; chains: ExportChain[] } {
  const exported = new Set<string>();
  const chains: ExportChain[] = [];
  for (const statement of source.statements) {
    if (ts.isExpressionStatement(statement)) {
      const chain = assignmentChain(statement.expression);
      if (chain.targets.length > 0) chains.push({ statement, ...chain });
    } else if (ts.isVariableStatement(statement)) {
      for (const decl of statement.declarationList.declarations) {
        if (!decl.initializer || !ts.isIdentifier(decl.name)) continue;
        const chain = assignmentChain(decl.initializer);
        if (chain.targets.some(isModuleExports)) {
          exported.add(decl.name.text);
          chains.push({ statement, targets: chain.targets, value: chain.value });
        }
      }
    }
  }
  for (const { targets, value } of chains)
    if (targets.some(isModuleExports)) {
      if (ts.isIdentifier(value)) exported.add(value.text);
      for (const target of targets) if (ts.isIdentifier(target)) exported.add(target.text);
    }
  exported.delete("exports");
  return { exported, chains };
}

/**
 * Public symbols of one file's text. `importedTypes` reads the interfaces and classes that
 * other files of the project declare, for the docs a member inherits from them.
 */
export function jsDocSymbols(
  fileName: string,
  text: string,
  importedTypes?: ImportedTypeDocs,
): DocSymbol[] {
  const source = parseFile(fileName, text);
  const out: DocSymbol[] = [];
  const seen = new Map<string, DocSymbol>();
  const lineOf = (node: ts.Node) =>
    source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const add = (name: string, node: ts.Node, docNodes: ts.Node[], inherited = false) => {
    const last = name.split(".").pop() ?? name;
    if (last.startsWith("_") || last.startsWith("#")) return;
    const earlier = seen.get(name);
    if (earlier) {
      // Overloads (`export function f(a: string): …; export function f(…) {…}`) and
      // merged declarations are one symbol, documented when any of them is.
      if (!docNodes.some(isPrivateDoc) && (inherited || docNodes.some(hasDoc)))
        earlier.documented = true;
      return;
    }
    if (docNodes.some(isPrivateDoc)) return;
    const symbol = { name, line: lineOf(node), documented: inherited || docNodes.some(hasDoc) };
    seen.set(name, symbol);
    out.push(symbol);
  };

  const locals = localDeclarations(source);
  const imported = importedNames(source);
  const importedDocs = (base: string): MemberDocs => {
    const from = imported.get(base);
    if (!from?.name || !importedTypes) return [];
    return importedTypes(from.specifier, from.name) ?? [];
  };

  /**
   * Members of the interfaces and classes a class implements or extends, by name: documented
   * or not. Read where that is possible without a type checker: types declared in this file,
   * types imported by name from another file of the project (`importedTypes`; their own
   * members), and global types of TypeScript's standard library (`implements URL`) when the
   * name is neither declared nor imported here. An implementing or overriding member shows the
   * inherited doc in editors and TypeDoc.
   */
  const heritageCache = new Map<ts.Node, Map<string, boolean>>();
  function inheritedDocs(node: ts.ClassLikeDeclaration, depth = 0): Map<string, boolean> {
    const cached = heritageCache.get(node);
    if (cached) return cached;
    const docs = new Map<string, boolean>();
    heritageCache.set(node, docs);
    for (const clause of node.heritageClauses ?? [])
      for (const type of clause.types) {
        if (!ts.isIdentifier(type.expression) || depth > 8) continue;
        const base = type.expression.text;
        const declared = source.statements.filter(
          (s): s is ts.InterfaceDeclaration | ts.ClassDeclaration =>
            (ts.isInterfaceDeclaration(s) || ts.isClassDeclaration(s)) && s.name?.text === base,
        );
        const members =
          declared.length > 0
            ? declared.flatMap((d) => memberDocs(d, depth))
            : imported.has(base)
              ? importedDocs(base)
              : locals.has(base)
                ? []
                : libMemberDocs(base);
        for (const [name, documented] of members)
          if (documented || !docs.has(name))
            docs.set(name, documented || (docs.get(name) ?? false));
      }
    return docs;
  }
  function memberDocs(
    decl: ts.InterfaceDeclaration | ts.ClassDeclaration,
    depth: number,
  ): Array<[string, boolean]> {
    const own = ownMemberDocs(decl);
    const inherited = ts.isClassDeclaration(decl) ? [...inheritedDocs(decl, depth + 1)] : [];
    if (ts.isInterfaceDeclaration(decl))
      for (const clause of decl.heritageClauses ?? [])
        for (const type of clause.types)
          if (ts.isIdentifier(type.expression)) {
            const name = type.expression.text;
            const parents = source.statements.filter(
              (s): s is ts.InterfaceDeclaration =>
                ts.isInterfaceDeclaration(s) && s.name.text === name,
            );
            if (depth < 8) for (const p of parents) inherited.push(...memberDocs(p, depth + 1));
          }
    return [...own, ...inherited];
  }

  /** A local defined in this file (not a `require`d value). */
  const ownLocal = (name: string) => {
    const local = locals.get(name);
    if (!local) return undefined;
    let value = local.value as ts.Expression | undefined;
    if (value && ts.isBinaryExpression(value)) value = assignmentChain(value).value;
    if (value && (isRequireCall(value) || ts.isPropertyAccessExpression(value))) return undefined;
    return local;
  };

  const classMembers = (prefix: string, node: ts.ClassLikeDeclaration) => {
    for (const member of node.members) {
      if (
        !(
          ts.isMethodDeclaration(member) ||
          ts.isPropertyDeclaration(member) ||
          ts.isGetAccessorDeclaration(member) ||
          ts.isSetAccessorDeclaration(member)
        ) ||
        !member.name ||
        !(ts.isIdentifier(member.name) || ts.isStringLiteral(member.name))
      )
        continue;
      if (
        hasModifier(member, ts.SyntaxKind.PrivateKeyword) ||
        hasModifier(member, ts.SyntaxKind.ProtectedKeyword)
      )
        continue;
      // A field is a property, not a method, unless its value is a function.
      if (
        ts.isPropertyDeclaration(member) &&
        !(
          member.initializer &&
          (ts.isArrowFunction(member.initializer) || ts.isFunctionExpression(member.initializer))
        )
      )
        continue;
      const inherited = inheritedDocs(node).get(member.name.text) ?? false;
      add(`${prefix}.${member.name.text}`, member, [member], inherited);
    }
  };

  const { exported, chains } = commonJsExports(source);

  /** `X.name`, `X.prototype.name` or `exports.name` with X exported: the symbol's name. */
  const memberName = (target: ts.Expression): string | null => {
    if (!ts.isPropertyAccessExpression(target) && !ts.isElementAccessExpression(target))
      return null;
    const name = ts.isPropertyAccessExpression(target)
      ? target.name.text
      : ts.isStringLiteral(target.argumentExpression)
        ? target.argumentExpression.text
        : null;
    if (name === null) return null;
    let owner = target.expression;
    if (isModuleExports(owner)) return name;
    if (ts.isPropertyAccessExpression(owner) && owner.name.text === "prototype")
      owner = owner.expression;
    if (ts.isIdentifier(owner) && exported.has(owner.text)) return `${owner.text}.${name}`;
    return null;
  };

  moduleStatementSymbols();
  commonJsSymbols();

  /** The ES module exports and CommonJS `defineGetter`-style calls, statement by statement. */
  function moduleStatementSymbols(): void {
    for (const statement of source.statements) {
      // --- ES modules
      if (
        (ts.isFunctionDeclaration(statement) ||
          ts.isClassDeclaration(statement) ||
          ts.isInterfaceDeclaration(statement) ||
          ts.isTypeAliasDeclaration(statement) ||
          ts.isEnumDeclaration(statement) ||
          ts.isModuleDeclaration(statement)) &&
        hasModifier(statement, ts.SyntaxKind.ExportKeyword)
      ) {
        const name =
          statement.name && ts.isIdentifier(statement.name) ? statement.name.text : "default";
        add(name, statement, [statement]);
        if (ts.isClassDeclaration(statement)) classMembers(name, statement);
        continue;
      }
      if (
        ts.isVariableStatement(statement) &&
        hasModifier(statement, ts.SyntaxKind.ExportKeyword)
      ) {
        for (const decl of statement.declarationList.declarations)
          if (ts.isIdentifier(decl.name)) add(decl.name.text, decl, [statement, decl]);
        continue;
      }
      if (ts.isExportDeclaration(statement)) {
        if (statement.moduleSpecifier || !statement.exportClause) continue; // re-export
        if (ts.isNamedExports(statement.exportClause))
          for (const element of statement.exportClause.elements) {
            const local = locals.get((element.propertyName ?? element.name).text);
            if (!local) continue;
            add(element.name.text, element, [local.node, statement]);
            if (ts.isClassDeclaration(local.node)) classMembers(element.name.text, local.node);
          }
        continue;
      }
      if (ts.isExportAssignment(statement)) {
        const local = ts.isIdentifier(statement.expression)
          ? ownLocal(statement.expression.text)
          : undefined;
        if (ts.isIdentifier(statement.expression) && !local) continue;
        add("default", statement, local ? [local.node, statement] : [statement]);
        continue;
      }
      // --- CommonJS calls: defineGetter(req, "protocol", function protocol() {…})
      if (ts.isExpressionStatement(statement) && ts.isCallExpression(statement.expression)) {
        const [owner, key, fn] = statement.expression.arguments;
        if (
          owner &&
          key &&
          fn &&
          ts.isIdentifier(owner) &&
          exported.has(owner.text) &&
          ts.isStringLiteral(key) &&
          (ts.isFunctionExpression(fn) ||
            ts.isArrowFunction(fn) ||
            ts.isObjectLiteralExpression(fn))
        )
          add(`${owner.text}.${key.text}`, statement, [statement]);
      }
    }
  }

  /** CommonJS assignments: `module.exports = …`, `exports.name = …`, `X.prototype.name = …`. */
  function commonJsSymbols(): void {
    for (const { statement, targets, value } of chains) {
      if (targets.some(isModuleExports)) {
        // The module itself: its value's definition carries the doc.
        if (ts.isIdentifier(value)) {
          const local = ownLocal(value.text);
          if (local) {
            add(value.text, statement, [local.node, statement]);
            if (ts.isClassDeclaration(local.node)) classMembers(value.text, local.node);
            if (
              local.value &&
              ts.isExpression(local.value as ts.Expression) &&
              ts.isObjectLiteralExpression(local.value as ts.Expression)
            )
              objectMembers(value.text, local.value as ts.ObjectLiteralExpression);
          }
        } else if (ts.isObjectLiteralExpression(value)) objectMembers(null, value);
        else if (isDefinition(value)) {
          const name =
            (ts.isFunctionExpression(value) || ts.isClassExpression(value)) && value.name
              ? value.name.text
              : "module.exports";
          add(name, statement, [statement, value]);
          if (ts.isClassExpression(value)) classMembers(name, value);
        }
        continue;
      }
      // An alias chain (`res.contentType = res.type = function contentType(…)`) is one
      // function under several names: one symbol, under the first name, as a re-export counts
      // where it is defined.
      const name = targets.map(memberName).find((n) => n !== null);
      if (!name) continue;
      if (ts.isIdentifier(value)) {
        const local = ownLocal(value.text);
        if (local) add(name, statement, [statement, local.node]);
      } else if (!ts.isPropertyAccessExpression(value) && !isRequireCall(value))
        add(name, statement, [statement, value]);
    }
  }

  function objectMembers(prefix: string | null, literal: ts.ObjectLiteralExpression): void {
    for (const property of literal.properties) {
      if (!property.name || !(ts.isIdentifier(property.name) || ts.isStringLiteral(property.name)))
        continue;
      const name = prefix ? `${prefix}.${property.name.text}` : property.name.text;
      const target = ts.isShorthandPropertyAssignment(property)
        ? property.name
        : ts.isPropertyAssignment(property)
          ? property.initializer
          : null;
      if (target && ts.isIdentifier(target)) {
        const local = ownLocal(target.text);
        if (local) add(name, property, [property, local.node]);
        continue;
      }
      if (target && (isRequireCall(target) || ts.isPropertyAccessExpression(target))) continue;
      add(name, property, [property]);
    }
  }

  out.sort((a, b) => a.line - b.line);
  return out;
}
