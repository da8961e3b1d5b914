"""Running one section: its lesson in its workdir, what it prints shown and recorded step
by step, and the outcome as a `SectionResult`. A lesson imports nothing of this: it only
gets a `Lesson`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import os
import pathlib
import signal
import sys
import textwrap
import time
import traceback
from typing import Any

from sections import runtime
from sections.lesson import Lesson, LessonFailed, SkipSection
from sections.registry import SectionInfo, lesson_function, lesson_text

# How many innermost frames of an unexpected error are shown under its section.
SHORT_TRACEBACK_FRAMES = 3
# Test hook: the section with this slug raises instead of teaching; with "<slug>:crash" it
# kills its own process, with "<slug>:hang" it waits for Ctrl-C (tests/test_reliability.py).
FAIL_SECTION_ENV = "KAULDRON_TUTORIAL_FAIL_SECTION"


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


def run(info: SectionInfo, workdir: pathlib.Path) -> SectionResult:
    """Imports the section's module, prints its introduction, runs its lesson in
    `workdir`, and records the outcome: each step's output (shown as it comes, too), the
    checks, and the data of its figure, if any. A failure names the step it happened in.

    KeyboardInterrupt is not caught: the driver handles it for the whole run.
    """
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
