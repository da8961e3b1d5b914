"""The same experiment from the command line.

A Kauldron experiment is a config file with a `get_config()`; `python -m kauldron.main`
loads it, applies `--cfg.<path>=<value>` flags on top, resolves it and trains. A value
can be a literal, JSON, or a `py::` Python expression. Kauldron's XManager launcher turns
each dict of a config file's `sweep()` into such a command, with every value as JSON
(strings as they are); the commands for section 7's sweep are printed below, and the
last one runs here for real, in its own process, with a run length and a workdir added.
The workdir then records what ran: `config.json` holds the config after the flags,
TensorBoard files hold the losses.
"""

import json
import shlex
import sys
from typing import Any

from kauldron import konfig
from kauldron.konfig import py_flag_utils

import compat
from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.children import run_child
from sections.shared import event_files, read_scalars

STEPS = 50


def launcher_flag(path: str, value: Any) -> str:
    """An override as Kauldron's XManager launcher passes it: the value as JSON (a config
    value as the JSON of its call), a string as it is."""
    if isinstance(value, konfig.ConfigDict):
        value = json.loads(value.to_json())
    return f"--cfg.{path}={value if isinstance(value, str) else json.dumps(value)}"


def py_expression(node: Any) -> str:
    """A config value as the `py::` expression a person would type for it."""
    if not (isinstance(node, dict) and "__qualname__" in node):
        return repr(node)
    module, name = node["__qualname__"].split(":")
    args = [py_expression(v) for k, v in node.items() if k.isdigit()]
    args += [f"{k}={py_expression(v)}" for k, v in node.items() if not k.isdigit() and k != "__qualname__"]
    return f"{module}.{name}({', '.join(args)})"


def check_launcher_encoding(lesson: Lesson, overrides: list[dict]) -> None:
    """The flags printed here are the ones the launcher's own encoder makes."""
    from kauldron.xm._src import json_utils  # private: the launcher itself does not import here

    for path, value in (item for run in overrides for item in run.items()):
        lesson.check_equal(launcher_flag(path, value).split("=", 1)[1], json_utils.arg_to_json(value),
                           f"the launcher's JSON for {path}", internal=True)


def print_sweep_commands(overrides: list[dict]) -> list[str]:
    print("\n  Section 7's sweep, one command per run, as the launcher passes the values:")
    lines = []
    for run in overrides:
        line = shlex.join(["python", "-m", "kauldron.main", "--cfg=configs/regression.py",
                           *(launcher_flag(path, value) for path, value in run.items())])
        lines.append(line)
        print(f"    {line}")
    return lines


@section(10, "cli", "The same experiment from the command line", trains=True,
         shows="python -m kauldron.main with --cfg flags, as the launcher runs a sweep; config.json records them",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/main.py")
def experiment_from_the_command_line(lesson: Lesson) -> str:
    overrides = list(regression.sweep())
    sweep_lines = print_sweep_commands(overrides)
    check_launcher_encoding(lesson, overrides)

    workdir = lesson.workdir / "run"
    flags = ["--cfg=configs/regression.py", *(launcher_flag(p, v) for p, v in overrides[-1].items()),
             f"--cfg.num_train_steps={STEPS}", f"--cfg.workdir={workdir}"]
    print("\n  The last one, run here:\n    python -m kauldron.main \\\n      " + " \\\n      ".join(map(shlex.quote, flags)))
    # A new process does not have the compat fixes this one applied: compat.run adds them.
    run_child([sys.executable, *compat.python_m(), "kauldron.main", *flags], "python -m kauldron.main")

    config = json.loads((workdir / "config.json").read_text())
    recorded = {"optimizer": config["optimizer"], "num_train_steps": config["num_train_steps"],
                "workdir": config["workdir"]}
    print(f"\n  {workdir.name}/config.json records the overrides: {recorded}")
    lesson.check(recorded == {"optimizer": {"__qualname__": "optax:sgd", "0": 0.05}, "num_train_steps": STEPS,
                              "workdir": str(workdir)},
                 f"config.json records the overrides: optimizer optax.sgd(0.05), num_train_steps={STEPS}, the workdir")
    lesson.check_equal(config["model"], {"__qualname__": "sections.shared:MLP", "inputs": "batch.x", "hidden": 32},
                       "the model in config.json (the config file's, not overridden)")
    lesson.check((workdir / "train_complete.txt").exists(), "training completed: the workdir has train_complete.txt")

    losses = read_scalars(*event_files(workdir, "train"))
    steps = sorted(step for step, values in losses.items() if "losses/logcosh" in values)
    first, last = losses[steps[0]]["losses/logcosh"], losses[steps[-1]]["losses/logcosh"]
    print(f"  {workdir.name}/train/ logged logcosh {first:.4f} at step {steps[0]} and {last:.4f} at step {steps[-1]}")
    lesson.check_equal(steps[-1], STEPS, "the last step with a logged loss")
    lesson.check(last < first, "the logged training loss fell")
    lesson.fact("recorded_overrides", recorded)
    lesson.fact("logged_logcosh", {str(steps[0]): first, str(steps[-1]): last})
    lesson.fact("sweep_commands", sweep_lines)

    typed = f"py::{py_expression(json.loads(overrides[-1]['optimizer'].to_json()))}"
    parsed = py_flag_utils.maybe_parse_py_flag_value(typed)
    lesson.check_equal(json.loads(parsed.to_json()), config["optimizer"],
                       f"--cfg.optimizer={typed}, parsed by konfig, as recorded in config.json")
    print(f"\n  Typing it by hand, --cfg.optimizer={typed} says the same: konfig's flag parser turns it"
          "\n  into the config config.json recorded.")
    return f"kauldron.main ran a sweep command ({STEPS} steps, optax.sgd(0.05)); config.json recorded it; logcosh {first:.3f} -> {last:.3f}"
