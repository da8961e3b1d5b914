"""What a user sees from the command line: listing, choosing sections, errors, exit codes,
JSON. What only parses the command line runs in this process (the fast tier); what runs a
section runs `tutorial.py` as a user does."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import ROOT, readme_command

import tutorial
from harness import registry, runtime
from harness.results import SectionResult

CATALOG = registry.catalog()
SLUGS = [info.slug for info in CATALOG]


class Outcome:
    """What `tutorial.main(argv)` did, in this process: its exit status and what it printed."""

    def __init__(self, status: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = status, out, err


@pytest.fixture
def main_here(tutorial_main, capsys):
    """Runs `tutorial.main` in this process; argparse's exit is an exit status too."""

    def run(*argv: str) -> Outcome:
        try:
            status = tutorial_main(list(argv))
        except SystemExit as e:
            status = e.code
        out, err = capsys.readouterr()
        return Outcome(status, out, err)

    return run


@pytest.fixture
def ran(monkeypatch):
    """The sections `tutorial.main` asked the runner for, each reported passed without
    running: what choosing sections does, without their cost."""
    chosen = []

    class Runner:
        def __init__(self, *args, **kwargs):
            pass

        def run(self, sections, **kwargs):
            chosen.extend(info.slug for info in sections)
            return [SectionResult(info.number, info.slug, info.title, "passed", 0.0, "") for info in sections], False

        def with_the_rest(self, sections, results):
            return results

    monkeypatch.setattr(tutorial, "Runner", Runner)
    return chosen


def test_list_shows_number_slug_whether_it_trains_and_what_it_shows(main_here):
    run = main_here("--list")
    assert run.returncode == 0
    lines = run.stdout.strip().splitlines()
    assert len(lines) == len(CATALOG)
    for line, info in zip(lines, CATALOG):
        number, slug, trains, shows = line.split(maxsplit=3)
        assert (int(number), slug, shows) == (info.number, info.slug, info.shows)
        assert trains == ("trains" if info.trains else "-")


def test_the_readme_table_is_what_list_prints():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## The sections", 1)[1].split("\n\n", 2)[1]
    rows = [[cell.strip().strip("`") for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert rows == [[str(i.number), i.slug, "trains" if i.trains else "-", i.shows] for i in CATALOG]


def test_catalog_is_numbered_from_zero_without_gaps():
    assert [info.number for info in CATALOG] == list(range(len(CATALOG)))
    assert SLUGS[:5] == ["digits", "konfig", "ref", "kontext", "ktyping"]


@pytest.mark.parametrize(
    "selectors, expected",
    [
        (["3"], ["kontext"]),
        (["kontext"], ["kontext"]),
        (["loss"], ["loss-metric"]),  # a unique prefix
        (["ref", "1", "konfig"], ["ref", "konfig"]),  # asked order, no repeats
        (["guardrails"], ["guardrails"]),  # the original guide's name for section 8
    ],
)
def test_selectors_run_exactly_the_chosen_sections(main_here, ran, tmp_path, selectors, expected):
    run = main_here(*selectors, "--no-cache", "--json", str(tmp_path / "r.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert ran == expected
    assert [s["slug"] for s in json.loads((tmp_path / "r.json").read_text())["sections"]] == expected


@pytest.mark.parametrize("selector, problem", [
    ("nosuch", "unknown section 'nosuch'"),
    ("99", "unknown section '99'"),
    ("kon", "ambiguous section 'kon'"),
    ("", "empty section name"),
])
def test_bad_selector_is_one_line_exit_2_and_nothing_runs(main_here, ran, tmp_path, selector, problem):
    run = main_here(selector, "--json", str(tmp_path / "r.json"))
    assert run.returncode == 2
    assert run.stdout == "" and ran == []
    assert not (tmp_path / "r.json").exists()  # nothing ran, so no results were written
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert problem in lines[0]
    assert "valid sections: 0 digits, 1 konfig, 2 ref, 3 kontext, 4 ktyping" in lines[0]


@pytest.mark.parametrize("flags, problem", [
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--jobs", "0"], "argument -j/--jobs: expected a whole number >= 1, got '0'"),
    (["--jobs", "x"], "argument -j/--jobs: expected a whole number >= 1, got 'x'"),
])
def test_a_bad_flag_gets_argparse_usage_and_exit_2(main_here, flags, problem):
    run = main_here(*flags)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith("usage: tutorial.py")
    assert problem in run.stderr
    assert "Traceback" not in run.stderr


def test_unwritable_json_path_is_refused_before_running(main_here, ran, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = main_here("kontext", "--json", str(blocker / "r.json"))
    assert ran == []
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and "--json" in run.stderr


@pytest.mark.parametrize("option", ["--workdir", "--plots", "--notebook"])
@pytest.mark.parametrize("problem", ["cannot be created", "cannot be written"])
def test_unusable_output_directory_is_refused(main_here, ran, tmp_path, option, problem):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # /proc exists and refuses new files, even to root.
    folder = blocker / "sub" if problem == "cannot be created" else pathlib.Path("/proc")
    target = folder / "t.ipynb" if option == "--notebook" else folder
    run = main_here("kontext", option, str(target))
    assert run.returncode == 2 and ran == []
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"tutorial.py: {option}")


@pytest.mark.slow
def test_json_schema(tutorial):
    run = tutorial("konfig", "kontext")
    assert run.returncode == 0
    r = run.results
    assert {"versions", "compat", "interrupted", "sections", "totals"} <= set(r)
    assert {"python", "kauldron", "jax", "jaxlib", "flax", "optax", "etils", "numpy"} <= set(r["versions"])
    assert r["interrupted"] is False and r["jobs"] == 1
    assert [fix["name"] for fix in r["compat"]] == ["etils-prng", "kauldron-schedules", "konfig-imports"]
    assert all(set(fix) >= {"name", "applied", "state", "reason"} for fix in r["compat"])
    for s in r["sections"]:
        assert set(s) >= {"number", "slug", "title", "status", "seconds", "summary", "facts", "checks", "error",
                          "plots", "steps", "skipped_checks", "figure_title", "figure_step"}
        assert s["status"] == "passed" and s["error"] is None and s["facts"]
        assert len(s["steps"]) >= 3 and all(set(step) == {"heading", "printed", "blocks"} and step["heading"]
                                            for step in s["steps"])
        assert all({"kind", "line", "printed"} <= set(block) for step in s["steps"] for block in step["blocks"])
        assert s["checks"] and all(set(c) <= {"claim", "passed", "internal", "internal_because", "step"} and c["passed"]
                                   for c in s["checks"])
        assert [c["step"] for c in s["checks"]] == sorted(c["step"] for c in s["checks"])  # in step order
    assert r["totals"]["passed"] == 2
    assert r["totals"]["failed"] == r["totals"]["skipped"] == r["totals"]["failed_checks"] == 0
    assert r["totals"]["checks"] == sum(len(s["checks"]) for s in r["sections"])
    assert r["totals"]["seconds"] > 0
    assert r["workdir_removed"] is True and not pathlib.Path(r["workdir"]).exists()


@pytest.mark.slow
def test_header_reports_versions_devices_and_each_compat_fix(tutorial):
    run = tutorial("kontext")
    header = run.stdout.split("\n\n")[0]
    for package in ("python", "kauldron", "jax", "jaxlib", "flax", "optax", "etils", "numpy"):
        assert f"{package} {run.results['versions'][package]}" in header
    assert "devices: cpu:0" in header
    assert "compat etils-prng: " in header
    assert ("applied" in header) or ("not needed" in header)
    # A heavy fix: kontext never imports Kauldron's trainer, so it stays undecided (compat/fix.py).
    assert "compat kauldron-schedules: pending (waiting for kauldron.train.metric_writer to be imported)" in header
    assert "compat konfig-imports: applied (" in header


@pytest.mark.slow
def test_no_compat_is_reported(tutorial):
    run = tutorial("konfig", "--no-compat")
    assert run.results["compat"] == [
        {"name": name, "applied": False, "state": "skipped", "reason": "--no-compat"}
        for name in ("etils-prng", "kauldron-schedules", "konfig-imports")
    ]
    assert "compat etils-prng: skipped (--no-compat)" in run.stdout
    assert "compat kauldron-schedules: skipped (--no-compat)" in run.stdout
    assert "compat konfig-imports: skipped (--no-compat)" in run.stdout


@pytest.mark.slow
def test_default_workdir_is_fresh_and_removed(tutorial):
    first, second = tutorial("kontext"), tutorial("kontext")
    dirs = [r.results["workdir"] for r in (first, second)]
    assert dirs[0] != dirs[1]
    assert not any(__import__("os").path.exists(d) for d in dirs)


@pytest.mark.slow
def test_kept_workdir_holds_one_directory_per_section(tutorial, tmp_path):
    run = tutorial("ref", "kontext", "--workdir", str(tmp_path / "wd"))
    assert run.returncode == 0
    assert run.results["workdir_removed"] is False
    # and Keras' config, which TensorFlow writes when it is imported (never to the home directory)
    assert sorted(p.name for p in (tmp_path / "wd").iterdir()) == [".keras", "02-ref", "03-kontext"]


@pytest.mark.slow
def test_kontext_alone_does_not_import_tensorflow(tmp_path):
    code = (
        "import sys, tutorial\n"
        f"rc = tutorial.main(['kontext', '--json', {str(tmp_path / 'r.json')!r}])\n"
        "heavy = [m for m in ('tensorflow', 'kauldron.typing', 'kauldron.train') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "HEAVY []" in proc.stdout


@pytest.mark.slow
def test_compile_cache_is_on_by_default_and_the_header_says_where(tutorial, tmp_path):
    cache = tmp_path / "cache"
    run = tutorial("konfig", "--cache-dir", str(cache))
    assert run.returncode == 0
    assert run.results["cache"] == str(cache)
    assert f"cache: {cache} (" in run.stdout
    assert list((cache / "jax").glob("*-cache")), "the run wrote compiled programs to the cache"
    default = tutorial("kontext")
    assert default.results["cache"] == str(runtime.default_cache())


@pytest.mark.slow
def test_no_cache_compiles_afresh(tutorial):
    run = tutorial("kontext", "--no-cache")
    assert run.returncode == 0
    assert run.results["cache"] is None
    assert "cache: off" in run.stdout


def test_unusable_cache_dir_is_refused(main_here, ran, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = main_here("kontext", "--cache-dir", str(blocker / "cache"))
    assert run.returncode == 2 and ran == []
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and "--cache-dir" in run.stderr


def test_ci_runs_readme_command_2_step_by_step():
    """.ci/run's py311 leg is the README's test command: each of its steps, in order."""
    steps = [step.strip() for step in readme_command(2).split("&&")]
    assert steps[-1] == ".venv/bin/python -m pytest" and any("uv pip install" in step for step in steps)
    ci = (ROOT / ".ci" / "run").read_text()
    leg = ci.split("leg py311: README command 2", 1)[1].split("\nelif ", 1)[1].split("; then", 1)[0]
    positions = [leg.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), list(zip(steps, positions))


def test_where_a_tpu_is_held_by_one_process_the_sections_run_in_one_and_more_jobs_are_refused(monkeypatch, tutorial_main,
                                                                                           capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: object() if name == "libtpu" else find_spec(name, *rest))
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    assert tutorial.default_jobs(registry.catalog()) == 1
    assert tutorial_main(["konfig", "--jobs", "2"]) == 2
    assert capsys.readouterr().err == ("tutorial.py: --jobs 2: one process at a time can hold a TPU, and each worker would"
                                       " open it: run with --jobs 1 (or JAX_PLATFORMS=cpu to run on the CPU)\n")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # jax kept off the chip: workers as on any CPU
    assert tutorial.default_jobs(registry.catalog()) > 1


def test_where_one_process_holds_a_tpu_a_lesson_that_starts_processes_runs_on_the_cpu_in_a_worker(monkeypatch,
                                                                                                  tmp_path):
    """The tutorial's process holds the chip (--jobs 1): a lesson whose commands would open
    it runs, with them, in a worker on the CPU; the others here, on the chip."""
    import importlib.util

    from harness import teaching
    from runner import Runner

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: object() if name == "libtpu" else find_spec(name, *rest))
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    chosen = registry.select(registry.catalog(), ["konfig", "cli", "data"])
    here, in_workers = [], []
    runner = Runner(1, tmp_path, None, True, banner=lambda info: "")
    monkeypatch.setattr(runner, "_in_pool", lambda workers, start, printed, *rest, on_cpu=False, **options:
                        in_workers.append((workers, [info.slug for info in printed], on_cpu)))
    monkeypatch.setattr(teaching, "run", lambda info, *rest: here.append(info.slug) or SectionResult.skipped(info, "-"))
    runner._in_this_process(chosen, lambda result: None, [], set())
    assert (here, in_workers) == (["konfig", "data"], [(1, ["cli"], True)])
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # jax kept off the chip: every lesson here
    here.clear()
    runner._in_this_process(chosen, lambda result: None, [], set())
    assert here == ["konfig", "cli", "data"]


def test_a_worker_for_a_lesson_that_trains_or_starts_processes_is_forked_warm_others_are_spawned(monkeypatch):
    """Section 4 trains nothing but starts a Python process, so the warm-start server's
    forkserver has imported jax, Kauldron and TensorFlow already: its worker is forked from
    there (spawned, it imported them again: 20 s of its 24 on a TPU machine). A light lesson
    alone gets a spawned worker, which imports little."""
    from runner import worker_context

    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # warm_context sets it: undone after

    def method(*slugs, warm_start=True):
        chosen = registry.select(registry.catalog(), list(slugs))
        # As the runner does: a warm-start server runs where a lesson starts processes, unless turned off.
        return worker_context(chosen, warm_start and any(info.starts_processes for info in chosen)).get_start_method()

    assert (method("ktyping"), method("trainer"), method("kontext", "data")) == ("forkserver", "forkserver", "spawn")
    # --no-warm-start: no server, so no forkserver for section 4
    assert (method("ktyping", warm_start=False), method("trainer", warm_start=False)) == ("spawn", "forkserver")
