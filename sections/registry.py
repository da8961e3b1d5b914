"""The section registry: what the sections are, how to pick them, how one runs.

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
import contextlib
import dataclasses
import importlib
import inspect
import io
import os
import pathlib
import signal
import sys
import textwrap
import time
import traceback
from typing import Any, Callable

from sections.lesson import Lesson, LessonFailed, SkipSection

SECTIONS_DIR = pathlib.Path(__file__).resolve().parent
SECTION_FILES = "s[0-9][0-9]_*.py"
# How many innermost frames of an unexpected error are shown under its section.
SHORT_TRACEBACK_FRAMES = 3
# Test hook: the section with this slug raises instead of teaching; with "<slug>:crash" it
# kills its own process, with "<slug>:hang" it waits for Ctrl-C (tests/test_reliability.py).
FAIL_SECTION_ENV = "KAULDRON_TUTORIAL_FAIL_SECTION"


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


class SelectionError(ValueError):
    """A section selector matched nothing, or more than one section."""


@dataclasses.dataclass
class SectionResult:
    number: int
    slug: str
    title: str
    status: str  # "passed", "failed" or "skipped"
    seconds: float
    summary: str
    facts: dict[str, Any]
    # Every claim the lesson checked, in order: {"claim", "passed"[, "internal": True]}.
    checks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # For a failure: {"type", "message", "expected", "short_traceback", "traceback"};
    # "expected" (a LessonFailed) means the message says it all.
    error: dict[str, str] | None = None
    plots: list[str] = dataclasses.field(default_factory=list)  # PNG files written
    # The lesson's steps in order, {"heading", "printed"}: what its code printed in each.
    steps: list[dict[str, str]] = dataclasses.field(default_factory=list)
    # Claims this run could not check, {"claim", "why", "step"}: neither passed nor failed.
    skipped_checks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # The lesson's figure, (title, panels), for whoever draws it; in the JSON only its
    # title and the step it belongs to.
    figure: tuple[str, list] | None = None
    figure_step: int | None = None

    def to_json(self) -> dict[str, Any]:
        found = dataclasses.asdict(self)
        figure = found.pop("figure")
        found["figure_title"] = figure[0] if figure else None
        return found

    @property
    def failed_checks(self) -> int:
        return sum(not check["passed"] for check in self.checks)


# slug -> function, filled by `@section` as the selected modules are imported.
_FUNCTIONS: dict[str, Callable[[Lesson], str]] = {}


def section(number: int, slug: str, title: str, *, shows: str, trains: bool = False,
            start_early: bool = False, reference: str | None = None):
    """Registers a lesson. Arguments must be literals: the catalog reads them with ast.
    `shows`: what the lesson shows, in a line; `trains`: whether it trains a model;
    `start_early`: whether, with --jobs, it starts before the others (a long lesson that
    works mostly in processes of its own); `reference`: the page of Kauldron's own docs on
    the topic."""

    def register(fn: Callable[[Lesson], str]) -> Callable[[Lesson], str]:
        # The same section defined again (a notebook cell, then its module imported by a
        # config) replaces itself; two sections sharing a slug are an error.
        earlier = getattr(_FUNCTIONS.get(slug), "section_info", None)
        info = (number, slug, title, shows, trains, start_early, reference)
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


def _decorator_arguments(tree: ast.Module) -> list[tuple[Any, ...]]:
    """The (number, slug, title, shows, trains, start_early, reference) of every `@section(...)`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "section"):
                continue
            args = [ast.literal_eval(a) for a in deco.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in deco.keywords}
            number, slug, title = (args + [kwargs.get(k) for k in ("number", "slug", "title")])[:3]
            found.append((number, slug, title, kwargs["shows"], bool(kwargs.get("trains", False)),
                          bool(kwargs.get("start_early", False)), kwargs.get("reference")))
    return found


def catalog() -> list[SectionInfo]:
    """Every section, in number order, read from the section files without importing them."""
    infos = []
    for path in sorted(SECTIONS_DIR.glob(SECTION_FILES)):
        for number, slug, title, shows, trains, starts, reference in _decorator_arguments(ast.parse(path.read_text())):
            infos.append(SectionInfo(number, slug, title, shows, trains, f"sections.{path.stem}", starts, reference))
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


def _injected_failure(how: str):
    if how == "crash":  # as a segfault in compiled code would: no Python error, the process gone
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":  # a long section, as the user sees it when they press Ctrl-C
        print("hanging until interrupted", flush=True)
        while True:
            time.sleep(0.1)
    raise RuntimeError(f"failure injected by {FAIL_SECTION_ENV}")


def one_line(message: str) -> str:
    """An error message in one line: its first line, and its last when the first only
    introduces the rest (Kauldron's "Error resolving the config:")."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return f"{lines[0]} ... {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _error(e: BaseException) -> dict[str, str]:
    frames = traceback.extract_tb(e.__traceback__)
    short = "".join(traceback.format_list(frames[-SHORT_TRACEBACK_FRAMES:]))
    return {
        "type": type(e).__name__,
        "message": one_line(str(e)),
        "expected": isinstance(e, LessonFailed),
        "short_traceback": short,
        "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__)),
    }


def prepare(cache: pathlib.Path | None = None, workdir: pathlib.Path | None = None) -> None:
    """Process-wide settings for the lessons: the shared cache directory (JAX's compiled
    programs) if one is given, and the run's workdir. Call before anything imports jax;
    calling again changes nothing."""
    from sections import runtime

    runtime.prepare(cache, workdir)


def default_cache() -> pathlib.Path:
    from sections import runtime

    return runtime.default_cache()


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


def plotting_available() -> bool:
    """Whether --plots can draw: matplotlib is an optional dependency."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def run(info: SectionInfo, workdir: pathlib.Path) -> SectionResult:
    """Imports the section's module, prints its introduction, runs its lesson in
    `workdir`, and records the outcome: each step's output (shown as it comes, too), the
    checks, and the data of its figure, if any. A failure names the step it happened in.

    KeyboardInterrupt is not caught: the driver handles it for the whole run.
    """
    from sections import runtime

    start = time.perf_counter()
    lesson = Lesson(workdir, shown=sys.stdout)
    status, summary, error = "passed", "", None
    # Beside the lesson's workdir, which the lesson may list or clear.
    restore_temporary_files = runtime.send_temporary_files_to(workdir.parent / ".tmp" / workdir.name)
    try:
        lesson.workdir.mkdir(parents=True, exist_ok=True)
        module = importlib.import_module(info.module)
        print(textwrap.indent(lesson_text(module), "  "))
        with contextlib.redirect_stdout(_StepOutput(sys.stdout, lesson)), lesson.cleanup:
            summary = _teach(info, lesson)
    except SkipSection as e:
        status, summary = "skipped", str(e)
    except Exception as e:  # noqa: BLE001 - one section's failure never stops the run
        status, error = "failed", _error(e)
        error["step"] = lesson.step
        where = f'in step "{lesson.step}": ' if lesson.step else ""
        summary = f"{where}{error['type']}: {error['message']}"
    finally:
        restore_temporary_files()
    seconds = round(time.perf_counter() - start, 3)
    runtime.release_memory()
    return SectionResult(
        number=info.number,
        slug=info.slug,
        title=info.title,
        status=status,
        seconds=seconds,
        summary=summary,
        facts=lesson.facts,
        checks=lesson.checks,
        error=error,
        steps=lesson.steps,
        skipped_checks=lesson.skipped_checks,
        figure=lesson.figure,
        figure_step=lesson.figure_step,
    )


class _StepOutput(io.TextIOBase):
    """The lesson's stdout: what its code prints is shown as it comes, indented under the
    step's prose, and recorded in the step it was printed in."""

    INDENT = "    "

    def __init__(self, shown, lesson: Lesson):
        self.shown, self.lesson = shown, lesson
        self.at_line_start = True

    def write(self, text: str) -> int:
        self.lesson.record_output(text)
        indented = []
        for line in text.splitlines(keepends=True):
            if self.at_line_start and line.strip():
                line = self.INDENT + line
            indented.append(line)
            self.at_line_start = line.endswith("\n")
        self.shown.write("".join(indented))
        return len(text)

    def flush(self) -> None:
        self.shown.flush()


def _teach(info: SectionInfo, lesson: Lesson) -> str:
    """Runs the lesson (its module imported); returns its summary."""
    fn = lesson_function(info.slug)
    failing, _, how = os.environ.get(FAIL_SECTION_ENV, "").partition(":")
    if failing == info.slug:
        _injected_failure(how)
    return fn(lesson) or ""


def missing_requirements() -> list[str]:
    """Top-level packages the lessons need that are not installed (checked without importing)."""
    import importlib.util

    return [name for name in ("kauldron", "jax", "flax", "optax") if importlib.util.find_spec(name) is None]
