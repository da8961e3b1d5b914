"""What a lesson works with: its own workdir, checks that record their claims, facts for
the JSON results, and the data of a figure.

Every `check*` call records the claim it makes, passed or not, in the order made; a
failed check raises `CheckFailed`, which fails the section. A check that can only be
made through a library's private names (a leading underscore, `jax._src`) passes
`internal=True`, so the results tell a maintainer that a refactor which changes no
behaviour may trip it.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any, Callable


class LessonFailed(Exception):
    """The lesson cannot go on, for a reason its one-line message gives in full."""


class CheckFailed(LessonFailed, AssertionError):
    """A claim the lesson makes is not what the library does."""


class SkipSection(Exception):
    """The section cannot run here (the message says why); it is not a failure."""


@dataclasses.dataclass
class Panel:
    """One panel of a section's figure: curves (label -> (xs, ys)) or bars (label -> value)."""

    title: str
    xlabel: str
    ylabel: str
    lines: dict[str, tuple[list[float], list[float]]] = dataclasses.field(default_factory=dict)
    bars: dict[str, float] = dataclasses.field(default_factory=dict)
    log_y: bool = False


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Lesson:
    """What a section function gets: its own workdir, checks, and a place for facts and
    for the data of a figure (drawn only with --plots)."""

    def __init__(self, workdir: pathlib.Path):
        self.workdir = workdir
        self.facts: dict[str, Any] = {}
        self.checks: list[dict[str, Any]] = []
        self.figure: tuple[str, list[Panel]] | None = None

    def plot(self, title: str, *panels: Panel) -> None:
        """Records the section's figure: data only, so matplotlib stays optional."""
        self.figure = (title, list(panels))

    def fact(self, name: str, value: Any) -> Any:
        """Records a verified value for the JSON results, and returns it."""
        self.facts[name] = value
        return value

    def _record(self, claim: str, passed: bool, internal: bool, failure: str) -> None:
        entry = {"claim": claim, "passed": bool(passed)}
        if internal:
            entry["internal"] = True
        self.checks.append(entry)
        if not passed:
            raise CheckFailed(failure)

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
