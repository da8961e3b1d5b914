"""Section 18's child processes: the lesson's claims, and that no child ever outlives the run,
whether the run ends well, a peer dies, or the user presses Ctrl-C."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from conftest import ROOT

QUIET = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")


def processes_mentioning(text: str) -> dict[int, str]:
    """Live processes whose command line contains `text`: pid -> command line."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), "")
        except OSError:
            continue  # gone meanwhile
        if text in cmdline and "zombie" not in state:
            found[int(entry.name)] = cmdline
    return found


def start(workdir: pathlib.Path, results: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), "multihost", "--workdir", str(workdir),
                             "--json", str(results)], cwd=ROOT, env=QUIET, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_job_trains_like_one_8_device_process_and_leaves_nothing_running(tutorial, tmp_path):
    run = tutorial("multihost", "--workdir", str(tmp_path / "wd"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (section,) = run.results["sections"]
    assert section["status"] == "passed" and all(check["passed"] for check in section["checks"])
    assert section["facts"]["max_relative_loss_difference"] <= 1e-5
    assert "dropped" in run.stdout and "gloo connection lines" in run.stdout
    assert "[Gloo]" not in run.stdout + run.stderr  # the children's noise stays in their logs
    assert processes_mentioning(str(tmp_path / "wd")) == {}


def test_ctrl_c_stops_both_processes_of_the_job(tmp_path):
    workdir, results = tmp_path / "wd", tmp_path / "r.json"
    proc = start(workdir, results)
    wait_for(lambda: len(processes_mentioning(f"{workdir}/18-multihost/job")) >= 2, 300, "the job's two processes")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    assert processes_mentioning(str(workdir)) == {}
    assert json.loads(results.read_text())["interrupted"] is True


def test_a_peer_that_dies_fails_the_section_at_once_in_one_line_and_stops_the_other(tmp_path):
    workdir, results = tmp_path / "wd", tmp_path / "r.json"
    proc = start(workdir, results)
    peers = wait_for(lambda: {pid: cmd for pid, cmd in processes_mentioning(f"{workdir}/18-multihost/job").items()
                              if "--process_id=1" in cmd}, 300, "process 1 of the job")
    killed_at = time.monotonic()
    for pid in peers:
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - killed_at < 60  # not jax's 300 s wait for a peer
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    (section,) = json.loads(results.read_text())["sections"]
    assert section["status"] == "failed" and section["error"]["type"] == "LessonFailed"
    assert section["error"]["message"].startswith("process-1 exited -9")
    assert processes_mentioning(str(workdir)) == {}
