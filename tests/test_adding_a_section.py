"""CONTRIBUTING.md is enough to add a section: its example, saved as one file in a copy of
the repository, and nothing else, is a section that runs, is listed, has its place on the
reading path, a page, and a notebook that runs as that page's program."""

import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT
from page_programs import differences, run_in_a_kernel

from harness import registry

pytestmark = pytest.mark.slow  # the tutorial, and the page's program in a kernel

NEXT = len(registry.catalog())  # the catalog is numbered from 0 without gaps (tests/test_cli.py)
IGNORED = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "docs", "*.ipynb", ".pytest_cache")


def the_guide_s_example() -> str:
    """The section file CONTRIBUTING.md's "Adding a section" shows, as a contributor copies it."""
    guide = (ROOT / "CONTRIBUTING.md").read_text().split("## Adding a section", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "@section(" in b]
    return "\n".join(line.removeprefix("   ") for line in block.splitlines()) + "\n"


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """A copy of the repository with the guide's example added under the next free number."""
    root = tmp_path_factory.mktemp("repository") / "tutorial"
    shutil.copytree(ROOT, root, ignore=IGNORED)
    example = re.sub(r"@section\(\d+,", f"@section({NEXT},", the_guide_s_example(), count=1)
    (root / "sections" / f"s{NEXT:02d}_my_slug.py").write_text(example)
    return root


def tutorial(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "tutorial.py", *args], cwd=root, capture_output=True, text=True,
                          timeout=600)


def test_the_new_section_is_listed_and_runs(copy, tmp_path):
    listed = tutorial(copy, "--list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[-1].split()[:2] == [str(NEXT), "my-slug"]
    run = tutorial(copy, "my-slug", "--jobs", "1", "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "md"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (section,) = json.loads((tmp_path / "r.json").read_text())["sections"]
    assert section["status"] == "passed" and len(section["checks"]) == 3
    assert section["summary"] == "a run of 10 steps, edited, written and resolved"

    # Its page, its place on the index's reading path, and its page as a program.
    page = (tmp_path / "md" / f"{NEXT}-my-slug.md").read_text()
    assert "## Resolve it into a Trainer" in page and "<summary>configs/regression.py</summary>" in page
    index = (tmp_path / "md" / "index.md").read_text()
    glue = next(line for line in index.splitlines() if "**The glue" in line)
    assert f"[{NEXT}. A config's run length, read back]({NEXT}-my-slug.md)" in glue

    exported = tutorial(copy, "--notebook", str(tmp_path / "new.ipynb"), "my-slug")
    assert exported.returncode == 0, exported.stderr
    notebook = nbformat.read(tmp_path / "new.ipynb", as_version=4)
    run_in_a_kernel(notebook, copy, dict(os.environ), tmp_path / "kernel")
    assert differences(page, notebook, tmp_path / "kernel", f"{NEXT}-my-slug") == []
