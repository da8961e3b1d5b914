"""Running one section: its page's program, block by block, as a notebook runs cells, in
the lesson's own workdir; what each block prints shown and recorded under it; the outcome
as a `SectionResult`.

The program (harness/lesson_format.py) runs in one namespace: the section module's (its setup
and helpers), with `lesson` and `workdir`. While it runs, `$WORKDIR` is set and the
current directory is the repository, as in a kernel started there. A shell block runs its
command (harness/shell.py); one in the `background` goes on while the step's next
blocks run, and the step ends when it has, or, `needed_by` a later step, while the steps
between run, and that step starts when it has.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import io
import os
import pathlib
import shutil
import signal
import sys
import textwrap
import time
import traceback

from harness import bounds, lesson_format, processes, runtime, shell
from harness.lesson import CheckFailed, Lesson, LessonFailed, SkipSection
from harness.registry import SectionInfo, section_file
from harness.results import Block, Failure, Figure, SectionResult, Step

# How many innermost frames of an unexpected error are shown under its section.
SHORT_TRACEBACK_FRAMES = 3
# Test hook: the section with this slug raises instead of teaching; with "<slug>:crash" it
# kills its own process, with "<slug>:hang" it waits for Ctrl-C, with "<slug>:stuck" its main
# thread waits where no signal reaches it, as in a deadlock inside compiled code
# (tests/test_reliability.py).
FAIL_SECTION_ENV = "KAULDRON_TUTORIAL_FAIL_SECTION"
INDENT = "    "


def run(info: SectionInfo, workdir: pathlib.Path, bound: float | None = None) -> SectionResult:
    """Imports the section's module, prints its introduction, runs its program in
    `workdir`, and records the outcome: each block's output (shown as it comes, too), the
    checks, and its figure, if its code drew one. A failure names the step it happened in.
    Past `bound` seconds (harness/bounds.py), it fails, and what it started is stopped.

    KeyboardInterrupt is not caught: the driver handles it for the whole run."""
    start = time.perf_counter()
    teacher = _Teacher(workdir)
    status, error = "passed", None
    # Beside the lesson's workdir, which the lesson may list or clear.
    restore_temporary_files = runtime.send_temporary_files_to(workdir.parent / ".tmp" / workdir.name)
    environment, directory = dict(os.environ), os.getcwd()
    try:
        stuck_file(workdir).unlink(missing_ok=True)  # an earlier run's, in a kept --workdir
        with bounds.bounded(bound, stuck_file(workdir), teacher.kill_processes):
            _start_fresh(workdir)
            source = lesson_format.read(section_file(info))
            module = importlib.import_module(info.module)
            print(textwrap.indent(source.intro, "  "))
            os.environ["WORKDIR"] = str(workdir)
            os.chdir(lesson_format.ROOT)
            with contextlib.redirect_stdout(_BlockOutput(sys.stdout, teacher)), teacher.lesson.cleanup:
                _injected_failure(info.slug)
                teacher.teach(source, module)
    except SkipSection as e:
        status, teacher.lesson.summary = "skipped", str(e)
    except (Exception, bounds.SectionTimedOut) as e:  # noqa: BLE001 - one section's failure never stops the run
        status, error = "failed", _error(e, teacher.lesson.heading)
        where = f'in step "{teacher.lesson.heading}": ' if teacher.lesson.heading else ""
        teacher.lesson.summary = f"{where}{error.type}: {error.message}"
    finally:
        os.chdir(directory)
        os.environ.clear()
        os.environ.update(environment)
        restore_temporary_files()
    seconds = round(time.perf_counter() - start, 3)
    runtime.release_memory()
    lesson = teacher.lesson
    return SectionResult(info.number, info.slug, info.title, status, seconds, lesson.summary, lesson.facts,
                         lesson.checks_made, error, [], teacher.steps, lesson.skipped_checks, lesson.figure)


def stuck_file(workdir: pathlib.Path) -> pathlib.Path:
    """Where a section's process, stuck past its bound, says why before it ends itself:
    beside the section's workdir (`03-kontext.stuck`), for the runner to read."""
    return workdir.with_name(workdir.name + ".stuck")


def _start_fresh(workdir: pathlib.Path) -> None:
    """The lesson's own, empty workdir. One kept from an earlier run (`--workdir`) is
    cleared, and the run says so: Kauldron would resume from its checkpoints."""
    if workdir.is_dir() and any(workdir.iterdir()):
        leftovers = sorted(path.name for path in workdir.iterdir())
        shutil.rmtree(workdir)
        print(f"  (this workdir held an earlier run of the section, {leftovers}: cleared)")
    workdir.mkdir(parents=True, exist_ok=True)


class _Teacher:
    """Runs a program's blocks and keeps, step by step, what each printed."""

    def __init__(self, workdir: pathlib.Path):
        self.workdir = workdir
        self.lesson = Lesson(workdir, shown=sys.stdout, run_shell=self.shell)
        self.steps: list[Step] = []
        self.block: Block | None = None  # the record of the block running
        self.background: list[_Background] = []
        self.shells: list[shell.Shell] = []  # every command started, to stop if the section is stuck

    def teach(self, source: lesson_format.Program, module) -> None:
        namespace = dict(vars(module), lesson=self.lesson, workdir=self.workdir)
        for index, step in enumerate(source.steps):
            self._finish_background(lambda entry: entry.needed_by == step.heading)
            self.lesson.step, self.lesson.heading = index, step.heading
            self.steps.append(Step(step.heading))
            self.lesson.tell("\n" + textwrap.indent(step.prose, "  ") + "\n\n")
            for block in step.blocks:
                self.block = Block(block.kind, block.line)
                self.steps[-1].blocks.append(self.block)
                code = compile(ast.Module(body=block.statements, type_ignores=[]), str(source.path), "exec")
                try:
                    exec(code, namespace)  # noqa: S102 - the lesson's own code, as a notebook runs a cell
                    if block.kind == "python":
                        self._keep_figure(index)
                except CheckFailed:
                    # A check may fail only because a command of its step, in the background,
                    # died meanwhile (a killed peer): the command's failure is then the cause.
                    for entry in self.background:
                        if entry.check and entry.running.fails_within(2.0):
                            self.background.remove(entry)
                            self._finish_started(entry)  # raises LessonFailed, naming the command
                    raise
            self.block = None
            self._finish_background(lambda entry: entry.needed_by is None)
        self._finish_background(lambda entry: True)

    def _keep_figure(self, step: int) -> None:
        """The figure a block of the page's code drew with matplotlib (a notebook shows it
        under the cell), kept as a PNG for the pages and --plots, and closed. Its title (the
        pages' alt text) is its suptitle, else its first axes' title, else the step's
        heading. A page has one figure at most."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        for number in pyplot.get_fignums() if pyplot else []:
            figure = pyplot.figure(number)
            if self.lesson.figure is not None:
                raise LessonFailed(f"a page has one figure: step \"{self.lesson.heading}\" draws a second")
            drawn = io.BytesIO()
            figure.savefig(drawn, format="png", dpi=100)
            pyplot.close(figure)
            titles = [figure.get_suptitle(), *(ax.get_title() for ax in figure.axes), self.lesson.heading]
            self.lesson.figure = Figure(next(title for title in titles if title), drawn.getvalue(), step)

    def shell(self, command: str, *, background: bool, shows: str | None, check: bool, timeout: float | None,
              needed_by: str | None = None):
        """Runs a shell block's command (Lesson.shell); waits for it unless `background`."""
        record = self.block
        record.command, record.printed = command, ""
        self.lesson.tell(textwrap.indent("$ " + command.replace("\n", "\n  "), INDENT) + "\n")
        with processes.ctrl_c_held():
            running = shell.Shell(command, self.workdir, timeout)
            self.lesson.cleanup.callback(running.kill)
            self.shells.append(running)
        if background:
            self.background.append(_Background(running, record, shows, check, needed_by, self.lesson.step))
            goes_on = f'until the step "{needed_by}"' if needed_by else "while the step goes on"
            self.lesson.tell(f"{INDENT}(running in the background {goes_on})\n")
            return running
        return self._finish(running, record, shows, check)

    def _finish(self, running: shell.Shell, record: Block, shows: str | None, check: bool, step: int = -1):
        try:
            running.wait()
        except processes.ProcessFailed as e:
            raise LessonFailed(str(e)) from None
        shown = shell.excerpt(running.output, shows)
        record.printed, record.output_lines = shown + "\n" if shown else "", len(running.output.splitlines())
        self.steps[step].printed += record.printed
        if shown:
            self.lesson.tell(textwrap.indent(shown, INDENT) + "\n")
        if check and running.returncode != 0:
            raise LessonFailed(running.failure())
        return running

    def _finish_started(self, entry: _Background):
        """A command started in the background, waited for; its output shown now, and
        recorded with the step that started it."""
        if entry.step != self.lesson.step:
            self.lesson.tell(f"{INDENT}(waiting for the command in the background: $ {entry.record.command})\n")
        return self._finish(entry.running, entry.record, entry.shows, entry.check, entry.step)

    def _finish_background(self, due) -> None:
        """Waits for the commands in the background that are `due`."""
        for entry in [entry for entry in self.background if due(entry)]:
            self.background.remove(entry)
            self._finish_started(entry)

    def kill_processes(self) -> None:
        """Kills what the section's commands started, from any thread: no waiting, no
        Python the main thread must run (it may be stuck)."""
        for running in self.shells:
            for pid in running.pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def record_output(self, text: str) -> None:
        """What the lesson's code printed, kept with the block that printed it."""
        if self.block is None:
            return
        self.block.printed += text
        if self.block.kind != "checks":
            self.steps[-1].printed += text


@dataclasses.dataclass
class _Background:
    """A shell block's command running in the background."""

    running: shell.Shell
    record: Block  # its block's record, where its output goes
    shows: str | None
    check: bool
    needed_by: str | None  # the heading of the step that waits for it; None: its own step's end
    step: int  # the index of the step that started it


class _BlockOutput(io.TextIOBase):
    """The lesson's stdout: what its code prints is shown as it comes, indented under the
    step's prose, and recorded in the block it was printed in."""

    def __init__(self, shown, teacher: _Teacher):
        self.shown, self.teacher = shown, teacher
        self.at_line_start = True

    def write(self, text: str) -> int:
        self.teacher.record_output(text)
        indented = []
        for line in text.splitlines(keepends=True):
            # A blank line stays blank; a line whose first write is spaces (print("  ", x))
            # is indented like any other.
            if self.at_line_start and (line.strip() or not line.endswith("\n")):
                line = INDENT + line
            indented.append(line)
            self.at_line_start = line.endswith("\n")
        self.shown.write("".join(indented))
        return len(text)

    def flush(self) -> None:
        self.shown.flush()


def _injected_failure(slug: str) -> None:
    failing, _, how = os.environ.get(FAIL_SECTION_ENV, "").partition(":")
    if failing != slug:
        return
    if how == "crash":  # as a segfault in compiled code would: no Python error, the process gone
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":  # a long section, as the user sees it when they press Ctrl-C
        print("hanging until interrupted", flush=True)
        while True:
            time.sleep(0.1)
    if how == "stuck":  # sigsuspend with every signal blocked: only SIGKILL ends it
        import ctypes

        libc, mask = ctypes.CDLL(None), ctypes.create_string_buffer(128)  # a sigset_t
        libc.sigfillset(mask)
        libc.sigsuspend(mask)
    raise RuntimeError(f"failure injected by {FAIL_SECTION_ENV}")


def one_line(message: str) -> str:
    """An error message in one line: its first line, and its last when the first only
    introduces the rest (Kauldron's "Error resolving the config:")."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return f"{lines[0]} ... {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _error(e: BaseException, step: str | None) -> Failure:
    frames = traceback.extract_tb(e.__traceback__)
    return Failure(type(e).__name__, one_line(str(e)), expected=isinstance(e, (LessonFailed, bounds.SectionTimedOut)),
                   short_traceback="".join(traceback.format_list(frames[-SHORT_TRACEBACK_FRAMES:])),
                   traceback="".join(traceback.format_exception(type(e), e, e.__traceback__)), step=step)
