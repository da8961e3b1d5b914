"""A `python` for the shell commands of a page's program, run in a warm kernel
(tests/page_programs.py): `python -m MODULE ARGS` is forked by a warm-start server
(harness/warm_start.py) with jax, Kauldron and TensorFlow imported, as the lessons' own
commands are in a run of the tutorial; any other use of `python` is the interpreter itself.

    write(folder, address) -> folder/python, which runs `main` here

A kernel whose PATH starts with `folder` runs a page's `!python -m kauldron.main ...` warm:
about 8 CPU seconds of imports saved a command, with some twenty commands in the pages.
The child's output is streamed to this process's stdout as it comes, and its exit status
is this process's (128 + N for a child ended by signal N, as a shell reports it). The
child joins the kernel's process group (tests/warm_kernel.py names it in KERNEL_GROUP_ENV),
which ends with the kernel. Without a server (`tests/test_sections.py --cold-kernels`),
kernels keep the real `python`.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL_GROUP_ENV = "KAULDRON_TUTORIAL_KERNEL_GROUP"


def write(folder: pathlib.Path, address: str) -> pathlib.Path:
    """An executable `python` in `folder` that asks the server at `address`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python"
    script.write_text(f"#!{sys.executable}\n"
                      f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                      f"from tests.warm_command import main\nmain({address!r}, sys.argv[1:])\n")
    script.chmod(0o755)
    return script


def main(address: str, argv: list[str]) -> None:
    """`python ARGV`: forked warm when it is `-m MODULE ...` and the server answers."""
    if argv[:1] != ["-m"] or len(argv) < 2:
        os.execv(sys.executable, [sys.executable, *argv])
    from harness import warm_start

    with tempfile.NamedTemporaryFile(prefix="warm-command-", suffix=".out") as output:
        try:
            child = warm_start.WarmChild(address, [sys.executable, *argv], cwd=pathlib.Path.cwd(),
                                         env=dict(os.environ), output=pathlib.Path(output.name),
                                         pgid=int(os.environ[KERNEL_GROUP_ENV]))
        except (ConnectionError, FileNotFoundError):  # no server there: the interpreter itself
            os.execv(sys.executable, [sys.executable, *argv])
        with open(output.name, "rb") as printed:
            while child.poll() is None:
                _copy(printed)
                time.sleep(0.05)
            _copy(printed)
    code = child.returncode
    sys.exit(code if code >= 0 else 128 - code)


def _copy(printed) -> None:
    chunk = printed.read()
    if chunk:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
