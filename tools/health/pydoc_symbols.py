"""Public Python symbols and whether each has a docstring, read with the ast module.

Reads a JSON list of files ({"path", "text"}) on stdin and prints
{"symbols": [{"path", "name", "line", "documented"}], "errors": [{"path", "error"}]}.
Public: module-level functions and classes, and methods of public classes, whose names do
not start with "_" (dunder methods are not counted), filtered by the module's __all__ when
it lists names. Used by src/health/documentation.ts; nothing here imports the code.
"""
import ast
import json
import sys


def module_all(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                names = [
                    e.value for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
                return set(names)
    return None


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def symbols(path, tree):
    exported = module_all(tree)
    out = []
    for node in tree.body:
        if not isinstance(node, DEFS) or node.name.startswith("_"):
            continue
        if exported is not None and node.name not in exported:
            continue
        out.append({"path": path, "name": node.name, "line": node.lineno,
                    "documented": bool(ast.get_docstring(node))})
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, DEFS) and not member.name.startswith("_"):
                    out.append({"path": path, "name": node.name + "." + member.name,
                                "line": member.lineno,
                                "documented": bool(ast.get_docstring(member))})
    return out


def main():
    result = {"symbols": [], "errors": []}
    for entry in json.load(sys.stdin):
        path = entry["path"]
        try:
            tree = ast.parse(entry["text"], filename=path)
        except (SyntaxError, ValueError) as error:
            result["errors"].append({"path": path, "error": str(error)[:200]})
            continue
        result["symbols"].extend(symbols(path, tree))
    json.dump(result, sys.stdout)


main()
