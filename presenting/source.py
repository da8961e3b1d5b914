"""What a section file holds, read without importing it (importing would pull in Kauldron).

A section file tells its lesson top to bottom: the module docstring (the title, then an
introduction), the imports and the parts the lesson defines, then the `@section` lesson
function, a sequence of steps each opened by `lesson.md(...)`, then the helpers the
lesson uses to check itself. `read_lesson` splits the file at those places with `ast`, so
the page and the notebook show the same prose and code the terminal runs.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
import re
import textwrap

from sections import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Calls on the lesson that record a claim, a fact or a figure, and calls of helpers given
# the lesson (they check with it): on a page the checks are listed after the step's output,
# so the code shows what the lesson does, not its bookkeeping.
BOOKKEEPING = {"check", "check_equal", "check_close", "check_raises", "skip_check", "fact", "plot"}
# Imports of the tutorial's own machinery, which a page leaves out of the code it shows.
MACHINERY = re.compile(r"^from sections\.(lesson|registry|children|kept_checkpoints|figures) import .*$")
# Shared modules of helpers that lessons check themselves with: a page shows, with the
# lesson's own helpers, those it imports from them.
CHECKING_MODULES = ("sections.recompute", "sections.resume", "sections.command_line")


class LessonSourceError(ValueError):
    """A section file that does not have the shape of a lesson (the message says where)."""


@dataclasses.dataclass
class Step:
    heading: str
    prose: str  # Markdown: the heading line, then why the step matters
    code: str  # what a page shows: the step's code without its bookkeeping
    runnable: str  # what a notebook runs: the step's code with its checks


@dataclasses.dataclass
class LessonSource:
    path: pathlib.Path
    intro: str  # the module docstring without its first line (the title)
    setup: str  # the imports and the parts the lesson defines, above the lesson function
    steps: list[Step]
    helpers: str  # below the lesson function: how the lesson checks itself
    helpers_imported: str  # the functions it imports from CHECKING_MODULES, each under its file's name
    configs: list[pathlib.Path]  # the config files the section imports (configs/*.py)
    parts: list[tuple[str, str, str]]  # (file, name, source) of the classes it imports from sections/shared.py or parts/
    programs: list[pathlib.Path]  # the child programs it starts (python -m sections.<name>)

    @property
    def shown_setup(self) -> str:
        """The setup as a page shows it: without the tutorial's own machinery."""
        lines = [line for line in self.setup.splitlines() if not MACHINERY.match(line)]
        return _trimmed("\n".join(lines))


def section_file(module: str) -> pathlib.Path:
    """The file of a section module named like `sections.s03_kontext`."""
    return ROOT / (module.replace(".", "/") + ".py")


def lesson_prose(path: pathlib.Path) -> str:
    """The module docstring without its first line (the title, which is shown above it)."""
    return registry.without_title(ast.get_docstring(ast.parse(path.read_text()), clean=False) or "")


def _trimmed(code: str) -> str:
    """Dedented, without blank lines at either end."""
    return textwrap.dedent(code).strip("\n")


def _lesson_call(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` is a statement `lesson.<name>(...)` with name in `names`."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr in names
            and getattr(node.value.func.value, "id", None) == "lesson")


def _bookkeeping(node: ast.AST) -> bool:
    """Whether `node` is a statement that records checks, facts or a figure: a call of
    `lesson.check*`, `.fact` or `.plot`, or of a helper given the lesson (`helper(lesson, ...)`),
    or a loop or block that does nothing else."""
    if _lesson_call(node, BOOKKEEPING):
        return True
    if isinstance(node, (ast.For, ast.While, ast.If, ast.With)):
        return all(_bookkeeping(inner) for inner in node.body + getattr(node, "orelse", []))
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and bool(node.value.args)
            and getattr(node.value.args[0], "id", None) == "lesson")


def _lesson_function(tree: ast.Module, path: pathlib.Path) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", None) == "section" for d in node.decorator_list):
            return node
    raise LessonSourceError(f"{path.name}: no @section function")


def _step_code(lines: list[str], statements: list[ast.stmt], *, shown: bool) -> str:
    """The source lines of `statements` (comments between them included); for a page
    (`shown`) without the bookkeeping calls, at any depth."""
    if not statements:
        return ""
    first, last = statements[0], statements[-1]
    start = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])])
    dropped: set[int] = set()
    if shown:
        for statement in statements:
            for node in ast.walk(statement):
                if _bookkeeping(node):
                    dropped.update(range(node.lineno, node.end_lineno + 1))
    kept = [lines[n - 1] for n in range(start, last.end_lineno + 1) if n not in dropped]
    return _trimmed("\n".join(kept))


def read_lesson(path: pathlib.Path) -> LessonSource:
    """Splits a section file into its introduction, setup, steps and helpers."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    function = _lesson_function(tree, path)
    params = [a.arg for a in function.args.args]
    if params != ["lesson"]:
        raise LessonSourceError(f"{path.name}: the lesson function must take one argument, `lesson`")

    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring
    if body and isinstance(body[-1], ast.Return):
        body = body[:-1]  # the summary line: bookkeeping for the terminal
    for node in body:
        if isinstance(node, ast.Return):
            raise LessonSourceError(f"{path.name}:{node.lineno}: only the last statement may return")
        for inner in ast.walk(node):
            if _lesson_call(inner, {"md"}) and inner is not node:
                raise LessonSourceError(f"{path.name}:{inner.lineno}: lesson.md() opens a step only at the top level")
    steps: list[Step] = []
    groups: list[tuple[ast.Expr | None, list[ast.stmt]]] = []
    for node in body:
        if _lesson_call(node, {"md"}):
            groups.append((node, []))
        elif groups:
            groups[-1][1].append(node)
        else:  # a lesson that does not open with a step: its code before the first one
            groups.append((None, [node]))
    for md, statements in groups:
        if md is None:
            steps.append(Step("", "", _step_code(lines, statements, shown=True), _step_code(lines, statements, shown=False)))
            continue
        (argument,) = md.value.args
        if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
            raise LessonSourceError(f"{path.name}:{md.lineno}: lesson.md() takes a plain string (prose, not values)")
        prose = inspect.cleandoc(argument.value)
        heading = prose.splitlines()[0].lstrip("#").strip() if prose else ""
        steps.append(Step(heading, prose, _step_code(lines, statements, shown=True),
                          _step_code(lines, statements, shown=False)))

    docstring = tree.body[0] if (tree.body and isinstance(tree.body[0], ast.Expr)
                                 and isinstance(tree.body[0].value, ast.Constant)) else None
    setup_start = docstring.end_lineno + 1 if docstring else 1
    function_start = min([function.lineno] + [d.lineno for d in function.decorator_list])
    setup = _trimmed("\n".join(lines[setup_start - 1:function_start - 1]))
    helpers = _trimmed("\n".join(lines[function.end_lineno:]))
    parts = [(module, alias.name) for node in tree.body if isinstance(node, ast.ImportFrom)
             and (module := node.module or "").startswith(("sections.shared", "sections.parts.")) for alias in node.names]
    parts += parts_named_in_configs(tree)
    configs = sorted(ROOT / "configs" / f"{alias.name}.py" for node in tree.body
                     if isinstance(node, ast.ImportFrom) and node.module == "configs" for alias in node.names)
    named = {node.value.removeprefix("sections.") for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and re.fullmatch(r"sections\.[a-z_]+", node.value)}
    named |= set(re.findall(r"`sections/([a-z_]+)\.py`", source)) - {"shared"}  # programs the prose names
    programs = sorted(ROOT / "sections" / f"{name}.py" for name in named)
    checking = [(node.module, alias.name) for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.module in CHECKING_MODULES for alias in node.names]
    return LessonSource(path, lesson_prose(path), setup, steps, helpers, functions_imported(checking), configs,
                        classes_imported(parts),
                        [program for program in programs if program.is_file()])


def parts_named_in_configs(tree: ast.Module) -> list[tuple[str, str]]:
    """(module, name) of what the lesson names through modules imported in konfig.imports()
    (`shared_cfg.MLP`, `finetune_cfg.LoadRenamed`): the parts its configs use."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("sections", "sections.parts"):
            for alias in node.names:
                if node.module == "sections.parts" or alias.name == "shared":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return [(aliases[node.value.id], node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases]


def classes_imported(names: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(file, class name, source) of those of the (module, name) imported that are classes:
    the parts (a model, a loss, a metric, a data source) a lesson uses from the modules
    that define them for the configs."""
    found = []
    for module in dict.fromkeys(module for module, _ in sorted(names)):
        path = ROOT / (module.replace(".", "/") + ".py")
        source = path.read_text()
        wanted = {name for m, name in names if m == module}
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef) and node.name in wanted:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                found.append((str(path.relative_to(ROOT)), node.name,
                              "\n".join(source.splitlines()[start - 1:node.end_lineno])))
    return found


def functions_imported(names: list[tuple[str, str]]) -> str:
    """The source of those of the (module, name) imported that are functions, each under a
    comment naming its file."""
    found = []
    for module in dict.fromkeys(module for module, _ in names):
        path = ROOT / (module.replace(".", "/") + ".py")
        source = path.read_text().splitlines()
        wanted = {name for m, name in names if m == module}
        for node in ast.parse("\n".join(source)).body:
            if isinstance(node, ast.FunctionDef) and node.name in wanted:
                found.append(f"# {path.relative_to(ROOT)}\n" + "\n".join(source[node.lineno - 1:node.end_lineno]))
    return "\n\n\n".join(found)
