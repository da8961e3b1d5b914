"""How long each section took when it last passed with this cache, so that a run in
workers can start the longest first. On two workers, a section of 3.5 s that starts last
ends the run 3.5 s after all the others; started first, it runs beside them."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import tempfile

FILE_NAME = "section-seconds.json"


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
