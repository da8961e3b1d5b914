"""The same experiment from the command line.

A Kauldron experiment is a config file with a `get_config()`; `python -m kauldron.main`
loads it, applies `--cfg.<path>=<value>` flags on top, resolves it and trains. Here the
regression of the earlier lessons (`configs/regression.py`) runs that way, in its own
process, with two overrides and a workdir. The workdir then records what ran:
`config.json` holds the config after the flags, TensorBoard files hold the losses. A
sweep is therefore a list of flag strings, one command per run.
"""

import json
import shlex
import sys

from kauldron import konfig
from kauldron.konfig import py_flag_utils

import compat
from configs import regression
from sections.registry import Lesson, section
from sections.shared import as_flag, event_files, read_scalars, run_child

STEPS, HIDDEN = 50, 128


@section(10, "cli", "The same experiment from the command line", trains=True)
def lesson(lesson: Lesson) -> str:
    workdir = lesson.workdir / "run"
    flags = ["--cfg=configs/regression.py", f"--cfg.model.hidden={HIDDEN}",
             f"--cfg.num_train_steps={STEPS}", f"--cfg.workdir={workdir}"]
    print("  python -m kauldron.main \\\n    " + " \\\n    ".join(map(shlex.quote, flags)))
    # A new process does not have the compat fixes this one applied: compat.run adds them.
    command = [sys.executable, *compat.python_m(), "kauldron.main", *flags]
    run_child(command, "python -m kauldron.main")

    config = json.loads((workdir / "config.json").read_text())
    recorded = {"model.hidden": config["model"]["hidden"], "num_train_steps": config["num_train_steps"],
                "workdir": config["workdir"]}
    print(f"\n  {workdir.name}/config.json records the overrides: {recorded}")
    lesson.check_equal(recorded, {"model.hidden": HIDDEN, "num_train_steps": STEPS, "workdir": str(workdir)},
                       "the overrides recorded in config.json")
    lesson.check_equal(config["model"]["__qualname__"], "sections.shared:MLP", "the model in config.json")
    lesson.check((workdir / "train_complete.txt").exists(), "training completed (train_complete.txt)")

    losses = read_scalars(*event_files(workdir, "train"))
    steps = sorted(step for step, values in losses.items() if "losses/logcosh" in values)
    first, last = losses[steps[0]]["losses/logcosh"], losses[steps[-1]]["losses/logcosh"]
    print(f"  {workdir.name}/train/ logged logcosh {first:.4f} at step {steps[0]} and {last:.4f} at step {steps[-1]}")
    lesson.check_equal(steps[-1], STEPS, "the last step with a logged loss")
    lesson.check(last < first, "the logged training loss fell")
    lesson.fact("recorded_overrides", recorded)
    lesson.fact("logged_logcosh", {str(steps[0]): first, str(steps[-1]): last})

    print("\n  Section 7's sweep, as one command per run:")
    sweep_flags = []
    for overrides in regression.sweep():
        line = shlex.join(as_flag(path, value) for path, value in overrides.items())
        sweep_flags.append(line)
        print(f"    python -m kauldron.main --cfg=configs/regression.py {line}".rstrip())
        for path, value in overrides.items():
            if isinstance(value, konfig.ConfigDict):  # a py:: flag: parse it as the CLI does
                parsed = py_flag_utils.maybe_parse_py_flag_value(as_flag(path, value).split("=", 1)[1])
                lesson.check_equal(json.loads(parsed.to_json()), json.loads(value.to_json()),
                                   f"{as_flag(path, value)} parsed back by konfig")
    lesson.fact("sweep_flags", sweep_flags)
    print("  (Each py:: value above was parsed back with konfig's own flag parser and"
          "\n  matches the sweep's override.)")
    return f"kauldron.main trained {STEPS} steps with hidden={HIDDEN}; config.json recorded both; logcosh {first:.3f} -> {last:.3f}"
