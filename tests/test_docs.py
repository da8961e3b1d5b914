"""docs/ is the tutorial rendered from a real full run (`--markdown docs`, on the Python 3.12
pins), for reading without installing anything. Each page records the hash of the section
file it came from: a section changed since is a stale page."""

import hashlib
import json
import re

import pytest
from conftest import ROOT

from harness import registry

DOCS = ROOT / "docs"
REGENERATE = ".venv/bin/python tutorial.py --markdown docs on the Python 3.12 pins (CONTRIBUTING.md)"


@pytest.mark.slow  # a contributor's change to a lesson is not a fast-tier failure until docs/ is regenerated
def test_every_section_has_a_page_rendered_from_its_current_source():
    stale = []
    for info in registry.catalog():
        page = DOCS / f"{info.number:02d}-{info.slug}.md"
        recorded = re.match(r"<!-- source: (\S+) sha256 ([0-9a-f]{64}) -->", page.read_text()) if page.exists() else None
        if recorded is None or recorded[2] != hashlib.sha256(registry.section_file(info).read_bytes()).hexdigest():
            stale.append(page.name)
    assert not stale, f"docs/ is stale for {', '.join(stale)}: regenerate it with {REGENERATE}"


@pytest.mark.slow  # a new section is not a fast-tier failure until docs/ is regenerated
def test_the_index_lists_every_section_passed_on_the_python_3_12_pins():
    index = (DOCS / "index.md").read_text()
    for info in registry.catalog():
        assert f"| {info.number} | [{info.title}]({info.number:02d}-{info.slug}.md) | {info.shows} |" in index
        assert f"| {info.number} | passed |" in index
    assert re.search(r"^\| python \| 3\.12\.", index, re.MULTILINE)
    assert re.search(r"^\| kauldron \| 1\.4\.4 \|", index, re.MULTILINE)


def test_no_page_shows_a_path_of_the_machine_that_rendered_it():
    for page in DOCS.glob("*.md"):
        assert not re.search(r"(^|[^A-Za-z0-9_.])/(tmp|root|home|work)/[A-Za-z]", page.read_text()), page.name


def test_every_figure_a_page_shows_is_there():
    for page in DOCS.glob("*.md"):
        for figure in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text()):
            assert (DOCS / figure).is_file(), f"{page.name} shows {figure}, which is missing"


def test_a_page_s_visible_story_is_short_its_digressions_and_checks_folded():
    """What a reader scrolls through outside the folds: at most 300 lines of Markdown for
    the median page (digressions go to a Going further fold, checks fold under their step)."""
    visible = sorted(len(re.sub(r"<details[^>]*>.*?</details>", "", page.read_text(), flags=re.S).splitlines())
                     for page in DOCS.glob("[0-9][0-9]-*.md"))
    assert visible[len(visible) // 2] <= 300, visible


def test_the_results_page_is_its_kept_runs_rendered_and_keeps_each_cpu_leg():
    from presenting import runs

    kept = runs.load()
    assert {"cpu-py311", "cpu-py312", "cpu-latest"} <= set(kept)
    assert (DOCS / "results.md").read_text() == runs.render(kept), "regenerate it: python -m presenting.runs render"
    for name, run in kept.items():
        assert run["finished"] and run["versions"]["kauldron"], name
        assert not re.search(r"(^|[^A-Za-z0-9_.])/(tmp|root|home|work)/[A-Za-z]", json.dumps(run)), name


def test_the_results_page_lists_a_value_that_differs_between_runs_but_not_float32_rounding():
    import copy

    from presenting import runs

    cpu = {"sections": [{"slug": "loss-metric", "facts": {"masked_loss": 0.3791142702, "rows": 3}}]}
    tpu, rounding = copy.deepcopy(cpu), copy.deepcopy(cpu)
    tpu["sections"][0]["facts"]["masked_loss"] = 0.3791081607  # measured on a TPU v5e
    rounding["sections"][0]["facts"]["masked_loss"] = 0.3791142702 + 3e-9
    assert [(found["slug"], found["fact"]) for found in runs.differences({"cpu": cpu, "tpu": tpu})] == \
        [("loss-metric", "masked_loss")]
    assert runs.differences({"cpu": cpu, "again": rounding}) == []
