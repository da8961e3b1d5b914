"""Child processes that start with jax, Kauldron and TensorFlow already imported.

A lesson's child (`python -m kauldron.main ...`, the 8-device run, the processes of a
multi-host job) spends about 8 CPU seconds importing before it does anything. When a
chosen lesson `starts_processes`, the runner starts one server that imports all that once
(sections/warm_imports.py), beside its own imports or the workers', and then forks a child
for each `python -m MODULE ARGS` a lesson asks for. The child sets the lesson's environment, working directory and output files,
and runs MODULE as `python -m` does (`runpy`), then exits as Python does (threads joined,
exit handlers run). Importing starts no jax backend, so forking after it is safe, and a
child's `XLA_FLAGS` or `jax.distributed.initialize()` still act before its backend starts.

    python -m sections.warm_start SOCKET   # the server: the runner starts it; it ends
                                           # when its standard input closes

A child joins the process group of the worker that asked for it, so stopping a worker
stops its children too. Without a server (a notebook), `start` uses `subprocess.Popen`,
and lessons cannot tell the difference.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import warnings

ADDRESS_ENV = "KAULDRON_TUTORIAL_WARM_START"  # the server's socket, set in the workers
ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository


@contextlib.contextmanager
def server():
    """Runs a server for the block and yields its address (for the workers' ADDRESS_ENV)."""
    with tempfile.TemporaryDirectory(prefix="kauldron-tutorial-") as directory:  # short: a socket path is
        address = str(pathlib.Path(directory, "warm-start"))                     # at most 107 bytes
        proc = subprocess.Popen([sys.executable, "-m", "sections.warm_start", address], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            # It says when it listens (before its imports); if it died, children start as usual.
            yield address if proc.stdout.readline() else None
        finally:
            proc.stdin.close()  # the server's cue to end
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def use(address: str | None) -> None:
    """Children of this process come from the server at `address` (None: started as usual)."""
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
        use(before)


def start(command: list[str], cwd: pathlib.Path, env: dict[str, str], stdout: pathlib.Path,
          stderr: pathlib.Path | None = None, warm: bool = True):
    """Starts `command` writing to `stdout` (and `stderr`, else the same file): forked by
    the server when there is one, the command is `python -m ...` and `warm`, else a Popen."""
    address = os.environ.get(ADDRESS_ENV)
    if warm and address and command[0] == sys.executable and command[1:2] == ["-m"]:
        with contextlib.suppress(ConnectionError, FileNotFoundError):  # no server there: started as usual
            return WarmChild(address, command, cwd, env, stdout, stderr)
    with open(stdout, "w") as out, open(stderr or os.devnull, "w") as err:  # the child keeps its own copies
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                stderr=err if stderr else subprocess.STDOUT, stdin=subprocess.DEVNULL)


class WarmChild:
    """A child forked by the server: the part of `subprocess.Popen` lessons use (`pid`,
    `poll`, `wait`, `kill`, `returncode`). The server writes the child's pid on the
    connection when it forks it, and its exit status when it ends."""

    def __init__(self, address: str, command: list[str], cwd: pathlib.Path, env: dict[str, str],
                 stdout: pathlib.Path, stderr: pathlib.Path | None):
        self.args, self.returncode, self._received = command, None, b""
        self._connection = socket.socket(socket.AF_UNIX)
        self._connection.connect(address)
        request = {"command": command, "cwd": str(cwd), "env": env, "stdout": str(stdout),
                   "stderr": str(stderr) if stderr else None, "pgid": os.getpgrp()}
        self._connection.sendall(json.dumps(request).encode() + b"\n")
        self.pid = int(self._line(timeout=None))  # waits while the server still imports

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


def serve(address: str) -> None:
    """Listens first (a worker may ask before the imports are done: it then waits), imports,
    then forks a child for each request until standard input closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the runner's to handle
    server = os.getpid()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(address)
    listener.listen(16)
    print("listening", flush=True)
    import sections.warm_imports  # noqa: F401

    # The imports leave threads of C libraries behind (jemalloc's background thread among
    # them), no Python thread and no jax backend: the state multiprocessing's forkserver
    # forks the --jobs workers in. Python 3.12 warns about any fork with threads.
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)

    waiting: dict[int, socket.socket] = {}  # child pid -> the connection that asked for it
    try:
        while True:
            readable = select.select([listener, sys.stdin], [], [], 0.1)[0]
            if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
                return  # the runner is done, or gone
            if listener in readable:
                connection, _ = listener.accept()
                request = json.loads(connection.makefile().readline())
                ready, set_up = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child keeps no copy of the server's sockets
                    for kept in (listener, connection, *waiting.values()):
                        kept.close()
                    os.close(ready)
                    run_child(request, set_up)  # never returns
                os.close(set_up)
                os.read(ready, 1)  # the pid goes back once the child is in its group and named
                os.close(ready)
                connection.sendall(f"{pid}\n".encode())
                waiting[pid] = connection
            report_exits(waiting)
    finally:
        if os.getpid() == server:
            for pid in waiting:  # orphans of a runner that is gone
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def report_exits(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        connection = waiting.pop(pid)
        with contextlib.suppress(OSError), connection:
            connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())


def run_child(request: dict, set_up: int) -> None:
    """In the forked child: become `python -m MODULE ARGS` as the lesson asked, and exit
    as a Python process does, with the module's exit status. Writes to `set_up` once it
    is in its group and named."""
    import setproctitle

    os.setpgid(0, request["pgid"])
    setproctitle.setproctitle(shlex.join(request["command"]))  # what `ps` shows, not the server's command
    os.write(set_up, b"1")
    os.close(set_up)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if request["stderr"] else stdout
    stdin = os.open(os.devnull, os.O_RDONLY)
    for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(source, target)
    module, *args = request["command"][2:]
    sys.argv = [module, *args]  # runpy puts the module's path first, as `python -m` does
    import runpy

    runpy.run_module(module, run_name="__main__", alter_sys=True)
    sys.exit(0)  # as the end of `python -m MODULE`; a SystemExit raised by MODULE passes through


if __name__ == "__main__":
    serve(sys.argv[1])
