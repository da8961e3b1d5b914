"""The whole tutorial, run as users run it: every section passes with a clean log, and
every page is a program. `tutorial.py` runs forward in worker processes (the default
--jobs), writing its pages; then each section's notebook (exactly its page's code) runs
in a Jupyter kernel of its own at the repository root, and prints what its page shows.
The kernels start when the run has ended, so that they find its compiled programs in the
compilation cache they share (as a reader who ran the tutorial first does), and go on
beside the tests that need only the run; the page tests come last. So every section runs
in a process shared with others and in one of its own, and none depends on another having
run before it. The facts are read from the run's JSON: no section is run again just to
read them; the tests of a kept workdir run the checkpoint lesson again on copies of the
run's.

`--sections digits,ref` runs it on those sections only (CONTRIBUTING.md: a new page, as a
program); the tests about the whole tutorial are then skipped."""

import concurrent.futures
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, assert_png_drawn, headless_chromium, processes_mentioning, sections_printed, warm_server
from page_programs import differences, imports_jax, run_in_a_kernel

from harness import registry
from presenting import notebook as notebooks

pytestmark = pytest.mark.slow  # a full run, and every page in a kernel

CATALOG = [info.slug for info in registry.catalog()]
CHECKPOINT_LESSON = registry.file_stem(9, "checkpoint")  # its folder in a workdir
# Three: a page's program spends much of its time waiting on its commands (section 15's
# eval job sleeps 20 s), and the other kernels use that time.
KERNELS_AT_ONCE = 3


@pytest.fixture(scope="module")
def chosen(request) -> list[registry.SectionInfo]:
    """The sections these tests run: all, or those --sections names."""
    infos = registry.catalog()
    option = request.config.getoption("--sections")
    return registry.select(infos, option.split(",")) if option else infos


@pytest.fixture(scope="module")
def whole(chosen):
    """Skips a test about the whole tutorial when --sections chose part of it."""
    if len(chosen) != len(CATALOG):
        pytest.skip("about the whole tutorial: --sections chose part of it")


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict:
    """One isolated home, temporary directory and cache home, which the run and the page
    programs all see, and the environment that names them. Jupyter's own files (connection
    files, the IPython profile) go to a folder of their own, so the home directory shows the
    tutorial's."""
    base = tmp_path_factory.mktemp("full-run")
    folders = {name: base / name for name in ("home", "tmp", "cache-home", "jupyter", "kernels")}
    for folder in folders.values():
        folder.mkdir()
    folders["base"] = base
    env = dict(os.environ, HOME=str(folders["home"]), TMPDIR=str(folders["tmp"]),
               XDG_CACHE_HOME=str(folders["cache-home"]), JUPYTER_RUNTIME_DIR=str(folders["jupyter"] / "runtime"),
               IPYTHONDIR=str(folders["jupyter"] / "ipython"))
    return {"folders": folders, "env": env}


@pytest.fixture(scope="module")
def kernel_env(places) -> dict:
    """The page programs' environment: the run's, and JAX's compilation cache shared with
    it; Keras' settings and matplotlib's fonts in the kernels' folder."""
    folders = places["folders"]
    return dict(places["env"], JAX_COMPILATION_CACHE_DIR=str(folders["cache-home"] / "kauldron-tutorial" / "jax"),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1",
                KERAS_HOME=str(folders["kernels"] / ".keras"), MPLCONFIGDIR=str(folders["kernels"] / "mpl"))


@pytest.fixture(scope="module")
def warm_kernels(request, places, kernel_env):
    """The address of a warm-start server for the kernels (tests/warm_kernel.py), or None
    with --cold-kernels. A page that trains, or whose program imports jax (itself or with
    Kauldron's kd), starts in a kernel forked with jax and Kauldron imported: modules its
    program imports too, by its imports or by resolving its config, and more of Kauldron's;
    none of the tutorial's, nothing in the kernel's namespace. That saves about 6 CPU
    seconds a page on a run of 2 cores kept busy: this module took 197 s, and 267 s with
    --cold-kernels (measured one after the other, 2026-12-07). Its `python -m` commands are
    forked from the same server (tests/warm_command.py), as a run's lessons' are: about 8
    CPU seconds a command; on Python 3.11 the module took 275 CPU-s (155 s) with them, 380
    CPU-s (208 s) with them started afresh (alone, one after the other, 2026-12-07). CI's
    py313 leg starts every kernel and command afresh, as a reader's are."""
    if request.config.getoption("--cold-kernels"):
        yield None
        return
    own = dict(kernel_env, TMPDIR=str(places["folders"]["kernels"]))  # its socket: not in the run's TMPDIR
    # At a lower priority: what the kernels do, the tests need last; the run they are
    # compared with, and the other tests, go first.
    with warm_server(own, nice=10) as address:
        yield address


@pytest.fixture(scope="module")
def started_run(chosen, places):
    """`tutorial.py` (default --jobs, --keep, --plots, --html, --markdown), started before
    anything else of this module, its output in run.log. Waiting for it is `ended`'s."""
    base = places["folders"]["base"]
    command = [sys.executable, str(ROOT / "tutorial.py"), *[info.slug for info in chosen], "--keep",
               "--plots", str(base / "plots"), "--html", str(base / "site"), "--markdown", str(base / "pages"),
               "--json", str(base / "forward.json")]
    with open(base / "run.log", "w") as log:
        run = subprocess.Popen(command, cwd=ROOT, env=places["env"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield run
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def ended(run: subprocess.Popen) -> int | None:
    """The run's exit status once it has ended, or None after 40 minutes."""
    try:
        return run.wait(timeout=2400)
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture(scope="module")
def page_programs(chosen, places, started_run, kernel_env, warm_kernels):
    """slug -> the future of its notebook (exactly its page's code), run in a kernel of its
    own. They start when the run has ended, passed or not: its programs are then in the
    compilation cache they share, and neither compiles what the other is compiling (the
    run and the kernels took 317 CPU seconds, against 380 side by side, measured). They go
    on beside the tests that need only the run."""
    # The costly ones first (those that start commands, which run cold in a kernel), so
    # that none ends the run of the tests alone. Built one after another: Python 3.11's
    # ast.parse is not thread-safe ("SystemError: AST constructor recursion depth
    # mismatch", seen in CI).
    in_order = sorted(chosen, key=lambda info: (not info.start_early, not info.starts_processes))
    programs = [(info, notebooks.build([info])) for info in in_order]
    ended(started_run)
    pool = concurrent.futures.ThreadPoolExecutor(KERNELS_AT_ONCE)
    futures = {info.slug: pool.submit(run_in_a_kernel, program, ROOT, kernel_env,
                                      places["folders"]["kernels"] / registry.file_stem(info.number, info.slug),
                                      warm_kernels if info.trains or imports_jax(program) else None)
               for info, program in programs}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def full_run(places, started_run):
    """The run's (report, log, folders), once it has ended."""
    folders, base = places["folders"], places["folders"]["base"]
    status = ended(started_run)
    log = (base / "run.log").read_text()
    assert status == 0, f"exit status {status}\n" + log[-3000:]
    report = json.loads((base / "forward.json").read_text())
    return report, log, folders


@pytest.fixture(scope="module")
def verified(full_run):
    """slug -> the facts the forward run's section verified."""
    forward, _, _ = full_run
    return {section["slug"]: section["facts"] for section in forward["sections"]}


def assert_a_clean_log(log: str) -> None:
    assert "Traceback" not in log
    assert "it/s]" not in log  # no tqdm progress bars in a non-interactive log
    assert "Profile has already been started" not in log
    assert "[Gloo]" not in log  # section 18's children keep their noise in their own logs
    assert "use of fork() may lead to deadlocks" not in log  # the warm-start server forks quietly


# page_programs first: the kernels start as soon as the run ends, even if it failed, and go
# on beside the tests below.
def test_a_full_run_passes_every_section_cleanly(page_programs, full_run, chosen):
    forward, log, folders = full_run
    assert [s["slug"] for s in forward["sections"]] == [info.slug for info in chosen]
    assert [s["status"] for s in forward["sections"]] == ["passed"] * len(chosen)
    assert f"{len(chosen)} passed, 0 failed, 0 skipped; {forward['totals']['checks']} checks in" in log
    assert all(section["checks"] for section in forward["sections"])  # every lesson checks something
    assert forward["totals"]["failed_checks"] == 0
    expected_fix = os.environ.get("TUTORIAL_EXPECT_ETILS_PRNG")  # set by .ci/run per leg
    if expected_fix:
        assert {fix["name"]: fix["state"] for fix in forward["compat"]}["etils-prng"] == expected_fix
    assert_a_clean_log(log)
    assert sections_printed(log) == [info.slug for info in chosen]

    # Nothing but the run's workdir in its temporary directory.
    assert [str(p) for p in folders["tmp"].iterdir()] == [forward["workdir"]]
    assert forward["workdir_removed"] is False  # --keep
    kept = {p.name for p in pathlib.Path(forward["workdir"]).iterdir()}
    assert {registry.file_stem(info.number, info.slug) for info in chosen} <= kept


def test_plots_are_real_pictures_one_per_section_with_a_figure(full_run, whole):
    forward, _, folders = full_run
    plots = folders["base"] / "plots"
    drawn = [section for section in forward["sections"] if section["figure_title"]]
    assert drawn, "no lesson recorded a figure"
    assert sorted(p.name for p in plots.iterdir()) == [f"{s['number']:02d}-{s['slug']}.png" for s in drawn]
    for section in forward["sections"]:
        figure = plots / f"{section['number']:02d}-{section['slug']}.png"
        assert section["plots"] == ([str(figure)] if section["figure_title"] else [])
    for section in drawn:
        assert_png_drawn(pathlib.Path(section["plots"][0]))


def test_the_site_reads_in_a_real_browser_with_every_section_figure_and_check(full_run, whole):
    """--html's pages in headless Chromium: every heading, every figure loaded, no console
    error, as many checks listed as the JSON has, and an index that is not blank."""
    forward, _, folders = full_run
    site = folders["base"] / "site"
    pages = {section["slug"]: site / f"{section['number']:02d}-{section['slug']}.html" for section in forward["sections"]}
    for page in [site / "index.html", *pages.values()]:  # nothing to fetch from the network (links are fine)
        assert not re.search(r"""(src=|<link[^>]*href=)["']?(https?:)?//""", page.read_text()), page
    with headless_chromium() as browser:
        browser.get((site / "index.html").as_uri())
        listed = browser.execute_script("return [...document.querySelector('table').querySelectorAll('a')]"
                                        ".filter(a => !a.getAttribute('href').startsWith('http')).map(a => a.textContent)")
        assert listed == [section["title"] for section in forward["sections"]]
        from PIL import Image

        colours = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB").getcolors(maxcolors=1 << 24)
        assert len(colours) > 20, "the index looks blank"
        assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []
        for section in forward["sections"]:
            browser.get(pages[section["slug"]].as_uri())
            heading = browser.execute_script("return document.querySelector('h1').textContent")
            assert heading == f"{section['number']}. {section['title']}"
            images = browser.execute_script("return [...document.images].map(i => [i.complete, i.naturalWidth])")
            assert len(images) == len(section["plots"]) and all(done and width > 0 for done, width in images)
            checks = browser.execute_script(
                "return [...document.querySelectorAll('li')].filter(li => /^[✔✘]/.test(li.textContent)).length")
            assert checks == len(section["checks"]), section["slug"]
            assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == [], section["slug"]


# --- A kept workdir, run again (copies of the forward run's, which --keep kept) ------------

def kept_checkpoint_lesson(full_run, into: pathlib.Path) -> pathlib.Path:
    """A workdir holding a copy of what the forward run's checkpoint lesson left."""
    forward, _, _ = full_run
    shutil.copytree(pathlib.Path(forward["workdir"]) / CHECKPOINT_LESSON, into / CHECKPOINT_LESSON)
    return into


def test_a_kept_workdir_run_again_starts_each_section_afresh_saying_so(full_run, whole, tutorial, tmp_path):
    """Kauldron resumes from the checkpoints in a workdir, so a section run again in a kept
    one (`--workdir`) first clears its own folder, and says so: even a damaged checkpoint
    left there changes nothing."""
    workdir = kept_checkpoint_lesson(full_run, tmp_path / "kept")
    checkpoint = workdir / CHECKPOINT_LESSON / "run" / "checkpoints" / "ckpt_60"
    data = max((checkpoint / "default").rglob("d/*"), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated

    again = tutorial("checkpoint", "--workdir", str(workdir))
    assert again.returncode == 0, again.stdout[-3000:]
    assert "(this workdir held an earlier run of the section, ['in-memory-uninterrupted', 'pygrain', 'run']: cleared)" \
        in again.stdout
    assert again.section("checkpoint")["checks"] == next(
        s for s in full_run[0]["sections"] if s["slug"] == "checkpoint")["checks"]


# --- Golden numbers: what the lessons computed on the pinned versions -------------------
# The lessons check their claims (a loss falls, two curves agree); these are the numbers
# they got, kept here together: a change in one says a pinned library now computes
# something else, even where every claim still holds. (path in the section's facts, what
# it was, tolerance); a tolerance of None means exactly.

GOLDEN = {
    "digits": [("test_accuracy.75", 0.9667, 0.01), ("test_accuracy.100", 0.9472, 0.01)],
    "konfig": [("qualname", "optax:adam", None)],
    "ref": [("lr_at_step_180.reference", 1.045e-04, 1e-6), ("lr_at_step_180.copy", 9.81e-04, 1e-5),
            ("optimizer_lr_last_update", 1e-05, 1e-9)],
    "kontext": [("mean_gap", 0.5, None), ("mean_gap_repointed", 1.0, None)],
    "loss-metric": [("losses.LogCosh", 0.574136, 1e-6), ("masked_logcosh", 0.379114, 1e-6),
                    ("losses.kd\\.losses\\.L2", 1.871867, 1e-6), ("merged_ratio", 0.4375, None)],
    "trainer": [("logcosh.0", 1.5107, 1e-4), ("logcosh.50", 0.0416, 1e-3), ("enc_norm_last_step", 6.112, 2e-2)],
    "sweep": [("final_logcosh.(baseline)", 0.0416, 2e-4), ("final_logcosh.model\\.hidden=128", 0.0294, 2e-4),
              ("final_logcosh.optimizer\\.learning_rate=0\\.1", 0.0473, 2e-4),
              ("final_logcosh.optimizer=optax\\.sgd(0\\.05)", 0.4293, 2e-4)],
    "checkpoint": [("eval_within_tol_at_0.all_rows", 13 / 128, None), ("eval_within_tol_at_0.remainder_dropped", 12 / 96, None),
                   ("max_param_difference_after_resume.InMemoryPipeline", 0.057, 0.006)],
    "sharding": [("fsdp_shards.['enc']['kernel']", [16, 4], None)],
    "data": [("element_spec.transformed", {"pixels": "f32[8 192]", "target": "i64[8]"}, None),
             ("element_spec.overridden", {"pixels": "f32[16 3 8 8]", "target": "i64[16]"}, None)],
    "finetune": [("final_logcosh.finetune", 0.0674, 5e-3)],
    "evals": [("heldout.0", 1.2229, 1e-4), ("heldout.40", 0.0764, 1e-3)],
    "grad-accum": [("max_param_difference_vs_batches_of_32.2", 0.0, 1e-6), ("resume_mid_accumulation_identical", True, None)],
    "mixture": [("shifted_fraction.per_epoch", [479, 479], None)],
    "writer": [("jsonl_rows.train", 58, None), ("jsonl_rows.heldout", 12, None), ("logcosh.0", 1.5107, 1e-4)],
}


def fact(facts: dict, path: str):
    """facts["a"]["b"] for "a.b"; a dot inside a key is written \\."""
    for key in re.split(r"(?<!\\)\.", path):
        facts = facts[key.replace("\\.", ".")]
    return facts


@pytest.mark.parametrize("slug", list(GOLDEN))
def test_golden_numbers_are_what_the_lesson_computed_on_the_pinned_versions(verified, slug):
    if slug not in verified:
        pytest.skip("not among --sections")
    for path, expected, tolerance in GOLDEN[slug]:
        got = fact(verified[slug], path)
        assert got == (expected if tolerance is None else pytest.approx(expected, abs=tolerance)), path


def test_the_children_of_section_18_keep_their_noise_out_of_the_log(full_run, whole):
    """The log shows the lines of the job's output its page shows (gloo's are not)."""
    _, forward_log, _ = full_run
    assert "process 0 of 2: 4 local devices, 8 in the job" in forward_log and "[Gloo]" not in forward_log


def test_the_index_table_of_what_pypi_does_not_do_is_each_a_check_that_still_holds(full_run, whole):
    """Every row names a check of the run, which passed: the feature still fails from PyPI."""
    from presenting import site

    forward, _, _ = full_run
    rows = site.pypi_gaps(forward)
    assert [row["status"] for row in rows] == ["still fails (checked)"] * len(site.PYPI_GAPS)


def test_the_multi_process_job_listened_on_loopback_only(full_run, whole):
    """jax binds its coordinator to every interface unless told: section 18 binds it to
    127.0.0.1, and checks, while its job runs, what the job's processes listen on."""
    forward, _, _ = full_run
    claims = {check["claim"]: check["passed"] for check in next(s for s in forward["sections"] if s["slug"] == "multihost")["checks"]}
    assert claims["while the job ran, its coordinator's port was bound on 127.0.0.1 only"] is True
    assert claims["while the job ran, nothing it started listened on an address other than loopback"] is True


# --- Every page, a program (their kernels ran after the run, beside the tests above) -------

@pytest.mark.parametrize("slug", CATALOG)
def test_each_page_is_a_program_that_prints_what_the_page_shows(full_run, page_programs, chosen, slug):
    """The code a page shows, outside its folds, is its notebook's, cell for cell; run in a
    kernel of its own at the repository root (`warm_kernels` says how fresh), no cell
    raises, and each prints what the page shows under it (but for the workdir's path and
    the last digits of floats)."""
    if slug not in [info.slug for info in chosen]:
        pytest.skip("not among --sections")
    _, _, folders = full_run
    info = next(info for info in chosen if info.slug == slug)
    stem = registry.file_stem(info.number, info.slug)
    page = (folders["base"] / "pages" / f"{stem}.md").read_text()
    found = differences(page, page_programs[slug].result(), folders["kernels"] / stem, stem)
    assert not found, "\n\n".join(found)


def test_the_run_and_the_page_programs_share_only_the_cache_and_leave_no_process(full_run, page_programs, chosen):
    """After the run and every page program: nothing in the home directory, only the
    tutorial's folder in the cache home, and no process of theirs left (section 18 starts
    two)."""
    forward, _, folders = full_run
    for future in page_programs.values():
        future.result()
    assert list(folders["home"].rglob("*")) == []
    assert [p.name for p in folders["cache-home"].iterdir()] == ["kauldron-tutorial"]  # the default cache
    # Compiled programs, the sections' times, and matplotlib's font list once a section of
    # the run imported matplotlib: one that drew a figure, or imported Kauldron's training
    # modules, which import it (`--sections konfig` does neither; `--sections data` the second).
    cached = {p.name for p in (folders["cache-home"] / "kauldron-tutorial").iterdir()}
    drawn = {"matplotlib"} if any(s["figure_title"] for s in forward["sections"]) else set()
    assert {"jax", "section-seconds.json"} | drawn <= cached <= {"jax", "section-seconds.json", "matplotlib"}
    assert processes_mentioning(str(folders["base"])) == {}


def test_a_page_kernel_slow_to_end_ends_cleanly_leaving_no_semaphore_behind(tmp_path):
    """A page's kernel that takes seconds to end (jax and TensorFlow loaded, a busy machine)
    is given the time. Ended by a signal instead (jupyter_client's default: SIGTERM 2.5 s after
    its shutdown request, SIGKILL at 5 s), it runs no atexit hook and leaves the semaphores
    it made (tqdm's lock, in a page that trains) to the warm-start server's resource
    tracker, which reports them in the tests' output: "There appear to be 2 leaked
    semaphore objects"."""
    import nbformat

    env = dict(os.environ, TMPDIR=str(tmp_path), KERAS_HOME=str(tmp_path / ".keras"), MPLCONFIGDIR=str(tmp_path / "mpl"))
    slow_to_end = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import atexit, multiprocessing, time\nlock = multiprocessing.RLock()\natexit.register(time.sleep, 4)")])
    with open(tmp_path / "server.log", "w") as log, warm_server(env, stderr=log) as address:
        run_in_a_kernel(slow_to_end, ROOT, env, tmp_path / "kernel", address)
    assert "leaked semaphore" not in (tmp_path / "server.log").read_text()
