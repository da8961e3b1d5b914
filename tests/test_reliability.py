"""The suite under stress: isolation, concurrent runs, and bad input (preemption is in
test_preemption.py). Each test states what a user sees; every expected error is one
line, never a traceback."""

import io
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import ROOT, processes_with, readme_command, sections_printed
import warm_command

from harness import bounds, processes, registry, shell, teaching, warm_start
from harness.results import SectionResult
from runner import durations, start_order

QUIET = dict(os.environ, TQDM_DISABLE="1", TF_CPP_MIN_LOG_LEVEL="3")


# --- Isolation: one failing section does not stop the others ------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failing_section_fails_alone_in_one_line(tutorial, jobs):
    env = dict(os.environ, **{teaching.FAIL_SECTION_ENV: "kontext"})
    run = tutorial("konfig", "kontext", "loss-metric", "--jobs", jobs, env=env)
    assert run.returncode == 1
    assert run.statuses() == {"konfig": "passed", "kontext": "failed", "loss-metric": "passed"}
    error = run.section("kontext")["error"]
    assert (error["type"], error["message"]) == ("RuntimeError", f"failure injected by {teaching.FAIL_SECTION_ENV}")
    assert error["traceback"].startswith("Traceback (most recent call last)")
    summary_line = next(line for line in run.stdout.splitlines() if re.match(r"\s+3\s+kontext", line))
    assert "failed" in summary_line and "RuntimeError: failure injected" in summary_line
    assert "-> FAILED" in run.stdout and "last frames:" in run.stdout  # unexpected: frames shown
    assert "1 passed" not in run.stdout and "2 passed, 1 failed, 0 skipped" in run.stdout


# --- Worker processes (--jobs) -------------------------------------------------------------

LIGHT = ["konfig", "kontext", "loss-metric"]  # none imports TensorFlow (a few seconds each)


@pytest.mark.slow
def test_jobs_print_each_section_whole_in_order_and_write_the_same_json(tutorial, tmp_path):
    runs = {jobs: tutorial(*LIGHT, "--jobs", jobs) for jobs in ("1", "2")}
    for jobs, run in runs.items():
        assert run.returncode == 0, run.stdout[-2000:]
        assert sections_printed(run.stdout) == LIGHT
    one, two = (runs[jobs].results for jobs in ("1", "2"))
    assert (one["jobs"], two["jobs"]) == (1, 2)
    assert one.keys() == two.keys()
    for a, b in zip(one["sections"], two["sections"], strict=True):
        assert a.keys() == b.keys()
        assert (a["slug"], a["status"], a["checks"], a["facts"]) == (b["slug"], b["status"], b["checks"], b["facts"])
    assert "jobs: 2 worker processes" in runs["2"].stdout and "jobs:" not in runs["1"].stdout


def test_workers_start_early_sections_then_the_longest_of_earlier_runs(tmp_path):
    """On two workers, a long section started last would end the run alone: the runner
    remembers each passed section's seconds in the cache and starts the longest first."""
    chosen = registry.select(registry.catalog(), ["digits", *map(str, range(1, 10))])
    assert [i.slug for i in start_order(chosen, {})][:3] == ["digits", "konfig", "ref"]  # no history: in order
    durations.record(tmp_path, [result("checkpoint", "passed", 3.9), result("sweep", "passed", 3.0),
                                result("ref", "failed", 9.0)])
    assert durations.load(tmp_path) == {"checkpoint": 3.9, "sweep": 3.0}  # a failed section's time says little
    order = [i.slug for i in start_order(chosen, durations.load(tmp_path))]
    assert order[:4] == ["digits", "checkpoint", "sweep", "konfig"]
    (tmp_path / durations.FILE_NAME).write_text("{not json")
    assert durations.load(tmp_path) == {} and durations.load(None) == {}


def result(slug: str, status: str, seconds: float) -> SectionResult:
    return SectionResult(0, slug, slug, status, seconds, "")


@pytest.mark.slow
def test_a_warm_started_child_is_the_command_it_was_given(tmp_path):
    """A lesson's `python -m ...` child forked by the warm-start server: it starts with the
    imports done, `ps` shows its own command, it writes where it was told, its exit status
    comes back, it joins the asking process's group (stopping a worker stops it), and
    kill() stops it. Without a server, or with warm start off, it is a plain Popen."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"a": 1}')
    bad.write_text("{")
    sleeping = [sys.executable, "-m", "timeit", "-n", "1", "-r", "1", "__import__('time').sleep(120)"]
    with warm_start.server() as address, warm_start.used_here(address):
        ok = warm_start.start([sys.executable, "-m", "json.tool", str(good)], dict(os.environ), tmp_path / "ok.out")
        failed = warm_start.start([sys.executable, "-m", "json.tool", str(bad)], dict(os.environ), tmp_path / "bad.out")
        child = warm_start.start(sleeping, dict(os.environ), tmp_path / "sleep.out")
        assert isinstance(child, warm_start.WarmChild)
        assert ok.wait(60) == 0 and json.loads((tmp_path / "ok.out").read_text()) == {"a": 1}
        assert failed.wait(60) == 1 and "Expecting" in (tmp_path / "bad.out").read_text()
        process = psutil.Process(child.pid)
        assert " ".join(process.cmdline()).strip() == shlex.join(sleeping)
        assert os.getpgid(child.pid) == os.getpgrp()
        assert any("tensorflow" in region.path for region in process.memory_maps())  # already imported
        assert child.poll() is None
        child.kill()
        assert child.wait(10) == -signal.SIGKILL
        # jax, imported by the server, read JAX_PLATFORMS there: a child reads its own, as a new process does
        platforms = [sys.executable, "-m", "timeit", "-n", "1", "-r", "1",
                     "import jax, sys; sys.stdout.write(f'platforms={jax.config.jax_platforms}; ')"]
        for value, expected in (("cpu", "platforms=cpu;"), (None, "platforms=None;")):
            env = {name: v for name, v in os.environ.items() if name != "JAX_PLATFORMS"}
            env.update({"JAX_PLATFORMS": value} if value else {})
            told = warm_start.start(platforms, env, tmp_path / "platforms.out")
            assert isinstance(told, warm_start.WarmChild) and told.wait(60) == 0
            assert expected in (tmp_path / "platforms.out").read_text()
    cold = warm_start.start(sleeping[:2] + ["json.tool", str(good)], dict(os.environ), tmp_path / "cold.out")
    assert isinstance(cold, subprocess.Popen) and cold.wait(60) == 0  # no server: started as usual


@pytest.mark.slow
def test_the_python_of_a_warm_page_kernel_forks_python_m_warm_and_runs_anything_else_itself(tmp_path):
    """tests/warm_command.py, the `python` first on a warm page kernel's PATH: `-m` forked
    warm (TensorFlow already imported), its output streamed, its exit status its own (a
    signal's as a shell reports it); `-c` the interpreter itself, cold."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"a": 1}')
    bad.write_text("{")
    tensorflow_loaded = "import sys; sys.stdout.write(str('tensorflow' in sys.modules) + chr(10))"
    with warm_start.server() as address:
        python = str(warm_command.write(tmp_path / "bin", address))
        env = dict(os.environ, **{warm_command.KERNEL_GROUP_ENV: str(os.getpgrp())})

        def run(*args):
            done = subprocess.run([python, *args], env=env, capture_output=True, text=True, timeout=120)
            return done.returncode, done.stdout

        assert run("-m", "json.tool", str(good)) == (0, '{\n    "a": 1\n}\n')
        code, printed = run("-m", "json.tool", str(bad))
        assert code == 1 and "Expecting" in printed  # the child's stderr comes with its stdout
        assert run("-m", "timeit", "-n", "1", "-r", "1", tensorflow_loaded)[1].startswith("True\n")
        assert run("-m", "timeit", "-n", "1", "-r", "1", "import os; os.kill(os.getpid(), 9)")[0] == 128 + 9
        assert run("-c", tensorflow_loaded) == (0, "False\n")


@pytest.mark.slow
def test_a_shell_block_runs_as_bash_would_its_processes_warm_and_a_failure_in_one_line(tmp_path):
    """What `lesson.shell` runs: `python -m` lines here (forked warm when a server runs),
    `&` in the background until `wait`, `$WORKDIR` the lesson's; the rest in bash; a
    process that fails stops its peers at once, and says why in one line."""
    with warm_start.server() as address, warm_start.used_here(address):
        both = shell.Shell("A=1 python -m platform &\npython -c 'import os; print(os.environ[\"WORKDIR\"])'\nwait",
                               tmp_path).wait()
        assert both.returncode == 0 and str(tmp_path) in both.output and "Linux" in both.output
        piped = shell.Shell("echo one two | wc -w", tmp_path).wait()
        assert (piped.returncode, piped.output.strip()) == (0, "2")
        started = time.monotonic()
        failing = shell.Shell("python -m timeit -n 1 -r 1 \"__import__('time').sleep(60)\" &\n"
                                  "python -m no_such_module &\nwait", tmp_path).wait()
        assert failing.returncode == 1 and time.monotonic() - started < 30  # the sleeper was stopped
        assert failing.failure() == f"`python -m no_such_module` exited 1: {sys.executable}: No module named no_such_module"
        # The reason is the failed process's own last line, whatever its peers printed meanwhile.
        mixed = shell.Shell("python -c \"import sys, time; print('half a line', end='', flush=True); time.sleep(60)\" &\n"
                                "python -c \"import sys, time; time.sleep(1); sys.exit('the reason')\" &\nwait", tmp_path).wait()
        assert mixed.failure().endswith("exited 1: the reason") and mixed.output.startswith("half a line")


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_while_workers_run_a_terminal_shows_which_sections_run_and_for_how_long_a_log_nothing(monkeypatch, terminal):
    from runner.status import Status

    stderr = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # set by an earlier in-process run, for its log
    status = Status(19)
    status.show(["evals", "trainer"], 5)
    status.clear()
    status.close()
    assert ("[5/19 done] running: evals 0 s, trainer 0 s" in stderr.getvalue()) is terminal
    assert stderr.getvalue() == "" or terminal


@pytest.mark.slow
def test_a_section_that_kills_its_worker_fails_alone_in_one_line(tutorial):
    env = dict(os.environ, **{teaching.FAIL_SECTION_ENV: "kontext:crash"})
    run = tutorial("konfig", "kontext", "loss-metric", "--jobs", "2", env=env)
    assert run.returncode == 1
    assert run.statuses() == {"konfig": "passed", "kontext": "failed", "loss-metric": "passed"}
    assert "its worker process died while running it alone" in run.section("kontext")["summary"]
    assert "SUMMARY" in run.stdout and "Traceback" not in run.stdout + run.stderr


# --- Concurrent runs: a full run and the notebook at once are test_sections.py's shared runs


# --- Bad input -----------------------------------------------------------------------------

# Unknown, ambiguous and empty selectors, an unwritable --json, an unusable --workdir or
# --cache-dir and an unknown flag are specified in test_cli.py.


# A corrupt and a healthy kept checkpoint workdir: test_sections.py, on copies of its full
# run's kept workdir (a run of their own would repeat the checkpoint lesson).


@pytest.mark.slow
def test_sigterm_while_the_workers_start_stops_the_run_like_ctrl_c_and_leaves_no_process_behind(tmp_path):
    """As a CI job's timeout or `kill` stops it. The workers come from the forkserver, which
    imports first (seconds): the pool waits for it to fork each one. Stopped there, the run
    once left a worker it did not know of, which failed with a traceback after the run had
    exited (seen in CI). A Ctrl-C while the workers run their sections: test_multihost.py."""
    results = tmp_path / "r.json"
    env = dict(QUIET, **{teaching.FAIL_SECTION_ENV: "trainer:hang", "THIS_TEST_RUN": str(tmp_path)})
    proc = subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), "kontext", "trainer", "--jobs", "2",
                             "--json", str(results)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    while time.monotonic() - started < 120 and len(psutil.Process(proc.pid).children()) < 2:
        time.sleep(0.1)  # multiprocessing's resource tracker and forkserver: the pool is starting workers
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "SUMMARY" in out and "Traceback" not in out + err
    assert json.loads(results.read_text())["interrupted"] is True
    gone, alive = psutil.wait_procs(processes_with("THIS_TEST_RUN", str(tmp_path)), timeout=20)
    assert not alive, [p.cmdline() for p in alive]


@pytest.mark.slow
def test_ctrl_c_prints_the_summary_writes_partial_json_and_exits_130(tmp_path):
    results = tmp_path / "r.json"
    env = dict(QUIET, **{teaching.FAIL_SECTION_ENV: "trainer:hang"})  # section 6 runs until Ctrl-C
    proc = subprocess.Popen([sys.executable, str(ROOT / "tutorial.py"), *LIGHT, "trainer", "--jobs", "1",
                             "--json", str(results)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "hanging until interrupted" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    stdout = "".join(seen) + out
    assert proc.returncode == 130
    assert "SUMMARY" in stdout and "Traceback" not in stdout + err
    report = json.loads(results.read_text())
    assert report["interrupted"] is True
    statuses = {s["slug"]: s["status"] for s in report["sections"]}
    assert statuses == {**dict.fromkeys(LIGHT, "passed"), "trainer": "skipped"}
    assert {s["slug"]: s["summary"] for s in report["sections"]}["trainer"] == "interrupted while running"
    assert report["totals"]["passed"] == len(LIGHT)


def test_ctrl_c_stops_the_run_even_when_library_code_swallows_it(monkeypatch, tmp_path, capsys, tutorial_main):
    def run_a_section_that_swallows_ctrl_c(info, workdir, bound=None):
        try:
            signal.raise_signal(signal.SIGINT)  # the user presses Ctrl-C ...
        except KeyboardInterrupt:
            pass  # ... and library code catches it, as one did in CI
        return SectionResult(info.number, info.slug, info.title, "passed", 0.0, "looks fine")

    monkeypatch.setattr(teaching, "run", run_a_section_that_swallows_ctrl_c)
    status = tutorial_main(["kontext", "ktyping", "--jobs", "1", "--no-warm-start", "--workdir", str(tmp_path / "w"),
                            "--json", str(tmp_path / "r.json")])
    assert status == 130
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interrupted"] is True
    assert [(s["slug"], s["status"]) for s in report["sections"]] == [("kontext", "skipped"), ("ktyping", "skipped")]
    assert "interrupted" in capsys.readouterr().out


def test_ctrl_c_during_garbage_collection_stops_the_run_without_a_traceback(monkeypatch, tmp_path, capsys,
                                                                          tutorial_main):
    """Python cannot raise an interrupt inside a gc callback (jax has one): it would print
    "Exception ignored in ..." with a traceback and carry on."""
    import gc

    def press_ctrl_c_in_gc(phase, info):
        if phase == "start":
            signal.raise_signal(signal.SIGINT)

    def run_a_section_that_collects_garbage(info, workdir, bound=None):
        gc.callbacks.append(press_ctrl_c_in_gc)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(press_ctrl_c_in_gc)
        # The interrupt lands here, in the section's own code, within milliseconds: the
        # loop gives it up to 10 s (a thread raises it again, which a loaded machine can
        # delay past 1 s: seen with pytest's 4 workers on 2 cores).
        for _ in range(10_000):
            time.sleep(0.001)
        finished.append(info.slug)
        return SectionResult(info.number, info.slug, info.title, "passed", 0.0, "never interrupted")

    finished = []

    monkeypatch.setattr(teaching, "run", run_a_section_that_collects_garbage)
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's, not pytest's
    status = tutorial_main(["kontext", "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "r.json")])
    assert status == 130 and finished == []  # interrupted promptly, not at the section's end
    assert [s["status"] for s in json.loads((tmp_path / "r.json").read_text())["sections"]] == ["skipped"]
    output = capsys.readouterr()
    assert "Traceback" not in output.out + output.err and "Exception ignored" not in output.err


def test_sigterm_while_the_pool_starts_a_worker_stops_the_run_once_the_worker_is_known(request):
    """A pool starts a worker by waiting for the forkserver to fork it. An interrupt landing
    there left a worker the run did not know of: not stopped with the others, it failed with
    a traceback after the run had exited (seen in CI: SIGTERM, Python 3.12). The runner
    holds SIGTERM there as it holds Ctrl-C while a lesson's command starts."""
    from runner.interrupts import CtrlC

    previous = signal.signal(signal.SIGTERM, CtrlC.handler)  # as tutorial.py installs it
    request.addfinalizer(lambda: signal.signal(signal.SIGTERM, previous))
    request.addfinalizer(lambda: setattr(CtrlC, "pressed", False))
    started = []
    with pytest.raises(KeyboardInterrupt):
        with processes.ctrl_c_held():
            signal.raise_signal(signal.SIGTERM)  # the signal, while the worker is being forked
            started.append("the worker")
    assert started == ["the worker"]
    assert signal.getsignal(signal.SIGTERM) == CtrlC.handler  # the run's own handler again


@pytest.mark.slow
def test_without_kauldron_one_line_gives_the_install_command(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    proc = subprocess.run([str(bare / "bin" / "python"), str(ROOT / "tutorial.py"), "kontext"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1
    setup = readme_command(1).removesuffix(" && .venv/bin/python tutorial.py")  # all but running it
    assert "kauldron" in proc.stderr and f"set up with: {setup} (see README.md)" in proc.stderr


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


@pytest.mark.slow
def test_an_old_python_is_told_which_python_is_needed():
    python = find_python("3.10")
    if python is None:
        pytest.skip("no Python 3.10 on this machine")
    proc = subprocess.run([python, str(ROOT / "tutorial.py"), "kontext"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and "needs Python >= 3.11" in proc.stderr


# --- A hang is a failure: every wait has a bound -------------------------------------------

class StuckProcess:
    """A process that prints one line and then nothing, and never exits, as a deadlocked job
    does: what `warm_start.start` returns, without starting anything."""

    def __init__(self, output: pathlib.Path):
        output.write_text("I1206 21:00:00.000000 140 train_loop.py:42] [0] collection=train losses/logcosh=1.5\n")
        self.pid, self.returncode, self.killed = 2**22 + 7, None, False  # beyond Linux's largest pid

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        return self.returncode

    def kill(self):
        self.killed, self.returncode = True, -signal.SIGKILL


def test_a_command_that_stops_printing_fails_its_lesson_in_one_line_within_its_bound_and_is_stopped(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(shell, "start", lambda command, env, output, **_: started.append(StuckProcess(output)) or started[-1])
    monkeypatch.setattr(shell, "QUIET_SECONDS", 0.5)
    info = registry.SectionInfo(99, "stuck-command", "A command that gets stuck", shows="", part="glue", trains=False,
                                module="tests.lessons.stuck_command")
    began = time.monotonic()
    result = teaching.run(info, tmp_path / "99-stuck-command", bound=10)  # should the command's bound fail
    assert time.monotonic() - began < 8
    assert result.status == "failed" and result.error.expected
    assert result.summary == ('in step "A job that stops moving": LessonFailed: `python -m stuck_job`: its process printed nothing'
                              ' for 0.5 s, after "[0] collection=train losses/logcosh=1.5": stopped')
    assert [process.killed for process in started] == [True]  # nothing left behind
    assert "not reached" not in json.dumps(result.to_json()["steps"])


def test_a_section_past_its_bound_fails_in_one_line_naming_its_step(tmp_path):
    # A lesson that imports nothing heavy: a bound this small must fall in its step, not in
    # an import (a worker's first import of kauldron takes seconds, in compiled code too).
    info = registry.SectionInfo(98, "endless-step", "A step that never ends", shows="", part="glue", trains=False,
                                module="tests.lessons.endless_step")
    teaching.stuck_file(tmp_path / "98-endless-step").write_text("an earlier run's, in a kept workdir")
    began = time.monotonic()
    result = teaching.run(info, tmp_path / "98-endless-step", bound=0.5)
    assert time.monotonic() - began < 3
    assert (result.status, result.summary) == (
        "failed", 'in step "A step that never ends": SectionTimedOut: did not finish in 0.5 s (its bound): stopped')
    assert result.steps[0].printed == "step began\n"
    assert result.error.type == "SectionTimedOut" and not teaching.stuck_file(tmp_path / "98-endless-step").exists()


def test_a_section_that_answers_its_bound_but_unwinds_slowly_is_not_ended(tmp_path):
    """SIGALRM raises in the main thread at the bound; what the section then does on its
    way out (stopping what it started) may take a while on a busy machine, here twice the
    bound, before the watchdog is cancelled. With a grace as short as a short bound, the
    watchdog ended this process (seen: a pytest worker gone, mid-run)."""
    began = time.monotonic()
    with pytest.raises(bounds.SectionTimedOut):
        with bounds.bounded(0.2, tmp_path / "x.stuck", lambda: None):
            try:
                time.sleep(10)
            finally:
                time.sleep(0.6)  # the section's cleanup, slow
    assert time.monotonic() - began < 2 and not (tmp_path / "x.stuck").exists()


def test_a_section_s_bound_is_five_times_its_last_passing_run_and_at_least_two_minutes(monkeypatch):
    monkeypatch.delenv(durations.BOUND_ENV, raising=False)
    seconds = {"evals": 30.0, "kontext": 0.1}
    assert [durations.bound(slug, seconds) for slug in ("evals", "kontext", "never-run")] == [150.0, 120.0, 600.0]


@pytest.mark.slow
def test_a_real_command_that_stops_printing_is_killed_within_its_bound_leaving_no_process(tmp_path):
    began = time.monotonic()
    stuck = shell.Shell("python -c \"import time; print('step 0', flush=True); time.sleep(600)\"", tmp_path, quiet=2)
    pids = stuck.pids
    with pytest.raises(processes.ProcessFailed) as failed, bounds.bounded(30, tmp_path / "x.stuck", stuck.kill):
        stuck.wait()  # should its own bound fail, the test's stops it
    assert time.monotonic() - began < 20
    assert str(failed.value).endswith('its process printed nothing for 2 s, after "step 0": stopped')
    assert not [pid for pid in pids if psutil.pid_exists(pid)]


@pytest.mark.slow
def test_a_section_stuck_in_compiled_code_past_its_bound_fails_alone_and_the_run_goes_on(tutorial):
    """Its main thread waits where no signal reaches it, as in a deadlock inside jax: its
    worker ends itself, and the runner says why (one that sleeps in Python: the fast tier)."""
    # A bound a loaded machine's import of the lesson stays well within (3 s did not, once).
    env = dict(os.environ, **{teaching.FAIL_SECTION_ENV: "kontext:stuck", durations.BOUND_ENV: "kontext=10"})
    run = tutorial("konfig", "kontext", "loss-metric", "--jobs", "2", env=env)
    assert run.returncode == 1
    assert run.statuses() == {"konfig": "passed", "kontext": "failed", "loss-metric": "passed"}
    summary = run.section("kontext")["summary"]
    assert summary.startswith("SectionTimedOut: did not finish in 10 s (its bound), and its main thread ran no Python"
                              " for 10 s more (stuck in compiled code)")
