"""Fixes for known version breakages, applied before anything imports Kauldron.

Each fix detects the breakage by behaviour (never by version strings), patches only
when it is broken, verifies the patch, and reports what it did. The driver prints the
reports in its header and writes them to the JSON results.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class FixReport:
    name: str
    applied: bool
    reason: str
    # False only when a patch was needed and did not work: the run goes on, but the
    # sections that depend on the fix will fail, and the header says why.
    ok: bool = True

    def line(self) -> str:
        state = "applied" if self.applied else ("not needed" if self.ok else "FAILED")
        return f"{self.name}: {state} ({self.reason})"


def apply_all() -> list[FixReport]:
    """Applies every known fix that this environment needs."""
    from compat import etils_prng

    return [etils_prng.apply()]


def skipped_all() -> list[FixReport]:
    """What `--no-compat` reports: every fix left out, on request."""
    from compat import etils_prng

    return [FixReport(etils_prng.NAME, applied=False, reason="skipped: --no-compat")]
