"""The suite under stress: preemption, isolation, concurrent runs, and bad input.

Each test states what a user sees; every expected error is one line, never a traceback.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from sections import registry

QUIET = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")


# --- Preemption: a real SIGKILL in the middle of training --------------------------------

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


# --- Isolation: one failing section does not stop the others ------------------------------

def test_a_failing_section_fails_alone_in_one_line(tutorial):
    env = dict(os.environ, **{registry.FAIL_SECTION_ENV: "kontext"})
    run = tutorial("ref", "kontext", "ktyping", env=env)
    assert run.returncode == 1
    assert run.statuses() == {"ref": "passed", "kontext": "failed", "ktyping": "passed"}
    error = run.section("kontext")["error"]
    assert (error["type"], error["message"]) == ("RuntimeError", f"failure injected by {registry.FAIL_SECTION_ENV}")
    assert error["traceback"].startswith("Traceback (most recent call last)")
    summary_line = next(line for line in run.stdout.splitlines() if re.match(r"\s+3\s+kontext", line))
    assert "failed" in summary_line and "RuntimeError: failure injected" in summary_line
    assert "-> FAILED" in run.stdout and "last frames:" in run.stdout  # unexpected: frames shown
    assert "1 passed" not in run.stdout and "2 passed, 1 failed, 0 skipped" in run.stdout


# --- Concurrent runs -----------------------------------------------------------------------

def test_two_runs_at_once_both_pass_and_share_only_the_cache(tmp_path):
    home, tmp, cache = tmp_path / "home", tmp_path / "tmp", tmp_path / "cache"
    for folder in (home, tmp):
        folder.mkdir()
    env = dict(QUIET, HOME=str(home), TMPDIR=str(tmp))
    env.pop("XDG_CACHE_HOME", None)
    procs = [subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), "--keep", "--cache-dir", str(cache),
                               "--json", str(tmp_path / f"run{i}.json")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in (0, 1)]
    outputs = [p.communicate(timeout=1200)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]

    workdirs = {json.loads((tmp_path / f"run{i}.json").read_text())["workdir"] for i in (0, 1)}
    assert len(workdirs) == 2
    assert {str(p) for p in tmp.iterdir()} == workdirs  # nothing else in the temp directory
    assert list(home.rglob("*")) == []  # nothing in the home directory
    assert sorted(p.name for p in cache.iterdir()) == ["jax", "matplotlib"]


# --- Bad input -----------------------------------------------------------------------------

# Unknown, ambiguous and empty selectors, an unwritable --json, an unusable --workdir or
# --cache-dir and an unknown flag are specified in test_cli.py.


def test_a_corrupt_checkpoint_in_a_kept_workdir_fails_that_section_only(tutorial, tmp_path):
    workdir = tmp_path / "kept"
    assert tutorial("checkpoint", "--workdir", str(workdir)).returncode == 0
    checkpoint = workdir / "09-checkpoint" / "run" / "checkpoints" / "ckpt_300"
    data = max((checkpoint / "default").rglob("d/*"), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated

    run = tutorial("kontext", "checkpoint", "--workdir", str(workdir))
    assert run.returncode == 1
    assert run.statuses() == {"kontext": "passed", "checkpoint": "failed"}
    message = run.section("checkpoint")["summary"]
    assert str(checkpoint) in message and "start fresh" in message
    failed = [line for line in run.stdout.splitlines() if line.startswith("-> FAILED")]
    assert len(failed) == 1 and str(checkpoint) in failed[0]
    assert "Traceback" not in run.stdout + run.stderr and "last frames:" not in run.stdout


def test_a_healthy_kept_workdir_runs_the_lesson_again(tutorial, tmp_path):
    workdir = tmp_path / "kept"
    assert tutorial("checkpoint", "--workdir", str(workdir)).returncode == 0
    again = tutorial("checkpoint", "--workdir", str(workdir))
    assert again.returncode == 0, again.stdout[-2000:]
    assert again.section("checkpoint")["facts"]["checkpoints"]["first_run"] == [0, 100, 200]


def test_ctrl_c_prints_the_summary_writes_partial_json_and_exits_130(tmp_path):
    results = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), "--json", str(results)],
                            cwd=ROOT, env=QUIET, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:  # wait until section 6 has started
        seen.append(line)
        if line.startswith("6. "):
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    stdout = "".join(seen) + out
    assert proc.returncode == 130
    assert "SUMMARY" in stdout and "Traceback" not in stdout + err
    report = json.loads(results.read_text())
    assert report["interrupted"] is True
    statuses = {s["slug"]: s["status"] for s in report["sections"]}
    assert [statuses[slug] for slug in ("konfig", "ref", "kontext", "ktyping", "loss-metric")] == ["passed"] * 5
    assert statuses["trainer"] == "skipped"
    assert report["totals"]["passed"] == 5


def test_without_kauldron_one_line_gives_the_install_command(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    proc = subprocess.run([str(bare / "bin" / "python"), str(ROOT / "tutorial.py"), "kontext"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1
    assert "kauldron" in proc.stderr and "pip install -r requirements.txt" in proc.stderr


def find_python(version: str) -> str | None:
    """A working pythonX.Y: on PATH, or under pyenv (whose shims fail until told a version)."""
    pyenv_root = shutil.which("pyenv") and subprocess.run(
        ["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    candidates = [f"python{version}"]
    if pyenv_root:
        candidates += sorted(str(p) for p in pathlib.Path(pyenv_root, "versions").glob(f"{version}*/bin/python{version}"))
    for candidate in candidates:
        try:
            if subprocess.run([candidate, "-c", "import sys"], capture_output=True).returncode == 0:
                return candidate
        except OSError:
            continue
    return None


def test_an_old_python_is_told_which_python_is_needed():
    python = find_python("3.10")
    if python is None:
        pytest.skip("no Python 3.10 on this machine")
    proc = subprocess.run([python, str(ROOT / "tutorial.py"), "kontext"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and "needs Python >= 3.11" in proc.stderr
