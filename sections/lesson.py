"""What a lesson works with: its steps, its own workdir, checks that record their claims,
facts for the JSON results, and the data of a figure.

A lesson is a sequence of steps. `lesson.md("## Heading ...")` opens one: its prose
(Markdown, a heading and why the step matters) is shown, and what the lesson prints and
checks from then on belongs to that step, until the next `md`. The pages and the notebook
split the lesson's source at the same calls (presenting/source.py), so the prose is
written once, for the terminal, the page and the notebook alike.

Every `check*` call records the claim it makes, passed or not, in the order made; a
failed check raises `CheckFailed`, which fails the section. A check that can only be
made through a library's private names (a leading underscore, `jax._src`) passes
`internal=True`, so the results tell a maintainer that a refactor which changes no
behaviour may trip it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import pathlib
import sys
from typing import Any, Callable, TextIO


class LessonFailed(Exception):
    """The lesson cannot go on, for a reason its one-line message gives in full."""


class CheckFailed(LessonFailed, AssertionError):
    """A claim the lesson makes is not what the library does."""


class SkipSection(Exception):
    """The section cannot run here (the message says why); it is not a failure."""


@dataclasses.dataclass
class Panel:
    """One panel of a section's figure: curves (label -> (xs, ys)), bars (label -> value),
    a matrix of counts (rows of numbers, drawn as a heat map with each count written in),
    or small grey images, each with a caption (drawn as a grid)."""

    title: str
    xlabel: str
    ylabel: str
    lines: dict[str, tuple[list[float], list[float]]] = dataclasses.field(default_factory=dict)
    bars: dict[str, float] = dataclasses.field(default_factory=dict)
    log_y: bool = False
    matrix: list[list[float]] = dataclasses.field(default_factory=list)
    images: list[tuple[list[list[float]], str]] = dataclasses.field(default_factory=list)


def _short(value: Any, limit: int = 120) -> str:
    """A value's repr on one line, cut at `limit` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Lesson:
    """What a section function gets: its steps, its own workdir, checks, and a place for
    facts and for the data of a figure (drawn only with --plots).

    `shown`: where the prose and the check results are shown (the run's stdout; by default
    whatever sys.stdout is when they are written, as in a notebook)."""

    def __init__(self, workdir: pathlib.Path, shown: TextIO | None = None):
        self.workdir = workdir
        self.shown = shown
        self.steps: list[dict[str, str]] = []  # {"heading", "printed"}, in order
        self.facts: dict[str, Any] = {}
        self.checks: list[dict[str, Any]] = []
        self.skipped_checks: list[dict[str, Any]] = []  # claims this run could not check, and why
        self.figure: tuple[str, list[Panel]] | None = None
        self.figure_step: int | None = None
        # What must be undone when the lesson ends, however it ends (a child it started).
        self.cleanup = contextlib.ExitStack()

    def md(self, prose: str) -> None:
        """Opens a step: `prose` is Markdown whose first line is its `## heading`."""
        text = inspect.cleandoc(prose)
        heading = text.splitlines()[0].lstrip("#").strip() if text else ""
        self.steps.append({"heading": heading, "printed": ""})
        self._show("\n" + "\n".join(f"  {line}".rstrip() for line in text.splitlines()) + "\n\n")

    @property
    def step(self) -> str | None:
        """The heading of the step the lesson is in (None before the first)."""
        return self.steps[-1]["heading"] if self.steps else None

    def record_output(self, text: str) -> None:
        """What the lesson's code printed, kept with the step it printed it in."""
        self._current_step()["printed"] += text

    def _current_step(self) -> dict[str, str]:
        """The step the lesson is in; before its first `md`, an untitled one."""
        if not self.steps:
            self.steps.append({"heading": "", "printed": ""})
        return self.steps[-1]

    def _show(self, text: str) -> None:
        (self.shown or sys.stdout).write(text)

    def plot(self, title: str, *panels: Panel) -> None:
        """Records the section's figure: data only, so matplotlib stays optional."""
        self.figure = (title, list(panels))
        self._current_step()
        self.figure_step = len(self.steps) - 1

    def fact(self, name: str, value: Any) -> Any:
        """Records a verified value for the JSON results, and returns it."""
        self.facts[name] = value
        return value

    def _record(self, claim: str, passed: bool, internal: bool, failure: str) -> None:
        entry = {"claim": claim, "passed": bool(passed)}
        if internal:
            entry["internal"] = True
        self._current_step()
        entry["step"] = len(self.steps) - 1
        self.checks.append(entry)
        self._show(f"  {'✔' if passed else '✘ FAILED:'} {claim}{' (internal)' if internal else ''}\n")
        if not passed:
            raise CheckFailed(failure)

    def skip_check(self, claim: str, why: str) -> None:
        """A claim this run cannot check (`why` says what stands in the way): shown and
        recorded apart from the checks, neither passed nor failed."""
        self._current_step()
        self.skipped_checks.append({"claim": claim, "why": why, "step": len(self.steps) - 1})
        self._show(f"  - not checked here: {claim} ({why})\n")

    def check(self, condition: Any, claim: str, *, internal: bool = False) -> None:
        """`claim` is a sentence that is true when `condition` is."""
        self._record(claim, bool(condition), internal, f"not true: {claim}")

    def check_equal(self, actual: Any, expected: Any, what: str, *, internal: bool = False) -> None:
        self._record(f"{what} = {_short(expected)}", actual == expected, internal,
                     f"{what}: expected {_short(expected, 300)}, got {_short(actual, 300)}")

    def check_close(self, actual: float, expected: float, what: str, *, rel: float = 1e-6,
                    abs: float = 0.0, internal: bool = False) -> None:
        tolerance = " and ".join(f"{name} {value:g}" for name, value in (("rel", rel), ("abs", abs)) if value)
        self._record(f"{what} = {expected:.6g} within {tolerance}",
                     math.isclose(actual, expected, rel_tol=rel, abs_tol=abs), internal,
                     f"{what}: expected {expected!r} ({tolerance}), got {actual!r}")

    def check_raises(self, exception: type[BaseException], fn: Callable[[], Any], what: str, *,
                     internal: bool = False) -> BaseException:
        """Calls fn, checks it raises `exception`, and returns the exception."""
        claim = f"{what} raises {exception.__name__}"
        try:
            fn()
        except exception as e:
            self._record(claim, True, internal, "")
            return e
        except Exception as e:  # noqa: BLE001 - another error is this claim failing
            self._record(claim, False, internal,
                         f"{what}: expected {exception.__name__}, got {type(e).__name__}: {e}")
        self._record(claim, False, internal, f"{what}: expected {exception.__name__}, nothing was raised")
