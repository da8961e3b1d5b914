"""What a lesson's own code talks to: its steps, the shell commands it shows, its checks,
and facts for the JSON results.

The body of a `@section` function is the page's program (harness/lesson_format.py reads it).
Only three kinds of statement name the `lesson`, and a page shows none of them as code:

    lesson.md('''## Heading ...''')           opens a step: its prose, Markdown
    run = lesson.shell("python -m ...")       a command the reader types: a shell block
    with lesson.checks():                     what checks the step, beside its code
        lesson.check(...)

Every `check*` call records the claim it makes, passed or not, in the order made; a
failed check raises `CheckFailed`, which fails the section. A check that can only be made
through what a library does not promise (its source text, a private name, another
library's file layout) passes `internal=` the reason, so the results tell a maintainer
that a refactor which changes no behaviour may trip it.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import pathlib
import sys
from typing import Any, Callable, TextIO

from harness.results import Check, Figure, SkippedCheck


class LessonFailed(Exception):
    """The lesson cannot go on, for a reason its one-line message gives in full."""


class CheckFailed(LessonFailed, AssertionError):
    """A claim the lesson makes is not what the library does."""


class SkipSection(Exception):
    """The section cannot run here (the message says why); it is not a failure."""


def _short(value: Any, limit: int = 120) -> str:
    """A value's repr on one line, cut at `limit` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Lesson:
    """The lesson as its hidden statements see it. `shown`: where check results are shown
    (the run's stdout; by default whatever sys.stdout is when they are written).

    The runner (harness/teaching.py) tells it which step and block is running; a lesson
    only calls `shell`, `checks`, the `check*` methods, `skip_check` and `fact`, and may
    set `summary`, its one-line result. Its figure, if any, is the page's own matplotlib
    code: the runner keeps it (teaching.py)."""

    def __init__(self, workdir: pathlib.Path, shown: TextIO | None = None,
                 run_shell: Callable[..., Any] | None = None):
        self.workdir = workdir
        self.shown = shown
        self.summary = ""
        self.step = -1  # the index of the step running (-1: before the first)
        self.heading: str | None = None  # its heading
        self.facts: dict[str, Any] = {}
        self.checks_made: list[Check] = []
        self.skipped_checks: list[SkippedCheck] = []  # claims this run could not check, and why
        self.figure: Figure | None = None  # drawn by the page's own code
        self._run_shell = run_shell
        # What must be undone when the lesson ends, however it ends (a child it started).
        self.cleanup = contextlib.ExitStack()

    # -- what the page shows as something else than Python -----------------------------

    def md(self, prose: str) -> None:
        """Opens a step. The runner opens steps itself from the parsed source: this call is
        a marker, never run."""
        raise LessonFailed("lesson.md() is read from the source, not called: is the lesson run by harness.teaching?")

    def shell(self, command: str, *, background: bool = False, needed_by: str | None = None,
              shows: str | None = None, check: bool = True, timeout: float | None = None):
        """Runs a command as the reader would type it in a shell at the repository root
        (`$WORKDIR` is the lesson's workdir), and returns what it did (`returncode`,
        `output`, `seconds`). `background`: the lesson goes on meanwhile, and the runner
        waits for it when the step ends, or, given `needed_by` (the heading of a later
        step, the first that needs its result), before that step starts. `shows`: a
        regular expression; the page shows only the lines of its output that match
        (absl's prefix dropped), else all of them. `check`: a non-zero exit fails the
        lesson, in one line. Bounds: its processes may all print nothing for
        shell.QUIET_SECONDS, and it may run `timeout` seconds (None: as long as the
        section's own bound allows); past one, they are stopped and the lesson fails in
        one line that says which and for how long."""
        if self._run_shell is None:
            raise LessonFailed("lesson.shell() needs a runner (harness.teaching) to run its command")
        return self._run_shell(inspect.cleandoc(command), background=background, needed_by=needed_by, shows=shows,
                               check=check, timeout=timeout)

    @contextlib.contextmanager
    def checks(self):
        """The block checks the step beside its code: a page folds it under the step (the
        lesson format reads the `with` statement; running, it only yields the lesson)."""
        yield self

    # -- checks and facts ------------------------------------------------------------

    def tell(self, text: str) -> None:
        (self.shown or sys.stdout).write(text)

    def fact(self, name: str, value: Any) -> Any:
        """Records a verified value for the JSON results, and returns it."""
        self.facts[name] = value
        return value

    def _record(self, claim: str, passed: bool, internal: str | None, failure: str) -> None:
        if internal is True:
            raise TypeError("internal= takes the reason, such as \"reads Kauldron's source\"")
        self.checks_made.append(Check(claim, bool(passed), max(self.step, 0), internal or None))
        self.tell(f"  {'✔' if passed else '✘ FAILED:'} {claim}{' (internal)' if internal else ''}\n")
        if not passed:
            raise CheckFailed(failure)

    def skip(self, why: str) -> None:
        """Ends the section as skipped, not failed: it cannot run on this machine, and `why`
        says so in one line (a limit of the platform, not of the lesson)."""
        raise SkipSection(why)

    def skip_check(self, claim: str, why: str) -> None:
        """A claim this run cannot check (`why` says what stands in the way): shown and
        recorded apart from the checks, neither passed nor failed."""
        self.skipped_checks.append(SkippedCheck(claim, why, max(self.step, 0)))
        self.tell(f"  - not checked here: {claim} ({why})\n")

    def check(self, condition: Any, claim: str, *, internal: str | None = None) -> None:
        """`claim` is a sentence that is true when `condition` is."""
        self._record(claim, bool(condition), internal, f"not true: {claim}")

    def check_equal(self, actual: Any, expected: Any, what: str, *, internal: str | None = None) -> None:
        self._record(f"{what} = {_short(expected)}", actual == expected, internal,
                     f"{what}: expected {_short(expected, 300)}, got {_short(actual, 300)}")

    def check_close(self, actual: float, expected: float, what: str, *, rel: float = 1e-6,
                    abs: float = 0.0, internal: str | None = None) -> None:
        tolerance = " and ".join(f"{name} {value:g}" for name, value in (("rel", rel), ("abs", abs)) if value)
        self._record(f"{what} = {expected:.6g} within {tolerance}",
                     math.isclose(actual, expected, rel_tol=rel, abs_tol=abs), internal,
                     f"{what}: expected {expected!r} ({tolerance}), got {actual!r}")

    def check_raises(self, exception: type[BaseException], fn: Callable[[], Any], what: str, *,
                     internal: str | None = None) -> BaseException:
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
