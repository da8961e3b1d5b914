"""What a compat fix is, and what it reports: shared by the fixes and the package that
installs them (compat/__init__.py), so that neither imports the other."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

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


def replace_if_broken(name: str, owner: Any, attribute: str, problem: Callable[[Any], str | None],
                      replacement: Callable[[Any], Any], works: str, fixed: str) -> FixReport:
    """What every fix does once its modules are imported: `problem(owner.attribute)` says why
    it is broken, or None. If broken, installs `replacement(original)`, asks `problem` again,
    and puts the original back if the patch did not help. `fixed` may name `{found}`."""
    original = getattr(owner, attribute)
    found = problem(original)
    if found is None:
        return FixReport(name, "not needed", works)
    setattr(owner, attribute, replacement(original))
    left = problem(getattr(owner, attribute))
    if left is not None:
        setattr(owner, attribute, original)
        return FixReport(name, "failed", f"broken ({found}) and the patch did not help: {left}")
    return FixReport(name, "applied", fixed.format(found=found))
