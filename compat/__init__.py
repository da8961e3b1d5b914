"""Fixes for known version breakages, applied before anything imports Kauldron.

Each fix detects the breakage by behaviour (never by version strings), patches only
when it is broken, verifies the patch, and reports what it did. The driver prints the
reports in its header and writes them to the JSON results.
"""

from __future__ import annotations

import dataclasses


STATES = ("applied", "not needed", "skipped", "failed")


@dataclasses.dataclass(frozen=True)
class FixReport:
    name: str
    # "failed" means the patch was needed and did not work: the run goes on, but the
    # sections that depend on the fix will fail, and the header says why.
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


_applied: list[FixReport] = []


def apply_all() -> list[FixReport]:
    """Applies every known fix that this environment needs."""
    from compat import etils_prng

    reports = [etils_prng.apply()]
    _applied.extend(r for r in reports if r.applied)
    return reports


def python_m() -> list[str]:
    """How this process should start `python -m MODULE` in a child: through `compat.run`
    if it applied fixes (a new process starts without them), plainly otherwise."""
    return ["-m", "compat.run"] if _applied else ["-m"]


def skipped_all() -> list[FixReport]:
    """What `--no-compat` reports: every fix left out, on request."""
    from compat import etils_prng

    return [FixReport(etils_prng.NAME, "skipped", "--no-compat")]
