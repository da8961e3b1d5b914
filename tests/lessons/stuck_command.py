"""A lesson whose command gets stuck: it prints a line, then nothing, and never exits.

The fast tier runs it with its process faked and a small bound (tests/test_reliability.py).
"""

from harness import Lesson, section


@section(99, "stuck-command", "A command that gets stuck", part="glue", shows="a hang, bounded")
def stuck_command(lesson: Lesson, workdir):
    lesson.md("""
    ## A job that stops moving

    The command prints its first step, then waits forever, as a deadlocked job does.
    """)
    lesson.shell("python -m stuck_job")
    print("not reached")
