"""The same experiment from the command line.

A Kauldron experiment is a config file with a `get_config()`. `python -m kauldron.main`
loads it, applies `--cfg.<path>=<value>` flags on top, resolves it and trains; that is
also what Kauldron's launcher runs for each job of a sweep. The workdir then records what
ran: `config.json` holds the config after the flags, TensorBoard files hold the losses.
"""

import json
import shlex

from kauldron import kd

from configs import regression
from sections.children import ROOT, python_m, run_child
from sections.command_line import check_launcher_encoding, launcher_value, parsed_config
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import library_source
from sections.shared import event_files, read_scalars

STEPS = 50
CONFIG_FILE = ROOT / "configs" / "regression.py"


@section(10, "cli", "The same experiment from the command line", part="for-real", trains=True,
         starts_processes=True,
         shows="python -m kauldron.main with --cfg flags: Python literals and py:: calls, not JSON; config.json records them",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/main.py")
def experiment_from_the_command_line(lesson: Lesson) -> str:
    lesson.md("""
    ## A config file, and flags on top

    The command names the config file and overrides what it needs, by key path: the run
    length, the workdir, and here the optimizer, written as a Python call after `py::`.
    It runs in a process of its own, as a user would start it.
    """)
    workdir = lesson.workdir / "run"
    command = ["kauldron.main", f"--cfg={CONFIG_FILE}", f"--cfg.num_train_steps={STEPS}",
               "--cfg.optimizer=py::optax.sgd(0.05)", f"--cfg.workdir={workdir}"]
    print("python -m " + shlex.join(command))
    run_child(python_m(*command), "python -m kauldron.main")

    lesson.md("""
    ## The workdir records what ran

    `config.json` is the config after the flags: the optimizer the `py::` expression
    built, the run length, the workdir; the model is the config file's. The losses are in
    `train/`.
    """)
    config = json.loads((workdir / "config.json").read_text())
    print({key: config[key] for key in ("optimizer", "num_train_steps", "model")})
    losses = {step: row["losses/logcosh"] for step, row in read_scalars(*event_files(workdir, "train")).items()}
    print({step: round(loss, 4) for step, loss in losses.items()})
    lesson.check((config["optimizer"], config["num_train_steps"], config["workdir"])
                 == ({"__qualname__": "optax:sgd", "0": 0.05}, STEPS, str(workdir)),
                 f"config.json records the optimizer optax.sgd(0.05), num_train_steps={STEPS} and the workdir")
    lesson.check_equal(config["model"], {"__qualname__": "sections.shared:MLP", "inputs": "batch.x", "hidden": 32},
                       "the model in config.json (the config file's)")
    lesson.check((workdir / "train_complete.txt").exists() and max(losses) == STEPS and losses[STEPS] < losses[0],
                 "the run completed: train_complete.txt, and a loss logged at step 50 lower than at step 0")
    lesson.fact("logged_logcosh", {str(step): losses[step] for step in (0, STEPS)})

    lesson.md("""
    ## Flag values are Python literals, not JSON

    `kauldron.main` reads `--cfg` with konfig's `DEFINE_config_file`, whose values go
    through `ast.literal_eval`: `0x10` is 16, and JSON's `true` is not a literal, so a
    value holding it stays a string, which a config field refuses. Kauldron's launcher
    writes a sweep's values as JSON: `optax.adamw(0.001, nesterov=True)` becomes such a
    value, and the job fails. Write calls with `py::`. Here the same flag, parsed in
    this process:
    """)
    launcher_json = json.dumps({"__qualname__": "optax:adamw", "learning_rate": 0.001, "nesterov": True})
    literal = parsed_config([f"--cfg={CONFIG_FILE}", "--cfg.model.hidden=0x10"])
    print(literal.model.hidden, launcher_json)
    lesson.check_equal(literal.model.hidden, 16, "--cfg.model.hidden=0x10, parsed as kauldron.main parses it")
    error = lesson.check_raises(TypeError, lambda: parsed_config([f"--cfg={CONFIG_FILE}", f"--cfg.optimizer={launcher_json}"]),
                                "the launcher's JSON of optax.adamw(0.001, nesterov=True) as --cfg.optimizer")
    print(str(error).splitlines()[-1][:150])
    lesson.check("cannot be casted" in str(error) and "'str'" in str(error), "the JSON arrived as a string")
    lesson.check('kd.konfig.DEFINE_config_file(\n      "cfg"' in library_source("kauldron.main"),
                 "kauldron/main.py defines --cfg with kd.konfig.DEFINE_config_file", internal=True)

    lesson.md("""
    ## A sweep, from the command line

    Kauldron's launcher turns each dict of a config file's `sweep()` (section 7) into
    such a command, each value as JSON; section 7's sweep has no boolean, so these run.
    With `--eval_names=NAME` instead, `kauldron.main` evaluates a finished workdir
    (section 15).
    """)
    sweep_commands = [shlex.join(["python", "-m", "kauldron.main", "--cfg=configs/regression.py",
                                  *(f"--cfg.{path}={launcher_value(value)}" for path, value in run.items())])
                      for run in regression.sweep()]
    print("\n".join(sweep_commands))
    check_launcher_encoding(lesson, list(regression.sweep()))
    lesson.fact("sweep_commands", sweep_commands)

    lesson.md("""
    ## The `kauldron` command does not run from PyPI; its subcommands do, from Python

    Kauldron's docs also describe a `kauldron` command (`kauldron data element_spec
    --cfg=...`). From PyPI, its console script imports a module where it expects a
    function, and `python -m kauldron.cli.main` passes its `main` a list where it expects
    parsed flags. The subcommands are dataclasses you call: the element spec of a
    config's data, or the shapes of everything a step computes, without training.
    """)
    import kauldron.cli.run  # not imported by kd.cli

    from kauldron.cli import main as console_script  # what the `kauldron` script imports and calls
    cfg = regression.get_config()
    cfg.workdir = str(lesson.workdir / "inspected")
    kd.cli.data.ElementSpec(cfg=cfg)()
    kauldron.cli.run.EvalShape(cfg=cfg)()
    lesson.check(not callable(console_script), "the `kauldron` console script calls a module (TypeError)")
    lesson.check_raises(AttributeError, lambda: console_script.main(["kauldron", "data", "element_spec"]),
                        "kauldron.cli.main's main with the argv list `python -m` gives it")
    return f"kauldron.main trained {STEPS} steps with a py:: optimizer; config.json recorded it; launcher JSON with true fails"
