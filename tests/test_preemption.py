"""Preemption: a real SIGKILL in the middle of training, then the same command again.

The job is the suite's preemptible configuration (PyGrain data, a checkpoint every 100
steps), started as a user would start it. Orbax commits a checkpoint by renaming its
temporary directory, so a checkpoint killed half-written is never loaded.
"""

import os
import re
import signal
import subprocess
import sys
import time
import pathlib

import pytest
from conftest import ROOT

QUIET = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")

PREEMPTIBLE_STEPS = 1000  # configs/preemptible.py: a checkpoint every 100 steps


def training_command(workdir: pathlib.Path) -> list[str]:
    """The suite's preemptible job, as a user starts it (compat applied, for broken legs)."""
    return [sys.executable, "-m", "compat.run", "kauldron.main",
            "--cfg=configs/preemptible.py", f"--cfg.workdir={workdir}"]


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


def kill_when(workdir: pathlib.Path, condition, timeout: float = 600) -> None:
    """Starts the job and SIGKILLs it as soon as `condition(workdir)` holds."""
    proc = subprocess.Popen(training_command(workdir), cwd=ROOT, env=QUIET,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while not condition(workdir):
            assert proc.poll() is None, "the job finished before it could be killed"
            assert time.monotonic() < deadline, "timed out waiting to kill the job"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def run_to_the_end(workdir: pathlib.Path) -> int:
    """Runs the job to completion; returns the step Kauldron says its loop started at."""
    proc = subprocess.run(training_command(workdir), cwd=ROOT, env=QUIET, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(re.search(r"Starting training loop at step (\d+)", proc.stderr).group(1))


def final_checkpoint(workdir: pathlib.Path) -> dict:
    """Everything in the last checkpoint (params and optimizer state), as numpy arrays."""
    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    tree = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / f"ckpt_{PREEMPTIBLE_STEPS}" / "default")
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    assert run_to_the_end(workdir) == 0
    return final_checkpoint(workdir)


def assert_bit_identical(resumed: dict, reference: dict) -> None:
    assert resumed.keys() == reference.keys()
    different = [key for key in reference if not (resumed[key] == reference[key]).all()]
    assert not different, f"differ from the uninterrupted run: {different}"


def test_killed_mid_training_resumes_from_the_last_checkpoint_bit_identically(tmp_path, uninterrupted):
    workdir = tmp_path / "job"
    kill_when(workdir, lambda wd: any(step >= 300 for step in committed_steps(wd)))
    last = max(committed_steps(workdir))
    assert 300 <= last < PREEMPTIBLE_STEPS, "killed after a checkpoint, before the end"

    assert run_to_the_end(workdir) == last  # resumed there, not at 0
    assert max(committed_steps(workdir)) == PREEMPTIBLE_STEPS
    assert_bit_identical(final_checkpoint(workdir), uninterrupted)


def test_a_checkpoint_killed_while_being_written_is_never_loaded(tmp_path, uninterrupted):
    workdir = tmp_path / "job"
    # ckpt_200 or later, so that an earlier checkpoint (100) is committed.
    kill_when(workdir, lambda wd: any(not n.startswith(("ckpt_0.", "ckpt_100.")) for n in being_written(wd)))
    half_written = being_written(workdir)
    last = max(committed_steps(workdir))
    assert half_written and all(int(n.split(".")[0][5:]) > last for n in half_written)

    assert run_to_the_end(workdir) == last  # Orbax ignored the half-written one
    assert not being_written(workdir)
    assert_bit_identical(final_checkpoint(workdir), uninterrupted)
