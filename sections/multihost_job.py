"""Section 18's job: its processes started side by side on a free port of 127.0.0.1, waited
for, and what to keep of their logs.

Each process runs `python -m sections.distributed_main` with its own id and 4 simulated
CPU devices. The coordinator is bound to loopback; while the job runs, the addresses its
processes listen on are recorded. Another program may take the free port between our
choosing it and the coordinator binding it: then the job starts again on another.
"""

from __future__ import annotations

import pathlib
import re
import shlex

from sections.children import children, free_port, listening, log_digest, python_m, wait_for_all
from sections.lesson import LessonFailed

JOIN_TIMEOUT = 60  # seconds a process waits for the others to join before it gives up
JOB_TIMEOUT = 600  # seconds before the lesson stops a job that has not finished
ATTEMPTS = 3
# What the coordinator (process 0) prints, before it crashes, when its port is taken.
PORT_TAKEN = re.compile(r"Failed to add port to server")


# The lines of a process's log that teach (who it is, where training started, the losses)
# and the noise counted apart (gloo's connection lines); absl's start-up is the rest.
TEACHES = re.compile(r"^process \d+ of \d+: |Starting training loop at step \d+|collection=train losses")
NOISE = {"gloo connection lines": re.compile(r"^\[Gloo\]")}


def digest(log: pathlib.Path) -> tuple[list[str], str]:
    """The lines of a process's log worth showing (a losses line up to its first value),
    and one line saying what was dropped."""
    kept, dropped = log_digest(log, TEACHES, NOISE)
    return [line.split(", ")[0] if "collection=" in line else line for line in kept], dropped


def commands(job: pathlib.Path, processes: int, devices: int, port: int) -> dict[str, tuple[list[str], dict]]:
    env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}  # jax listens on every interface otherwise
    return {f"process-{i}": (python_m("sections.distributed_main", f"--coordinator_address=127.0.0.1:{port}",
                                      f"--num_processes={processes}", f"--process_id={i}",
                                      f"--initialization_timeout={JOIN_TIMEOUT}", "--cfg=configs/multihost.py",
                                      f"--cfg.workdir={job}"), env)
            for i in range(processes)}


def run_job(job: pathlib.Path, processes: int, devices: int) -> tuple[dict[str, str], set[tuple[str, int]]]:
    """Runs the job to its end; returns each process's command as a user would type it, and
    every (address, port) its processes listened on while it ran."""
    logdir = job.parent
    for attempt in range(1, ATTEMPTS + 1):
        port = free_port()
        started = commands(job, processes, devices, port)
        listeners: set[tuple[str, int]] = set()
        with children(started, logdir) as procs:
            try:
                pids = [proc.pid for proc in procs.values()]
                wait_for_all(procs, logdir, JOB_TIMEOUT, while_waiting=lambda: listeners.update(listening(pids)))
                shown = {name: " ".join(f"{name}={value}" for name, value in env.items()) + " python -m "
                         + shlex.join(argv[argv.index("-m") + 1:]) for name, (argv, env) in started.items()}
                return shown, listeners
            except LessonFailed:
                if attempt == ATTEMPTS or not PORT_TAKEN.search((logdir / "process-0.log").read_text(errors="replace")):
                    raise
        print(f"(port {port} was taken before the coordinator could bind it: trying another)")
    raise AssertionError("unreachable")
