"""The section registry: what the sections are, and how to pick them. Running one is
`runner/section_run.py`'s job: a lesson imports only this, for `@section`, and its `Lesson`.

A section is a function in `sections/sNN_<slug>.py` decorated with `@section(...)`.
The catalog is read from those decorators with `ast`, without importing anything, so a
run imports only the modules of the sections it selected (`kontext` alone must not pay
for TensorFlow, which `kd.train` imports).

A section function takes a `Lesson` (sections/lesson.py) and tells its lesson in steps
(`lesson.md`): each step's code prints values and checks every claim of the step with
`lesson.check*` (each check is recorded; a failed one fails the section, naming the step).
It returns a one-line summary built from the values it measured.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib
from typing import Any, Callable

from sections.lesson import Lesson

SECTIONS_DIR = pathlib.Path(__file__).resolve().parent
SECTION_FILES = "s[0-9][0-9]_*.py"


@dataclasses.dataclass(frozen=True)
class SectionInfo:
    number: int
    slug: str
    title: str
    shows: str  # what the lesson shows, in a line: --list and the README's table
    trains: bool  # whether it trains a model (seconds, not milliseconds)
    module: str
    # Whether, with --jobs, it starts before the others: a long lesson that works mostly in
    # processes of its own, which then overlap with the rest.
    start_early: bool = False
    reference: str | None = None  # the page of Kauldron's own docs on the topic
    # Whether it starts Python processes of its own (with --jobs, a server with the imports
    # done forks them: sections/warm_start.py).
    starts_processes: bool = False


class SelectionError(ValueError):
    """A section selector matched nothing, or more than one section."""


# slug -> function, filled by `@section` as the selected modules are imported.
_FUNCTIONS: dict[str, Callable[[Lesson], str]] = {}


def section(number: int, slug: str, title: str, *, shows: str, trains: bool = False,
            start_early: bool = False, starts_processes: bool = False, reference: str | None = None):
    """Registers a lesson. Arguments must be literals: the catalog reads them with ast.
    `shows`: what the lesson shows, in a line; `trains`: whether it trains a model;
    `start_early`: whether, with --jobs, it starts before the others (a long lesson that
    works mostly in processes of its own); `starts_processes`: whether it starts Python
    processes of its own; `reference`: the page of Kauldron's own docs on the topic."""

    def register(fn: Callable[[Lesson], str]) -> Callable[[Lesson], str]:
        # The same section defined again (a notebook cell, then its module imported by a
        # config) replaces itself; two sections sharing a slug are an error.
        earlier = getattr(_FUNCTIONS.get(slug), "section_info", None)
        info = (number, slug, title, shows, trains, start_early, reference, starts_processes)
        if earlier is not None and earlier != info:
            raise ValueError(f"section {slug!r} is registered twice")
        fn.section_info = info
        _FUNCTIONS[slug] = fn
        return fn

    return register


def lesson_function(slug: str) -> Callable[[Lesson], str]:
    """The function registered for a section (its module must have been imported)."""
    fn = _FUNCTIONS.get(slug)
    if fn is None:
        raise LookupError(f"no section {slug!r} is registered (is its module imported?)")
    return fn


def _decorator_arguments(tree: ast.Module) -> list[dict[str, Any]]:
    """The arguments of every `@section(...)`, by name, defaults filled in."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "section"):
                continue
            bound = inspect.signature(section).bind(*[ast.literal_eval(a) for a in deco.args],
                                                    **{k.arg: ast.literal_eval(k.value) for k in deco.keywords})
            bound.apply_defaults()
            found.append(bound.arguments)
    return found


def catalog() -> list[SectionInfo]:
    """Every section, in number order, read from the section files without importing them."""
    infos = [SectionInfo(module=f"sections.{path.stem}", **arguments)
             for path in sorted(SECTIONS_DIR.glob(SECTION_FILES))
             for arguments in _decorator_arguments(ast.parse(path.read_text()))]
    infos.sort(key=lambda info: info.number)
    for key in ("number", "slug"):
        values = [getattr(info, key) for info in infos]
        duplicates = {v for v in values if values.count(v) > 1}
        if duplicates:
            raise ValueError(f"duplicate section {key}s: {sorted(duplicates)}")
    return infos


def describe(infos: list[SectionInfo]) -> str:
    return ", ".join(f"{info.number} {info.slug}" for info in infos)


def select(infos: list[SectionInfo], selectors: list[str]) -> list[SectionInfo]:
    """Sections by number, slug or unique slug prefix, in the order asked, without repeats."""
    chosen: list[SectionInfo] = []
    for selector in selectors:
        wanted = selector.strip().lower()
        if not wanted:
            raise SelectionError(f"empty section name; valid sections: {describe(infos)}")
        if wanted.isdigit():
            matches = [i for i in infos if i.number == int(wanted)]
        else:
            matches = [i for i in infos if i.slug == wanted] or [
                i for i in infos if i.slug.startswith(wanted)
            ]
        if not matches:
            raise SelectionError(f"unknown section {selector!r}; valid sections: {describe(infos)}")
        if len(matches) > 1:
            raise SelectionError(
                f"ambiguous section {selector!r} (matches {describe(matches)}); "
                f"valid sections: {describe(infos)}"
            )
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


def file_stem(number: int, slug: str) -> str:
    """How a section's files are named: its workdir, its figure, its page (`03-kontext`)."""
    return f"{number:02d}-{slug}"


def lesson_text(module) -> str:
    """A section module's docstring without its first line (the title, printed above it)."""
    return without_title(module.__doc__ or "")


def without_title(docstring: str) -> str:
    """A docstring, cleaned, without its first paragraph (the section's title)."""
    doc = inspect.cleandoc(docstring)
    return doc.split("\n\n", 1)[1] if "\n\n" in doc else ""


