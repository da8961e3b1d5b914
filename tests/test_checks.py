"""Every check a lesson makes is a visible result: its claim, whether it passed, and
whether it leans on a library's private names."""

import json

import pytest
from kauldron import kontext

from runner import section_run
from sections import registry
from sections.lesson import CheckFailed, Lesson


def test_checks_are_recorded_in_order_with_their_claims(tmp_path):
    lesson = Lesson(tmp_path)
    lesson.check(1 + 1 == 2, "one and one make two")
    lesson.check_equal([1, 2], [1, 2], "the list")
    lesson.check_close(0.1 + 0.2, 0.3, "a float sum", rel=1e-9)
    lesson.check_raises(KeyError, lambda: {}["x"], "a missing key")
    lesson.check(True, "read through a private name", internal=True)
    assert lesson.checks == [  # made before any step: in an untitled one
        {"claim": "one and one make two", "passed": True, "step": 0},
        {"claim": "the list = [1, 2]", "passed": True, "step": 0},
        {"claim": "a float sum = 0.3 within rel 1e-09", "passed": True, "step": 0},
        {"claim": "a missing key raises KeyError", "passed": True, "step": 0},
        {"claim": "read through a private name", "passed": True, "internal": True, "step": 0},
    ]
    assert lesson.steps == [{"heading": "", "printed": ""}]


@pytest.mark.parametrize("make_it_fail", [
    lambda lesson: lesson.check(False, "a false claim"),
    lambda lesson: lesson.check_equal(1, 2, "a false claim"),
    lambda lesson: lesson.check_close(1.0, 2.0, "a false claim"),
    lambda lesson: lesson.check_raises(KeyError, lambda: None, "a false claim"),
    lambda lesson: lesson.check_raises(KeyError, lambda: 1 / 0, "a false claim"),
])
def test_a_failed_check_is_recorded_and_fails_the_lesson(tmp_path, make_it_fail):
    lesson = Lesson(tmp_path)
    with pytest.raises(CheckFailed, match="a false claim"):
        make_it_fail(lesson)
    (check,) = lesson.checks
    assert check["passed"] is False and check["claim"].startswith("a false claim")


def test_a_check_made_to_fail_in_a_real_section_shows_in_the_json(monkeypatch, tmp_path, capsys, tutorial_main):
    """Section 3 checks that a key path returns the very array, not a copy. Make kontext
    return copies, and that claim is recorded as failed, after the ones that passed."""
    import copy

    real = kontext.get_by_path
    monkeypatch.setattr(kontext, "get_by_path", lambda context, path, **kw: copy.deepcopy(real(context, path, **kw)))
    status = tutorial_main(["kontext", "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "r.json")])
    assert status == 1
    (section,) = json.loads((tmp_path / "r.json").read_text())["sections"]
    assert section["status"] == "failed"
    heading = "A key path reaches into dicts, lists and attributes"
    assert section["checks"][-1] == {
        "claim": "get_by_path(context, 'batch.image') returns that very array, not a copy", "passed": False, "step": 0}
    assert section["error"]["message"].startswith("not true: get_by_path(context, 'batch.image')")
    assert section["error"]["step"] == heading
    assert section["summary"].startswith(f'in step "{heading}": CheckFailed: not true: ')
    out = capsys.readouterr().out
    assert "-> FAILED (" in out and f'1 check, 1 failed): in step "{heading}"' in out
    assert "✘ FAILED: get_by_path(context, 'batch.image')" in out
    assert "0 passed, 1 failed, 0 skipped; 1 check, 1 failed in" in out


def test_a_lesson_is_told_in_steps_each_holding_what_it_printed_and_checked(tmp_path, capsys):
    lesson = Lesson(tmp_path)
    lesson.md("""
        ## First step

        Why it matters.
        """)
    print("printed in the first step")
    lesson.check(True, "a claim of the first step")
    lesson.md("## Second step\n\nMore prose.")
    print("printed in the second")
    lesson.check_equal(2, 2, "a claim of the second step")
    lesson.skip_check("a claim this run cannot make", "why not")
    assert lesson.steps == [{"heading": "First step", "printed": ""}, {"heading": "Second step", "printed": ""}]
    assert [check["step"] for check in lesson.checks] == [0, 1]
    assert lesson.skipped_checks == [{"claim": "a claim this run cannot make", "why": "why not", "step": 1}]
    shown = capsys.readouterr().out  # a Lesson alone shows everything on stdout, as a notebook cell does
    assert shown.index("## First step") < shown.index("✔ a claim of the first step") < shown.index("## Second step")
    assert "- not checked here: a claim this run cannot make (why not)" in shown


def test_what_a_lesson_prints_is_recorded_in_its_step_and_shown_indented(tmp_path, capsys):
    """section_run.run: the prose unindented by two, the code's output by four, then the result."""
    import sys
    import types

    module = types.ModuleType("sections.s99_fake")
    module.__doc__ = "A fake lesson.\n\nIts introduction."

    @registry.section(99, "fake", "A fake lesson", shows="nothing")
    def fake(lesson):
        lesson.md("## One\n\nWhy.")
        print("a value")
        lesson.md("## Two\n\nWhy again.")
        print("another value")
        lesson.check(False, "a false claim")

    sys.modules[module.__name__] = module
    try:
        info = registry.SectionInfo(99, "fake", "A fake lesson", "nothing", False, module.__name__)
        result = section_run.run(info, tmp_path / "fake")
    finally:
        del sys.modules[module.__name__]
        registry._FUNCTIONS.pop("fake")
    assert result.steps == [{"heading": "One", "printed": "a value\n"}, {"heading": "Two", "printed": "another value\n"}]
    assert result.status == "failed" and result.error["step"] == "Two"
    assert result.summary == 'in step "Two": CheckFailed: not true: a false claim'
    shown = capsys.readouterr().out
    assert "  Its introduction.\n" in shown and "  ## One\n" in shown and "\n    a value\n" in shown
    assert "  ✘ FAILED: a false claim\n" in shown


def test_every_lesson_says_what_it_shows_in_a_line():
    for info in registry.catalog():
        assert info.shows and "\n" not in info.shows and len(info.shows) <= 120, info
