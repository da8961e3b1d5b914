"""What a compat fix is, and what it reports: shared by the fixes and the package that
installs them (compat/__init__.py), so that neither imports the other."""

from __future__ import annotations

import dataclasses
from typing import Callable

STATES = ("applied", "not needed", "skipped", "failed", "pending")


@dataclasses.dataclass(frozen=True)
class FixReport:
    name: str
    # "failed": the patch was needed and did not work; the run goes on, but what depends on
    # the fix fails. "pending": the watched modules have not been imported yet.
    state: str
    reason: str

    def __post_init__(self):
        assert self.state in STATES, self.state

    @property
    def applied(self) -> bool:
        return self.state == "applied"

    def line(self) -> str:
        return f"{self.name}: {self.state} ({self.reason})"

    def to_json(self) -> dict:
        return {"name": self.name, "applied": self.applied, "state": self.state, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class Fix:
    """A fix: its name, the modules it needs imported, and the function that decides and
    patches once they are (it returns the report). `heavy`: importing what it watches takes
    seconds (TensorFlow), so a run's header does not import it to decide (compat.reports);
    the fix decides when a lesson imports it, and stays pending in a run that never does."""

    name: str
    watches: tuple[str, ...]
    apply: Callable[[], FixReport]
    heavy: bool = False
