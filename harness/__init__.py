"""The harness: what runs a lesson and checks it, apart from the lessons themselves.

A lesson (sections/sNN_<slug>.py) imports `section` and `Lesson` from here, and
may compare results with harness.compare in its checks.
lesson_format.py reads the lesson format; registry.py lists the sections; teaching.py runs one,
block by block; lesson.py is what its checks talk to; shell.py runs a lesson's shell
commands, warm_start.py forks their `python -m` processes (and the runner's workers) warm,
processes.py holds what every process shares (a held Ctrl-C, stopping one); runtime.py holds
the process-wide settings; results.py the typed results.
"""

from harness.lesson import Lesson
from harness.registry import section

__all__ = ["Lesson", "section"]
