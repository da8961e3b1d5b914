"""What a run found, typed: each section's result (its checks, steps and blocks, failure,
figure), and the whole run's report. The lessons and the runner build them, the terminal
reads them; `to_json` writes the run's --json, which the pages and the results page read
(a kept run is a JSON file): the form it had before the types, but that a crashed
section's error now has a `step` too (null)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any


@dataclasses.dataclass
class Check:
    """A claim the lesson checked, and whether it held, in its step (an index)."""

    claim: str
    passed: bool
    step: int
    internal_because: str | None = None  # it reads what the library does not promise: why

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"claim": self.claim, "passed": self.passed}
        if self.internal_because:
            found.update(internal=True, internal_because=self.internal_because)
        found["step"] = self.step
        return found


@dataclasses.dataclass
class SkippedCheck:
    """A claim this run could not check (`why`: what stands in the way): neither passed nor
    failed."""

    claim: str
    why: str
    step: int


@dataclasses.dataclass
class Block:
    """What one block of a step printed; `line`: where it starts in the section file. A
    shell block also keeps its command and how many lines its output had."""

    kind: str  # "python", "shell" or "checks"
    line: int
    printed: str = ""
    command: str | None = None
    output_lines: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in dataclasses.asdict(self).items()
                if value is not None or key not in ("command", "output_lines")}


@dataclasses.dataclass
class Step:
    """A step as it ran: its heading, its blocks, and what its shown blocks printed
    together (`printed`)."""

    heading: str
    printed: str = ""
    blocks: list[Block] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"heading": self.heading, "printed": self.printed, "blocks": [block.to_json() for block in self.blocks]}


@dataclasses.dataclass
class Failure:
    """Why a section failed. `expected` (a LessonFailed, a bound passed): the message says
    it all, no traceback needed; `step`: the heading of the step it happened in."""

    type: str
    message: str
    expected: bool
    short_traceback: str = ""
    traceback: str = ""
    step: str | None = None


@dataclasses.dataclass
class Figure:
    """The lesson's figure, as its page's code drew it: a PNG, its title (the pages' alt
    text) and the step that drew it."""

    title: str
    png: bytes
    step: int


@dataclasses.dataclass
class SectionResult:
    number: int
    slug: str
    title: str
    status: str  # "passed", "failed" or "skipped"
    seconds: float
    summary: str
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    checks: list[Check] = dataclasses.field(default_factory=list)  # in the order made
    error: Failure | None = None
    plots: list[str] = dataclasses.field(default_factory=list)  # PNG files written
    steps: list[Step] = dataclasses.field(default_factory=list)  # those reached, in order
    skipped_checks: list[SkippedCheck] = dataclasses.field(default_factory=list)
    figure: Figure | None = None

    @classmethod
    def skipped(cls, info, why: str) -> "SectionResult":
        """A section that did not run (`why`: interrupted, not reached)."""
        return cls(info.number, info.slug, info.title, "skipped", 0.0, why)

    @classmethod
    def crashed(cls, info, error_type: str, message: str) -> "SectionResult":
        """A section whose process died without a result: `message` says it all."""
        return cls(info.number, info.slug, info.title, "failed", 0.0, f"{error_type}: {message}",
                   error=Failure(error_type, message, expected=True))

    def to_json(self) -> dict[str, Any]:
        """The JSON's record of the section (the figure: only its title and step)."""
        return {"number": self.number, "slug": self.slug, "title": self.title, "status": self.status,
                "seconds": self.seconds, "summary": self.summary, "facts": self.facts,
                "checks": [check.to_json() for check in self.checks],
                "error": dataclasses.asdict(self.error) if self.error else None, "plots": self.plots,
                "steps": [step.to_json() for step in self.steps],
                "skipped_checks": [dataclasses.asdict(skipped) for skipped in self.skipped_checks],
                "figure_step": self.figure.step if self.figure else None,
                "figure_title": self.figure.title if self.figure else None}

    @property
    def failed_checks(self) -> int:
        return sum(not check.passed for check in self.checks)


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
