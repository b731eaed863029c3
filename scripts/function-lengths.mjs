#!/usr/bin/env node
/*
 * Lists every function, method, accessor, constructor and arrow function in src/ and web/src/
 * whose body is longer than N lines (default 100), longest first, so the "no function body over
 * 150 lines, at most 2 over 100" figure can be re-measured.
 *
 * How it counts: a body's span is the lines from the one holding its opening brace to the one
 * holding its closing brace, both included (an arrow function with an expression body: from the
 * expression's first line to its last). Blank lines and comments in it count. A function's own
 * lines are its span less the lines strictly inside the bodies of the functions nested in it
 * (callbacks, closures, render props): those are counted for the nested function, which is
 * listed on its own, so a factory returning closures is not charged for them twice. The line a
 * nested function starts on and the one it ends on stay the outer function's.
 * `--inclusive` counts the whole span instead, nested functions and all.
 *
 *   node scripts/function-lengths.mjs               own lines over 100
 *   node scripts/function-lengths.mjs 80            own lines over 80
 *   node scripts/function-lengths.mjs --inclusive   whole spans over 100
 *   node scripts/function-lengths.mjs --check       also exit 1 when any is over 150 lines or
 *                                                   more than 2 are over 100
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const FOLDERS = ["src", "web/src"];
const MAX = 150;
const MAX_OVER_100 = 2;

/** Every .ts/.tsx/.mts/.cts file under `dir` (declaration files left out). */
function sourceFiles(dir) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sourceFiles(full));
    else if (/\.[mc]?tsx?$/.test(entry.name) && !/\.d\.[mc]?ts$/.test(entry.name)) found.push(full);
  }
  return found;
}

/** A readable name: the declaration's own, else the variable or property it is assigned to. */
function nameOf(node, file) {
  const own = node.name && ts.isIdentifier(node.name) ? node.name.text : undefined;
  const owner =
    node.parent && (ts.isClassLike(node.parent) || ts.isObjectLiteralExpression(node.parent))
      ? node.parent
      : undefined;
  const ownerName = owner?.name?.text ?? (owner && ts.isClassLike(owner) ? "<class>" : undefined);
  if (ts.isConstructorDeclaration(node)) return `${ownerName ?? "<class>"}.constructor`;
  if (own && ownerName) return `${ownerName}.${own}`;
  if (node.name) return own ?? node.name.getText(file);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) {
    return parent.name.getText(file);
  }
  if (ts.isCallExpression(parent)) {
    return `<anonymous, argument of ${parent.expression.getText(file).slice(0, 40)}>`;
  }
  return "<anonymous>";
}

function lineOf(file, pos) {
  return file.getLineAndCharacterOfPosition(pos).line + 1;
}

/** The first and last line (1-based) of a function's body. */
function span(file, node) {
  return [lineOf(file, node.body.getStart(file)), lineOf(file, node.body.getEnd())];
}

/** The functions directly nested in `node` (not those nested in them). */
function nestedFunctions(node) {
  const found = [];
  const visit = (child) => {
    if (ts.isFunctionLike(child) && child.body) found.push(child);
    else ts.forEachChild(child, visit);
  };
  ts.forEachChild(node.body, visit);
  return found;
}

/** Every function-like with a body in `full`: { file, line, name, lines }. */
function bodies(full, inclusive) {
  const text = readFileSync(full, "utf8");
  const kind = full.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const file = ts.createSourceFile(full, text, ts.ScriptTarget.Latest, true, kind);
  const found = [];
  const visit = (node, outer) => {
    let name = outer;
    if (ts.isFunctionLike(node) && node.body) {
      const [first, last] = span(file, node);
      let lines = last - first + 1;
      if (!inclusive) {
        for (const nested of nestedFunctions(node)) {
          const [from, to] = span(file, nested);
          lines -= Math.max(0, to - from - 1);
        }
      }
      const own = nameOf(node, file);
      name = outer && own.startsWith("<") ? `${outer} > ${own}` : own;
      found.push({
        file: path.relative(root, full),
        line: lineOf(file, node.getStart(file)),
        name,
        lines,
      });
    }
    ts.forEachChild(node, (child) => visit(child, name));
  };
  visit(file, undefined);
  return found;
}

const args = process.argv.slice(2);
const check = args.includes("--check");
const inclusive = args.includes("--inclusive");
const limit = Number(args.find((arg) => /^\d+$/.test(arg)) ?? 100);

const all = FOLDERS.flatMap((folder) => sourceFiles(path.join(root, folder))).flatMap((full) =>
  bodies(full, inclusive),
);
const over = all.filter((body) => body.lines > limit).sort((a, b) => b.lines - a.lines);
for (const body of over)
  console.log(`${String(body.lines).padStart(4)}  ${body.name}  ${body.file}:${body.line}`);
const over100 = all.filter((body) => body.lines > 100).length;
const over150 = all.filter((body) => body.lines > MAX).length;
console.log(`\n${over.length} over ${limit} lines; ${over100} over 100, ${over150} over ${MAX}`);
if (check && (over150 > 0 || over100 > MAX_OVER_100)) {
  console.error(`More than ${MAX_OVER_100} bodies over 100 lines, or one over ${MAX}.`);
  process.exit(1);
}
