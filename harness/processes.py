"""Every process a lesson starts, in one place: how it starts, how it is waited for, what
is kept of its output, and that none outlives the lesson.

A lesson starts processes only through the shell commands its page shows
(`lesson.shell("python -m kauldron.main ...")`): `Shell` runs them as a shell would, at
the repository root, with `$WORKDIR` set. Lines of the form

    [NAME=value ...] python -m MODULE ARGS [&]        and        wait

are run here (`&`: in the background, until `wait`), and so are this environment's console
scripts (`tensorboard ...`, through their entry point); anything else goes to bash.

A `python -m` child spends about 8 CPU seconds importing jax, Kauldron and TensorFlow
before it does anything. Warm processes come from one place: multiprocessing's forkserver,
which imports all that once (`harness.warm_imports`) and forks from there. It forks the
runner's --jobs workers (`warm_context()`) and, when a chosen lesson `starts_processes`,
one warm-start server (`server()`), which forks each such child: it sets the command's
environment, directory and output, runs the module as `python -m` does (compat/run.py's
`run_module`, the one shim), and ends as a Python program ends.
Importing starts no jax backend, so forking after it is safe, and a child's `XLA_FLAGS`
or `jax.distributed.initialize()` still act before its backend starts. Without a server,
or with KAULDRON_TUTORIAL_WARM_START=0 (to rule warm start out when narrowing a failure
down; `tutorial.py --no-warm-start` sets it), children are started with
`subprocess.Popen`, and lessons cannot tell.

A child joins the process group of the worker that asked for it, so stopping a worker
stops its children too, and runs at its priority, as a Popen child would: every worker
but the one running the run's longest chain of processes runs at lower priority
(`lower_priority`; runner/__init__.py's `at_normal_priority`). A Ctrl-C is raised as
KeyboardInterrupt wherever Python happens to be: raised inside `subprocess.Popen` after
the fork, it would leave a child no variable holds, so a Ctrl-C pressed while a child
starts is held until the child is in the lesson's hands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import pathlib
import re
import select
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository: configs/ and sections/
ADDRESS_ENV = "KAULDRON_TUTORIAL_WARM_START"  # the server's socket, set in the workers; "0": never warm
# absl's prefix of a log line: level, date, time, thread, file:line.
ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+:\d+\] ")
# Tokens of the shell's own syntax (pipes, redirections, subshells, lists), which bash runs.
_SHELL_SYNTAX = re.compile(r"^[();<>|&]+$")


class ProcessFailed(Exception):
    """A process a lesson started failed; the one-line message says which and why."""


# -- starting one process -----------------------------------------------------------


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


def start(command: list[str], env: dict[str, str], output: pathlib.Path, *, cwd: pathlib.Path = ROOT):
    """Starts `command`, its stdout and stderr to `output`: forked by the warm-start server
    when there is one and the command is `python -m ...`, else a Popen. Either way it has
    `pid`, `poll`, `wait`, `kill` and `returncode`. Call it under `ctrl_c_held()`, and put
    what it returns where it will be stopped before the block ends."""
    address = os.environ.get(ADDRESS_ENV)
    # A `python -c` program (through compat.run too) starts cold: it is typed to look at a
    # fresh process (section 4 asks what importing one module imported).
    is_python_m = command[0] == sys.executable and command[1:2] == ["-m"] and "-c" not in command[2:4]
    if address and address != "0" and is_python_m:
        with contextlib.suppress(ConnectionError, FileNotFoundError):  # no server there: a Popen
            return WarmChild(address, command, cwd, env, output)
    with open(output, "w") as out:  # the child keeps its own copy
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


# -- priority ---------------------------------------------------------------------

# The niceness of the run's workers, all but the one running the run's longest chain of
# processes (runner/__init__.py): measured, section 15's eval job then ends about 3 s sooner.
LOW_PRIORITY = 10


def niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def lower_priority(to: int = LOW_PRIORITY) -> None:
    """This process at niceness `to` (never higher priority than it is), every thread of it:
    on Linux, niceness is a thread's, and jax's and TensorFlow's pools of threads may have
    started already. Processes it starts from now on start there too."""
    tasks = pathlib.Path("/proc/self/task")
    for tid in [int(task.name) for task in tasks.iterdir()] if tasks.is_dir() else [0]:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, tid, max(to, os.getpriority(os.PRIO_PROCESS, tid)))


def stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


# -- a lesson's shell command ------------------------------------------------------


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


def _console_script(name: str) -> bool:
    """Whether `name` is a console script this Python environment installed (its file is
    beside this interpreter, and an entry point names it)."""
    import importlib.metadata

    return ((pathlib.Path(sys.executable).parent / name).is_file()
            and bool(importlib.metadata.entry_points(group="console_scripts", name=name)))


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


# -- what processes listen on ------------------------------------------------------


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (another program may still take it before we do)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    mapped = getattr(ipaddress.ip_address(address), "ipv4_mapped", None)
    return str(mapped) if mapped else address


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(ipv4_if_mapped(address)).is_loopback


# -- warm processes: the forkserver, and the warm-start server it forks ---------------


def warm_context():
    """The multiprocessing context whose processes start with `harness.warm_imports`
    done: the forkserver's (Linux and macOS). Its server imports once and forks each
    process from there: the --jobs workers, and the warm-start server. It imports the
    main module too, so that a worker need not: a program that starts warm processes
    keeps its own work under `if __name__ == "__main__":`, as multiprocessing asks."""
    import multiprocessing

    # The server starts in this process's working directory, and (up to Python 3.13 at
    # least) without this process's sys.path: from elsewhere than the repository, it could
    # not import harness.warm_imports, and silently skipped it.
    paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "harness.warm_imports"])
    return context


@contextlib.contextmanager
def server():
    """Runs a warm-start server for the block and yields its address (for the workers'
    ADDRESS_ENV), or None when warm start is turned off or forking is not available.

    The server is forked by the forkserver, like the --jobs workers, so it costs no
    imports of its own. Its socket listens from the start: a worker may ask before the
    forkserver has imported, and then waits."""
    import multiprocessing

    if os.environ.get(ADDRESS_ENV) == "0" or "forkserver" not in multiprocessing.get_all_start_methods():
        yield None
        return
    context = warm_context()
    with tempfile.TemporaryDirectory(prefix="kauldron-tutorial-") as directory:  # short: a socket path is
        address = str(pathlib.Path(directory, "warm-start"))                     # at most 107 bytes
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(address)
        listener.listen(16)
        here, there = context.Pipe()  # the server ends when `here` closes: at the block's end, or if this process dies
        proc = context.Process(target=serve, args=(listener, there), name="warm-start server", daemon=False)
        try:
            proc.start()
        finally:  # the server holds its own copies (so a server that is gone refuses connections)
            listener.close()
            there.close()
        try:
            yield address
        finally:
            here.close()
            proc.join(timeout=10)
            if proc.exitcode is None:
                proc.kill()
                proc.join()


def turn_warm_start_off() -> None:
    """From now on, this process and those it starts start every child afresh."""
    os.environ[ADDRESS_ENV] = "0"


def use(address: str | None) -> None:
    """Children of this process come from the server at `address` (None: started as usual).
    Warm start turned off (ADDRESS_ENV=0) stays off."""
    if os.environ.get(ADDRESS_ENV) == "0":
        return
    os.environ.pop(ADDRESS_ENV, None)
    if address:
        os.environ[ADDRESS_ENV] = address


@contextlib.contextmanager
def used_here(address: str | None):
    """`use(address)` for the block, then as it was."""
    before = os.environ.get(ADDRESS_ENV)
    use(address)
    try:
        yield
    finally:
        if before != "0":  # warm start turned off stays off
            os.environ.pop(ADDRESS_ENV, None)
            if before:
                os.environ[ADDRESS_ENV] = before


# How long a lesson waits for the warm-start server to fork its child: the forkserver's
# imports take about 5 s (measured, byte-compiled installs): a bound for a machine far slower.
FORK_SECONDS = 300


class WarmChild:
    """A child forked by the server: the part of `subprocess.Popen` lessons use (`pid`,
    `poll`, `wait`, `kill`, `returncode`). The server writes the child's pid on the
    connection when it forks it, and its exit status when it ends."""

    def __init__(self, address: str, command: list[str], cwd: pathlib.Path, env: dict[str, str],
                 output: pathlib.Path, pgid: int | None = None):
        """`pgid`: the process group the child joins; this process's by default, 0 for a
        group of its own (a process group of another session cannot be joined)."""
        self.args, self.returncode, self._received = command, None, b""
        self._connection = socket.socket(socket.AF_UNIX)
        self._connection.connect(address)
        # Niceness too: a child runs at its parent's priority, as a Popen child would.
        request = {"command": command, "cwd": str(cwd), "env": env, "output": str(output),
                   "pgid": os.getpgrp() if pgid is None else pgid, "niceness": niceness()}
        self._connection.sendall(json.dumps(request).encode() + b"\n")
        pid = self._line(timeout=FORK_SECONDS)  # waits while the forkserver still imports
        if pid is None:
            self._connection.close()
            raise ProcessFailed(f"the warm-start server did not start `{' '.join(command[2:4])}` in {FORK_SECONDS} s")
        if not pid:  # the server is gone: the caller starts the command as usual
            self._connection.close()
            raise ConnectionError("the warm-start server is gone")
        self.pid = int(pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            line = self._line(timeout=0)
            if line is not None:
                self.returncode = int(line) if line else -signal.SIGKILL  # "": the server is gone
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            line = self._line(timeout)
            if line is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = int(line) if line else -signal.SIGKILL
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _line(self, timeout: float | None) -> str | None:
        """The server's next line; None if none came within `timeout`; "" if it closed."""
        while b"\n" not in self._received:
            if not select.select([self._connection], [], [], timeout)[0]:
                return None
            chunk = self._connection.recv(4096)
            if not chunk:
                return ""
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return line.decode()


def serve(listener: socket.socket, runner) -> None:
    """The warm-start server: forks a child for each request on `listener`, until the
    runner closes its end of the connection `runner` (or is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle
    server_pid = os.getpid()
    import harness.warm_imports  # noqa: F401 - the forkserver imported it already: nothing to do

    # The imports leave threads of C libraries behind (jemalloc's background thread among
    # them), no Python thread and no jax backend: the state the forkserver forks the --jobs
    # workers in. Python 3.12 warns about any fork with threads.
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)

    waiting: dict[int, socket.socket] = {}  # child pid -> the connection that asked for it
    try:
        while True:
            readable = select.select([listener, runner], [], [], 0.1)[0]
            if runner in readable:
                return  # the runner is done, or gone (it never sends: readable means closed)
            if listener in readable:
                connection, _ = listener.accept()
                request = json.loads(connection.makefile().readline())
                ready, set_up = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child keeps no copy of the server's sockets
                    for kept in (listener, connection, *waiting.values()):
                        kept.close()
                    runner.close()
                    os.close(ready)
                    _become(request, set_up)  # never returns
                os.close(set_up)
                os.read(ready, 1)  # the pid goes back once the child is in its group and named
                os.close(ready)
                try:
                    connection.sendall(f"{pid}\n".encode())
                except OSError:  # the asker is gone (stopped meanwhile): nobody would stop its child
                    os.kill(pid, signal.SIGKILL)
                    connection.close()
                waiting[pid] = connection
            _report_exits(waiting)
    finally:
        if os.getpid() == server_pid:
            for pid in waiting:  # orphans of a runner that is gone
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _report_exits(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        connection = waiting.pop(pid)
        with contextlib.suppress(OSError), connection:
            connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


def _become(request: dict, set_up: int) -> None:
    """In the forked child: become `python -m MODULE ARGS` as asked, and exit as a Python
    process does, with the module's exit status. Writes to `set_up` once it is in its
    group and named."""
    import setproctitle

    os.setpgid(0, request["pgid"])
    lower_priority(request["niceness"])
    setproctitle.setproctitle(shlex.join(request["command"]))  # what `ps` shows, not the server's command
    os.write(set_up, b"1")
    os.close(set_up)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # jax read JAX_PLATFORMS when the server imported it; a new process reads the command's.
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_platforms", os.environ.get("JAX_PLATFORMS") or None)
    tempfile.tempdir = None  # read from TMPDIR again, as a new process does: the server's imports set it
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    output = os.open(request["output"], flags, 0o644)
    stdin = os.open(os.devnull, os.O_RDONLY)
    for source, target in ((stdin, 0), (output, 1), (output, 2)):
        os.dup2(source, target)
    from compat.run import run_module

    module, *args = request["command"][2:]
    _end_as_a_program(lambda: run_module(module, args))


def _end_as_a_program(main) -> None:
    """Runs `main`, then ends this process as the interpreter ends `python -m MODULE`: an
    uncaught exception printed (exit status 1), a SystemExit's code as the status, the
    program's threads waited for, its atexit functions run, its output flushed. A forked
    process must do it itself: it would return into the code that forked it (here
    multiprocessing's, which ends its processes with os._exit and runs no atexit function)."""
    import atexit

    code, interrupted = 0, False
    try:
        main()
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            code = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException as error:  # noqa: BLE001 - as the interpreter does with what reaches it
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, isinstance(error, KeyboardInterrupt)
    threading._shutdown()  # noqa: SLF001 - the interpreter's own step at exit; it has no public name
    atexit._run_exitfuncs()  # noqa: SLF001 - likewise
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if interrupted:  # the interpreter ends by the signal, so the parent sees it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)
