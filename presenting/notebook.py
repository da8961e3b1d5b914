"""The tutorial as a Jupyter notebook, built with nbformat.

A setup cell (the install line, the compat fixes, a fresh workdir), then for each section:
a markdown cell with its title and introduction; a code cell with its imports, the parts it
defines and the helpers it checks itself with, which gives it a `lesson` of its own; then
one markdown cell and one code cell per step of the lesson (its prose; its code, checks
included); and a last cell that says it passed. The notebook imports `sections` and
`compat` from this repository, so it runs wherever the repository is; the setup cell says
where it expects it.
"""

from __future__ import annotations

import json
import pathlib

import nbformat
from nbformat import v4

from presenting.source import ROOT, read_lesson, section_file
from sections import registry

INTRO = """# Kauldron, section by section

Each section is a short lesson that prints what it shows and checks it against the
installed library: a failed check raises, and the cell shows why. Run the cells in order
(the setup cell first); each section's cells also run on their own after the setup cell.
Exported from the repository at `{root}` by `python tutorial.py --notebook`."""

SETUP = '''import os, pathlib, sys, tempfile

# The repository this notebook came from: its sections/ and compat/ are imported below.
# Elsewhere (Colab, another machine), set KAULDRON_TUTORIAL_ROOT to where you put it.
TUTORIAL_ROOT = pathlib.Path(os.environ.get("KAULDRON_TUTORIAL_ROOT", {root}))
sys.path.insert(0, str(TUTORIAL_ROOT))

# Without Kauldron installed, uncomment, run once (about 4.2 GB, a few minutes), restart the kernel:
# %pip install -r {{TUTORIAL_ROOT}}/requirements-extras.txt

from sections import runtime
from sections.lesson import Lesson

# A fresh workdir for this session, and JAX's compilation cache shared with tutorial.py.
# Temporary files the libraries leave behind go to the workdir too.
WORKDIR = pathlib.Path(tempfile.mkdtemp(prefix="kauldron-notebook-"))
runtime.prepare(runtime.default_cache(), WORKDIR)
runtime.send_temporary_files_to(WORKDIR / ".tmp")

# The compat fixes, before anything imports Kauldron (tutorial.py does the same).
import compat
compat.install_all()
for fix in compat.reports(settle=True):
    print(f"compat {{fix.line()}}")
print(f"workdir: {{WORKDIR}}")'''

LESSON = '''# The lesson's own workdir; its checks raise in the cell where a claim does not hold.
lesson = Lesson(WORKDIR / {workdir})
lesson.workdir.mkdir(exist_ok=True)'''

PASSED = 'print(f"-> passed ({{len(lesson.checks)}} checks):", {title})'


def demoted(prose: str) -> str:
    """A step's prose one heading level down: in the notebook a section's title is `##`."""
    heading, _, rest = prose.partition("\n")
    return ("#" + heading if heading.startswith("#") else heading) + ("\n" + rest if rest else "")


def build(infos: list[registry.SectionInfo]) -> nbformat.NotebookNode:
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(v4.new_markdown_cell(INTRO.format(root=ROOT)))
    nb.cells.append(v4.new_code_cell(SETUP.format(root=json.dumps(str(ROOT)))))
    for info in infos:
        lesson = read_lesson(section_file(info.module))
        nb.cells.append(v4.new_markdown_cell(f"## {info.number}. {info.title}\n\n{lesson.intro}".rstrip()))
        workdir = json.dumps(registry.file_stem(info.number, info.slug))
        parts = [lesson.setup, "# How this lesson checks itself (used by the steps below)\n" + lesson.helpers
                 if lesson.helpers else "", LESSON.format(workdir=workdir)]
        nb.cells.append(v4.new_code_cell("\n\n\n".join(part for part in parts if part)))
        for step in lesson.steps:
            nb.cells.append(v4.new_markdown_cell(demoted(step.prose)))
            if step.runnable:
                nb.cells.append(v4.new_code_cell(step.runnable))
        nb.cells.append(v4.new_code_cell(PASSED.format(title=repr(f"{info.number}. {info.title}"))))
    nbformat.validate(nb)
    return nb


def export(infos: list[registry.SectionInfo], path: pathlib.Path) -> None:
    nbformat.write(build(infos), str(path))
