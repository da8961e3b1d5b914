"""What --notebook, --html and --markdown give a user: a notebook of the sections asked for,
and pages that show a failed section as failed (the notebook of every section, run
headless, and a full run's figures and site, in a browser, are checked in
test_sections.py). Without the optional libraries they need, one line says how to install
them."""

import os

import nbformat
import pytest
from conftest import shadow_module

from harness import registry, teaching

pytestmark = pytest.mark.slow  # the tutorial, run as a user does

CATALOG = registry.catalog()


def test_a_notebook_of_some_sections_holds_only_those(tutorial, tmp_path):
    path = tmp_path / "two.ipynb"
    assert tutorial("--notebook", str(path), "kontext", "1", with_json=False).returncode == 0
    titles = [cell.source.splitlines()[0] for cell in nbformat.read(path, as_version=4).cells
              if cell.cell_type == "markdown" and cell.source.startswith("## ")]
    by_number = {info.number: info for info in CATALOG}
    assert titles == [f"## {n}. {by_number[n].title}" for n in (3, 1)]  # in the order asked


def test_without_nbformat_notebook_export_says_how_to_install_it(tutorial, tmp_path):
    run = tutorial("--notebook", str(tmp_path / "t.ipynb"), with_json=False,
                   env=shadow_module(tmp_path / "shadow", "nbformat"))
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.count("\n") == 1
    assert "nbformat" in run.stderr and "pip install -r requirements-extras.txt" in run.stderr
    assert not (tmp_path / "t.ipynb").exists()


def test_a_failed_section_is_shown_failed_on_its_page_with_its_error(tutorial, tmp_path):
    env = dict(os.environ, **{teaching.FAIL_SECTION_ENV: "kontext"})
    run = tutorial("kontext", "konfig", "--html", str(tmp_path / "site"), "--markdown", str(tmp_path / "md"), env=env)
    assert run.returncode == 1
    assert "html: " in run.stdout and "markdown: " in run.stdout
    page = (tmp_path / "site" / "03-kontext.html").read_text()
    assert "<strong>failed:</strong> <code>RuntimeError: failure injected by" in page
    assert "<strong>failed</strong> in" in page and "Not reached in this run" in page
    markdown = (tmp_path / "md" / "03-kontext.md").read_text()
    assert "**failed:** `RuntimeError: failure injected by" in markdown
    index = (tmp_path / "md" / "index.md").read_text()
    assert "| 3 | failed |" in index and "| 1 | passed |" in index


@pytest.mark.parametrize("missing", ["jinja2", "markdown", "pygments"])
def test_without_the_site_libraries_html_says_how_to_install_them(tutorial, tmp_path, missing):
    run = tutorial("kontext", "--html", str(tmp_path / "site"), with_json=False,
                   env=shadow_module(tmp_path / "shadow", missing))
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.count("\n") == 1 and missing in run.stderr and "requirements-extras.txt" in run.stderr

