"""Section 18's child processes never outlive the run, whether a peer dies or the user presses
Ctrl-C (its claims, and a run that ends well, are in test_sections.py)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import ROOT, descendants, processes_mentioning, still_running

from harness import shell, warm_start
from sections.parts import network

pytestmark = pytest.mark.slow  # section 18's job, and its children stopped

QUIET = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")


def start(workdir: pathlib.Path, results: pathlib.Path, *more: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), "multihost", *more, "--workdir", str(workdir),
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


@pytest.mark.parametrize("more", [[], ["kontext", "--jobs", "2"]], ids=["in-process", "in-workers"])
def test_ctrl_c_stops_both_processes_of_the_job(tmp_path, more):
    """In the tutorial's own process, or in a worker of --jobs: every process goes."""
    workdir, results = tmp_path / "wd", tmp_path / "r.json"
    proc = start(workdir, results, *more)
    wait_for(lambda: len(processes_mentioning(f"{workdir}/18-multihost/job")) >= 2, 300, "the job's two processes")
    started = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    assert processes_mentioning(str(workdir)) == {} and still_running(started) == set()
    assert json.loads(results.read_text())["interrupted"] is True


def test_a_peer_that_dies_fails_the_section_at_once_in_one_line_and_stops_the_other(tmp_path):
    workdir, results = tmp_path / "wd", tmp_path / "r.json"
    proc = start(workdir, results)
    peers = wait_for(lambda: {pid: cmd for pid, cmd in processes_mentioning(f"{workdir}/18-multihost/job").items()
                              if "--process_id=1" in cmd}, 300, "process 1 of the job")
    # Once the coordinator listens: the lesson's check of its port must see it before the death.
    coordinator = wait_for(lambda: [pid for pid, cmd in processes_mentioning(f"{workdir}/18-multihost/job").items()
                                    if "--process_id=0" in cmd], 300, "process 0 of the job")
    wait_for(lambda: network.listening(coordinator), 300, "the coordinator's port")
    started = descendants(proc.pid)
    killed_at = time.monotonic()
    for pid in peers:
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - killed_at < 60  # not jax's 300 s wait for a peer
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    (section,) = json.loads(results.read_text())["sections"]
    assert section["status"] == "failed" and section["error"]["type"] == "LessonFailed"
    message = section["error"]["message"]
    assert "--process_id=1" in message and "exited -9 (SIGKILL)" in message
    assert processes_mentioning(str(workdir)) == {} and still_running(started) == set()


class PopenInterruptedAsItReturns(subprocess.Popen):
    """A Ctrl-C that lands inside Popen after the fork: the child runs, the caller gets no Popen."""

    started: list[int] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.started.append(self.pid)
        signal.raise_signal(signal.SIGINT)


@pytest.mark.parametrize("how", ["side by side", "to the end"])
def test_ctrl_c_while_a_child_starts_still_stops_that_child(monkeypatch, request, tmp_path, how):
    """A shell block's processes, started cold (no warm-start server): a Ctrl-C pressed as
    one starts is held until it is in the lesson's hands, then stops it."""
    monkeypatch.setattr(warm_start.subprocess, "Popen", PopenInterruptedAsItReturns)
    monkeypatch.setattr(PopenInterruptedAsItReturns, "started", [])
    monkeypatch.setenv(warm_start.ADDRESS_ENV, "0")
    # Ctrl-C raises KeyboardInterrupt, as Python sets it up, whatever ran in this process before.
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous_handler))
    sleeper = "python -c 'import time; time.sleep(60)'"
    command = f"{sleeper} &\n{sleeper} &\nwait" if how == "side by side" else sleeper
    running = None
    with pytest.raises(KeyboardInterrupt):
        running = shell.Shell(command, tmp_path)
        running.wait()
    started = PopenInterruptedAsItReturns.started
    assert len(started) == 1 and running is None  # the Ctrl-C stopped the rest from starting
    assert still_running([psutil.Process(pid) for pid in started if psutil.pid_exists(pid)], grace=5) == set()


@pytest.mark.slow
def test_on_a_machine_that_refuses_sockets_the_job_is_skipped_in_one_line(tutorial):
    """As a sandboxed TPU machine of this project's refused every TCP and UDP socket."""
    refusing = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests" / "no_sockets"),
                                                                         os.environ.get("PYTHONPATH")])))
    run = tutorial("multihost", "--jobs", "2", env=refusing)
    assert run.returncode == 0, run.stdout[-2000:]
    assert run.statuses() == {"multihost": "skipped"}
    assert run.section("multihost")["summary"] == ("this machine refuses TCP sockets, loopback included (Address family"
                                                   " not supported by protocol): the processes of a JAX job meet over TCP")
