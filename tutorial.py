"""Kauldron, section by section: every lesson prints what it shows and checks it.

    python tutorial.py                  # every section, in order
    python tutorial.py 3 ktyping        # some sections, by number, slug or slug prefix
    python tutorial.py --list           # what there is
    python tutorial.py --help           # every option

This file is the driver: it parses the command line, applies the compat fixes, runs the
selected sections in their own workdirs and reports. It knows nothing about Kauldron; the
lessons live in `sections/`.
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

import _thread  # noqa: E402
import argparse  # noqa: E402
import atexit  # noqa: E402
import concurrent.futures  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from sections import registry  # noqa: E402

# README command 1 without its last step (running the tutorial); tests/test_reliability.py
# checks they stay the same.
INSTALL_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install uv==0.13.9"
                   " && .venv/bin/uv pip install --compile-bytecode -p .venv -r requirements.txt")
EXTRAS_INSTALL_COMMAND = ".venv/bin/pip install -r requirements-extras.txt"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
RULE = "=" * 78


class UsageError(Exception):
    """A bad command line: reported as one line, exit status 2, nothing run."""


class CtrlC:
    """Remembers a Ctrl-C. Python raises it as KeyboardInterrupt in whatever code is running,
    and when that is a garbage-collector callback (jax registers one) Python cannot raise it:
    it prints "Exception ignored in ..." with a traceback and goes on. Seen in CI: a run
    that ignored its Ctrl-C and exited 0. So the press is remembered, a swallowed interrupt
    is raised again in the main thread, and the run stops after the section either way."""

    pressed = False
    _reraised = 0

    @classmethod
    def handler(cls, signum, frame):
        cls.pressed = True
        raise KeyboardInterrupt

    @classmethod
    def unraisable_hook(cls, unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            sys.__unraisablehook__(unraisable)
        elif cls._reraised < 100:  # bounded, in case it keeps landing in callbacks
            cls._reraised += 1
            # From another thread, so that it lands after the callback, not in this hook.
            # At interpreter shutdown (seen on 3.12) no thread can start, and there is no
            # main code left to interrupt: the press is already remembered.
            if sys.is_finalizing():
                return
            try:
                threading.Timer(0.01, _thread.interrupt_main).start()
            except RuntimeError:
                pass


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tutorial.py",
        description="Kauldron, section by section. Each section prints a lesson and checks it "
        "against the installed library.",
    )
    parser.add_argument(
        "sections", nargs="*", metavar="SECTION",
        help="section number, slug or unique slug prefix (default: all, in order)",
    )
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument(
        "--versions", action="store_true",
        help="print the environment (package versions, devices, compat decisions) and exit",
    )
    parser.add_argument("--json", metavar="PATH", help="write machine-readable results to PATH")
    parser.add_argument(
        "--workdir", metavar="DIR",
        help="root for everything the run writes (default: a fresh temporary directory, "
        "removed at the end unless --keep)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary workdir")
    parser.add_argument(
        "-j", "--jobs", type=positive_int, default=default_jobs(), metavar="N",
        help="run the sections in N worker processes, printing each whole and in order "
        f"(default: the number of CPU cores, {default_jobs()} here; 1: all in this process)",
    )
    parser.add_argument(
        "--plots", metavar="DIR",
        help="also draw the sections' figures as PNG files in DIR (needs matplotlib)",
    )
    parser.add_argument(
        "--notebook", metavar="PATH",
        help="write the selected sections as a Jupyter notebook to PATH and exit (needs nbformat)",
    )
    parser.add_argument(
        "--html", metavar="DIR",
        help="also write the results as a web page per section in DIR (lesson, code, output, "
        "figure, checks) with an index; it needs no network to read",
    )
    parser.add_argument(
        "--markdown", metavar="DIR",
        help="also write the results as Markdown pages in DIR (docs/ is one such copy)",
    )
    parser.add_argument(
        "--no-compat", action="store_true",
        help="skip the compat fixes (to see what they fix)",
    )
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache-dir", metavar="DIR",
        help="the cache runs share: JAX's compiled programs, matplotlib's font list "
        f"(default: per user, {registry.default_cache()})",
    )
    cache.add_argument("--no-cache", action="store_true", help="compile everything afresh")
    return parser.parse_args(argv)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def print_list(infos: list[registry.SectionInfo]) -> None:
    """One line per section: number, slug, whether it trains a model, what it shows."""
    width = max(len(info.slug) for info in infos)
    for info in infos:
        trains = "trains" if info.trains else "-"
        print(f"{info.number:>3}  {info.slug:<{width}}  {trains:<6}  {info.shows}")


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


def plotting_to(target: pathlib.Path | None) -> tuple[pathlib.Path | None, str | None]:
    """Where --plots draws (None: nowhere), and the header line that says so. Without
    matplotlib the run goes on as if --plots was not given, after one line saying why.
    Call after the process settings: importing matplotlib writes its config directory."""
    if target is None:
        return None, None
    if not registry.plotting_available():
        return None, f"plots: not drawn: matplotlib is not installed; install it with: {EXTRAS_INSTALL_COMMAND}"
    return target, f"plots: {target} (a PNG for each selected section that has a figure)"


def check_site_requirements() -> None:
    """--html and --markdown render with Jinja2, Markdown and Pygments."""
    try:
        import jinja2  # noqa: F401
        import markdown  # noqa: F401
        import pygments  # noqa: F401
    except ImportError as e:
        raise UsageError(f"--html and --markdown need {e.name}, which is not installed; install it with: "
                         f"{EXTRAS_INSTALL_COMMAND}") from None


def export_notebook(path: str, chosen: list[registry.SectionInfo]) -> None:
    target = pathlib.Path(path)
    if target.is_dir():
        raise UsageError(f"--notebook {path}: is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"--notebook {path}: no directory {target.parent}")
    try:
        from presenting import notebook
    except ImportError as e:
        raise UsageError(f"--notebook needs {e.name}, which is not installed; install it with: "
                         f"{EXTRAS_INSTALL_COMMAND}") from None
    try:
        notebook.export(chosen, target)
    except OSError as e:
        raise UsageError(f"--notebook {path}: cannot write it ({e.strerror})") from None
    sections = f"{len(chosen)} section" + ("s" if len(chosen) != 1 else "")
    print(f"notebook: {target} ({sections}). Open it with `jupyter lab {target}`"
          " (README.md: Notebook).")


def prepare_cache(path: str | None, disabled: bool) -> pathlib.Path | None:
    """The cache directory runs share, or None when there is none to use."""
    if disabled:
        return None
    cache = pathlib.Path(path).resolve() if path else registry.default_cache()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        if path:
            raise UsageError(f"--cache-dir {path}: cannot create it ({e.strerror})") from None
        return None  # a read-only home: run without a cache (the header says so)
    return cache


def write_json(path: pathlib.Path, results: dict) -> None:
    # Write beside the target and rename, so a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def inspect_environment(
    no_compat: bool, cache: pathlib.Path | None = None, workdir: pathlib.Path | None = None
) -> tuple[dict, list]:
    """Applies the compat fixes (unless told not to) and describes the environment."""
    # Process settings first (jax reads some when it is imported), then the fixes, all
    # before any section imports Kauldron.
    registry.prepare(cache, workdir)
    if not no_compat:
        import compat

        compat.install_all()
    return describe(*environment_here(no_compat), cache)


def environment_here(no_compat: bool) -> tuple[list[str], list]:
    """This process's jax devices and what each compat fix decided. The lessons import what
    the fixes watch anyway: it is imported now, so that every decision is made."""
    import compat
    from compat import environment

    return environment.devices(), compat.skipped_all() if no_compat else compat.reports(settle=True)


def describe(devices: list[str], fixes: list, cache: pathlib.Path | None) -> tuple[dict, list]:
    from compat import environment

    return {"versions": environment.versions(), "devices": devices, "compat": [fix.to_json() for fix in fixes],
            "cache": str(cache) if cache else None}, fixes


def start_worker(no_compat: bool, cache: pathlib.Path | None, workdir: pathlib.Path) -> None:
    """Runs first in each worker process (--jobs): the driver's process settings and fixes,
    and a process group of its own, so that stopping the run can stop the worker together
    with every process its sections started."""
    os.setpgrp()
    registry.prepare(cache, workdir)
    if not no_compat:
        import compat

        compat.install_all()


def run_captured(info: registry.SectionInfo, workdir: pathlib.Path, no_compat: bool) -> tuple:
    """One section in a worker: its result, what it printed (for the driver to print in
    order), and the worker's devices and compat decisions (for the driver's header: it
    need not start jax itself)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = registry.run(info, workdir)
    environment = environment_here(no_compat)
    # Last registered, first run: when the pool ends the worker, it leaves at once instead
    # of tearing down jax and TensorFlow (1.8 s measured, with nothing left to do).
    atexit.unregister(exit_at_once)
    atexit.register(exit_at_once)
    return result, printed.getvalue(), environment


def exit_at_once() -> None:
    """A worker's exit, once its sections are done and their results sent."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def stop_workers() -> None:
    """Kills every worker and whatever it started (each worker leads its own process group)."""
    for worker in multiprocessing.active_children():
        for kill in (lambda: os.killpg(worker.pid, signal.SIGKILL), worker.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill()


def worker_died(info: registry.SectionInfo, error: Exception) -> registry.SectionResult:
    message = ("its worker process died while running it alone (killed, or a crash in compiled code);"
               " run it with --jobs 1 to see why")
    return registry.SectionResult(
        info.number, info.slug, info.title, "failed", 0.0, f"{type(error).__name__}: {message}", {},
        error={"type": type(error).__name__, "message": message, "expected": True,
               "short_traceback": "", "traceback": ""})


def section_banner(info: registry.SectionInfo) -> str:
    return f"\n{RULE}\n{info.number}. {info.title}  [{info.slug}]\n{RULE}"


def run_in_this_process(chosen, section_dir, finish, results, running) -> None:
    for info in chosen:
        running.add(info.slug)
        print(section_banner(info))
        result = registry.run(info, section_dir(info))
        if CtrlC.pressed:  # the interrupt was swallowed inside the section: don't trust it
            raise KeyboardInterrupt
        running.discard(info.slug)
        finish(result)
        results.append(result)


def run_in_workers(jobs, worker_setup, chosen, section_dir, finish, results, running, first=lambda environment: None) -> None:
    """Runs the sections in `jobs` worker processes and prints each section whole as soon as
    it and the ones before it are done. A worker runs one section after another, as this
    process does with --jobs 1, so it pays the imports once. Those marked `start_early` go
    first (a long job in processes of their own then overlaps with the rest), the others in
    order, so that output starts at once.

    A worker that dies (a crash in compiled code, the OOM killer) breaks the pool: the
    sections not yet done then run again one by one, each in a worker of its own, so that
    only the one that kills its worker fails. `first` is called with a worker's devices and
    compat decisions (None if its worker died) before the first section is printed."""
    start_order = sorted(chosen, key=lambda info: not info.start_early)  # stable: else in order
    left = run_in_pool(min(jobs, len(chosen)), worker_setup, start_order, chosen, section_dir, finish,
                       results, running, first=first)
    for info in left:
        run_in_pool(1, worker_setup, [info], [info], section_dir, finish, results, running, alone=True, first=first)


def worker_context(trains: bool):
    """Workers forked from a server that has imported what training lessons need
    (sections/warm_imports.py), when one is chosen. Never forked from this process: it
    may have started jax, which is multithreaded. Else spawned: light lessons import
    little."""
    if not trains or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", "sections.warm_imports"])
    return context


def run_in_pool(workers, worker_setup, start_order, print_order, section_dir, finish, results, running,
                alone=False, first=lambda environment: None) -> list:
    """Runs sections in a pool; prints and records each in `print_order`. Returns the
    sections left undone when a worker died (none when `alone`: that section failed)."""
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, initializer=start_worker, initargs=worker_setup,
        mp_context=worker_context(any(info.trains for info in start_order)))
    futures = {}
    try:
        no_compat = worker_setup[0]
        for info in start_order:
            futures[info.slug] = pool.submit(run_captured, info, section_dir(info), no_compat)
        for index, info in enumerate(print_order):
            try:
                result, printed, environment = futures[info.slug].result()
            except concurrent.futures.process.BrokenProcessPool as e:
                if not alone:
                    return print_order[index:]
                result, printed, environment = worker_died(info, e), "", None
            first(environment)
            print(section_banner(info))
            print(printed, end="")
            finish(result)
            results.append(result)
        return []
    except BaseException:
        # "Running" includes the next in line: the pool hands it on before a worker is free.
        running.update(slug for slug, future in futures.items() if future.running())
        stop_workers()
        # Sections done but not yet printed (one before them was still running) count.
        printed = {result.slug for result in results}
        for info in print_order:
            future = futures.get(info.slug)
            if info.slug not in printed and future and future.done() and not future.cancelled() \
                    and future.exception() is None:
                results.append(future.result()[0])
        raise
    finally:
        pool.shutdown(cancel_futures=True)


def print_versions(described: dict, fixes: list) -> None:
    for name, version in described["versions"].items():
        print(f"{name:<18} {version}")
    print(f"{'devices':<18} {', '.join(described['devices'])}")
    for fix in fixes:
        print(f"compat {fix.line()}")


def print_header(described: dict, fixes: list, workdir: pathlib.Path, removed: bool, jobs: int) -> None:
    print(RULE)
    print("Kauldron tutorial")
    print(" | ".join(f"{name} {version}" for name, version in described["versions"].items()))
    print(f"devices: {', '.join(described['devices'])}")
    for fix in fixes:
        print(f"compat {fix.line()}")
    cache = described["cache"]
    if cache:
        programs = sum(1 for _ in pathlib.Path(cache, "jax").glob("*-cache"))
        print(f"cache: {cache} ({programs} compiled programs; --no-cache to compile afresh)")
    else:
        print("cache: off (everything is compiled afresh)")
    print(f"workdir: {workdir}" + (" (removed at the end; --keep keeps it)" if removed else ""))
    if jobs > 1:
        print(f"jobs: {jobs} worker processes (each section is printed whole, in order, when done)")


def checks_counted(checks: list[dict]) -> str:
    """'12 checks', or '12 checks, 1 failed'."""
    failed = sum(not check["passed"] for check in checks)
    text = f"{len(checks)} check" + ("" if len(checks) == 1 else "s")
    return text + (f", {failed} failed" if failed else "")


def print_result(result: registry.SectionResult) -> None:
    timing = f"{result.seconds:.1f} s, {checks_counted(result.checks)}"
    if result.status == "failed":
        print(f"-> FAILED ({timing}): {result.summary}")
        if not result.error["expected"]:
            print("   last frames:")
            print("   " + result.error["short_traceback"].rstrip().replace("\n", "\n   "))
    else:
        print(f"-> {result.status} ({timing}): {result.summary}")
    for path in result.plots:
        print(f"   figure: {path}")


def print_summary(results: list[registry.SectionResult], totals: dict) -> None:
    print(f"\n{RULE}\nSUMMARY\n{RULE}")
    width = max(len(r.slug) for r in results)
    for r in results:
        # Shortened at a word boundary: the JSON has it whole.
        summary = textwrap.shorten(r.summary, width=90, placeholder=" ...")
        print(f"{r.number:>3}  {r.slug:<{width}}  {r.status:<7} {r.seconds:>6.1f} s  {len(r.checks):>3} checks  {summary}")
    print(
        f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped;"
        f" {checks_counted([c for r in results for c in r.checks])} in {totals['seconds']:.1f} s"
    )


def main(argv: list[str]) -> int:
    # Line by line, as lessons print; a terminal that cannot show a ✔ gets an escape, not an error.
    sys.stdout.reconfigure(line_buffering=True, errors="backslashreplace")
    # Ctrl-C stops the run with a summary. Python leaves SIGINT ignored when it starts
    # with it ignored (as a shell's background job does): make it interrupt regardless.
    signal.signal(signal.SIGINT, CtrlC.handler)
    sys.unraisablehook = CtrlC.unraisable_hook
    args = parse_args(argv)
    try:
        infos = registry.catalog()
        if args.list:
            print_list(infos)
            return EXIT_OK
        chosen = registry.select(infos, args.sections) if args.sections else infos
        if args.notebook:  # writing it needs nbformat, not Kauldron
            export_notebook(args.notebook, chosen)
            return EXIT_OK
        json_path = check_json_path(args.json) if args.json else None
        missing = registry.missing_requirements()
        if missing:
            raise UsageError(
                f"{', '.join(missing)} not installed; set up with: {INSTALL_COMMAND} (see README.md)"
            )
        if args.versions:
            described, fixes = inspect_environment(args.no_compat)
            print_versions(described, fixes)
            if json_path:
                write_json(json_path, {**described, "interrupted": False, "sections": [], "totals": {}})
            return EXIT_OK
        cache = prepare_cache(args.cache_dir, args.no_cache)
        sites = {kind: writable_dir(f"--{kind}", path) for kind, path in
                 (("html", args.html), ("markdown", args.markdown)) if path}
        if sites:
            check_site_requirements()
        plots_dir = writable_dir("--plots", args.plots) if args.plots else None
        if plots_dir is None and sites:  # the pages show the figures: draw them beside the pages
            plots_dir = next(iter(sites.values())) / "figures"
        workdir, remove_workdir = prepare_workdir(args.workdir, args.keep)
    except (UsageError, registry.SelectionError) as e:
        print(f"tutorial.py: {e}", file=sys.stderr)
        return EXIT_USAGE

    start = time.perf_counter()
    results: list[registry.SectionResult] = []
    running: set[str] = set()  # the sections running when an interrupt came
    jobs = min(args.jobs, len(chosen))
    running_note = "interrupted while running" if jobs == 1 else "interrupted while running or next in line"
    report = {"versions": {}, "devices": [], "compat": [], "interrupted": False,
              "workdir": str(workdir), "workdir_removed": remove_workdir, "jobs": jobs, "sections": [], "totals": {}}
    try:
        plots = {"dir": plots_dir}
        registry.prepare(cache, workdir)

        def show_header(environment: tuple | None = None) -> None:
            """The environment, as a worker saw it, or else as this process sees it (it then
            applies the fixes and starts jax); once."""
            if report["devices"]:
                return
            described, fixes = (describe(*environment, cache) if environment
                                else inspect_environment(args.no_compat, cache, workdir))
            plots["dir"], plots_line = plotting_to(plots["dir"])
            report.update(described, plots=str(plots["dir"]) if plots["dir"] else None)
            print_header(described, fixes, workdir, remove_workdir, jobs)
            if plots_line:
                print(plots_line)

        def section_dir(info: registry.SectionInfo) -> pathlib.Path:
            return workdir / registry.file_stem(info.number, info.slug)

        def finish(result: registry.SectionResult) -> None:
            """Draws the section's figure, if asked, and prints its result line."""
            if plots["dir"] is not None and result.figure is not None:
                from presenting import plots as drawing

                path = plots["dir"] / f"{registry.file_stem(result.number, result.slug)}.png"
                drawing.draw(*result.figure, path)
                result.plots.append(str(path))
            print_result(result)

        if jobs == 1:
            show_header()
            run_in_this_process(chosen, section_dir, finish, results, running)
        else:
            # The workers report the environment with their results: this process need
            # not import jax, nor apply the fixes, only print.
            worker_setup = (args.no_compat, cache, workdir)
            run_in_workers(jobs, worker_setup, chosen, section_dir, finish, results, running, show_header)
    except KeyboardInterrupt:
        report["interrupted"] = True
        print("\ninterrupted")
    finally:
        if not report["versions"]:  # stopped before any worker reported: what needs no jax
            from compat import environment

            report["versions"] = environment.versions()
        done = {r.slug for r in results}
        for info in chosen:
            if info.slug not in done:
                why = running_note if info.slug in running else "not run: interrupted"
                results.append(registry.SectionResult(info.number, info.slug, info.title, "skipped", 0.0, why, {}))
        order = [info.slug for info in chosen]
        results.sort(key=lambda r: order.index(r.slug))
        totals = {status: sum(r.status == status for r in results)
                  for status in ("passed", "failed", "skipped")}
        totals["checks"] = sum(len(r.checks) for r in results)
        totals["failed_checks"] = sum(r.failed_checks for r in results)
        totals["seconds"] = round(time.perf_counter() - start, 3)
        report["sections"] = [r.to_json() for r in results]
        report["totals"] = totals
        print_summary(results, totals)
        if json_path:
            write_json(json_path, report)
            print(f"results: {json_path}")
        for kind, site in sites.items():
            from presenting import site as pages

            written = pages.write(report, chosen, site, kind, run_command=f"{INSTALL_COMMAND} && .venv/bin/python tutorial.py")
            print(f"{kind}: {written[0]} and {len(written) - 1} section pages")
        if remove_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"workdir kept: {workdir}")
    if report["interrupted"]:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if totals["failed"] else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
