"""The tutorial as a Jupyter notebook, built with nbformat.

A setup cell (the install line, the compat fixes, a fresh workdir), then for each section
a markdown cell with its lesson, a code cell with the section's own code (its module,
without the docstring the markdown already shows) and a code cell that runs it. The
notebook imports `sections` and `compat` from this repository, so it runs wherever the
repository is; the setup cell says where it expects it.
"""

from __future__ import annotations

import json
import pathlib

import nbformat
from nbformat import v4

from presenting.source import ROOT, lesson_prose, section_code, section_file
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

from sections import registry
from sections.lesson import Lesson

# A fresh workdir for this session, and JAX's compilation cache shared with tutorial.py.
WORKDIR = pathlib.Path(tempfile.mkdtemp(prefix="kauldron-notebook-"))
registry.prepare(registry.default_cache(), WORKDIR)

# The compat fixes, before anything imports Kauldron (tutorial.py does the same).
import compat
compat.install_all()
for fix in compat.reports(settle=True):
    print(f"compat {{fix.line()}}")
print(f"workdir: {{WORKDIR}}")'''

RUN = '''workdir = WORKDIR / {workdir}
workdir.mkdir(exist_ok=True)
lesson = Lesson(workdir)
summary = registry.lesson_function({slug})(lesson)  # a failed check raises here
print(f"-> passed ({{len(lesson.checks)}} checks): {{summary}}")'''


def lesson_markdown(info: registry.SectionInfo, path: pathlib.Path) -> str:
    return f"## {info.number}. {info.title}\n\n{lesson_prose(path)}".rstrip()


def build(infos: list[registry.SectionInfo]) -> nbformat.NotebookNode:
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(v4.new_markdown_cell(INTRO.format(root=ROOT)))
    nb.cells.append(v4.new_code_cell(SETUP.format(root=json.dumps(str(ROOT)))))
    for info in infos:
        path = section_file(info.module)
        nb.cells.append(v4.new_markdown_cell(lesson_markdown(info, path)))
        nb.cells.append(v4.new_code_cell(section_code(path)))
        nb.cells.append(v4.new_code_cell(RUN.format(workdir=json.dumps(registry.file_stem(info.number, info.slug)), slug=json.dumps(info.slug))))
    nbformat.validate(nb)
    return nb


def export(infos: list[registry.SectionInfo], path: pathlib.Path) -> None:
    nbformat.write(build(infos), str(path))
