/*
 * A TypeDoc plugin of the health-accuracy benchmark: it sets the reference's scope to the
 * service's definition of public API (src/health/doc-js.ts), which TypeDoc's options alone
 * cannot say. Removed before TypeDoc resolves the project (so typedoc-plugin-coverage does
 * not count them):
 * - names starting with `_` and symbols tagged `@api private` (the dox convention);
 * - CommonJS re-exports and aliases: `module.exports = require(…)`, `exports.x = other.y`,
 *   the inner names of an alias chain `a.x = a.y = function …`, and symbols defined only in
 *   another package (node_modules): the service counts a function once, where it is defined
 *   in the repository (TypeDoc's excludeReferences does this for ES re-exports only); a
 *   symbol without any declaration or source (TypeScript's stand-in for another package's
 *   untyped export) is one of these;
 * - JSDoc `@typedef {import("./x").X} X` type imports;
 * - fields assigned with `this.x = …`: properties, whose kind TypeDoc takes from the inferred
 *   type (a field that holds a function becomes a method).
 */
import { Converter, DeclarationReflection, ReflectionKind } from "typedoc";
import ts from "typescript";

function isAssignment(node) {
  return ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken;
}

/** True for a declaration that is not a definition the service counts. */
function outOfScope(decl) {
  if (decl.getSourceFile().fileName.includes("/node_modules/")) return true;
  if (ts.isJSDocTypedefTag(decl))
    return !!decl.typeExpression && ts.isJSDocTypeExpression(decl.typeExpression)
      ? ts.isImportTypeNode(decl.typeExpression.type)
      : false;
  let node = decl;
  if (
    (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) &&
    node.parent &&
    isAssignment(node.parent) &&
    node.parent.left === node
  )
    node = node.parent;
  if (!isAssignment(node)) return false;
  const target = node.left;
  if (
    (ts.isPropertyAccessExpression(target) || ts.isElementAccessExpression(target)) &&
    target.expression.kind === ts.SyntaxKind.ThisKeyword
  )
    return true;
  // The inner target of `a.x = a.y = value`: an alias of the first name.
  if (node.parent && isAssignment(node.parent) && node.parent.right === node) return true;
  let value = node.right;
  while (isAssignment(value)) value = value.right;
  return (
    ts.isPropertyAccessExpression(value) ||
    (ts.isCallExpression(value) &&
      ts.isIdentifier(value.expression) &&
      value.expression.text === "require")
  );
}

function apiPrivate(reflection) {
  // A function's comment sits on its signatures.
  return [reflection, ...(reflection.signatures ?? [])].some((r) => tagged(r));
}

function tagged(reflection) {
  return (reflection.comment?.blockTags ?? []).some(
    (tag) => tag.tag === "@api" && tag.content.some((part) => /\bprivate\b/.test(part.text)),
  );
}

export function load(app) {
  app.converter.on(
    Converter.EVENT_RESOLVE_BEGIN,
    (context) => {
      const project = context.project;
      const drop = Object.values(project.reflections).filter((reflection) => {
        // `__type`, the object type TypeDoc makes of a literal, is no name of the code's.
        if (
          !(reflection instanceof DeclarationReflection) ||
          reflection.kindOf(ReflectionKind.TypeLiteral)
        )
          return false;
        if (reflection.name.startsWith("_") || apiPrivate(reflection)) return true;
        const declarations = context.getSymbolFromReflection(reflection)?.declarations ?? [];
        // No declaration and no source: a symbol TypeScript made up from another package's
        // type (`exports.json = bodyParser.json` without that package's types).
        if (declarations.length === 0) return (reflection.sources ?? []).length === 0;
        return declarations.every(outOfScope);
      });
      for (const reflection of drop)
        if (project.getReflectionById(reflection.id)) project.removeReflection(reflection);
    },
    // Before TypeDoc's own resolve steps.
    200,
  );
}
