"""The house's size rules, held by CI: no module of the package over 450 lines, and every function
over 60 lines listed (a module past ~400 lines or a function past ~60 is asking to be split:
``STYLE.md``). Exit 1 when a module is over; functions are reported, not failed, so a long but
linear function (a table, a parser's one ``match``) can stay where splitting would hide its shape.

Usage: ``python scripts/check_sizes.py [--json]``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

MODULE_LIMIT = 450
FUNCTION_FLAG = 60
PACKAGE = Path(__file__).resolve().parent.parent / "openab_voice"


def module_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_functions(path: Path) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` for each function over the flag, docstring included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                length = child.end_lineno - child.lineno + 1
                if length > FUNCTION_FLAG:
                    found.append((name, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def main(argv: list[str]) -> int:
    modules = sorted(PACKAGE.rglob("*.py"))
    over = [(p, n) for p in modules if (n := module_lines(p)) > MODULE_LIMIT]
    flagged = [(p, name, n) for p in modules for name, n in long_functions(p)]
    root = PACKAGE.parent
    if "--json" in argv:
        report = {
            "module_limit": MODULE_LIMIT,
            "modules_over": {str(p.relative_to(root)): n for p, n in over},
            "modules_over_400": sum(1 for p in modules if module_lines(p) > 400),
            "function_flag": FUNCTION_FLAG,
            "functions_flagged": {f"{p.relative_to(root)}:{name}": n for p, name, n in flagged},
        }
        print(json.dumps(report, indent=2))
    else:
        for p, name, n in flagged:
            print(f"note: {p.relative_to(root)}: {name} is {n} lines (over {FUNCTION_FLAG})")
        for p, n in over:
            print(f"error: {p.relative_to(root)} is {n} lines (limit {MODULE_LIMIT})", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
