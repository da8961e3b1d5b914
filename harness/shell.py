"""A lesson's shell command, run as a shell would run it, at the repository root, with
`$WORKDIR` set: `Shell`. Lines of the form

    [NAME=value ...] python -m MODULE ARGS [&]        and        wait

are run here: each line's process starts in turn; one that ends with `&` runs in the
background while the next lines start, and `wait` waits for all of those; a line without
`&` is waited for before the next starts. So `a & b; wait`, on two lines, starts a, then b
at once, and waits for both. This environment's console scripts (`tensorboard ...`) run
through their entry point. A command with any other shell syntax (a pipe, a redirection,
`$(...)`) is handed whole to `bash -c`.

Each process writes to a log of its own; `excerpt` is what a page shows of them, `last_line`
what a failure quotes. A command whose processes all print nothing for QUIET_SECONDS, or
that runs past its `timeout`, is stopped, and fails in one line.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
import shlex
import shutil
import signal
import string
import sys
import tempfile
import time

from harness.processes import ProcessFailed, ctrl_c_held, python_m
from harness.warm_start import start

# absl's prefix of a log line: level, date, time, thread, file:line.
ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] ")
# Tokens of the shell's own syntax (pipes, redirections, subshells, lists), which bash runs.
_SHELL_SYNTAX = re.compile(r"^[();<>|&]+$")


@dataclasses.dataclass
class ShellLine:
    env: dict[str, str]  # NAME=value before the command
    argv: list[str]
    background: bool  # it ended with `&`
    text: str  # the line as typed, without its `&`


def shell_environment(workdir: pathlib.Path) -> dict[str, str]:
    """The environment a lesson's commands see: this process's, `$WORKDIR`, and the
    Python environment's scripts first on the PATH, as an activated venv has them."""
    scripts = str(pathlib.Path(sys.executable).parent)
    return dict(os.environ, WORKDIR=str(workdir), PATH=os.pathsep.join([scripts, os.environ.get("PATH", "")]))


def parse_shell(command: str, env: dict[str, str]) -> list[ShellLine | None] | None:
    """The command's lines, `$NAME` expanded from `env` (None for a `wait`), or None when
    it holds more of the shell's syntax than runs here."""
    lines = []
    for line in command.replace("\\\n", " ").splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        if line.strip() == "wait":
            lines.append(None)
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        background = tokens[-1] == "&"
        tokens = tokens[:-1] if background else tokens
        if not tokens or any(_SHELL_SYNTAX.match(token) for token in tokens) or "$(" in line or "`" in line:
            return None
        tokens = [string.Template(token).safe_substitute(env) for token in tokens]
        assignments = {}
        while tokens and re.fullmatch(r"[A-Za-z_]\w*=.*", tokens[0]):
            name, _, value = tokens.pop(0).partition("=")
            assignments[name] = value
        if not tokens:
            return None
        lines.append(ShellLine(assignments, tokens, background, " ".join(line.split()).removesuffix("&").strip()))
    return lines


# How long a command's running processes may all print nothing before it counts as stuck
# (a deadlocked job waits on a futex, using no CPU, and never exits: issue 41). Measured on a
# cold cache, the longest a healthy command here goes silent is 14 s (section 15's eval job,
# waiting between checkpoints); the bound gives it 4x that, for a slow or loaded machine
# (one core held by another program made runs 1.6x as long).
QUIET_SECONDS = 60


class Shell:
    """A lesson's shell command, running: started by `__init__`, waited for by `wait`.
    Each process it starts writes to a log of its own: two processes failing at once into
    one file mix their lines mid-line, as on a terminal, and the line that says why would
    be lost. `output` is the logs one after another, in the order the processes started.

    Its bounds: `quiet`, the seconds its running processes may all print nothing, and
    `timeout`, the seconds it may run in all (None: only the section's own bound, which
    runner/durations.py derives). Past one, `wait` (or `check_progress`, for a lesson
    that polls the processes meanwhile) stops them all and fails in one line that says
    what made no progress, for how long, and the last line printed."""

    def __init__(self, command: str, workdir: pathlib.Path, timeout: float | None = None,
                 quiet: float | None = None):
        self.command, self.timeout = command, timeout
        self.quiet = QUIET_SECONDS if quiet is None else quiet
        self.returncode: int | None = None
        self.output = ""
        self.started = time.monotonic()
        self._last_start = time.time()  # output's clock (a log's mtime): silence counts from here at least
        self.seconds = 0.0
        self._logs: dict[int, pathlib.Path] = {}  # a process's pid -> its log, in the order they started
        self._env = shell_environment(workdir)
        self._lines = parse_shell(command, self._env)
        self._next = 0  # the next line to start
        self._foreground = None  # the process of the line running in the foreground
        self._background: list = []  # started with `&`, not yet waited for
        self._typed: dict[int, str] = {}  # a process's pid -> the line that started it
        self._failed = self.first_line  # the line whose process failed
        self._failed_pid: int | None = None
        self._failed_output = ""  # what that process printed
        try:
            with ctrl_c_held():
                if self._lines is None:  # bash runs it all
                    self._lines = []
                    self._foreground = self._start(["bash", "-c", command], self._env)
            self._advance()
        except BaseException:
            self.kill()
            self._collect_output()
            raise

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._processes()]

    def _processes(self) -> list:
        return self._background + ([self._foreground] if self._foreground is not None else [])

    def _argv(self, line: ShellLine) -> list[str]:
        argv = list(line.argv)
        if argv[0] == "python":
            launcher = python_m()  # python -m, or python -m compat.run
            if argv[1:2] == ["-m"]:
                return [*launcher, *argv[2:]]
            if argv[1:2] == ["-c"] and launcher[-1] == "compat.run":  # which takes `-c CODE` too
                return [*launcher, *argv[1:]]
            return [sys.executable, *argv[1:]]
        if _console_script(argv[0]):  # this environment's own: started as a `python -m`, so warm
            return [sys.executable, "-m", "compat.run", "--script", *argv]
        return [shutil.which(argv[0], path=self._env["PATH"]) or argv[0], *argv[1:]]

    def _advance(self) -> None:
        """Starts lines until one must be waited for: a line in the foreground, or `wait`."""
        while self._foreground is None and self._next < len(self._lines) and self._lines[self._next] is not None:
            line = self._lines[self._next]
            with ctrl_c_held():  # the process is in self's hands before a Ctrl-C can stop this
                proc = self._start(self._argv(line), {**self._env, **line.env})
                self._typed[proc.pid] = line.text
                self._next += 1
                if line.background:
                    self._background.append(proc)
                else:
                    self._foreground = proc

    def fails_within(self, seconds: float) -> bool:
        """Whether one of its processes exits with an error within `seconds` (polled; a
        forked child's exit status reaches the warm-start server a moment after it)."""
        deadline = time.monotonic() + seconds
        while True:
            if any(proc.poll() not in (None, 0) for proc in self._processes()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def check_progress(self) -> None:
        """Raises ProcessFailed, in one line, once the command is past one of its bounds."""
        running = [proc for proc in self._processes() if proc.poll() is None]
        if not running:
            return
        logs = {log.stat().st_mtime: log for log in self._logs.values() if log.exists()}
        silent = time.time() - max([self._last_start, *logs])
        past_timeout = self.timeout is not None and time.monotonic() - self.started > self.timeout
        if silent <= self.quiet and not past_timeout:
            return
        said = last_line(logs[max(logs)].read_text(errors="replace")) if logs else "(no output)"
        if silent > self.quiet:
            who = f"its {len(running)} running processes" if len(running) > 1 else "its process"
            raise ProcessFailed(f"`{self.first_line}`: {who} printed nothing for {self.quiet:g} s, after"
                                f" \"{said}\": stopped")
        raise ProcessFailed(f"`{self.first_line}` did not finish in {self.timeout:g} s, its last line"
                            f" \"{said}\": stopped")

    def wait(self) -> "Shell":
        """Runs the command to its end, and what it left in the background. A process that
        fails stops the others at once; the return code is the first failure's, else 0.
        Past a bound, it stops them all and raises ProcessFailed."""
        looked = 0.0
        try:
            while self._processes() or self._next < len(self._lines):
                codes = [proc.poll() for proc in self._processes()]  # each polled: no failure goes unnoticed
                failed = [(proc, code) for proc, code in zip(self._processes(), codes) if code not in (None, 0)]
                if failed:
                    # Seen failed in the same look: one killed by a signal first, as the cause (a
                    # peer that loses its partner exits with an error of its own, after it).
                    failed.sort(key=lambda found: found[1] >= 0)
                    self.returncode = failed[0][1]
                    self._failed = self._typed.get(failed[0][0].pid, self.first_line)
                    self._failed_pid = failed[0][0].pid
                    break
                if self._foreground is not None and self._foreground.returncode is not None:
                    self._foreground = None
                elif self._foreground is None and None not in codes:  # at a `wait`, or the end: all done
                    self._background = []
                    self._next += 1
                else:
                    if time.monotonic() - looked > 0.5:  # a few stat() calls
                        self.check_progress()
                        looked = time.monotonic()
                    time.sleep(0.05)
                    continue
                self._advance()
            if self.returncode is None:
                self.returncode = 0
        finally:
            self.kill()
            self.seconds = time.monotonic() - self.started
            self._collect_output()
        return self

    def _start(self, argv: list[str], env: dict[str, str]):
        """Starts one process of the command, its output to a log of its own."""
        log = pathlib.Path(tempfile.mkstemp(prefix="shell-", suffix=".log")[1])
        try:
            proc = start(argv, env, log)
        except BaseException:
            log.unlink(missing_ok=True)
            raise
        self._logs[proc.pid] = log
        self._last_start = time.time()
        return proc

    def _collect_output(self) -> None:
        """Reads the processes' logs into `output` (and the failed one's apart), and removes them."""
        outputs = {}
        for pid, log in self._logs.items():
            outputs[pid] = log.read_text(errors="replace") if log.exists() else ""
            log.unlink(missing_ok=True)
        self._logs = {}
        self.output = "".join(outputs.values())
        self._failed_output = outputs.get(self._failed_pid, self.output)

    def kill(self) -> None:
        """Stops whatever still runs: all killed first, then waited for, so they go together."""
        for proc in self._processes():
            if proc.poll() is None:
                proc.kill()
        for proc in self._processes():
            proc.wait()

    @property
    def first_line(self) -> str:
        return self.command.strip().splitlines()[0].removesuffix("\\").strip()

    def failure(self) -> str:
        """Why it failed, in one line: the command, its exit status, its last line."""
        code = self.returncode
        signal_name = f" ({signal.Signals(-code).name})" if code < 0 else ""
        return f"`{self._failed}` exited {code}{signal_name}: {last_line(self._failed_output)}"


def starts_python(command: str) -> bool:
    """Whether a shell command starts Python: `python ...` or a console script of this
    environment (the warm-start server forks a `python -m` and a script; bash runs
    whatever else)."""
    return any(line and (line.argv[0] == "python" or _console_script(line.argv[0]))
               for line in parse_shell(command, {}) or [])


@functools.cache
def _console_script(name: str) -> bool:
    """Whether `name` is a console script this Python environment installed: an entry
    point names it, and its file is beside this interpreter (a venv's) or, first on the
    PATH, starts this interpreter (a `pip install --target DIR`'s, in DIR/bin: on a TPU
    machine, started cold it imported TensorFlow again, 17-25 s there)."""
    import importlib.metadata

    if not importlib.metadata.entry_points(group="console_scripts", name=name):
        return False
    if (pathlib.Path(sys.executable).parent / name).is_file():
        return True
    found = shutil.which(name)
    try:
        with open(found, "rb") as script:
            first = script.readline(512)
        interpreter = first[2:].split()[0].decode() if first.startswith(b"#!") else ""
        # A venv's python is a link to its base interpreter: a script of the base installation
        # is not this environment's. (`#!/usr/bin/env python3` scripts start cold.)
        return (os.path.samefile(interpreter, sys.executable)
                and (sys.prefix == sys.base_prefix or pathlib.Path(interpreter).is_relative_to(sys.prefix)))
    except (TypeError, OSError, IndexError, UnicodeDecodeError):  # none on the PATH, or not a script
        return False


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return ABSL_PREFIX.sub("", lines[-1])[:300] if lines else "(no output)"


def excerpt(output: str, shows: str | None) -> str:
    """What a page shows of a command's output: the lines `shows` matches (all, if None),
    without absl's prefix; "..." stands for each run of lines left out."""
    lines = [ABSL_PREFIX.sub("", line) for line in output.splitlines()]
    if shows is None:
        return "\n".join(lines)
    pattern, kept, skipped = re.compile(shows), [], False
    for line in lines:
        if pattern.search(line):
            kept.append(line)
            skipped = False
        elif not skipped:
            kept.append("...")
            skipped = True
    return "\n".join(kept)
