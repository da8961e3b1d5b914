"""Child processes a lesson starts: how to start them (with the compat fixes this process
has), how to wait for several at once, what to keep of their logs, and which addresses
they listen on. They run in the repository, can import its modules, and never outlive the
lesson, however it ends (a failure, a timeout, Ctrl-C).

A Ctrl-C is raised as KeyboardInterrupt wherever Python happens to be. Raised inside
`subprocess.Popen` after the fork, it leaves a child running that no variable holds, so
nothing can stop it (seen in a test: one of section 18's children outlived a Ctrl-C).
So a Ctrl-C pressed while a child starts is held until the child is in the lesson's hands.

A `python -m` child is forked, when it can be, by a server that has done the imports
(sections/warm_start.py); it behaves as a process started here.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from sections import warm_start
from sections.lesson import LessonFailed

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository: configs/ and sections/


def python_m(module: str, *args: str) -> list[str]:
    """`python -m MODULE ARGS` as this process should start it. A new process starts
    without the compat fixes this one installed: where one was (or may yet be) applied,
    the child goes through `python -m compat.run MODULE ...`, which installs them first."""
    import compat

    return [sys.executable, *compat.python_m(), module, *args]


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


def stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def run_child(command: list[str], what: str, timeout: float = 900, fresh_python: bool = False,
              **extra_env: str) -> subprocess.CompletedProcess:
    """Runs a child process to its end. If it fails, so does the lesson, in one line: `what`
    and its exit status, then the child's last line on stderr (its error). `fresh_python`:
    never forked with imports done (sections/warm_start.py)."""
    with tempfile.TemporaryDirectory() as logs, contextlib.ExitStack() as stopping:
        out, err = pathlib.Path(logs, "stdout"), pathlib.Path(logs, "stderr")
        with ctrl_c_held():
            proc = warm_start.start(command, ROOT, environment(**extra_env), out, err, warm=not fresh_python)
            stopping.callback(stop, proc)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LessonFailed(f"{what} did not finish in {timeout:g} s: stopped") from None
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if proc.returncode != 0:
        last = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
        raise LessonFailed(f"{what} exited {proc.returncode}: {' '.join(last)[:300]}")
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def start_in_background(lesson, command: list[str], log: pathlib.Path, **extra_env: str):
    """Starts a child that runs while the lesson goes on, logging to `log`; it is stopped
    when the lesson ends, if it has not ended by then. `finish` waits for it."""
    with ctrl_c_held():
        proc = warm_start.start(command, ROOT, environment(**extra_env), log)
        lesson.cleanup.callback(stop, proc)
    proc.log, proc.started = log, time.monotonic()
    return proc


def finish(proc: subprocess.Popen, what: str, timeout: float = 900) -> float:
    """Waits for a child started in the background and returns the seconds since it started
    (its run time, if it was still running); if it fails, so does the lesson, in one line:
    `what`, its exit status and its last line."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LessonFailed(f"{what} did not finish in {timeout:g} s: stopped") from None
    if proc.returncode != 0:
        raise LessonFailed(f"{what} exited {proc.returncode}: {last_line(proc.log)}")
    return time.monotonic() - proc.started


@contextlib.contextmanager
def children(commands: dict[str, tuple[list[str], dict[str, str]]], logdir: pathlib.Path):
    """Starts the commands (name -> (argv, extra environment)) side by side, each logging to
    logdir/<name>.log, and yields name -> Popen; kills whichever still run when the block ends."""
    procs = {}
    try:
        for name, (argv, extra_env) in commands.items():
            with ctrl_c_held():
                procs[name] = warm_start.start(argv, ROOT, environment(**extra_env), logdir / f"{name}.log")
        yield procs
    finally:
        for proc in procs.values():  # all killed first, then waited for: they go together
            if proc.poll() is None:
                proc.kill()
        for proc in procs.values():
            proc.wait()


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (another program may still take it before we do)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_all(procs: dict[str, subprocess.Popen], logdir: pathlib.Path, timeout: float,
                 while_waiting=lambda: None) -> None:
    """Waits until every child has exited 0; the first failure, in one line, or the timeout
    stops all. `while_waiting` is called about five times a second meanwhile."""
    deadline = time.monotonic() + timeout
    # A list, not any(): every child must be polled, or a dead one goes unnoticed.
    while [proc.poll() for proc in procs.values()].count(None):
        check_none_failed(procs, logdir)
        if time.monotonic() > deadline:
            raise LessonFailed(f"the job did not finish in {timeout:g} s: stopped")
        while_waiting()
        time.sleep(0.2)
    check_none_failed(procs, logdir)


def check_none_failed(procs: dict[str, subprocess.Popen], logdir: pathlib.Path) -> None:
    for name, proc in procs.items():
        if proc.returncode not in (None, 0):
            code = proc.returncode
            signal_name = f" ({signal.Signals(-code).name})" if code < 0 else ""
            raise LessonFailed(f"{name} exited {code}{signal_name}: {last_line(logdir / f'{name}.log')}")


def last_line(log: pathlib.Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def log_digest(log: pathlib.Path, keep: re.Pattern, noise: dict[str, re.Pattern]) -> tuple[list[str], str]:
    """The lines of a child's log worth showing (those `keep` matches, without absl's
    prefix), and one line saying what else was dropped: how many lines each kind of
    `noise` matched, and the rest."""
    lines = log.read_text(errors="replace").splitlines()
    kept = [line.split("] ", 1)[-1][:120] for line in lines if keep.search(line)]
    counts = {what: sum(bool(pattern.search(line)) for line in lines) for what, pattern in noise.items()}
    other = len(lines) - len(kept) - sum(counts.values())
    dropped = ", ".join(f"{count} {what}" for what, count in counts.items())
    return kept, f"{log.name}: {len(lines)} lines; shown {len(kept)}; dropped {dropped} and {other} other lines"


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """The (address, port) pairs the processes `pids` listen on now (TCP, IPv4 and IPv6)."""
    import psutil

    found = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found.update((ipv4_if_mapped(c.laddr.ip), c.laddr.port)
                         for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN)
    return found


def ipv4_if_mapped(address: str) -> str:
    """`::ffff:127.0.0.1` (an IPv6 socket bound to an IPv4 address) as `127.0.0.1`."""
    import ipaddress

    mapped = getattr(ipaddress.ip_address(address), "ipv4_mapped", None)
    return str(mapped) if mapped else address


def is_loopback(address: str) -> bool:
    import ipaddress

    return ipaddress.ip_address(ipv4_if_mapped(address)).is_loopback
