"""Jupyter kernels started warm, for the page programs of tests/test_sections.py:

    python tests/warm_kernel.py ADDRESS CONNECTION_FILE LOG

is the command of the kernel spec `page_programs.run_in_a_kernel` writes, ADDRESS a
warm-start server's (tests/warm_server.py): its kernels start with jax, flax, optax and
Kauldron imported, which a kernel started afresh spends about 6 CPU seconds on.

Jupyter starts it as it starts any kernel, in a session of its own. It asks the server for
this module's `forked` (which becomes `python -m ipykernel_launcher -f CONNECTION_FILE`),
forked in its directory and environment, the kernel's own output to LOG; then it waits
for the kernel and ends as it ends. The kernel cannot join the process group of another
session, so it has one of its own, with the commands it runs: a SIGINT or SIGTERM to this
program goes to that group, and when this program ends, killed or not, the kernel's group
is killed.
"""

import os
import pathlib
import select
import signal
import sys
import threading

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository, for harness

from harness import warm_start  # noqa: E402


def kernel(address: str, connection_file: str, log: str) -> None:
    """Here, as Jupyter started it."""
    command = [sys.executable, "-m", "tests.warm_kernel", "forked", str(os.getpid()), "-f", connection_file]
    child = warm_start.WarmChild(address, command, cwd=pathlib.Path.cwd(), env=dict(os.environ),
                                output=pathlib.Path(log), pgid=0)

    def relay(signum, frame):
        os.killpg(child.pid, signum)

    signal.signal(signal.SIGINT, relay)
    signal.signal(signal.SIGTERM, relay)
    code = child.wait()
    sys.exit(code if code >= 0 else 128 - code)


def forked(launcher: int, args: list[str]) -> None:
    """In the forked kernel: its group ends when the launcher does, then it is ipykernel.
    Its commands' warm children join the group too (tests/warm_command.py)."""
    from compat.run import run_module
    from tests.warm_command import KERNEL_GROUP_ENV

    os.environ[KERNEL_GROUP_ENV] = str(os.getpgrp())

    ended = os.pidfd_open(launcher)

    def end_with_the_launcher():
        select.select([ended], [], [])
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=end_with_the_launcher, daemon=True).start()
    run_module("ipykernel_launcher", args)


if __name__ == "__main__":
    if sys.argv[1] == "forked":
        forked(int(sys.argv[2]), sys.argv[3:])
    else:
        kernel(*sys.argv[1:])
