"""Fixes for known version breakages, applied when the broken module is imported.

Each fix watches the modules it needs (with wrapt's post-import hooks) and does nothing
until a program imports them: then it detects the breakage by behaviour (never by
version strings), patches only when it is broken, verifies the patch, and records what
it did. Installing the fixes imports nothing else, so a program runs with them exactly as
it runs without them, apart from the fix itself (`python -m compat.run` relies on it).

The driver and the notebook call `reports(settle=True)`, which imports the watched modules
(they would import them anyway) so that every decision is made and can be printed; a
heavy fix's only when asked (`--versions`), since a run may never import them.
"""

from __future__ import annotations

import importlib
from typing import Callable

from compat.fix import Fix, FixReport  # noqa: F401 - part of this package's API


def _known_fixes() -> list[Fix]:
    from compat import etils_prng, kauldron_schedules, konfig_imports

    return [etils_prng.FIX, kauldron_schedules.FIX, konfig_imports.FIX]


_reports: dict[str, FixReport] = {}
_installed = False


def install_all(on_failure: Callable[[FixReport], None] | None = None) -> None:
    """Makes every known fix apply itself as soon as the modules it watches are imported
    (at once, for those already imported). Installing twice changes nothing."""
    global _installed
    if _installed:
        return
    _installed = True
    import wrapt

    for fix in _known_fixes():
        _reports[fix.name] = FixReport(fix.name, "pending", f"waiting for {' and '.join(fix.watches)} to be imported")
        _when_all_imported(list(fix.watches), lambda fix=fix: _decide(fix, on_failure), wrapt)


def _when_all_imported(names: list[str], callback: Callable[[], None], wrapt) -> None:
    """Calls `callback` once every module in `names` has been imported, in whatever order."""
    if not names:
        callback()
        return
    first, rest = names[0], names[1:]
    wrapt.register_post_import_hook(lambda _module: _when_all_imported(rest, callback, wrapt), first)


def _decide(fix: Fix, on_failure: Callable[[FixReport], None] | None) -> None:
    report = fix.apply()
    _reports[fix.name] = report
    if report.state == "failed" and on_failure is not None:
        on_failure(report)


def reports(settle: bool = False, heavy: bool = False) -> list[FixReport]:
    """What each installed fix decided. With `settle`, first imports the modules the fixes
    watch, so that none is left pending; a heavy fix's (compat/fix.py) only with `heavy`."""
    if settle:
        for fix in _known_fixes():
            if fix.heavy and not heavy:
                continue
            for name in fix.watches:
                importlib.import_module(name)
    return [_reports[fix.name] for fix in _known_fixes() if fix.name in _reports]


def skipped_all() -> list[FixReport]:
    """What `--no-compat` reports: every fix left out, on request."""
    return [FixReport(fix.name, "skipped", "--no-compat") for fix in _known_fixes()]


def python_m() -> list[str]:
    """How this process should start `python -m MODULE` in a child: through `compat.run`
    when a fix is installed and was (or may yet be) applied, since a new process starts
    without it; plainly otherwise."""
    needed = any(report.state in ("applied", "pending") for report in _reports.values())
    return ["-m", "compat.run"] if needed else ["-m"]
