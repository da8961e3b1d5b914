"""The shape of a lesson, read from its file as the pages and the notebook read it: a
sequence of steps (a heading and why, a few lines of code), prose in the steps rather than
in print(), a page whose code uses only what it defines or imports from where a reader can,
and Kauldron's konfig Rule 0."""

import ast
import importlib.util
import pathlib
import sys

import pyflakes.api
import pyflakes.messages
import pyflakes.reporter
import pytest
from conftest import ROOT

from harness import lesson_format, registry

CATALOG = registry.catalog()
MOST_WORDS_PRINTED = 8  # a print() whose text says more is prose that belongs in the step
MOST_LINES_OF_CODE = 25  # a block the reader reads at once
# Where the code a page shows may import from: the standard library, installed packages,
# and the experiment's own files. Never the tutorial's machinery.
THE_TUTORIAL_S_OWN = ("harness", "runner", "presenting", "compat", "tests", "tutorial", "sections")
THE_EXPERIMENT_S = ("configs", "sections.parts")


def slug(info: registry.SectionInfo) -> str:
    return info.slug


def read(info: registry.SectionInfo) -> lesson_format.Program:
    return lesson_format.read(registry.section_file(info))


def shown_program(info: registry.SectionInfo) -> str:
    """The code the page shows, in order, as one program (a shell block as a comment)."""
    lesson = read(info)
    parts = [lesson.workdir_cell(registry.file_stem(info.number, info.slug)) or "", lesson.setup]
    for step in lesson.steps:
        for block in step.blocks:
            if block.kind == "python":
                parts.append(block.code)
    return "\n\n".join(part for part in parts if part)


def lesson_function(info: registry.SectionInfo) -> ast.FunctionDef:
    tree = ast.parse(registry.section_file(info).read_text())
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and any(
        isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "section"
        for decorator in node.decorator_list))


@pytest.mark.parametrize("info", CATALOG, ids=slug)
def test_a_lesson_is_three_or_more_steps_each_with_its_why_and_a_few_lines_of_code(info):
    lesson = read(info)
    assert len(lesson.steps) >= 3
    for step in lesson.steps:
        heading, blank, *why = step.prose.splitlines()
        assert heading.startswith("## ") and heading[3:] == step.heading and blank == ""
        assert len(" ".join(why).split()) >= 12, f"{step.heading}: say why in a sentence or two"
        shown = [block for block in step.blocks if block.shown]
        assert shown, f"{step.heading}: a step shows the code that does it"
        for block in shown:
            assert block.code.count("\n") < MOST_LINES_OF_CODE, f"{step.heading}: {block.code.count(chr(10)) + 1} lines"


@pytest.mark.parametrize("info", CATALOG, ids=slug)
def test_every_name_the_page_uses_is_defined_on_it_and_every_import_used(info):
    """pyflakes on the page's code as one program: no undefined name, no unused import."""
    warnings = []

    class Collect(pyflakes.reporter.Reporter):
        def __init__(self):
            pass

        def flake(self, message):
            # A shape annotation such as kt.Float["*b n c"] is not Python, and is not meant
            # to be (ruff's F722; jaxtyping's docs ask to turn it off).
            if not isinstance(message, pyflakes.messages.ForwardAnnotationSyntaxError):
                warnings.append(str(message).split(":", 2)[-1].strip())

        def syntaxError(self, filename, msg, lineno, offset, text):
            warnings.append(f"syntax error: {msg} (line {lineno})")

        unexpectedError = syntaxError

    pyflakes.api.check(shown_program(info), f"{info.slug}'s page", Collect())
    assert warnings == []


@pytest.mark.parametrize("info", CATALOG, ids=slug)
def test_the_page_imports_from_the_standard_library_installed_packages_and_the_experiment(info):
    tree = ast.parse(shown_program(info))
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            if name.startswith(THE_EXPERIMENT_S):
                assert importlib.util.find_spec(name) is not None, name
                continue
            top = name.split(".")[0]
            assert top not in THE_TUTORIAL_S_OWN, f"the page imports {name}, the tutorial's, not the reader's"
            assert top in sys.stdlib_module_names or importlib.util.find_spec(top) is not None, name


@pytest.mark.parametrize("info", CATALOG, ids=slug)
def test_code_prints_values_and_the_prose_lives_in_the_steps(info):
    for node in ast.walk(lesson_function(info)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            text = " ".join(words_printed(arg) for arg in node.args)
            assert len(text.split()) <= MOST_WORDS_PRINTED, f"line {node.lineno} prints prose: {text!r}"


def words_printed(node: ast.expr) -> str:
    """The literal text a print() argument writes: a string, or an f-string's text between its values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(part.value for part in node.values if isinstance(part, ast.Constant))
    return ""


def python_files(*folders: str) -> list[pathlib.Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def module_name(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_configs_import_what_they_name_only_inside_konfig_imports():
    for path in python_files("configs"):
        tree = ast.parse(path.read_text())
        outside = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        allowed = {"kauldron": ["konfig"], "configs": None}
        for node in outside:
            assert isinstance(node, ast.ImportFrom) and node.module in allowed, f"{path.name}:{node.lineno}"
            names = allowed[node.module]
            assert names is None or [alias.name for alias in node.names] == names, f"{path.name}:{node.lineno}"


def test_no_lesson_names_itself_or_another_lesson_in_a_config():
    lessons = {module_name(path) for path in lesson_format.section_files()}
    for path in python_files("configs", "sections"):
        tree = ast.parse(path.read_text())
        for block in ast.walk(tree):
            if isinstance(block, ast.With) and "konfig.imports" in ast.unparse(block.items[0].context_expr):
                named = set().union(*(imports_of_node(node) for node in block.body))
                assert not named & lessons, f"{path.name}:{block.lineno} names {sorted(named & lessons)}"


def imports_of_node(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.ImportFrom):
        return {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    return set()


# A cell's last expression is displayed by a notebook: only these calls end a block, as they
# return None (a figure's block ends with plt.show(), which draws it under the cell).
ENDS_A_BLOCK = {"print", "plt.show", "np.save"}


@pytest.mark.parametrize("info", CATALOG, ids=slug)
def test_a_block_ends_with_a_statement_a_notebook_would_not_display(info):
    for step in read(info).steps:
        for block in step.blocks:
            last = block.statements[-1]
            if block.kind == "python" and isinstance(last, ast.Expr):
                called = ast.unparse(last.value.func) if isinstance(last.value, ast.Call) else None
                assert called in ENDS_A_BLOCK, (
                    f"line {last.lineno} ends a block with `{ast.unparse(last)[:60]}`, which a notebook would display:"
                    " print it, assign it, or end a figure's block with plt.show()")
