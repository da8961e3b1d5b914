"""What a reader gets from a run's results, rendered in this process from a recorded
report: each step's prose, code, output and checks in that order; the helpers and config
files folded away; links to the neighbouring pages; no path of the machine that ran it;
and a notebook with one markdown and one code cell per step."""

import re

import nbformat
import pytest

from presenting import notebook, site
from presenting.source import read_lesson, section_file
from sections import registry

BY_SLUG = {info.slug: info for info in registry.catalog()}
WORKDIR = "/tmp/kauldron-tutorial-abc123"


def recorded(*slugs: str) -> dict:
    """A report as a run writes it, for these sections: each step printed one line (the
    last one a path in the lesson's workdir) and made one check; section 6 drew its figure."""
    sections = []
    for slug in slugs:
        info = BY_SLUG[slug]
        steps = read_lesson(section_file(info.module)).steps
        stem = registry.file_stem(info.number, slug)
        sections.append({
            "number": info.number, "slug": slug, "title": info.title, "status": "passed", "seconds": 1.5,
            "summary": "fine", "facts": {}, "error": None, "skipped_checks": [],
            "steps": [{"heading": step.heading, "printed": f"output of step {i}\n"} for i, step in enumerate(steps)],
            "checks": [{"claim": f"claim of step {i}", "passed": True, "step": i} for i in range(len(steps))],
            "plots": [f"/somewhere/{stem}.png"] if slug == "trainer" else [],
            "figure_title": "Section 6: a title" if slug == "trainer" else None, "figure_step": 2,
        })
    sections[-1]["steps"][-1]["printed"] = f"wrote {WORKDIR}/{stem}/run/checkpoints\n"
    return {"workdir": WORKDIR, "versions": {"python": "3.12.1", "kauldron": "1.4.4"}, "devices": ["cpu:0"],
            "compat": [], "sections": sections, "totals": {"passed": len(slugs), "failed": 0, "skipped": 0,
                                                          "checks": 0, "failed_checks": 0}}


@pytest.fixture
def pages(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "copy_figures", lambda report, target: None)
    report = recorded("konfig", "trainer", "sweep")
    site.write(report, list(BY_SLUG.values()), tmp_path, "markdown", run_command="RUN THE TUTORIAL")
    return {path.name: path.read_text() for path in tmp_path.glob("*.md")}


def test_each_step_shows_its_prose_then_its_code_then_its_output_then_its_checks(pages):
    page = pages["06-trainer.md"]
    steps = read_lesson(section_file(BY_SLUG["trainer"].module)).steps
    position = 0
    for i, step in enumerate(steps):
        prose = page.index(step.prose, position)
        code = page.index(f"```python\n{step.code}\n```", prose)
        output = page.index(f"```text\noutput of step {i}\n```", code)
        check = page.index(f"- ✔ claim of step {i}", output)
        position = check
    assert "![Section 6: a title](figures/06-trainer.png)" in page  # alt text: the figure's title


def test_the_checks_and_bookkeeping_are_not_in_the_code_shown_but_are_in_the_notebook():
    lesson = read_lesson(section_file(BY_SLUG["trainer"].module))
    assert not any("lesson.check" in step.code or "lesson.fact" in step.code for step in lesson.steps)
    assert any("lesson.check" in step.runnable for step in lesson.steps)


def test_helpers_and_config_files_are_folded_under_the_steps(pages):
    page = pages["06-trainer.md"]
    last_check = page.rindex("- ✔ claim of step")
    assert page.index("<summary>How this lesson checks it</summary>") > last_check
    assert page.index("<summary>configs/regression.py</summary>") > last_check
    assert "def get_config():" in page


def test_the_fold_also_shows_the_helpers_a_lesson_imports_from_shared_modules_with_their_file(pages):
    page = pages["06-trainer.md"]
    folded = page[page.index("<summary>How this lesson checks it</summary>"):]
    assert "# sections/recompute.py\ndef check_batch_stats(lesson" in folded
    assert "def enc_norm_by_hand(" in folded


def test_pages_link_to_their_neighbours_and_the_index(pages):
    first, middle, last = pages["01-konfig.md"], pages["06-trainer.md"], pages["07-sweep.md"]
    assert "[index](index.md) · [6. A Trainer, end to end →](06-trainer.md)" in first and "←" not in first
    assert "[← 1. " in middle and "(01-konfig.md) · [index](index.md) · [7. " in middle
    assert "[← 6. A Trainer, end to end](06-trainer.md) · [index](index.md)\n" in last


def test_pages_show_no_path_of_the_machine_that_ran_the_lesson(pages):
    assert "wrote WORKDIR/run/checkpoints" in pages["07-sweep.md"]
    assert not re.search(r"/tmp/|/somewhere/", "".join(pages.values()))


def test_the_index_is_an_entry_point_with_a_reading_path_and_a_status_table_below(pages):
    index = pages["index.md"]
    for part in ("is Google Research's library", "This tutorial is for", "**Prerequisites.**", "## A reading path",
                 "## The sections", "| 3.11 | 1.4.2", "| 3.12 and newer | 1.4.4", "RUN THE TUTORIAL", "## This run"):
        assert part in index, part
    info = BY_SLUG["trainer"]
    assert f"| 6 | [{info.title}](06-trainer.md) | {info.shows} | [eval: training]({info.reference}) |" in index
    steps = len(read_lesson(section_file(info.module)).steps)  # one check each in the recorded report
    assert index.index("## The sections") < index.index(f"| 6 | passed | 1.5 | {steps} |")


def test_the_html_pages_are_the_markdown_converted_with_nothing_from_the_network(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "copy_figures", lambda report, target: None)
    site.write(recorded("konfig", "trainer"), list(BY_SLUG.values()), tmp_path, "html", run_command="RUN")
    page = (tmp_path / "06-trainer.html").read_text()
    assert "<h1>6. A Trainer, end to end</h1>" in page and '<div class="codehilite">' in page
    assert '<details>\n<summary>How this lesson checks it</summary>' in page
    assert 'href="07-sweep.html"' not in page and 'href="01-konfig.html"' in page
    assert not re.search(r"""(src=|<link[^>]*href=)["']?(https?:)?//""", page)  # links are fine


def test_the_notebook_has_a_markdown_and_a_code_cell_per_step():
    nb = notebook.build([BY_SLUG["konfig"], BY_SLUG["trainer"]])
    nbformat.validate(nb)
    cells = [(cell.cell_type, cell.source) for cell in nb.cells]
    for slug in ("konfig", "trainer"):
        info = BY_SLUG[slug]
        start = cells.index(("markdown", next(s for t, s in cells if s.startswith(f"## {info.number}. "))))
        steps = read_lesson(section_file(info.module)).steps
        expected = [("markdown", notebook.demoted(step.prose)) for step in steps]
        following = cells[start + 2:start + 2 + 2 * len(steps)]  # after the title and the setup cell
        assert following[0::2] == expected
        assert [source for _, source in following[1::2]] == [step.runnable for step in steps]
        assert cells[start + 1][0] == "code" and "lesson = Lesson(WORKDIR / " in cells[start + 1][1]
