"""What a reader gets from a run's results, rendered in this process from a recorded
report: a page is its lesson's program, each step's prose, code and output in order, its
checks folded into one line; the experiment's files folded where first used; links to the
neighbouring pages; no path of the machine that ran it; and a notebook that is exactly the
pages' code."""

import re

import nbformat
import pytest
from page_programs import page_cells

from harness import lesson_format, registry
from presenting import notebook, site

BY_SLUG = {info.slug: info for info in registry.catalog()}
WORKDIR = "/tmp/kauldron-tutorial-abc123"
FIRST, SECOND, THIRD = (info.slug for info in registry.catalog()[:3])


def lesson(slug: str) -> lesson_format.Program:
    return lesson_format.read(registry.section_file(BY_SLUG[slug]))


def recorded(*slugs: str) -> dict:
    """A report as a run writes it, for these sections: each shown block printed one line
    (the last one a path in the lesson's workdir), each step made one check, and the
    first section drew its figure in its first step."""
    sections = []
    for slug in slugs:
        info = BY_SLUG[slug]
        stem = registry.file_stem(info.number, slug)
        steps = [{"heading": step.heading, "printed": "",
                  "blocks": [{"kind": block.kind, "line": block.line,
                              "printed": f"output of step {i} block {j}\n" if block.shown else ""}
                             for j, block in enumerate(step.blocks)]}
                 for i, step in enumerate(lesson(slug).steps)]
        sections.append({
            "number": info.number, "slug": slug, "title": info.title, "status": "passed", "seconds": 1.5,
            "summary": "fine", "facts": {}, "error": None, "skipped_checks": [], "steps": steps,
            "checks": [{"claim": f"claim of step {i}", "passed": True, "step": i} for i in range(len(steps))],
            "plots": [f"/somewhere/{stem}.png"] if slug == FIRST else [],
            "figure_title": "Section 0: a title" if slug == FIRST else None, "figure_step": 0,
        })
    last_block = sections[-1]["steps"][-1]["blocks"][0]
    last_block["printed"] = f"wrote {WORKDIR}/{registry.file_stem(BY_SLUG[slugs[-1]].number, slugs[-1])}/run\n"
    return {"workdir": WORKDIR, "versions": {"python": "3.12.1", "kauldron": "1.4.4"}, "devices": ["cpu:0"],
            "compat": [], "sections": sections, "totals": {"passed": len(slugs), "failed": 0, "skipped": 0,
                                                          "checks": 0, "failed_checks": 0}}


@pytest.fixture
def pages(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "copy_figures", lambda report, target: None)
    report = recorded(FIRST, SECOND, THIRD)
    site.write(report, list(BY_SLUG.values()), tmp_path, "markdown", run_command="RUN THE TUTORIAL")
    return {path.name: path.read_text() for path in tmp_path.glob("*.md")}


def page_name(slug: str) -> str:
    return f"{registry.file_stem(BY_SLUG[slug].number, slug)}.md"


def test_each_step_shows_its_prose_then_each_block_and_its_output_then_its_checks_folded(pages):
    page = pages[page_name(FIRST)]
    position = 0
    for i, step in enumerate(lesson(FIRST).steps):
        further = step.further  # a Going further step's heading is its fold's summary
        position = page.index(step.prose.split("\n\n", 1)[1] if further else step.prose, position)
        for j, block in enumerate(b for b in step.blocks if b.shown):
            fence = "python" if block.kind == "python" else "bash"
            position = page.index(f"```{fence}\n{block.code}\n```", position)
            position = page.index(f"output of step {i} block", position)
        position = page.index("<summary>✔ 1 check</summary>", position)
        position = page.index(f"- ✔ claim of step {i}", position)
    assert "![Section 0: a title](figures/00-digits.png)" in page  # alt text: the figure's title


def test_the_note_at_a_page_s_top_names_what_else_its_program_prints_and_only_that(pages):
    """Section 0 runs commands, trains on a PyGrain pipeline and draws a figure; section 1
    does none of these, and its note says only that the page is a program."""
    def note(page: str) -> str:
        return " ".join(page[page.index("*This page is a program"):page.index("```")].split())

    digits, konfig = note(pages[page_name(FIRST)]), note(pages[page_name(SECOND)])
    for told in ("(a shell block of one command as a `!` line", "A shell block's output here is an excerpt",
                 "TensorFlow's start-up lines", "In a notebook, Kauldron also prints `Starting training loop at step N`"
                 " when it trains, draws tqdm progress bars when it trains or evaluates, and prints `Disabling pygrain"
                 " multi-processing` when it iterates a PyGrain pipeline.", "The figure shows under its cell."):
        assert told in digits and told not in konfig
    assert konfig == ("*This page is a program: its code, run in order in a fresh Python kernel at the root of the"
                      " repository, prints what the page shows. Only the workdir's path and the last digits of floats"
                      " differ.*")


def test_the_code_a_page_shows_is_its_program_and_never_the_harness(pages):
    for slug in (FIRST, SECOND, THIRD):
        shown = "\n".join(cell.code for cell in page_cells(pages[page_name(slug)]))
        assert not re.search(r"\blesson\b|\bharness\b", shown), slug


def test_the_notebook_is_exactly_the_pages_code(pages):
    nb = notebook.build([BY_SLUG[FIRST], BY_SLUG[SECOND]])
    nbformat.validate(nb)
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert code == [cell.source for slug in (FIRST, SECOND) for cell in page_cells(pages[page_name(slug)])]
    assert not any("lesson" in source for source in code)


def test_a_going_further_fold_is_program_but_the_checks_folded_in_it_are_not():
    page = ("```python\nstory = 1\n```\n\n<details markdown=\"1\">\n<summary>✔ 1 check</summary>\n\n"
            "```python\ncheck = 1\n```\n</details>\n\n<details markdown=\"1\" class=\"further\">\n"
            "<summary><b>Going further: x</b></summary>\n\n```python\nfurther = 2\n```\n\n```text\n2\n```\n\n"
            "<details markdown=\"1\">\n<summary>✔ 1 check</summary>\n\n```python\ncheck = 2\n```\n</details>\n"
            "</details>\n\n<details markdown=\"1\">\n<summary>How this lesson checks it</summary>\n\n"
            "```python\ndef helper(): ...\n```\n</details>\n")
    assert [(cell.code, cell.shows) for cell in page_cells(page)] == [("story = 1", ""), ("further = 2", "2")]


def test_a_shell_block_is_a_bang_line_in_the_notebook_and_a_script_a_bash_cell():
    assert notebook.shell_cell("python -m kauldron.main \\\n    --cfg=configs/x.py") == \
        "!python -m kauldron.main --cfg=configs/x.py"
    assert notebook.shell_cell("a &\nb &\nwait") == "%%bash\na &\nb &\nwait"


def test_the_experiment_s_files_are_folded_where_the_page_first_uses_them(pages):
    page = pages[page_name(FIRST)]
    for step in lesson(FIRST).steps:
        for file in step.files:
            fold = page.index(f"<summary>{file.path}</summary>")
            assert page.index(step.prose) < fold < page.index(step.blocks[0].code if step.blocks[0].shown else "```")
    assert page.count("<summary>configs/digits.py</summary>") == 1


def test_pages_link_to_their_neighbours_and_the_index(pages):
    first, middle, last = pages[page_name(FIRST)], pages[page_name(SECOND)], pages[page_name(THIRD)]
    second_title = BY_SLUG[SECOND].title
    assert f"[index](index.md) · [{BY_SLUG[SECOND].number}. {second_title} →]({page_name(SECOND)})" in first
    assert "←" not in first
    assert f"[← {BY_SLUG[FIRST].number}. " in middle and f"({page_name(FIRST)}) · [index](index.md) · [" in middle
    assert f"[← {BY_SLUG[SECOND].number}. {second_title}]({page_name(SECOND)}) · [index](index.md)\n" in last


def test_pages_show_no_path_of_the_machine_that_ran_the_lesson(pages):
    assert "wrote WORKDIR/run" in pages[page_name(THIRD)]
    assert not re.search(r"/tmp/|/somewhere/", "".join(pages.values()))


def test_machine_paths_in_printed_output_are_replaced_by_what_they_stand_for():
    import sysconfig

    installed = sysconfig.get_paths()["purelib"]
    text = f"{WORKDIR}/00-digits/run {WORKDIR}/x {installed}/kauldron/kxm/__init__.py {lesson_format.ROOT}/configs"
    assert site.without_machine_paths(text, WORKDIR, "00-digits") == \
        "WORKDIR/run RUN/x <site-packages>/kauldron/kxm/__init__.py ./configs"


def test_the_index_is_an_entry_point_with_a_reading_path_and_a_status_table_below(pages):
    index = pages["index.md"]
    for part in ("is Google Research's library", "This tutorial is for", "**Prerequisites.**", "## A reading path",
                 "## The sections", "| 3.11 | 1.4.2", "| 3.12 and newer | 1.4.4", "RUN THE TUTORIAL", "## This run"):
        assert part in index, part
    info = BY_SLUG[FIRST]
    assert f"| {info.number} | [{info.title}]({page_name(FIRST)}) | {info.shows} |" in index
    steps = len(lesson(FIRST).steps)  # one check each in the recorded report
    assert index.index("## The sections") < index.index(f"| {info.number} | passed | 1.5 | {steps} |")


def test_the_reading_path_is_every_part_in_order_with_its_sections():
    path = site.reading_path(registry.catalog())
    assert [title for title, _ in path] == [registry.PARTS[key] for key in registry.PARTS
                                           if any(info.part == key for info in registry.catalog())]
    assert sorted(number for _, numbers in path for number in numbers) == [info.number for info in registry.catalog()]


def test_the_html_pages_are_the_markdown_converted_with_nothing_from_the_network(tmp_path, monkeypatch):
    monkeypatch.setattr(site, "copy_figures", lambda report, target: None)
    site.write(recorded(FIRST, SECOND), list(BY_SLUG.values()), tmp_path, "html", run_command="RUN")
    page = (tmp_path / page_name(FIRST).replace(".md", ".html")).read_text()
    assert f"<h1>{BY_SLUG[FIRST].number}. {BY_SLUG[FIRST].title}</h1>" in page and '<div class="codehilite">' in page
    assert "<details>\n<summary>✔ 1 check</summary>" in page
    assert not re.search(r"""(src=|<link[^>]*href=)["']?(https?:)?//""", page)  # links are fine
