"""Child processes a lesson starts: they run in the repository, can import its modules, and
never outlive the lesson, however it ends (a failure, a timeout, Ctrl-C).

A Ctrl-C is raised as KeyboardInterrupt wherever Python happens to be. Raised inside
`subprocess.Popen` after the fork, it leaves a child running that no variable holds, so
nothing can stop it (seen in a test: one of section 18's children outlived a Ctrl-C).
So a Ctrl-C pressed while a child starts is held until the child is in the lesson's hands.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import threading

from sections.lesson import LessonFailed

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository: configs/ and sections/


@contextlib.contextmanager
def ctrl_c_held():
    """Inside the block, a Ctrl-C is remembered, not raised; it is raised when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread
        return
    pressed = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed:
            signal.raise_signal(signal.SIGINT)  # handled now by whoever handled it before


def environment(**extra_env: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra_env)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def run_child(command: list[str], what: str, timeout: float = 900, **extra_env: str) -> subprocess.CompletedProcess:
    """Runs a child process to its end. If it fails, so does the lesson, in one line: `what`
    and its exit status, then the child's last line on stderr (its error)."""
    with contextlib.ExitStack() as stopping:
        with ctrl_c_held():
            proc = subprocess.Popen(command, cwd=ROOT, env=environment(**extra_env), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            stopping.callback(stop, proc)
        stdout, stderr = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        last = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
        raise LessonFailed(f"{what} exited {proc.returncode}: {' '.join(last)[:300]}")
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


@contextlib.contextmanager
def children(commands: dict[str, tuple[list[str], dict[str, str]]], logdir: pathlib.Path):
    """Starts the commands (name -> (argv, extra environment)) side by side, each logging to
    logdir/<name>.log, and yields name -> Popen; kills whichever still run when the block ends."""
    procs = {}
    try:
        for name, (argv, extra_env) in commands.items():
            with open(logdir / f"{name}.log", "w") as log, ctrl_c_held():  # the child keeps its own copy of log
                procs[name] = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                               env=environment(**extra_env))
        yield procs
    finally:
        for proc in procs.values():  # all killed first, then waited for: they go together
            if proc.poll() is None:
                proc.kill()
        for proc in procs.values():
            proc.wait()
