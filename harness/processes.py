"""What every process the tutorial starts shares, whatever starts it: `python -m` as
this environment needs it, a Ctrl-C held while a process is handed over, and stopping
one.

A lesson starts processes only through the shell commands its page shows: harness/shell.py
runs them. A `python -m` among them is forked, with jax, Kauldron and TensorFlow imported
already, by the warm-start server of harness/warm_start.py, which also gives the runner its
workers. A Ctrl-C is raised as KeyboardInterrupt wherever Python happens to be: raised
inside `subprocess.Popen` after the fork, it would leave a child no variable holds, so a
Ctrl-C pressed while a child starts is held until the child is in the lesson's hands.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository: configs/ and sections/


class ProcessFailed(Exception):
    """A process a lesson started failed; the one-line message says which and why."""


# -- starting one process -----------------------------------------------------------


def jax_platforms_from_environment() -> None:
    """jax reads JAX_PLATFORMS when it is imported: a process forked after that import (a
    --jobs worker, a warm-started child) whose environment says otherwise applies it again,
    as a new process would have read it."""
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_platforms", os.environ.get("JAX_PLATFORMS") or None)


def python_m() -> list[str]:
    """`python -m` as this process should start it: through `compat.run` when a compat fix
    was (or may yet be) applied here, since a new process starts without it."""
    import compat

    return [sys.executable, *compat.python_m()]


@contextlib.contextmanager
def ctrl_c_held():
    """Inside the block, a Ctrl-C (or a SIGTERM, which stops a run the same way) is
    remembered, not acted on; it is raised again when the block ends, to whoever handled it
    before: for a block that must not stop halfway, with a process started but not yet in
    its caller's hands."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread
        return
    pressed = []
    previous = {signum: signal.signal(signum, lambda signum, frame: pressed.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pressed:
            signal.raise_signal(pressed[0])  # handled now by whoever handled it before


def stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
