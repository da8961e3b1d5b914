"""What `python -m kauldron.main` and Kauldron's launcher make of command-line values,
computed here to show and check them: the config kauldron.main's own `--cfg` flag
parses, and a sweep value as the launcher writes it on a command line (section 10)."""

from __future__ import annotations

import json
import sys

from absl import flags
from kauldron import kd, konfig

from sections.lesson import Lesson


def parsed_config(argv: list[str]):
    """The config kauldron.main would train, from these flags: its own --cfg flag, in a
    FlagValues of its own, so this process's flags are left alone. ml_collections reads
    the overrides from sys.argv, which in kauldron.main's process holds these flags."""
    flag_values = flags.FlagValues()
    cfg = kd.konfig.DEFINE_config_file("cfg", None, flag_values=flag_values, lock_config=False)
    saved, sys.argv = sys.argv, ["kauldron.main", *argv]
    try:
        flag_values(sys.argv)
        return cfg.value
    finally:
        sys.argv = saved


def launcher_value(value) -> str:
    """A sweep value as the launcher passes it: JSON (a config as the JSON of its call)."""
    if isinstance(value, konfig.ConfigDict):
        value = json.loads(value.to_json())
    return value if isinstance(value, str) else json.dumps(value)


def check_launcher_encoding(lesson: Lesson, overrides: list[dict]) -> None:
    """The values printed are the ones the launcher's own encoder makes."""
    from kauldron.xm._src import json_utils  # private: the launcher itself does not import from PyPI

    for path, value in (item for run in overrides for item in run.items()):
        lesson.check_equal(launcher_value(value), json_utils.arg_to_json(value), f"the launcher's JSON for {path}",
                           internal=True)
