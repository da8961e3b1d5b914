"""Every check a lesson makes is a visible result: its claim, whether it passed, the step
it belongs to, and, when it leans on what a library does not promise, why."""

import json
import sys
import textwrap

import pytest
from kauldron import kontext

from harness import lesson_format, teaching
from harness.lesson import CheckFailed, Lesson
from harness.registry import SectionInfo
from harness.results import Block, Check, Failure, Figure, SectionResult, SkippedCheck, Step


def test_checks_are_recorded_in_order_with_their_claims(tmp_path):
    lesson = Lesson(tmp_path)
    lesson.check(1 + 1 == 2, "one and one make two")
    lesson.check_equal([1, 2], [1, 2], "the list")
    lesson.check_close(0.1 + 0.2, 0.3, "a float sum", rel=1e-9)
    lesson.check_raises(KeyError, lambda: {}["x"], "a missing key")
    lesson.check(True, "read through a private name", internal="a private name")
    assert [check.to_json() for check in lesson.checks_made] == [
        {"claim": "one and one make two", "passed": True, "step": 0},
        {"claim": "the list = [1, 2]", "passed": True, "step": 0},
        {"claim": "a float sum = 0.3 within rel 1e-09", "passed": True, "step": 0},
        {"claim": "a missing key raises KeyError", "passed": True, "step": 0},
        {"claim": "read through a private name", "passed": True, "internal": True,
         "internal_because": "a private name", "step": 0},
    ]


def test_a_section_s_json_keeps_its_form_key_for_key():
    """What --json holds of a section, which the pages and the kept runs read: each key, in
    order; an internal check's reason; a shell block's command and output length, which a
    Python block has not; the figure's title and step, not its PNG."""
    result = SectionResult(
        3, "kontext", "Kontext", "failed", 1.5, "in step \"Two\": CheckFailed: not true: x", {"fact": 1},
        [Check("a claim", True, 0), Check("x", False, 1, "reads a private name")],
        Failure("CheckFailed", "not true: x", True, "short", "long", "Two"), ["03-kontext.png"],
        [Step("One", "out\n", [Block("python", 17, "out\n"), Block("shell", 20, "ok\n", "python -m m", 3)])],
        [SkippedCheck("c", "why not", 0)], Figure("a title", b"PNG", 0))
    found = result.to_json()
    assert list(found) == ["number", "slug", "title", "status", "seconds", "summary", "facts", "checks", "error",
                           "plots", "steps", "skipped_checks", "figure_step", "figure_title"]
    assert found["checks"] == [{"claim": "a claim", "passed": True, "step": 0},
                               {"claim": "x", "passed": False, "internal": True,
                                "internal_because": "reads a private name", "step": 1}]
    assert [list(check) for check in found["checks"]] == [["claim", "passed", "step"],
                                                          ["claim", "passed", "internal", "internal_because", "step"]]
    assert found["error"] == {"type": "CheckFailed", "message": "not true: x", "expected": True,
                              "short_traceback": "short", "traceback": "long", "step": "Two"}
    assert found["steps"] == [{"heading": "One", "printed": "out\n", "blocks": [
        {"kind": "python", "line": 17, "printed": "out\n"},
        {"kind": "shell", "line": 20, "printed": "ok\n", "command": "python -m m", "output_lines": 3}]}]
    assert (found["skipped_checks"], found["figure_step"], found["figure_title"]) == (
        [{"claim": "c", "why": "why not", "step": 0}], 0, "a title")
    assert json.loads(json.dumps(found)) == found


def test_an_internal_check_says_why_it_is_internal(tmp_path):
    with pytest.raises(TypeError, match="the reason"):
        Lesson(tmp_path).check(True, "a claim", internal=True)


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
    (check,) = lesson.checks_made
    assert check.passed is False and check.claim.startswith("a false claim")


FAKE = '''
"""A fake lesson.

Its introduction.
"""

from harness import Lesson, section


@section(99, "fake", "A fake lesson", shows="nothing", part="glue")
def fake(lesson: Lesson, workdir):
    lesson.md("""
    ## One

    Why.
    """)
    print("a value")
    with lesson.checks():
        lesson.check(True, "a claim of step one")
        lesson.skip_check("a claim this run cannot make", "why not")

    lesson.md("""
    ## Two

    Why again.
    """)
    print("another value")
    (workdir / "written").write_text("here")
    with lesson.checks():
        lesson.check(False, "a false claim")
'''


@pytest.fixture
def fake_section(tmp_path, monkeypatch):
    yield from installed(FAKE, tmp_path, monkeypatch)


def installed(source: str, tmp_path, monkeypatch):
    """A lesson in a package of its own, as the runner finds one (harness/lesson_format.py)."""
    package = tmp_path / "fake_lessons"
    package.mkdir()
    (package / "s99_fake.py").write_text(textwrap.dedent(source))
    monkeypatch.setattr(lesson_format, "ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield SectionInfo(99, "fake", "A fake lesson", "nothing", "glue", False, "fake_lessons.s99_fake")
    sys.modules.pop("fake_lessons.s99_fake", None)
    sys.modules.pop("fake_lessons", None)


def test_a_lesson_runs_block_by_block_and_each_keeps_what_it_printed(fake_section, tmp_path, capsys):
    """The prose indented by two, the code's output by four, the checks; a failure names its step."""
    result = teaching.run(fake_section, tmp_path / "runs" / "99-fake")
    assert [step.heading for step in result.steps] == ["One", "Two"]
    assert [[(block.kind, block.printed) for block in step.blocks] for step in result.steps] == [
        [("python", "a value\n"), ("checks", "")], [("python", "another value\n"), ("checks", "")]]
    assert result.steps[0].blocks[0].line == 17  # where the block starts in the file
    assert (tmp_path / "runs" / "99-fake" / "written").read_text() == "here"  # `workdir` is the lesson's
    assert [(check.claim, check.passed, check.step) for check in result.checks] == [
        ("a claim of step one", True, 0), ("a false claim", False, 1)]
    assert result.skipped_checks == [SkippedCheck("a claim this run cannot make", "why not", 0)]
    assert result.status == "failed" and result.error.step == "Two"
    assert result.summary == 'in step "Two": CheckFailed: not true: a false claim'
    shown = capsys.readouterr().out
    assert "  Its introduction.\n" in shown and "  ## One\n" in shown and "\n    a value\n" in shown
    assert "  - not checked here: a claim this run cannot make (why not)" in shown
    assert shown.index("## One") < shown.index("✔ a claim of step one") < shown.index("## Two")
    assert "  ✘ FAILED: a false claim\n" in shown


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
    failed = section["checks"][-1]
    assert failed["passed"] is False and "not a copy" in failed["claim"]
    heading = section["steps"][failed["step"]]["heading"]
    assert section["error"]["message"] == f"not true: {failed['claim']}"
    assert section["error"]["step"] == heading
    assert section["summary"] == f'in step "{heading}": CheckFailed: not true: {failed["claim"]}'
    out = capsys.readouterr().out
    assert "-> FAILED (" in out and f'1 failed): in step "{heading}"' in out
    assert f"✘ FAILED: {failed['claim']}" in out
    assert "0 passed, 1 failed, 0 skipped;" in out


KILLED_MEANWHILE = '''
"""A lesson whose background command is killed while its step's checks run."""

from harness import Lesson, section


@section(99, "fake", "A fake lesson", shows="nothing", part="glue")
def fake(lesson: Lesson, workdir):
    lesson.md("""
    ## One

    Why this step matters, in a sentence.
    """)
    lesson.shell("python -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'", background=True)
    with lesson.checks():
        import time

        time.sleep(0.5)  # the command dies meanwhile
        lesson.check(False, "what the command, alive, would have made true")
'''


@pytest.fixture
def killed_meanwhile(tmp_path, monkeypatch):
    yield from installed(KILLED_MEANWHILE, tmp_path, monkeypatch)


@pytest.mark.slow  # starts a process
def test_a_check_failing_because_a_background_command_died_reports_the_death(killed_meanwhile, tmp_path):
    """As section 18's check of its job's port does when a process of the job is killed."""
    result = teaching.run(killed_meanwhile, tmp_path / "runs" / "99-fake")
    assert result.status == "failed" and result.error.type == "LessonFailed"
    assert result.error.message.startswith("`python -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'`"
                                              " exited -9 (SIGKILL)")


NEEDED_LATER = '''
"""A lesson whose background command is needed two steps later."""

import pathlib

from harness import Lesson, section


@section(99, "fake", "A fake lesson", shows="nothing", part="glue")
def fake(lesson: Lesson, workdir):
    lesson.md("""
    ## Start it

    Why this step matters, in a sentence.
    """)
    lesson.shell("sleep 1; echo done > $WORKDIR/done.txt; echo finished", background=True, needed_by="Use it")

    lesson.md("""
    ## Meanwhile

    Why this step matters, in a sentence.
    """)
    print("still running:", not pathlib.Path(workdir, "done.txt").exists())

    lesson.md("""
    ## Use it

    Why this step matters, in a sentence.
    """)
    print(pathlib.Path(workdir, "done.txt").read_text().strip())
    with lesson.checks():
        lesson.summary = "done"
'''


@pytest.fixture
def needed_later(tmp_path, monkeypatch):
    yield from installed(NEEDED_LATER, tmp_path, monkeypatch)


@pytest.mark.slow  # starts a process
def test_a_command_in_the_background_runs_on_until_the_step_that_needs_it(needed_later, tmp_path):
    """As section 15's eval job does, while the lesson reads what training wrote; its output
    stays with the step that started it."""
    result = teaching.run(needed_later, tmp_path / "runs" / "99-fake")
    assert result.status == "passed", result.summary
    start, meanwhile, use = result.steps
    assert start.printed == "finished\n"
    assert (meanwhile.printed, use.printed) == ("still running: True\n", "done\n")
