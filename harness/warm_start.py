"""Warm processes. A `python -m` child spends about 8 CPU seconds importing jax, Kauldron
and TensorFlow before it does anything. Warm processes come from one place:
multiprocessing's forkserver, which imports all that once (`harness.warm_imports`) and
forks from there. It forks the runner's --jobs workers (`warm_context()`) and, when a
chosen lesson `starts_processes`, one warm-start server (`server()`), which forks each
such child (`start`): it sets the command's environment, directory and output, runs the
module as `python -m` does (compat/run.py's `run_module`, the one shim), and ends as a
Python program ends. Importing starts no jax backend, so forking after it is safe, and a
child's `XLA_FLAGS` or `jax.distributed.initialize()` still act before its backend
starts; jax read JAX_PLATFORMS at import, so a child sets its own again. Without a server,
or with KAULDRON_TUTORIAL_WARM_START=0 (to rule warm start out when narrowing a failure
down; `tutorial.py --no-warm-start` sets it), children are started with
`subprocess.Popen`, and lessons cannot tell.

A child joins the process group of the worker that asked for it, so stopping a worker
stops its children too.
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
import threading
import warnings

from harness.processes import ROOT, ProcessFailed, jax_platforms_from_environment

ADDRESS_ENV = "KAULDRON_TUTORIAL_WARM_START"  # the server's socket, set in the workers; "0": never warm


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
        request = {"command": command, "cwd": str(cwd), "env": env, "output": str(output),
                   "pgid": os.getpgrp() if pgid is None else pgid}
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
    setproctitle.setproctitle(shlex.join(request["command"]))  # what `ps` shows, not the server's command
    os.write(set_up, b"1")
    os.close(set_up)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    jax_platforms_from_environment()  # the command's, not the server's
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
