"""A section's bound: the seconds it may run before it fails, in one line, and what it
started is stopped (issue 41: a hang is a failure).

Past the bound, SIGALRM raises `SectionTimedOut` in the main thread wherever Python is:
in a lesson's code, or waiting on its processes (`Shell.wait` sleeps in Python), whose
cleanup then stops them. A main thread stuck in compiled code (a deadlock inside jax)
runs no Python, so no exception reaches it: a grace later (the bound again, at least
`MIN_GRACE` and at most `GRACE` seconds), a watchdog thread writes every thread's stack
to stderr, records why in `stuck_file`, kills the children the section started and ends
the process. In a --jobs worker, the runner then reports that section failed with that
line and runs the rest; with --jobs 1, the run itself ends there, since the process that
would go on is the stuck one.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pathlib
import signal
import sys
import threading
from typing import Callable

GRACE = 30  # at most, the seconds a stuck main thread gets to answer SIGALRM
# At least: a main thread that answered SIGALRM still unwinds the section (its cleanup
# stops what it started) before the watchdog is cancelled; on a busy machine that took
# over half a second, and a bound of 0.5 s with a grace of 0.5 s ended a healthy process.
MIN_GRACE = 5
STUCK_EXIT = 75  # a stuck process's exit status


class SectionTimedOut(BaseException):
    """Raised in a section past its bound: not an Exception, so a lesson's `except
    Exception` does not swallow it."""


@contextlib.contextmanager
def bounded(seconds: float | None, stuck_file: pathlib.Path, stop_children: Callable[[], None]):
    """Inside the block, the section may run `seconds` (None: unbounded). Only the main
    thread receives signals: elsewhere the block runs unbounded."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise SectionTimedOut(f"did not finish in {seconds:g} s (its bound): stopped")

    grace = min(max(seconds, MIN_GRACE), GRACE)

    def stuck():
        reason = (f"did not finish in {seconds:g} s (its bound), and its main thread ran no Python for"
                  f" {grace:g} s more (stuck in compiled code): its process was ended; stacks on stderr")
        print(f"\n{stuck_file.stem}: {reason}", file=sys.__stderr__, flush=True)
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        with contextlib.suppress(OSError):
            stuck_file.write_text(reason)
        with contextlib.suppress(Exception):
            stop_children()
        os._exit(STUCK_EXIT)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    watchdog = threading.Timer(seconds + grace, stuck)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        watchdog.cancel()


def stuck_reason(stuck_file: pathlib.Path) -> str | None:
    """Why a section's process ended itself, stuck (see `bounded`); None if it did not."""
    with contextlib.suppress(OSError):
        return stuck_file.read_text()
    return None
