"""The house: one job per folder, and imports that run one way. `sections/` holds the
lessons and the experiment's parts; the harness runs them; the runner and the pages both
build on the harness and never on each other; nothing imports in a cycle."""

import ast
import pathlib

from conftest import ROOT

from harness import lesson_format

PACKAGES = ("tutorial", "harness", "runner", "presenting", "compat", "sections", "configs")


def python_files(*folders: str) -> list[pathlib.Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def module_name(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports_of(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The modules of `modules` a file imports, anywhere in it (inside functions and
    konfig.imports() too): `from package import module` imports the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found.update(submodules if len(submodules) == len(node.names) else {node.module, *submodules})
    return found & modules


def the_house() -> dict[str, set[str]]:
    """module -> the modules of the house it imports."""
    files = python_files("harness", "runner", "presenting", "compat", "sections", "configs") + [ROOT / "tutorial.py"]
    modules = {module_name(path): path for path in files}
    return {name: imports_of(path, set(modules)) - {name} for name, path in modules.items()}


def packages_imported(package: str) -> set[str]:
    return {imported.split(".")[0] for name, imports in the_house().items() if name.split(".")[0] == package
            for imported in imports} - {package}


def test_sections_holds_the_lessons_and_the_experiment_s_parts_and_nothing_else():
    lessons = {path.name for path in lesson_format.section_files()}
    others = {path.name for path in (ROOT / "sections").iterdir() if path.name not in lessons} - {"__pycache__"}
    assert others == {"__init__.py", "parts"}


def test_lessons_and_configs_build_on_the_harness_alone():
    assert packages_imported("sections") <= {"harness", "configs"}
    assert packages_imported("configs") <= {"sections"}  # its parts: sections.parts
    for name, imports in the_house().items():
        if name.startswith("configs."):
            assert all(imported.startswith(("configs", "sections.parts")) for imported in imports), name


def test_lessons_and_parts_import_of_the_harness_only_its_lesson_api_and_compare():
    """`section` and `Lesson` from `harness`, and `harness.compare` in checks: no lesson or
    part reaches into how the harness runs it (module level, functions and folds alike)."""
    for name, imports in the_house().items():
        if name.startswith(("sections", "configs")):
            assert {imported for imported in imports if imported.startswith("harness")} <= {"harness", "harness.compare"}, name
    for path in python_files("sections", "configs"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "harness":
                assert {alias.name for alias in node.names} <= {"Lesson", "section", "compare"}, path.name


def test_the_runner_and_the_pages_build_on_the_harness_and_not_on_each_other():
    assert "presenting" not in packages_imported("runner")
    assert "runner" not in packages_imported("presenting")
    assert packages_imported("harness") <= {"compat"}


def test_nothing_imports_in_a_cycle():
    graph = the_house()
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


def test_every_list_of_sections_in_the_tests_names_sections_of_the_catalog():
    import test_compat_leg
    import test_reliability
    import test_sections

    from harness import registry

    slugs = {info.slug for info in registry.catalog()}
    named = {"test_compat_leg.ARRAYSPEC_SECTIONS": test_compat_leg.ARRAYSPEC_SECTIONS,
             "test_compat_leg.CHILD_PROCESS_SECTIONS": test_compat_leg.CHILD_PROCESS_SECTIONS,
             "test_reliability.LIGHT": test_reliability.LIGHT, "test_sections.GOLDEN": list(test_sections.GOLDEN)}
    for where, listed in named.items():
        assert set(listed) <= slugs, f"{where} names {sorted(set(listed) - slugs)}, not sections"
    # Where the lists must follow the catalog: a section that trains builds a Trainer, whose
    # element specs are ArraySpecs (the broken etils fails it); a section fails in a command
    # only if it runs one.
    catalog = registry.catalog()
    assert {info.slug for info in catalog if info.trains} <= set(test_compat_leg.ARRAYSPEC_SECTIONS)
    assert set(test_compat_leg.CHILD_PROCESS_SECTIONS) <= {info.slug for info in catalog if info.starts_processes}
