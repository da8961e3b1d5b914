"""A page as a program: its code blocks, outside the folds, in order, and what the page
says each prints; run in a fresh kernel at the repository root and compared.

Python blocks are cells; a shell block is a `!` line (`%%bash` for several commands), as
the notebook has them. A Python cell must print what the page shows under it: the same
text, but for the workdir's path, the last digits of floats, and the status lines Kauldron
prints only in a notebook. A shell block's page
shows some lines of its output ("..." for the rest): each must appear, in order, in what
the command printed, absl's prefix aside.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re

from harness.shell import ABSL_PREFIX
from presenting.notebook import shell_cell

FENCE = re.compile(r"^```(\w*)\n(.*?)\n```$", re.S | re.M)
FOLD_TAG = re.compile(r"</?details[^>]*>")
# What Kauldron prints only in a notebook (`epy.is_notebook()`), where elsewhere it logs or
# stays silent: kauldron/utils/status_utils.py's `log` (training starts) and
# kauldron/data/py/base.py (a PyGrain pipeline without worker processes).
NOTEBOOK_ONLY = re.compile(r"^(Starting training loop at step \d+|Disabling pygrain multi-processing \(unsupported in colab\)\.)\n",
                           re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # a terminal's colours, which IPython's kernels pass on
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+|-?\d+")


@dataclasses.dataclass
class Cell:
    kind: str  # "python" or "shell"
    code: str
    shows: str = ""  # what the page shows under it ("" if nothing)

    @property
    def source(self) -> str:
        """The cell as a kernel runs it."""
        return self.code if self.kind == "python" else shell_cell(self.code)


def page_cells(page: str) -> list[Cell]:
    """The page's code blocks outside `<details>`, each with the output block after it; a
    "Going further" fold at the page's end holds program too (its own check folds aside)."""
    cells: list[Cell] = []
    open_folds: list[bool] = []  # for each <details> open here: is it a Going further fold?
    position = 0
    for match in FENCE.finditer(page):
        for tag in FOLD_TAG.findall(page[position:match.start()]):
            if tag.startswith("</"):
                open_folds.pop()
            else:
                open_folds.append('class="further"' in tag)
        folds = sum(not further for further in open_folds)
        position = match.end()
        language, text = match.groups()
        if folds:
            continue
        if language in ("python", "bash"):
            cells.append(Cell("python" if language == "python" else "shell", text))
        elif language == "text" and cells:
            cells[-1].shows = text
    return cells


def run_in_a_kernel(notebook, root: pathlib.Path, env: dict, own: pathlib.Path, warm: str | None = None):
    """Runs a notebook in a fresh kernel started at `root`, as a reader does: the Python
    environment's scripts first on the PATH (as an activated venv has them), its temporary
    directory `own/tmp`, and its own place for what libraries write in the home directory
    (Keras' settings, matplotlib's fonts). Errors are kept in the cells, not raised.

    `warm`: the address of a warm-start server (tests/warm_server.py): the kernel starts
    forked from it (tests/warm_kernel.py), with jax and Kauldron imported, and so do the
    `python -m` commands it runs (tests/warm_command.py). Those read KERAS_HOME,
    MPLCONFIGDIR and JAX's settings when the server imported them, so `env` must give them
    as the server had them."""
    import json
    import os
    import sys

    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    (own / "tmp").mkdir(parents=True, exist_ok=True)
    kernel_env = dict(env, TMPDIR=str(own / "tmp"),
                      PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")]))
    if warm is None:
        kernel_env.update(KERAS_HOME=str(own / ".keras"), MPLCONFIGDIR=str(own / "mpl"))
        manager = KernelManager(kernel_name="python3")
    else:
        from warm_command import write

        warm_python = write(own / "warm-python", warm)
        kernel_env["PATH"] = os.pathsep.join([str(warm_python.parent), kernel_env["PATH"]])
        spec = own / "kernels" / "python3-warm"
        spec.mkdir(parents=True, exist_ok=True)
        launcher = pathlib.Path(__file__).with_name("warm_kernel.py")
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, str(launcher), warm, "{connection_file}", str(own / "kernel.log")],
            "display_name": "Python 3 (warm)", "language": "python"}))
        manager = KernelManager(kernel_name="python3-warm",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(own / "kernels")]))
    # A kernel asked to shut down gets SIGTERM after half this, SIGKILL after all of it: ended
    # so, it never runs its atexit hooks, and leaves the semaphores it made (tqdm's lock, in
    # a page that trains) for the warm-start server's resource tracker to report ("leaked
    # semaphore objects"). With jax and TensorFlow loaded, a busy machine can take longer
    # than the default 5 s to end a kernel; 30 s still ends one that hangs.
    manager.shutdown_wait_time = 30.0
    client = NotebookClient(notebook, km=manager, timeout=900, allow_errors=True,
                            resources={"metadata": {"path": str(root)}})
    # The kernel's own log lines (ipykernel warns that it runs over TCP unencrypted) go to
    # its log, as a warm kernel's do, not into the tests' output; what its cells print
    # reaches the notebook either way.
    with open(own / "kernel.log", "a") as log:
        client.execute(env=kernel_env, cleanup_kc=True, stderr=log)  # shuts the kernel down, though the manager is ours
    return notebook


IMPORTS_JAX = re.compile(r"^(?:import jax\b|from jax\b|from kauldron import (?:.*, )?kd\b)", re.M)


def imports_jax(notebook) -> bool:
    """Whether the notebook's program imports jax, itself or with Kauldron's `kd` (at its
    top level, not inside `konfig.imports()`), as a warm kernel has."""
    return any(IMPORTS_JAX.search(cell.source) for cell in notebook.cells if cell.cell_type == "code")


def differences(page: str, notebook, own: pathlib.Path, stem: str) -> list[str]:
    """How a page and its program, run (`run_in_a_kernel`), differ: the code of the two,
    a cell that raised, what a cell printed against what the page shows under it, and the
    lines Kauldron prints only in a notebook against those the note at the page's top names."""
    cells = page_cells(page)
    ran = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if [cell.source for cell in cells] != [cell.source for cell in ran]:
        return ["the notebook's code is not the page's"]
    found = [f"cell {number} raised {out.get('ename')}: {out.get('evalue')}" for number, cell in enumerate(ran, 1)
             for out in cell.outputs if out.output_type == "error"]
    for number, (cell, out) in enumerate(zip(cells, ran), 1):
        problem = mismatch(cell, without_kernel_paths(printed_by(out), own / "tmp", stem))
        if problem:
            found.append(f"cell {number} ({cell.code.splitlines()[0][:60]}): {problem}")
    # The note at the page's top names what else a run prints: Kauldron's lines, by their first words.
    note = " ".join(page[:page.index("```")].split())
    printed = {" ".join(match[1].split()[:3]) for out in ran for match in NOTEBOOK_ONLY.finditer(printed_by(out))}
    named = {words for words in ("Starting training loop", "Disabling pygrain multi-processing") if words in note}
    if printed != named:
        found.append(f"the kernel printed Kauldron's {sorted(printed)}, the note at the page's top names {sorted(named)}"
                     " (presenting/site.py's program_note decides)")
    return found


def printed_by(cell) -> str:
    """What an executed code cell printed on stdout (a `!` line's stderr included), and
    the value it displayed, if any."""
    text = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream" and out.name == "stdout")
    return text + "".join(out["data"].get("text/plain", "") + "\n" for out in cell.outputs
                          if out.output_type == "execute_result")


def without_kernel_paths(text: str, kernel_tmp: pathlib.Path, stem: str) -> str:
    """Printed by a page's program, as its page shows it: the workdir its first cell made
    (`<stem>-...` in the kernel's temporary directory) is WORKDIR; installed packages and
    the home directory as presenting/site.py writes them."""
    from presenting import site

    text = re.sub(re.escape(str(kernel_tmp)) + "/" + re.escape(stem) + r"-\w+", "WORKDIR", text)
    for path, shown in site.shared_paths():
        text = text.replace(path, shown)
    return text


def _floats_match(expected: str, actual: str) -> bool:
    """Two numbers as printed: equal, or floats that differ only in their last digits."""
    if expected == actual:
        return True
    if "." not in expected + actual and "e" not in expected + actual:
        return False  # whole numbers are exact
    a, b = float(expected), float(actual)
    decimals = min(len(x.split(".")[1].split("e")[0]) if "." in x else 0 for x in (expected, actual))
    return math.isclose(a, b, rel_tol=1e-4) or abs(a - b) <= 1.01 * 10.0 ** -decimals


def same_text(expected: str, actual: str) -> bool:
    """The same text, the numbers in it within `_floats_match`."""
    expected_parts, actual_parts = NUMBER.split(expected), NUMBER.split(actual)
    expected_numbers, actual_numbers = NUMBER.findall(expected), NUMBER.findall(actual)
    return (expected_parts == actual_parts and len(expected_numbers) == len(actual_numbers)
            and all(_floats_match(e, a) for e, a in zip(expected_numbers, actual_numbers)))


def mismatch(cell: Cell, printed: str) -> str | None:
    """How what a cell printed differs from what its page shows, or None."""
    expected = cell.shows.strip("\n")
    printed = NOTEBOOK_ONLY.sub("", ANSI.sub("", printed))
    if cell.kind == "python":
        actual = "\n".join(line.rstrip() for line in printed.strip("\n").splitlines())
        if not same_text(expected, actual):
            return f"the page shows:\n{expected}\n--- the kernel printed:\n{actual}"
        return None
    lines = [ABSL_PREFIX.sub("", line).rstrip() for line in printed.splitlines()]
    at = 0
    for wanted in (line for line in expected.splitlines() if line != "..."):
        # `in`: processes started with `&` share the terminal, and a library that writes
        # a line in pieces (gloo's `[Gloo] Rank ...`) can put one before another's line.
        while at < len(lines) and not (same_text(wanted.rstrip(), lines[at]) or wanted.rstrip() in lines[at]):
            at += 1
        if at == len(lines):
            tail = "\n".join(lines[-8:]) or "(nothing)"
            return (f"the page shows the line {wanted!r}, which the command did not print (in this order);"
                    f" it printed, last:\n{tail}")
        at += 1
    return None
