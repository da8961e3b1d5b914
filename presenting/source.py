"""What a section file holds, read without importing it (importing would pull in Kauldron):
its lesson, the module docstring, and its code."""

from __future__ import annotations

import ast
import pathlib

from sections import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]


def section_file(module: str) -> pathlib.Path:
    """The file of a section module named like `sections.s03_kontext`."""
    return ROOT / (module.replace(".", "/") + ".py")


def lesson_prose(path: pathlib.Path) -> str:
    """The module docstring without its first line (the title, which is shown above it)."""
    return registry.without_title(ast.get_docstring(ast.parse(path.read_text()), clean=False) or "")


def section_code(path: pathlib.Path) -> str:
    """A section module's code: without its docstring (shown as the lesson) and without an
    `if __name__ == "__main__":` block (in a notebook that is true)."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    drop: set[int] = set()
    for node in tree.body:
        is_docstring = (node is tree.body[0] and isinstance(node, ast.Expr)
                        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
        is_main_block = (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                         and getattr(node.test.left, "id", None) == "__name__")
        if is_docstring or is_main_block:
            drop.update(range(node.lineno - 1, node.end_lineno))
    kept = [line for number, line in enumerate(lines) if number not in drop]
    return "\n".join(kept).strip("\n")
