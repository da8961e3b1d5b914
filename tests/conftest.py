"""Helpers for tests that run the tutorial the way a user does: as a separate process."""

import contextlib
import json
import multiprocessing.process
import os
import pathlib
import platform
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--sections", default=None, metavar="SLUGS",
                     help="run the full-run tests (tests/test_sections.py) on these sections only, comma-separated: "
                          "a section's page as a program, while writing it (CONTRIBUTING.md)")
    parser.addoption("--cold-kernels", action="store_true",
                     help="run every page's program, and its commands, in processes started afresh "
                          "(tests/test_sections.py); by default a page that trains or imports jax starts in a kernel "
                          "forked with jax and Kauldron imported, and its `python -m` commands are forked so too "
                          "(CI's py313 leg runs them all afresh)")


def pytest_xdist_auto_num_workers(config) -> int:
    """What `-n auto` (pytest.ini) means here: a test worker per core, and one more. Most
    tests wait for the tutorial processes they started, which do the work, and the page
    programs fill the cores at a lower priority (tests/test_sections.py); more workers only
    crowd the cores. Measured on 2 cores (pytest in README command 2, Python 3.11, fresh
    clones): 2 workers 278 s; 3 workers 252-286 s; 4 workers 268-286 s, and once a test
    that waits on a thread of its own timed out."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()  # not on macOS
    return (cores or 1) + 1


@pytest.fixture(autouse=True)
def fast_tests_start_no_process(request, monkeypatch):
    """The fast tier (`pytest -m "not slow"`) runs in this process: a test that starts a
    process (subprocess, os.fork, multiprocessing) fails at once, saying it belongs to the
    slow tier."""
    if request.node.get_closest_marker("slow") is None:
        # Python runs `uname -p` once a process, the first time something asks for the
        # processor: h5py does as TensorFlow imports it, which a fast test importing
        # kauldron.train makes happen here. Asked now, before the guard.
        platform.processor()

        def refuse(*args, **kwargs):
            raise AssertionError(f"{request.node.name} starts a process: mark it @pytest.mark.slow")

        monkeypatch.setattr(subprocess, "Popen", refuse)
        monkeypatch.setattr(os, "fork", refuse)
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)  # every context's processes


class Run:
    """A finished `python tutorial.py ...`: exit status, output and (if asked) JSON results."""

    def __init__(self, proc: subprocess.CompletedProcess, json_path: pathlib.Path | None):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.results = json.loads(json_path.read_text()) if json_path and json_path.exists() else None

    def section(self, slug: str) -> dict:
        return next(s for s in self.results["sections"] if s["slug"] == slug)

    def statuses(self) -> dict[str, str]:
        return {s["slug"]: s["status"] for s in self.results["sections"]}


@pytest.fixture
def tutorial(tmp_path):
    """Runs tutorial.py with the given arguments; adds --json unless told not to, and
    --jobs 1 unless the test gives --jobs: pytest-xdist already keeps every core busy, and a
    few sections in two workers import everything twice."""

    def run(*args: str, with_json: bool = True, timeout: float = 900, python: str = sys.executable,
            env: dict | None = None) -> Run:
        json_path = tmp_path / "results.json" if with_json else None
        jobs = [] if "--jobs" in args else ["--jobs", "1"]
        cmd = [python, str(ROOT / "tutorial.py"), *args, *jobs]
        if json_path:
            cmd += ["--json", str(json_path)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        return Run(proc, json_path)

    return run


@pytest.fixture
def tutorial_main(monkeypatch):
    """`tutorial.main`, to call in this process. What it sets for the whole process (its
    SIGINT and SIGTERM handlers, sys.unraisablehook, a remembered Ctrl-C, the environment variables of
    its settings, which the processes a later test starts would inherit: KERAS_HOME into
    this test's workdir, JAX's cache) is put back afterwards, so that no later test in this
    worker runs with them."""
    import tutorial
    from runner.interrupts import CtrlC

    monkeypatch.setattr(CtrlC, "pressed", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    environment = dict(os.environ)
    previous_handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield tutorial.main
    for signum, handler in previous_handlers.items():
        signal.signal(signum, handler)
    os.environ.clear()
    os.environ.update(environment)


def sections_printed(stdout: str) -> list[str]:
    """The slugs of the sections a run printed, in order, each whole: its banner, what it
    printed, its result line, then the next banner (never two sections interleaved)."""
    lines = stdout.splitlines()
    banners = [i for i, line in enumerate(lines) if line.endswith("]") and line.split(". ", 1)[0].isdigit()]
    results = [i for i, line in enumerate(lines) if line.startswith("-> ")]
    assert len(results) == len(banners)
    assert all(b < r < next_b for b, r, next_b in zip(banners, results, banners[1:] + [len(lines)]))
    return [lines[i].rsplit("[", 1)[1].rstrip("]") for i in banners]


def readme_command(number: int) -> str:
    """Command `number` of the README's "Two commands", as a user copies it."""
    two_commands = (ROOT / "README.md").read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n\s*(.+?)\n\s*```", two_commands)[number - 1]


def assert_png_drawn(path: pathlib.Path) -> None:
    """A real PNG with something drawn on it: not empty, not one flat colour."""
    from matplotlib import image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pixels = image.imread(path)  # decodes the whole file: a truncated PNG raises
    assert pixels.shape[0] >= 300 and pixels.shape[1] >= 500, pixels.shape
    colours = {tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::7]}
    assert len(colours) > 20, f"{path} looks blank: {len(colours)} colours"


def shadow_module(folder: pathlib.Path, name: str) -> dict:
    """An environment in which `import name` fails as if it were not installed."""
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    import os

    return dict(os.environ, PYTHONPATH=str(folder))


def alive(proc: psutil.Process) -> bool:
    """Running, and not a zombie waiting for its parent to collect it."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def processes_mentioning(text: str) -> dict[int, str]:
    """Live processes whose command line contains `text`: pid -> command line."""
    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.pid != os.getpid() and text in cmdline and alive(proc):
            found[proc.pid] = cmdline
    return found


def processes_with(name: str, value: str) -> list[psutil.Process]:
    """Live processes whose environment sets `name` to `value`: a run's processes, found
    even when they were started after a look at its descendants, or outlived it."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(name) == value and alive(proc):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def descendants(pid: int) -> list[psutil.Process]:
    """The live processes started, directly or not, by process `pid`."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def still_running(procs: list[psutil.Process], grace: float = 10.0) -> set[int]:
    """The pids of those of `procs` still alive after up to `grace` seconds."""
    deadline = time.monotonic() + grace
    while True:
        running = {proc.pid for proc in procs if alive(proc)}
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.2)


# Debian's packages (apt-get install chromium chromium-driver), as .ci/run installs them.
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextlib.contextmanager
def warm_server(env: dict[str, str], nice: int = 0, stderr=None):
    """A warm-start server (tests/warm_server.py) started in `env`, for the block: yields
    its address, or None where warm start is not available. `stderr`: where it, and
    multiprocessing's resource tracker it starts, write (None: the tests' own)."""
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "warm_server.py"), "--nice", str(nice)],
                              cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                              text=True)
    try:
        yield server.stdout.readline().strip() or None
    finally:
        server.stdin.close()
        server.wait(timeout=60)


@contextlib.contextmanager
def headless_chromium():
    """A Selenium driver for headless Chromium, or the test is skipped, saying what is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        pytest.skip(f"no browser: {', '.join(missing)} not installed (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("no selenium: pip install -r requirements-test.txt")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(argument)  # --no-sandbox: CI runs as root
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium must not download a driver
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()

