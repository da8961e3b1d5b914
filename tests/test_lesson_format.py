"""The lesson format (harness/lesson_format.py), as a contributor meets it: a section file is
read as the program its page shows, and a file that breaks the format is refused in one
line naming where."""

import contextlib
import io
import textwrap
import types

import pytest

from harness import lesson_format, teaching
from harness.lesson_format import LessonSourceError

LESSON = '''
"""A title.

Why it matters.
"""

import json

from configs import regression as regression_config
from harness import Lesson, section


@section(99, "example", "A title", shows="an example", part="glue")
def example(lesson: Lesson, workdir):
    lesson.md("""
    ## The first step

    Why the first step matters.
    """)
    # a comment the reader sees
    data = {"a": 1}
    print(json.dumps(data))
    with lesson.checks():
        lesson.check_equal(data, {"a": 1}, "the data")

    lesson.md("""
    ## The second step

    Why the second step matters.
    """)
    cfg = regression_config.get_config()
    run = lesson.shell("python -m kauldron.main --cfg=configs/regression.py --cfg.workdir=$WORKDIR/run",
                       background=True, shows="Starting")
    print(cfg.num_train_steps)
    with lesson.checks():
        lesson.summary = "done"


def helper():
    return 1
'''


def read(tmp_path, text: str) -> lesson_format.Program:
    path = tmp_path / "s99_example.py"
    path.write_text(textwrap.dedent(text))
    return lesson_format.read(path)


def test_a_lesson_is_steps_of_blocks_the_reader_sees_and_checks_beside_them(tmp_path):
    lesson = read(tmp_path, LESSON)
    assert (lesson.title, lesson.intro) == ("A title.", "Why it matters.")
    assert lesson.setup == "import json\n\nfrom configs import regression as regression_config"
    assert lesson.uses_workdir and "workdir = pathlib.Path(tempfile.mkdtemp(" in lesson.workdir_cell("99-example")
    assert [step.heading for step in lesson.steps] == ["The first step", "The second step"]
    first, second = lesson.steps
    assert [block.kind for block in first.blocks] == ["python", "checks"]
    assert first.blocks[0].code == '# a comment the reader sees\ndata = {"a": 1}\nprint(json.dumps(data))'
    assert first.checks_code == 'lesson.check_equal(data, {"a": 1}, "the data")'
    assert [block.kind for block in second.blocks] == ["python", "shell", "python", "checks"]
    shell = second.blocks[1]
    assert shell.code == "python -m kauldron.main --cfg=configs/regression.py --cfg.workdir=$WORKDIR/run"
    assert shell.options == {"background": True, "shows": "Starting"}
    assert lesson.helpers == "def helper():\n    return 1"


def test_the_experiment_s_files_are_shown_where_the_page_first_uses_them(tmp_path):
    first, second = read(tmp_path, LESSON).steps
    assert first.files == []
    # Used by the second step (by name, and by the shell command), with what they import.
    assert [file.path for file in second.files] == ["configs/regression.py", "sections/parts/regression.py"]


@pytest.mark.parametrize("body, problem", [
    ('print(1)\n    lesson.md("""## A step\n\n    Why.\n    """)', "a lesson opens with lesson.md"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    lesson.check(True, "a claim")', "never names `lesson`"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    print(lesson.workdir)', "never names `lesson`"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    return "done"', "a lesson does not return"),
    ('lesson.md(f"""## A step {1}""")', "one plain string"),
    ('lesson.md("""Why, with no heading.""")', "opens with its '## heading'"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    command = "ls"\n    lesson.shell(command)', "one plain string"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    with lesson.checks():\n        lesson.md("""## Another""")',
     "go at the top level"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    lesson.shell("ls", background=True, needed_by="A step")',
     "needed_by names a later step's heading"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    lesson.shell("ls", needed_by="Later")\n'
     '    lesson.md("""## Later\n\n    Why.\n    """)', "for a command in the background"),
    ('lesson.md("""## Going further: a digression\n\n    Why.\n    """)\n    print(1)\n'
     '    lesson.md("""## A step\n\n    Why.\n    """)', "a step comes before every 'Going further: ...' step"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    x = 1\n'
     '    with lesson.checks():\n        lesson.check(x, "one")\n'
     '    x = 2\n    with lesson.checks():\n        lesson.check(x, "two")', "code follows a step's checks"),
    ('lesson.md("""## A step\n\n    Why.\n    """)\n    print(1)\n'
     '    with lesson.checks():\n        lesson.check(1, "one")\n'
     '    lesson.shell("ls")', "code follows a step's checks"),
])
def test_a_file_that_breaks_the_format_is_refused_saying_where(tmp_path, body, problem):
    text = f'''
"""A title.

Why.
"""

from harness import Lesson, section


@section(99, "example", "A title", shows="an example", part="glue")
def example(lesson: Lesson):
    {body}
'''
    with pytest.raises(LessonSourceError, match=problem) as refused:
        read(tmp_path, text)
    assert str(refused.value).startswith("s99_example.py")


def test_a_step_may_open_with_checks_that_guard_its_code(tmp_path):
    body = ('lesson.md("""## A step\n\n    Why.\n    """)\n'
            '    with lesson.checks():\n        lesson.check(1, "a guard")\n'
            '    print(1)\n    with lesson.checks():\n        lesson.check(1, "the claim")')
    text = LESSON.split("@section", 1)[0] + f'''@section(99, "example", "A title", shows="an example", part="glue")
def example(lesson: Lesson):
    {body}
'''
    (step,) = read(tmp_path, text).steps
    assert [block.kind for block in step.blocks] == ["checks", "python", "checks"]


def test_a_step_may_define_functions_and_classes_that_return(tmp_path):
    body = 'lesson.md("""## A step\n\n    Why.\n    """)\n    def double(x):\n        return 2 * x\n    print(double(2))'
    text = LESSON.split("@section", 1)[0] + f'''@section(99, "example", "A title", shows="an example", part="glue")
def example(lesson: Lesson):
    {body}
'''
    (step,) = read(tmp_path, text).steps
    assert step.blocks[0].code == "def double(x):\n    return 2 * x\nprint(double(2))"


def test_a_lesson_takes_the_lesson_and_maybe_its_workdir(tmp_path):
    with pytest.raises(LessonSourceError, match=r"takes \(lesson\) or \(lesson, workdir\)"):
        read(tmp_path, LESSON.replace("(lesson: Lesson, workdir)", "(lesson: Lesson, workdir, extra)"))


def test_what_a_block_prints_is_indented_under_its_step_line_by_line():
    shown, recorded = io.StringIO(), []
    output = teaching._BlockOutput(shown, types.SimpleNamespace(record_output=recorded.append))
    with contextlib.redirect_stdout(output):
        print("a")
        print()
        print("  ", "b")  # a line whose first write is spaces
    assert shown.getvalue() == f"{teaching.INDENT}a\n\n{teaching.INDENT}   b\n"
    assert "".join(recorded) == "a\n\n   b\n"


@pytest.mark.parametrize("command, starts", [
    ("python -m kauldron.main --cfg=configs/regression.py --cfg.workdir=$WORKDIR/run", True),
    ("X=1 python -c 'import jax'", True),
    ("tensorboard --inspect --logdir $WORKDIR/run", True),  # a console script of this environment
    ("head -n 3 $WORKDIR/run/train/metrics.jsonl", False),
])
def test_whether_a_section_starts_python_processes_is_read_from_its_shell_blocks(tmp_path, command, starts):
    """The catalog says so (the run then starts the warm-start server; on a one-chip
    machine the lesson runs on the CPU with its commands): no flag to keep in step."""
    from harness import registry

    (tmp_path / "s99_example.py").write_text(textwrap.dedent(LESSON).replace(
        "python -m kauldron.main --cfg=configs/regression.py --cfg.workdir=$WORKDIR/run", command))
    (info,) = registry.catalog(tmp_path)
    assert info.starts_processes is starts
