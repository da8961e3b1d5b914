"""What a run found, typed: a section's result, and the whole run's report. The runner
builds them, the terminal, the JSON and the pages read them."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any


@dataclasses.dataclass
class SectionResult:
    number: int
    slug: str
    title: str
    status: str  # "passed", "failed" or "skipped"
    seconds: float
    summary: str
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Every claim the lesson checked, in order: {"claim", "passed", "step"[, "internal": True,
    # "internal_because"]}.
    checks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # For a failure: {"type", "message", "expected", "short_traceback", "traceback", "step"};
    # "expected" (a LessonFailed) means the message says it all.
    error: dict[str, Any] | None = None
    plots: list[str] = dataclasses.field(default_factory=list)  # PNG files written
    # The lesson's steps in order, {"heading", "printed", "blocks"}: each block
    # {"kind", "line", "printed"} (a shell block also "command", "output_lines"), where
    # "line" is where it starts in the section file; "printed" (the step's) is its shown
    # blocks' together.
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Claims this run could not check, {"claim", "why", "step"}: neither passed nor failed.
    skipped_checks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # The lesson's figure, (title, PNG bytes), as its page's code drew it; in the JSON only its
    # title and the step it belongs to.
    figure: tuple[str, bytes] | None = None
    figure_step: int | None = None

    @classmethod
    def skipped(cls, info, why: str) -> "SectionResult":
        """A section that did not run (`why`: interrupted, not reached)."""
        return cls(info.number, info.slug, info.title, "skipped", 0.0, why)

    @classmethod
    def crashed(cls, info, error_type: str, message: str) -> "SectionResult":
        """A section whose process died without a result: `message` says it all."""
        return cls(info.number, info.slug, info.title, "failed", 0.0, f"{error_type}: {message}",
                   error={"type": error_type, "message": message, "expected": True, "short_traceback": "",
                          "traceback": ""})

    def to_json(self) -> dict[str, Any]:
        found = dataclasses.asdict(self)
        figure = found.pop("figure")
        found["figure_title"] = figure[0] if figure else None
        return found

    @property
    def failed_checks(self) -> int:
        return sum(not check["passed"] for check in self.checks)


@dataclasses.dataclass
class Report:
    """A run: where it wrote, what it ran on, and each section's result, as the summary,
    the JSON and the pages read it. `environment` is what harness/environment.py
    describes (versions, devices, compat decisions, cache)."""

    workdir: str | None = None
    workdir_removed: bool = False
    jobs: int = 1
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    plots: str | None = None
    interrupted: bool = False
    sections: list[SectionResult] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def totals(self) -> dict[str, Any]:
        found = {status: sum(r.status == status for r in self.sections) for status in ("passed", "failed", "skipped")}
        found["checks"] = sum(len(r.checks) for r in self.sections)
        found["failed_checks"] = sum(r.failed_checks for r in self.sections)
        found["seconds"] = round(self.seconds, 3)
        return found

    def to_json(self) -> dict[str, Any]:
        finished = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return {**self.environment, "finished": finished, "interrupted": self.interrupted, "workdir": self.workdir,
                "workdir_removed": self.workdir_removed, "jobs": self.jobs, "plots": self.plots,
                "sections": [result.to_json() for result in self.sections], "totals": self.totals}
