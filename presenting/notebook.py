"""The tutorial as a Jupyter notebook, built with nbformat: exactly the pages' code.

For each section: a markdown cell with its title and introduction, the cell that makes its
workdir, its setup, then for each step its prose (with the experiment's files it first
uses, folded) and a cell per block of code, a shell block as a `!` line (`%%bash` for a
script of several lines). The checks are the tutorial's, not the reader's: they are not
in the notebook. Start it at the repository root, as the pages say.
"""

from __future__ import annotations

import nbformat
from nbformat import v4

from harness import lesson_format
from harness.registry import SectionInfo, file_stem, section_file

INTRO = """# Kauldron, section by section

Each section is the program its page shows (`docs/` in the repository): run the cells in
order, in a kernel started at the repository root (its code imports `configs/` and
`sections/parts/`, and its shell commands name files there). Each section also runs on its
own, from its first cell. Exported by `python tutorial.py --notebook`."""


def shell_cell(command: str) -> str:
    """A shell block as a notebook cell: one command (`\\` continuations joined) as a `!`
    line; a script of several commands under `%%bash`."""
    joined = command.replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if line.strip()]
    if len(lines) == 1:
        return "!" + " ".join(lines[0].split())
    return "%%bash\n" + command


def folded(path: str, text: str) -> str:
    return f"<details><summary><code>{path}</code></summary>\n\n```python\n{text}\n```\n\n</details>"


def demoted(prose: str) -> str:
    """A step's prose one heading level down: in the notebook a section's title is `##`."""
    return "#" + prose if prose.startswith("#") else prose


def section_cells(info: SectionInfo) -> list:
    source = lesson_format.read(section_file(info))
    cells = [v4.new_markdown_cell(f"## {info.number}. {info.title}\n\n{source.intro}".rstrip())]
    workdir = source.workdir_cell(file_stem(info.number, info.slug))
    cells += [v4.new_code_cell(code) for code in (workdir, source.setup) if code]
    if source.setup_files:
        cells.append(v4.new_markdown_cell("\n\n".join(folded(f.path, f.text) for f in source.setup_files)))
    for step in source.steps:
        cells.append(v4.new_markdown_cell("\n\n".join([demoted(step.prose), *(folded(f.path, f.text) for f in step.files)])))
        for block in step.blocks:
            if block.kind == "python":
                cells.append(v4.new_code_cell(block.code))
            elif block.kind == "shell":
                cells.append(v4.new_code_cell(shell_cell(block.code)))
    return cells


def build(infos: list[SectionInfo]) -> nbformat.NotebookNode:
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(v4.new_markdown_cell(INTRO))
    for info in infos:
        nb.cells += section_cells(info)
    nbformat.validate(nb)
    return nb


def export(infos: list[SectionInfo], path) -> None:
    nbformat.write(build(infos), str(path))
