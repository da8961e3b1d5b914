"""Runs the selected sections: one after another in this process (`jobs=1`), or in worker
processes, printing each section whole and in order as soon as it and the ones before it
are done (on a terminal, a status line says meanwhile which are running, and for how
long). A worker that dies fails only the section it ran; Ctrl-C stops every worker and
whatever it started. `Runner.run` returns every section's result, those not run included.

    results, interrupted = Runner(jobs, workdir, cache, no_compat).run(
        chosen, show_environment=..., show_result=...)
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import multiprocessing
import os
import pathlib
import signal
from typing import Callable

from harness import bounds, processes, program_memo, registry, runtime, teaching, warm_start
from harness.results import SectionResult
from harness import environment
from runner import durations
from runner.interrupts import CtrlC
from runner.status import Status


class Runner:
    """`banner(info)`: the line printed above a section's output (the runner prints what a
    worker's section printed under it, in order)."""

    def __init__(self, jobs: int, workdir: pathlib.Path, cache: pathlib.Path | None, no_compat: bool,
                 banner: Callable[[registry.SectionInfo], str]):
        self.jobs, self.workdir, self.cache, self.no_compat = jobs, workdir, cache, no_compat
        self.banner = banner
        self.warm_start: str | None = None  # the address of the server that forks lessons' children
        self.seconds = durations.load(cache)  # each section's, when it last passed: its bound

    def section_dir(self, info: registry.SectionInfo) -> pathlib.Path:
        return self.workdir / registry.file_stem(info.number, info.slug)

    def run(self, chosen: list[registry.SectionInfo], *, show_environment: Callable[[tuple | None], None],
            show_result: Callable[[SectionResult], None]) -> tuple[list[SectionResult], bool]:
        """Runs `chosen`; returns their results in order, and whether Ctrl-C stopped the run.
        `show_environment` gets a worker's (devices, compat decisions), or None with
        `jobs=1`, before the first section is printed; `show_result` each result in order."""
        results: list[SectionResult] = []
        running: set[str] = set()  # the sections running when an interrupt came
        # Lessons that start Python processes get them from a server forked, as the
        # workers are, by the forkserver that has imported what they need.
        warm = any(info.starts_processes for info in chosen)
        try:
            with warm_start.server() if warm else contextlib.nullcontext() as self.warm_start:
                if self.jobs == 1:
                    if any(info.trains for info in chosen):  # as the forkserver does: see warm_imports
                        import harness.warm_imports  # noqa: F401
                    show_environment(None)
                    with warm_start.used_here(self.warm_start):
                        self._in_this_process(chosen, show_result, results, running)
                else:
                    # The workers report the environment with their results: this process
                    # need not import jax, nor apply the fixes, only print.
                    left = self._in_pool(self.jobs, start_order(chosen, self.seconds), chosen,
                                         show_environment, show_result, results, running)
                    for info in left:
                        result = self.stuck(info)
                        if result:  # it ended its worker, and would again
                            print(self.banner(info))
                            show_result(result)
                            results.append(result)
                            continue
                        self._in_pool(1, [info], [info], show_environment, show_result, results, running, alone=True)
        except KeyboardInterrupt:
            return self.with_the_rest(chosen, results, running), True
        durations.record(self.cache, results)
        return self.with_the_rest(chosen, results, running), False

    def _in_this_process(self, chosen, show_result, results, running) -> None:
        # Where this process holds an accelerator that one process holds at a time (a TPU), a
        # lesson that starts Python processes runs in a worker on the CPU, its commands too:
        # they could not open the chip, and would compare their CPU results with the chip's.
        off_the_chip = environment.one_process_accelerator()
        for info in chosen:
            if off_the_chip and info.starts_processes:
                self._in_pool(1, [info], [info], lambda found: None, show_result, results, running, alone=True,
                              on_cpu=True)
                continue
            running.add(info.slug)
            print(self.banner(info))
            result = teaching.run(info, self.section_dir(info), durations.bound(info.slug, self.seconds))
            if CtrlC.pressed:  # the interrupt was swallowed inside the section: don't trust it
                raise KeyboardInterrupt
            running.discard(info.slug)
            show_result(result)
            results.append(result)

    def _in_pool(self, workers, start_order, print_order, show_environment, show_result, results, running,
                 alone=False, on_cpu=False) -> list:
        """Runs sections in a pool, those marked `start_early` first (a long job in processes
        of their own then overlaps with the rest); prints each in `print_order`. A worker
        that dies breaks the pool: returns the sections left undone, to run again one by
        one (none when `alone`: that section failed). `on_cpu`: jax in the workers, and in
        what they start, computes on the CPU."""
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, initializer=start_worker,
            initargs=(self.no_compat, self.cache, self.workdir, self.warm_start, on_cpu),
            mp_context=worker_context(start_order, self.warm_start is not None))
        futures = {}
        status = Status(len(print_order))
        try:
            # The pool starts its workers as sections are submitted, waiting for the forkserver
            # (seconds, while it imports) to fork each: an interrupt landing there left a worker
            # the run never knew of, which failed with a traceback after the run had exited
            # (seen in CI). Raised at the block's end, it also replaces the error a SIGTERM to
            # the whole process group (`timeout`, a CI runner) causes by stopping the forkserver.
            with processes.ctrl_c_held():
                for info in start_order:
                    futures[info.slug] = pool.submit(run_captured, info, self.section_dir(info), self.no_compat,
                                                     durations.bound(info.slug, self.seconds))
            for index, info in enumerate(print_order):
                while not futures[info.slug].done():  # the status line, every second, on a terminal
                    # The pool hands the next in line over early: as many as there are workers.
                    status.show([slug for slug, future in futures.items() if future.running()][:workers], index)
                    concurrent.futures.wait([futures[info.slug]], timeout=1)
                status.clear()
                try:
                    result, printed, found = futures[info.slug].result()
                except concurrent.futures.process.BrokenProcessPool as e:
                    if not alone:
                        return print_order[index:]
                    result = self.stuck(info) or worker_died(info, e)
                    printed, found = "", None
                show_environment(found)
                print(self.banner(info))
                print(printed, end="")
                show_result(result)
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
            status.close()
            pool.shutdown(cancel_futures=True)

    def stuck(self, info: registry.SectionInfo) -> SectionResult | None:
        """The result of a section that ended its worker, stuck past its bound (harness/bounds.py)."""
        reason = bounds.stuck_reason(teaching.stuck_file(self.section_dir(info)))
        return SectionResult.crashed(info, "SectionTimedOut", reason) if reason else None

    def with_the_rest(self, chosen, results, running=frozenset()) -> list[SectionResult]:
        """`results`, with a skipped result for each section not done, in the order chosen."""
        note = "interrupted while running" if self.jobs == 1 else "interrupted while running or next in line"
        done = {r.slug for r in results}
        for info in chosen:
            if info.slug not in done:
                why = note if info.slug in running else "not run: interrupted"
                results.append(SectionResult.skipped(info, why))
        order = [info.slug for info in chosen]
        return sorted(results, key=lambda r: order.index(r.slug))


def start_order(chosen: list[registry.SectionInfo], seconds: dict[str, float]) -> list[registry.SectionInfo]:
    """The order workers take sections in: those marked to start early, then the longest
    in earlier runs (`seconds`), then the rest in the order chosen."""
    return sorted(chosen, key=lambda info: (not info.start_early, -seconds.get(info.slug, 0.0)))


def worker_context(chosen: list[registry.SectionInfo], warm_server: bool):
    """Workers forked from the forkserver that has imported what training lessons need
    (harness/warm_imports.py), when one is chosen or a warm-start server runs (forked by
    that forkserver, which has imported it all then: a worker spawned beside it imported
    again, 20 s of section 4's 24 on a TPU machine). Never forked from this process: it
    may have started jax, which is multithreaded. Else spawned: light lessons import
    little."""
    if (not (warm_server or any(info.trains for info in chosen))
            or "forkserver" not in multiprocessing.get_all_start_methods()):
        return multiprocessing.get_context("spawn")
    return warm_start.warm_context()


def start_worker(no_compat: bool, cache: pathlib.Path | None, workdir: pathlib.Path, warm: str | None,
                 on_cpu: bool = False) -> None:
    """Runs first in each worker process: the driver's process settings and fixes, and a
    process group of its own, so that stopping the run can stop the worker together with
    every process its sections started (those the warm-start server at `warm` forks for it
    join the group). `on_cpu`: jax here and in the processes it starts computes on the CPU."""
    os.setpgrp()
    if on_cpu:
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ["KAULDRON_TUTORIAL_CHIP_HELD"] = "1"  # the driver holds it: sections/parts/accelerator.py
        processes.jax_platforms_from_environment()  # the forkserver imported jax before
    warm_start.use(warm)
    runtime.prepare(cache, workdir)
    program_memo.install()
    if not no_compat:
        import compat

        compat.install_all()


def run_captured(info: registry.SectionInfo, workdir: pathlib.Path, no_compat: bool,
                 bound: float | None = None) -> tuple:
    """One section in a worker: its result, what it printed (for the driver to print in
    order), and the worker's devices and compat decisions (for the driver's header: it
    need not start jax itself)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = teaching.run(info, workdir, bound)
    found = environment.here(no_compat)
    return result, printed.getvalue(), found


def stop_workers() -> None:
    """Kills every worker and whatever it started (each worker leads its own process group)."""
    for worker in multiprocessing.active_children():
        for kill in (lambda pid=worker.pid: os.killpg(pid, signal.SIGKILL), worker.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill()


def worker_died(info: registry.SectionInfo, error: Exception) -> SectionResult:
    return SectionResult.crashed(info, type(error).__name__, "its worker process died while running it alone (killed, "
                                 "or a crash in compiled code); run it with --jobs 1 to see why")
