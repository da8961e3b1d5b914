"""The lesson format, read: a section file as the program its page shows.

A section file tells its lesson top to bottom, the way a keras-io example does:

    \"\"\"Title.

    Why the lesson matters (Markdown).
    \"\"\"

    import ...                       # the setup: shown first, as the page's first code
    from harness import Lesson, section   # the harness: never shown

    @section(3, "slug", "Title", shows="...")
    def lesson_name(lesson: Lesson, workdir: pathlib.Path):
        lesson.md(\"\"\"
        ## A step's heading
        Why it matters.
        \"\"\")
        ...                          # the reader's code: shown, run as it is
        run = lesson.shell("python -m kauldron.main --cfg=configs/x.py")   # a shell block
        with lesson.checks():        # the step's checks, after its code: folded under it
            lesson.check(...)

    def helper_for_the_checks(...):  # below the lesson: how it checks itself (folded)
        ...

The body of the lesson function is never called: it is the page's program, which the
runner (harness/teaching.py) runs block by block, as a notebook runs cells, with `lesson`
and `workdir` set. The code a page shows never names `lesson`; a statement that does is
one of the three above, or the file is refused, saying where. `workdir` (when the lesson
takes it) is a fresh directory; on the page and in the notebook, a first cell makes it.

`read` splits a file into a `Program`; the pages, the notebook, the runner and the catalog read it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
import re
import textwrap
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository
SECTIONS_DIR = ROOT / "sections"
SECTION_FILES = "s[0-9][0-9]_*.py"
# A step whose heading starts so is a digression: it comes last, and pages fold it.
FURTHER = "Going further: "
# Imports a page leaves out: the harness is not the reader's.
HARNESS_IMPORT = re.compile(r"^(from harness(\.\w+)* import .*|import harness(\.\w+)*)$")
# The experiment's own files, which pages show where they are first used.
EXPERIMENT_PACKAGES = ("configs", "sections.parts")

# The first cell of a page that writes files: the directory it writes in, which shell
# commands see as $WORKDIR. The runner gives each lesson its own instead.
WORKDIR_CELL = '''import os
import pathlib
import tempfile

# Everything this page writes goes in a new directory; shell commands see it as $WORKDIR.
workdir = pathlib.Path(tempfile.mkdtemp(prefix="{prefix}-"))
os.environ["WORKDIR"] = str(workdir)'''


class LessonSourceError(ValueError):
    """A section file that does not have the shape of a lesson (the message says where)."""


@dataclasses.dataclass
class ShownFile:
    """A file of the experiment (configs/, sections/parts/) a page shows, whole."""

    path: str  # relative to the repository
    text: str


@dataclasses.dataclass
class Block:
    """Consecutive statements of a step that a page shows alike: "python" (the reader's
    code), "shell" (one `lesson.shell(...)`: the command is shown) or "checks" (a
    `with lesson.checks():` block, folded under the step)."""

    kind: str
    code: str  # python and checks: the source, dedented; shell: the command as typed
    line: int  # where it starts in the file: the runner records its output under it
    statements: list[ast.stmt] = dataclasses.field(repr=False)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # a shell block's keywords

    @property
    def shown(self) -> bool:
        return self.kind != "checks"


@dataclasses.dataclass
class Step:
    heading: str
    prose: str  # Markdown: the heading line, then why the step matters
    line: int
    blocks: list[Block]
    files: list[ShownFile] = dataclasses.field(default_factory=list)  # first used here

    @property
    def further(self) -> bool:
        """A digression: the page folds it at its end, under its heading (FURTHER)."""
        return self.heading.startswith(FURTHER)

    @property
    def checks_code(self) -> str:
        return "\n\n".join(block.code for block in self.blocks if block.kind == "checks")


@dataclasses.dataclass
class Program:
    path: pathlib.Path
    call: tuple[list[Any], dict[str, Any]]  # the @section(...) arguments, as written
    title: str
    intro: str  # the module docstring without its first paragraph (the title)
    setup: str  # the code above the lesson function, as a page shows it
    setup_files: list[ShownFile]  # the experiment's files the setup uses and no step does
    uses_workdir: bool
    steps: list[Step]
    helpers: str  # below the lesson function: how the lesson checks itself

    @property
    def source(self) -> str:
        """The file, relative to the repository."""
        return str(self.path.relative_to(ROOT))

    def workdir_cell(self, stem: str) -> str | None:
        return WORKDIR_CELL.format(prefix=stem) if self.uses_workdir else None


def section_files(directory: pathlib.Path = SECTIONS_DIR) -> list[pathlib.Path]:
    return sorted(directory.glob(SECTION_FILES))


def section_calls(path: pathlib.Path) -> list[tuple[tuple[list[Any], dict[str, Any]], list[str]]]:
    """For every `@section(...)` in a file, without importing it: its arguments, as
    literals, and the commands of its shell blocks (top-level `lesson.shell("...")`
    statements, as the format has them), as typed."""
    tree = ast.parse(path.read_text())
    return [(_section_call(function), [inspect.cleandoc(node.value.args[0].value) for node in function.body
                                       if _lesson_call(node, "shell") and node.value.args
                                       and isinstance(node.value.args[0], ast.Constant)])
            for function in _lesson_functions(tree)]


def _lesson_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef) and _section_decorator(node)]


def _section_decorator(function: ast.FunctionDef) -> ast.Call | None:
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "section":
            return decorator
    return None


def _section_call(function: ast.FunctionDef) -> tuple[list[Any], dict[str, Any]]:
    decorator = _section_decorator(function)
    return ([ast.literal_eval(a) for a in decorator.args],
            {k.arg: ast.literal_eval(k.value) for k in decorator.keywords})


def read(path: pathlib.Path) -> Program:
    """Splits a section file into its introduction, setup, steps (each a list of blocks)
    and helpers; refuses one that does not follow the format, naming the line."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    where = path.name
    functions = _lesson_functions(tree)
    if len(functions) != 1:
        raise LessonSourceError(f"{where}: expected one @section function, found {len(functions)}")
    (function,) = functions
    params = [a.arg for a in function.args.args]
    if params not in (["lesson"], ["lesson", "workdir"]):
        raise LessonSourceError(f"{where}:{function.lineno}: a lesson function takes (lesson) or (lesson, workdir)")

    body = list(function.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    steps: list[Step] = []
    for node in body:
        if _lesson_call(node, "md"):
            steps.append(_step(node, where))
            continue
        if not steps:
            raise LessonSourceError(f"{where}:{node.lineno}: a lesson opens with lesson.md(...), its first step")
        kind, options = _kind(node, where)
        blocks = steps[-1].blocks
        if kind == "python" and blocks and blocks[-1].kind == "python":
            blocks[-1].statements.append(node)
        else:
            blocks.append(Block(kind, "", node.lineno, [node], options))
    if not steps:
        raise LessonSourceError(f"{where}: a lesson has at least one step (lesson.md)")
    for step, after in zip(steps, steps[1:]):
        if step.further and not after.further:
            raise LessonSourceError(f"{where}:{after.line}: a step comes before every '{FURTHER}...' step: the page"
                                    " folds those at its end")
    for index, step in enumerate(steps):
        code_at = [i for i, block in enumerate(step.blocks) if block.kind != "checks"]  # checks before: a guard
        if late := [block for block in step.blocks[code_at[0]:code_at[-1]] if block.kind == "checks"] if code_at else []:
            raise LessonSourceError(f"{where}:{late[0].line}: code follows a step's checks: its page folds them under it")
        for block in step.blocks:
            needed_by = block.options.get("needed_by")
            if needed_by is not None and not (block.options.get("background")
                                              and needed_by in [later.heading for later in steps[index + 1:]]):
                raise LessonSourceError(f"{where}:{block.statements[0].lineno}: needed_by names a later step's heading,"
                                        " for a command in the background")
    for step in steps:
        for block in step.blocks:
            block.line = _first_line(block.statements[0])
            block.code = _block_code(block, lines)

    docstring = ast.get_docstring(tree, clean=True) or ""
    title, _, intro = docstring.partition("\n\n")
    setup_start = tree.body[0].end_lineno + 1 if tree.body and _is_docstring(tree.body[0]) else 1
    setup_lines = [line for line in lines[setup_start - 1:_first_line(function) - 1] if not HARNESS_IMPORT.match(line)]
    setup = _trimmed("\n".join(setup_lines))
    helpers = _trimmed("\n".join(lines[function.end_lineno:]))
    program = Program(path, _section_call(function), " ".join(title.split()), intro.strip(), setup, [],
                      "workdir" in params, steps, helpers)
    _place_shown_files(program, tree, function)
    return program


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _trimmed(code: str) -> str:
    """Dedented, without blank lines at either end."""
    return textwrap.dedent(code).strip("\n")


def _lesson_call(node: ast.AST, method: str) -> bool:
    """Whether `node` is the statement `lesson.<method>(...)`, or `name = lesson.<method>(...)`."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == method
            and getattr(value.func.value, "id", None) == "lesson")


def _names_lesson(node: ast.AST) -> int | None:
    """The line of the first mention of `lesson` in `node`, or None."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id == "lesson":
            return inner.lineno
    return None


def _outside_definitions(node: ast.AST):
    """The nodes of a statement, without the bodies of the functions and classes it defines."""
    yield node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        for child in ast.iter_child_nodes(node):
            yield from _outside_definitions(child)


def _step(node: ast.Expr, where: str) -> Step:
    (argument,) = node.value.args
    if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)) or node.value.keywords:
        raise LessonSourceError(f"{where}:{node.lineno}: lesson.md() takes one plain string (prose, not values)")
    prose = inspect.cleandoc(argument.value)
    if not prose.startswith("## "):
        raise LessonSourceError(f"{where}:{node.lineno}: a step's prose opens with its '## heading'")
    return Step(prose.splitlines()[0].removeprefix("## ").strip(), prose, node.lineno, [])


def _kind(node: ast.stmt, where: str) -> tuple[str, dict[str, Any]]:
    """What a statement of the lesson's body is: python, shell or checks."""
    if _lesson_call(node, "shell"):
        call = node.value
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Constant) or not isinstance(call.args[0].value, str):
            raise LessonSourceError(f"{where}:{node.lineno}: lesson.shell() takes the command as one plain string")
        if isinstance(node, ast.Assign) and not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise LessonSourceError(f"{where}:{node.lineno}: a shell command's result goes to one name")
        try:
            options = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        except ValueError:
            raise LessonSourceError(f"{where}:{node.lineno}: lesson.shell()'s options are literals") from None
        return "shell", options
    if (isinstance(node, ast.With) and len(node.items) == 1 and isinstance(node.items[0].context_expr, ast.Call)
            and isinstance(node.items[0].context_expr.func, ast.Attribute)
            and node.items[0].context_expr.func.attr == "checks"
            and getattr(node.items[0].context_expr.func.value, "id", None) == "lesson"):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Expr) and (_lesson_call(inner, "md") or _lesson_call(inner, "shell")):
                raise LessonSourceError(f"{where}:{inner.lineno}: lesson.md() and lesson.shell() go at the top level")
        return "checks", {}
    for inner in _outside_definitions(node):
        if isinstance(inner, ast.Return):
            raise LessonSourceError(f"{where}:{inner.lineno}: a lesson does not return: set lesson.summary in its checks")
    mention = _names_lesson(node)
    if mention is not None:
        raise LessonSourceError(f"{where}:{mention}: the code a page shows never names `lesson`: "
                                "checks, facts and figures go in a `with lesson.checks():` block")
    return "python", {}


def _block_code(block: Block, lines: list[str]) -> str:
    """A block's text: the comment lines just above its first statement, then the
    statements; a checks block's body; a shell block's command."""
    if block.kind == "shell":
        return inspect.cleandoc(block.statements[0].value.args[0].value)
    first, last = block.statements[0], block.statements[-1]
    if block.kind == "checks":
        return _trimmed("\n".join(lines[first.body[0].lineno - 1:last.end_lineno]))
    start = _first_line(first)
    while start > 1 and lines[start - 2].strip().startswith("#"):
        start -= 1
    return _trimmed("\n".join(lines[start - 1:last.end_lineno]))


# -- the experiment's files a page shows --------------------------------------------


def _experiment_module(module: str) -> pathlib.Path | None:
    """The file of a module of the experiment (`configs.digits`, `sections.parts.digits`)."""
    if not module.startswith(tuple(f"{package}." for package in EXPERIMENT_PACKAGES)):
        return None
    path = ROOT / (module.replace(".", "/") + ".py")
    return path if path.is_file() else None


def _imported_files(node: ast.AST) -> dict[str, pathlib.Path]:
    """name bound -> file, for the imports of the experiment's modules in `node`."""
    found = {}
    for inner in ast.walk(node):
        if isinstance(inner, ast.ImportFrom) and inner.module:
            for alias in inner.names:
                path = _experiment_module(f"{inner.module}.{alias.name}") or _experiment_module(inner.module)
                if path:
                    found[alias.asname or alias.name] = path
        elif isinstance(inner, ast.Import):
            for alias in inner.names:
                path = _experiment_module(alias.name)
                if path:
                    found[alias.asname or alias.name.split(".")[0]] = path
    return found


def _files_named(text: str) -> list[pathlib.Path]:
    """The experiment's files a shell command names: a path, or a module after `-m`."""
    found = [ROOT / match for match in re.findall(r"\b((?:configs|sections/parts)/\w+\.py)\b", text)]
    found += [path for module in re.findall(r"-m\s+([\w.]+)", text) if (path := _experiment_module(module))]
    return [path for path in found if path.is_file()]


def _with_what_they_import(paths: list[pathlib.Path]) -> list[pathlib.Path]:
    """The files, each followed by the experiment's files it imports (those first seen)."""
    ordered: list[pathlib.Path] = []

    def visit(path: pathlib.Path) -> None:
        if path in ordered:
            return
        ordered.append(path)
        for imported in _imported_files(ast.parse(path.read_text())).values():
            visit(imported)

    for path in paths:
        visit(path)
    return ordered


def _place_shown_files(program: Program, tree: ast.Module, function: ast.FunctionDef) -> None:
    """Attaches each experiment file the page's code uses to the first step that uses it
    (by a name its import binds, or a shell command naming it), with the files it imports."""
    setup_nodes = [node for node in tree.body if node.lineno < _first_line(function)]
    imported = {}
    for node in setup_nodes:
        imported.update(_imported_files(node))
    shown: set[pathlib.Path] = set()

    def attach(paths: list[pathlib.Path]) -> list[ShownFile]:
        new = [path for path in _with_what_they_import(paths) if path not in shown]
        shown.update(new)
        return [ShownFile(str(path.relative_to(ROOT)), path.read_text().strip("\n")) for path in new]

    for step in program.steps:
        used: list[pathlib.Path] = []
        for block in (b for b in step.blocks if b.shown):
            if block.kind == "shell":
                used += _files_named(block.code)
                continue
            names = {inner.id for node in block.statements for inner in ast.walk(node) if isinstance(inner, ast.Name)}
            names |= {inner.value.id for node in block.statements for inner in ast.walk(node)
                      if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)}
            used += [path for name, path in imported.items() if name in names]
            for node in block.statements:
                used += list(_imported_files(node).values())
        step.files = attach(used)
    program.setup_files = attach(list(imported.values()))
