"""How long each section took when it last passed with this cache, so that a run in
workers can start the longest first (on two workers, a section of 3.5 s that starts last
ends the run 3.5 s after all the others; started first, it runs beside them), and how long
each may run before it counts as stuck (`bound`)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import tempfile

FILE_NAME = "section-seconds.json"
BOUND_ENV = "KAULDRON_TUTORIAL_SECTION_BOUND"  # test hook: "<slug>=<seconds>", that section's bound
# A section's bound: MARGIN times what it took when it last passed, and at least FLOOR s;
# UNKNOWN with no record (a first run, or --no-cache: 6x the slowest below). Measured, cache cold
# on a loaded machine (load 8 on 2 cores), a section took up to 8.5x its warm time (section
# 14: 76 s against 9 s) and 92 s at most (section 18), within the floor; the longest,
# section 15, 2.8x (81 s against 29 s), within the margin.
MARGIN, FLOOR, UNKNOWN = 5, 120.0, 600.0


def load(cache: pathlib.Path | None) -> dict[str, float]:
    """slug -> seconds, from earlier runs; empty with no cache, or a file unreadable."""
    if cache is None:
        return {}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads((cache / FILE_NAME).read_text())
        return {slug: float(seconds) for slug, seconds in found.items()}
    return {}


def record(cache: pathlib.Path | None, results) -> None:
    """Adds the seconds of the sections that passed. Written whole and renamed into
    place, so a run reading it while another writes never sees half a file."""
    passed = {result.slug: round(result.seconds, 3) for result in results if result.status == "passed"}
    if cache is None or not passed:
        return
    with contextlib.suppress(OSError):
        handle, temporary = tempfile.mkstemp(dir=cache, prefix=FILE_NAME, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            json.dump({**load(cache), **passed}, out, indent=0, sort_keys=True)
        os.replace(temporary, cache / FILE_NAME)


def bound(slug: str, seconds: dict[str, float]) -> float:
    """How long section `slug` may run, from `seconds` (what `load` read)."""
    hooked, _, hooked_seconds = os.environ.get(BOUND_ENV, "").partition("=")
    if hooked == slug:
        return float(hooked_seconds)
    if slug not in seconds:
        return UNKNOWN
    return max(FLOOR, MARGIN * seconds[slug])
