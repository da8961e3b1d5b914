"""Kauldron, section by section: every lesson prints what it shows and checks it.

    python tutorial.py                  # every section, in order
    python tutorial.py 3 ktyping        # some sections, by number, slug or slug prefix
    python tutorial.py --list           # what there is
    python tutorial.py --help           # every option

This file is the command line: it reads and checks the arguments, has the runner (runner/)
run the selected sections, and prints and writes what they did. It knows nothing about
Kauldron; the lessons live in `sections/`.
"""

# Kept runnable on old Pythons up to the version check, so that they get one clear line.
import sys

MIN_PYTHON = (3, 11)
if sys.version_info < MIN_PYTHON:
    sys.stderr.write(
        "tutorial.py: needs Python >= %d.%d (Kauldron does); this is Python %s. See README.md.\n"
        % (MIN_PYTHON + (sys.version.split()[0],))
    )
    sys.exit(2)

import argparse  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import presenting  # noqa: E402
from presenting import report as reporting, terminal  # noqa: E402
from harness import environment, registry, runtime, warm_start  # noqa: E402
from harness.results import Report, SectionResult  # noqa: E402
from runner import Runner  # noqa: E402
from runner.interrupts import CtrlC  # noqa: E402

# README command 1 without its last step (running the tutorial); tests/test_reliability.py
# checks they stay the same.
INSTALL_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install uv==0.13.9"
                   " && .venv/bin/uv pip install --compile-bytecode -p .venv -r requirements.txt")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line: reported as one line, exit status 2, nothing run."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tutorial.py", description="Kauldron, section by section. Each section "
                                     "prints a lesson and checks it against the installed library.")
    add = parser.add_argument
    add("sections", nargs="*", metavar="SECTION",
        help="section number, slug or unique slug prefix (default: all, in order)")
    add("--list", action="store_true", help="list the sections and exit")
    add("--versions", action="store_true",
        help="print the environment (package versions, devices, compat decisions) and exit")
    add("--json", metavar="PATH", help="write machine-readable results to PATH")
    add("--workdir", metavar="DIR", help="root for everything the run writes (default: a fresh temporary "
        "directory, removed at the end unless --keep)")
    add("--keep", action="store_true", help="keep the temporary workdir")
    add("-j", "--jobs", type=positive_int, metavar="N",
        help="run the sections in N worker processes, printing each whole and in order (default: the "
        "number of CPU cores, plus one if a lesson that mostly waits on processes of its own is chosen: "
        f"{default_jobs(registry.catalog())} here for the whole tutorial; 1, and no more, where one process holds "
        "the TPU; 1: all in this process)")
    add("--plots", metavar="DIR", help="also write the sections' figures (their pages' matplotlib code) as PNG files in DIR")
    add("--notebook", metavar="PATH",
        help="write the selected sections as a Jupyter notebook to PATH and exit (needs nbformat)")
    add("--html", metavar="DIR", help="also write the results as a web page per section in DIR (lesson, code, "
        "output, figure, checks) with an index; it needs no network to read")
    add("--markdown", metavar="DIR", help="also write the results as Markdown pages in DIR (docs/ is one such copy)")
    add("--no-compat", action="store_true", help="skip the compat fixes (to see what they fix)")
    add("--no-warm-start", action="store_true", help="start the lessons' Python processes afresh instead of "
        "forking them from a process that has imported jax, Kauldron and TensorFlow (slower; to rule warm "
        "start out when narrowing a failure down)")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", metavar="DIR", help="the cache runs share: JAX's compiled programs, "
                       "matplotlib's font list, each section's last time (workers start the longest first) "
                       f"(default: per user, {runtime.default_cache()})")
    cache.add_argument("--no-cache", action="store_true", help="compile everything afresh")
    return parser.parse_args(argv)


def default_jobs(chosen: list[registry.SectionInfo]) -> int:
    """A worker per CPU core, and one more if a chosen lesson mostly waits on processes of
    its own (`start_early`): its worker sleeps meanwhile, and the extra one keeps the cores busy.
    1 where one process at a time can hold the accelerator jax would use (a TPU)."""
    if environment.one_process_accelerator():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + any(info.start_early for info in chosen)


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def check_json_path(path: str) -> pathlib.Path:
    """Refuses a results path we could not write, before anything runs."""
    target = pathlib.Path(path)
    if target.is_dir():
        raise UsageError(f"--json {path}: is a directory")
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as e:
        raise UsageError(f"--json {path}: cannot write there ({e.strerror})") from None
    if not existed:
        target.unlink()
    return target


def writable_dir(option: str, path: str) -> pathlib.Path:
    """The directory an option names, created if need be; refused unless we can write in it."""
    target = pathlib.Path(path).resolve()
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot create or write it ({e.strerror})") from None
    return target


def prepare_workdir(path: str | None, keep: bool) -> tuple[pathlib.Path, bool]:
    """The run's root directory, and whether to remove it at the end."""
    if path is None:
        return pathlib.Path(tempfile.mkdtemp(prefix="kauldron-tutorial-")), not keep
    return writable_dir("--workdir", path), False


def prepare_cache(path: str | None, disabled: bool) -> pathlib.Path | None:
    """The cache directory runs share, or None when there is none to use."""
    if disabled:
        return None
    cache = pathlib.Path(path).resolve() if path else runtime.default_cache()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if path:
            raise UsageError(f"--cache-dir {path}: cannot create it ({e.strerror})") from None
        return None  # a read-only home: run without a cache (the header says so)
    return cache


def main(argv: list[str]) -> int:
    # Line by line, as lessons print; a terminal that cannot show a ✔ gets an escape, not an error.
    sys.stdout.reconfigure(line_buffering=True, errors="backslashreplace")
    CtrlC.install()  # Ctrl-C stops the run with a summary
    args = parse_args(argv)
    try:
        infos = registry.catalog()
        if args.list:
            terminal.print_list(infos)
            return EXIT_OK
        chosen = registry.select(infos, args.sections) if args.sections else infos
        if args.notebook:  # writing it needs nbformat, not Kauldron
            presenting.export_notebook(args.notebook, chosen)
            return EXIT_OK
        json_path = check_json_path(args.json) if args.json else None
        held = environment.one_process_accelerator() if args.jobs and args.jobs > 1 else None
        if held:
            raise UsageError(f"--jobs {args.jobs}: one process at a time can hold {held}, and each worker would"
                             " open it: run with --jobs 1 (or JAX_PLATFORMS=cpu to run on the CPU)")
        missing = environment.missing_requirements()
        if missing:
            raise UsageError(f"{', '.join(missing)} not installed; set up with: {INSTALL_COMMAND} (see README.md)")
        if args.versions:
            described, fixes = environment.set_up_and_describe(args.no_compat, heavy=True)  # every decision
            terminal.print_versions(described, fixes)
            if json_path:
                reporting.write_json(json_path, Report(environment=described).to_json())
            return EXIT_OK
        cache = prepare_cache(args.cache_dir, args.no_cache)
        sites = {kind: writable_dir(f"--{kind}", path) for kind, path in
                 (("html", args.html), ("markdown", args.markdown)) if path}
        if sites:
            presenting.check_site_requirements()
        plots_dir = writable_dir("--plots", args.plots) if args.plots else None
        if plots_dir is None and sites:  # the pages show the figures: draw them beside the pages
            plots_dir = next(iter(sites.values())) / "figures"
        workdir, remove_workdir = prepare_workdir(args.workdir, args.keep)
    except (UsageError, registry.SelectionError, presenting.Unavailable) as e:
        print(f"tutorial.py: {e}", file=sys.stderr)
        return EXIT_USAGE

    start = time.perf_counter()
    jobs = min(args.jobs or default_jobs(chosen), len(chosen))
    report = Report(workdir=str(workdir), workdir_removed=remove_workdir, jobs=jobs)
    if args.no_warm_start:
        warm_start.turn_warm_start_off()
    plots = {"dir": plots_dir}
    runner = Runner(jobs, workdir, cache, args.no_compat, banner=terminal.section_banner)
    try:
        runtime.prepare(cache, workdir)

        def show_environment(found: tuple | None) -> None:
            """The header, once: the environment as a worker found it, or else as this
            process finds it (it then applies the fixes and starts jax)."""
            if report.environment:
                return
            described, fixes = (environment.describe(*found, cache) if found
                                else environment.set_up_and_describe(args.no_compat, cache, workdir))
            plots["dir"], plots_line = presenting.plotting_to(plots["dir"])
            report.environment, report.plots = described, str(plots["dir"]) if plots["dir"] else None
            terminal.print_header(described, fixes, workdir, remove_workdir, jobs)
            if plots_line:
                print(plots_line)

        def show_result(result: SectionResult) -> None:
            """Writes the section's figure, if asked, and prints its result line."""
            if plots["dir"] is not None and result.figure is not None:
                path = plots["dir"] / f"{registry.file_stem(result.number, result.slug)}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(result.figure.png)
                result.plots.append(str(path))
            terminal.print_result(result)

        report.sections, report.interrupted = runner.run(chosen, show_environment=show_environment,
                                                         show_result=show_result)
    except KeyboardInterrupt:  # before the first section started
        report.interrupted = True
    finally:
        if report.interrupted:
            print("\ninterrupted")
        # Runner.run gives every section's result; none only if Ctrl-C came before it started.
        report.sections = report.sections or runner.with_the_rest(chosen, [])
        report.seconds = time.perf_counter() - start
        reporting.report_on(report, chosen, json_path, sites,
                            run_command=f"{INSTALL_COMMAND} && .venv/bin/python tutorial.py")
        if remove_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"workdir kept: {workdir}")
    if report.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if report.totals["failed"] else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
