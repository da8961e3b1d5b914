"""Preemption: a real SIGKILL in the middle of training, then the same command again.

The job is the suite's preemptible configuration (PyGrain data), shortened on the command
line to 400 steps with a checkpoint every 50: the command a user types, forked, as the
lessons' commands are, by a warm-start server (its imports paid once, not at each of the
four starts). Orbax commits a checkpoint by renaming its temporary directory, so a
checkpoint killed half-written is never loaded.
"""

import os
import re
import signal
import sys
import time
import pathlib

import pytest
from conftest import ROOT, warm_server

from harness import processes, warm_start

pytestmark = pytest.mark.slow  # kauldron.main, killed and run again

# The job's environment: quiet, and (below) a compilation cache its runs share.
JOB_ENV = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")

STEPS, EVERY = 400, 50  # configs/preemptible.py's 1000 and 100, shortened: the same job, less of it


def training_command(workdir: pathlib.Path) -> list[str]:
    """The suite's preemptible job, as a user starts it (compat applied, for broken legs)."""
    return [sys.executable, "-m", "compat.run", "kauldron.main", "--cfg=configs/preemptible.py",
            f"--cfg.workdir={workdir}", f"--cfg.num_train_steps={STEPS}", f"--cfg.checkpointer.save_interval_steps={EVERY}"]


def committed_steps(workdir: pathlib.Path) -> list[int]:
    """Steps of the checkpoints Orbax has committed (renamed from their temporary name)."""
    folder = workdir / "checkpoints"
    names = [entry.name for entry in os.scandir(folder)] if folder.is_dir() else []
    return sorted(int(m.group(1)) for m in map(re.compile(r"ckpt_(\d+)$").match, names) if m)


def being_written(workdir: pathlib.Path) -> list[str]:
    folder = workdir / "checkpoints"
    if not folder.is_dir():
        return []
    return [e.name for e in os.scandir(folder) if e.name.endswith(".orbax-checkpoint-tmp")]


def started_at(log: str) -> int:
    """The step Kauldron says its training loop started at."""
    return int(re.search(r"Starting training loop at step (\d+)", log).group(1))


def start(workdir: pathlib.Path, log: pathlib.Path):
    """The job, its output to `log`: forked by the warm-start server when there is one."""
    return warm_start.start(training_command(workdir), JOB_ENV, log, cwd=ROOT)


def kill_when(workdir: pathlib.Path, condition, timeout: float = 600) -> int:
    """Starts the job, SIGKILLs it as soon as `condition(workdir)` holds; returns the step
    its training loop had started at."""
    log = workdir.parent / f"{workdir.name}-killed.log"
    proc = start(workdir, log)
    deadline = time.monotonic() + timeout
    try:
        while not condition(workdir):
            assert proc.poll() is None, "the job finished before it could be killed"
            assert time.monotonic() < deadline, "timed out waiting to kill the job"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        processes.stop(proc)
    assert proc.returncode == -signal.SIGKILL
    return started_at(log.read_text())


def run_to_the_end(workdir: pathlib.Path) -> int:
    """Runs the job to completion; returns the step its training loop started at."""
    log = workdir.parent / f"{workdir.name}-to-the-end.log"
    proc = start(workdir, log)
    try:
        assert proc.wait(900) == 0, log.read_text()[-3000:]
    finally:
        processes.stop(proc)
    return started_at(log.read_text())


def final_checkpoint(workdir: pathlib.Path) -> dict:
    """Everything in the last checkpoint (params and optimizer state), as numpy arrays."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    tree = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / f"ckpt_{STEPS}" / "default")
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


@pytest.fixture(scope="module", autouse=True)
def warm_start_and_a_shared_compilation_cache(tmp_path_factory):
    """The four runs start forked from one warm-start server (its imports, about 7 CPU-s
    of each cold start on Python 3.11, paid once) and share JAX's compilation cache, as
    runs on one machine can: each after the first compiles nothing (2.6 CPU-s). A program
    read from the cache is the one compiled, so the runs stay bit-identical.

    A job killed by SIGKILL leaves the semaphore it made (tqdm's lock) to the resource
    tracker it shares with the server, which reports it as leaked when the server ends: the
    server's output goes to a log of its own, not to the tests'."""
    JOB_ENV.update(JAX_COMPILATION_CACHE_DIR=str(tmp_path_factory.mktemp("jax-cache")),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    server_log = tmp_path_factory.mktemp("warm-server") / "server.log"
    with open(server_log, "w") as log, warm_server(JOB_ENV, stderr=log) as address, warm_start.used_here(address):
        yield


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    assert run_to_the_end(workdir) == 0
    return final_checkpoint(workdir)


def assert_bit_identical(resumed: dict, reference: dict) -> None:
    assert resumed.keys() == reference.keys()
    different = [key for key in reference if not (resumed[key] == reference[key]).all()]
    assert not different, f"differ from the uninterrupted run: {different}"


def test_killed_while_writing_a_checkpoint_then_after_one_it_resumes_each_time_and_ends_bit_identical(
        tmp_path, uninterrupted):
    """Two preemptions of one job, then the same command to the end."""
    workdir = tmp_path / "job"
    # 1. While the third checkpoint or a later one is being written, so that an earlier one
    # (after the first EVERY steps) is committed.
    assert kill_when(workdir, lambda wd: any(not n.startswith(("ckpt_0.", f"ckpt_{EVERY}.")) for n in being_written(wd))) == 0
    half_written = being_written(workdir)
    first = max(committed_steps(workdir))
    assert half_written and all(int(n.split(".")[0][5:]) > first for n in half_written)

    # 2. Again, just after a checkpoint two intervals on is committed: it had resumed at
    # `first`; Orbax ignored the half-written one.
    assert kill_when(workdir, lambda wd: max(committed_steps(wd), default=0) >= first + 2 * EVERY) == first
    second = max(committed_steps(workdir))
    assert first + 2 * EVERY <= second < STEPS, "killed after a checkpoint, before the end"

    # 3. The same command once more: it resumes at the last checkpoint, not at 0, and ends
    # where an uninterrupted run ends, bit for bit.
    assert run_to_the_end(workdir) == second
    assert max(committed_steps(workdir)) == STEPS and not being_written(workdir)
    assert_bit_identical(final_checkpoint(workdir), uninterrupted)
