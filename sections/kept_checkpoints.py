"""A kept workdir's checkpoints, before section 9 trains in it again.

Run as a program, it tries to restore each checkpoint named on its command line and
prints {path: problem or null} as JSON:

    python -m sections.kept_checkpoints WORKDIR/run/checkpoints/ckpt_40 ...

It runs in a child process: when one read fails, Orbax leaves the other reads' coroutines
behind, and Python prints each one's traceback whenever they are collected.
"""

from __future__ import annotations

import json
import re
import shutil
import sys

from sections.children import run_child
from sections.lesson import LessonFailed


def start_fresh(lesson) -> None:
    """Clears an earlier run from a kept workdir, so that the lesson starts at step 0, and
    says so. Its checkpoints must be readable first: Kauldron would resume from them, and
    it does not fall back to an older one when the newest is damaged."""
    workdir = lesson.workdir
    committed = sorted(p for p in workdir.glob("*/checkpoints/ckpt_*") if re.fullmatch(r"ckpt_\d+", p.name))
    if committed:
        proc = run_child([sys.executable, "-m", "sections.kept_checkpoints", *map(str, committed)],
                         "reading the kept checkpoints")
        for checkpoint, problem in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            if problem:
                raise LessonFailed(f"checkpoint {checkpoint} cannot be restored ({problem}); to start "
                                   f"fresh, delete {workdir} or run with a new --workdir")
    leftovers = sorted(p.name for p in workdir.iterdir())
    for path in workdir.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if leftovers:
        print(f"(this kept workdir held an earlier run, {leftovers}: its checkpoints are readable, cleared)")


def problems(paths: list[str]) -> dict[str, str | None]:
    import orbax.checkpoint as ocp

    found = {}
    for path in paths:
        try:
            ocp.StandardCheckpointer().restore(path + "/default")
            found[path] = None
        except Exception as e:  # noqa: BLE001 - whatever stops the read is the answer
            first_line = str(e).strip().splitlines()[0].split(". See full")[0]
            found[path] = f"{type(e).__name__}: {first_line[:160]}"
    return found


if __name__ == "__main__":
    print(json.dumps(problems(sys.argv[1:])))
