"""A lesson whose step never ends: its Python loops until something stops it.

The fast tier runs it with a small bound (tests/test_reliability.py).
"""

import time

from harness import Lesson, section


@section(98, "endless-step", "A step that never ends", part="glue", shows="a long step, bounded")
def endless_step(lesson: Lesson, workdir):
    lesson.md("""
    ## A step that never ends

    It prints one line, then waits in Python, as a training loop with no end would.
    """)
    print("step began")
    while True:
        time.sleep(0.1)
