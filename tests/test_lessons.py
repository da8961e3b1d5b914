"""The shape of a lesson, read from its file as the pages and the notebook read it: a
sequence of steps (a heading and why, a few lines of code, the checks of the step), the
story first, prose in the steps rather than in print(), and Kauldron's konfig Rule 0."""

import ast
import pathlib

import pytest
from conftest import ROOT

from presenting.source import read_lesson, section_file
from sections import registry

CATALOG = registry.catalog()
STEPPED = CATALOG
MOST_WORDS_PRINTED = 8  # a print() whose text says more is prose that belongs in the step
MOST_LINES = 135  # "about 130": a longer file hides its story among helpers


def slug(info: registry.SectionInfo) -> str:
    return info.slug


def lesson_function(info: registry.SectionInfo) -> ast.FunctionDef:
    tree = ast.parse(section_file(info.module).read_text())
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and any(
        isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "section"
        for decorator in node.decorator_list))


@pytest.mark.parametrize("info", STEPPED, ids=slug)
def test_a_lesson_is_three_or_more_steps_each_with_its_why_and_a_few_lines_of_code(info):
    lesson = read_lesson(section_file(info.module))
    assert len(lesson.steps) >= 3
    for step in lesson.steps:
        heading, blank, *why = step.prose.splitlines()
        assert heading.startswith("## ") and heading[3:] == step.heading and blank == ""
        assert len(" ".join(why).split()) >= 12, f"{step.heading}: say why in a sentence or two"
        assert step.code, f"{step.heading}: a step shows the code that does it"
        assert step.code.count("\n") < 25, f"{step.heading}: {step.code.count(chr(10)) + 1} lines of code"


@pytest.mark.parametrize("info", STEPPED, ids=slug)
def test_a_lesson_file_is_about_130_lines_its_plumbing_in_shared_modules(info):
    lines = section_file(info.module).read_text().count("\n")
    assert lines <= MOST_LINES, f"{lines} lines: move what recomputes, plots or runs processes to a shared module"


@pytest.mark.parametrize("info", STEPPED, ids=slug)
def test_the_story_comes_first_and_the_helpers_after_it(info):
    tree = ast.parse(section_file(info.module).read_text())
    story = lesson_function(info)
    functions_before = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                        and node.lineno < story.lineno]
    assert functions_before == [], f"define {functions_before} below the lesson"


@pytest.mark.parametrize("info", STEPPED, ids=slug)
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


def imports_of(path: pathlib.Path) -> set[str]:
    """The modules of this project a file imports, anywhere in it (konfig.imports() included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


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
    lessons = {module_name(path) for path in (ROOT / "sections").glob(registry.SECTION_FILES)}
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


def test_nothing_imports_in_a_cycle():
    files = python_files("configs", "sections", "presenting", "compat", "runner") + [ROOT / "tutorial.py"]
    modules = {module_name(path): path for path in files}
    graph = {name: {imported for imported in imports_of(path) if imported in modules and imported != name}
             for name, path in modules.items()}
    visiting, done = [], set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, f"import cycle: {' -> '.join(visiting[visiting.index(name):] + [name])}"
        visiting.append(name)
        for imported in sorted(graph[name]):
            visit(imported)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
