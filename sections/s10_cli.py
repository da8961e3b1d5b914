"""The same experiment from the command line.

A Kauldron experiment is a config file with a `get_config()`. `python -m kauldron.main`
loads it, applies `--cfg.<path>=<value>` flags on top, resolves it and trains; that is
also what Kauldron's launcher runs for each job of a sweep, and, with `--eval_names`, for
the job of a standalone evaluator beside the training. The workdir then records what ran:
`config.json` holds the config after the flags of the last run that started with no
checkpoint past step 0 to resume (section 9), TensorBoard files hold the losses.
"""

import contextlib
import io
import json
import shlex

from kauldron import kd
from kauldron.xm._src import json_utils  # private: no public name holds arg_to_json

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.logs import read_scalars


@section(10, "cli", "The same experiment from the command line", part="for-real", trains=True,
         shows="kauldron.main with --cfg flags: literals, py:: calls, no JSON holding true; config.json; --eval_names refusing an EveryNSteps evaluator",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/main.py")
def experiment_from_the_command_line(lesson: Lesson, workdir):
    lesson.md("""
    ## A config file, and flags on top

    The command names the config file and overrides what it needs, by key path: the run
    length, the workdir, and here the optimizer, written as a Python call after `py::`
    (quoted, as bash needs for the parentheses).
    On a machine with one TPU, a command started from a kernel that has run jax (one that
    ran another page, say) cannot open the chip the kernel holds (section 0): there, set
    `JAX_PLATFORMS=cpu` before the kernel imports jax (`%env JAX_PLATFORMS=cpu` as the first cell; its commands inherit
    it), as this tutorial does for this page.
    """)
    lesson.shell("python -m kauldron.main --cfg=configs/regression.py --cfg.num_train_steps=50"
                 " --cfg.optimizer='py::optax.sgd(0.05)' --cfg.workdir=$WORKDIR/run",
                 shows=r"^(Creating workdir|Starting training loop)")
    with lesson.checks():
        accelerator.check_one_chip(lesson)

    lesson.md("""
    ## The workdir records what ran

    `config.json` is the config after the flags of the last run that started on the
    workdir with no checkpoint to resume, as this config's runs all do: it keeps none (a
    run resumed from a checkpoint after step 0 leaves the file as it was: section 9):
    the optimizer the `py::` expression built, the run length, the workdir; the model is
    the config file's. The losses are in `train/`.
    """)
    config = json.loads((workdir / "run" / "config.json").read_text())
    print({key: config[key] for key in ("optimizer", "num_train_steps", "model")})
    losses = {step: row["losses/logcosh"] for step, row in read_scalars(workdir / "run", "train").items()}
    print({step: round(loss, 4) for step, loss in losses.items()})
    with lesson.checks():
        lesson.check((config["optimizer"], config["num_train_steps"], config["workdir"])
                     == ({"__qualname__": "optax:sgd", "0": 0.05}, 50, str(workdir / "run")),
                     "config.json records the optimizer optax.sgd(0.05), num_train_steps=50 and the workdir")
        lesson.check_equal(config["model"], {"__qualname__": "sections.parts.regression:MLP", "inputs": "batch.x", "hidden": 32},
                           "the model in config.json (the config file's)")
        lesson.check((workdir / "run" / "train_complete.txt").exists() and max(losses) == 50 and losses[50] < losses[0],
                     "the run completed: train_complete.txt, and a loss logged at step 50 lower than at step 0")
        lesson.check(not (workdir / "run" / "checkpoints").exists(), "the run kept no checkpoint: none to resume from")
        lesson.skip_check("a run resumed on the workdir from a checkpoint after step 0 leaves config.json as it was",
                          "section 9 checks it on a resumed train(), the loop kauldron.main runs")
        lesson.fact("logged_logcosh", {str(step): losses[step] for step in (0, 50)})

    lesson.md("""
    ## Flag values are Python literals: a JSON object with `true` is not

    `kauldron.main` reads `--cfg` with konfig's `DEFINE_config_file`, built on
    ml_collections' config flags, which parse each value of konfig's config, loaded
    lazily and so typed by no field, with `ast.literal_eval`:
    `--cfg.model.hidden=0b10000` is 16. A bare `true` or `false` is first made `True` or
    `False` (`--cfg.train_ds.shuffle=false` works), but not `null`: a sweep value
    `None`, which the launcher writes `null`, arrives as the string `'null'` in a field
    that holds `None` or a string, and a number's field refuses it. Inside a JSON
    object, JSON's `true` is not a Python literal either: the value stays a string, and
    a field that holds a config refuses a string. Kauldron's launcher writes each value
    of a sweep as JSON (a string as it is, unquoted); an optimizer such as
    `optax.adamw(0.001, nesterov=True)` becomes such an object, and the job, started,
    fails as it applies that flag to the config. Swept as the string `"py::optax.adamw(0.001, nesterov=True)"`, it arrives as
    a `py::` expression, which `kauldron.main` builds.
    """)
    adamw = lesson.shell("python -m kauldron.main --cfg=configs/regression.py --cfg.workdir=$WORKDIR/adamw"
                         """ '--cfg.optimizer={"__qualname__": "optax:adamw", "0": 0.001, "nesterov": true}'""",
                         check=False, shows=r"^TypeError")
    with lesson.checks():
        import re

        ADAMW_JSON = '{"__qualname__": "optax:adamw", "0": 0.001, "nesterov": true}'
        with kd.konfig.imports():
            import optax as optax_cfg
        lesson.check(adamw.returncode != 0 and "is of original type <class 'str'>" in adamw.output,
                     "the launcher's JSON of optax.adamw(0.001, nesterov=True) as --cfg.optimizer fails:"
                     " the value arrived as a string (TypeError)")
        lesson.check(re.search(r'kauldron/main\.py", line \d+, in main\n', adamw.output) is not None
                     and "Error trying to mutate path optimizer" in adamw.output,
                     "it fails inside kauldron/main.py's main(), setting the flag's value at the path optimizer",
                     internal="reads the traceback")
        lesson.check_equal(json_utils.arg_to_json(optax_cfg.adamw(0.001, nesterov=True)), ADAMW_JSON,
                           "arg_to_json, the launcher's encoder, of optax.adamw(0.001, nesterov=True): the command's JSON",
                           internal="a private name")
        parsed = parsed_config(["--cfg=configs/regression.py", "--cfg.model.hidden=0b10000", "--cfg.train_ds.shuffle=false",
                                "--cfg.train_ds.drop_remainder=true", "--cfg.profiler=null"])
        lesson.check_equal(parsed.model.hidden, 16, "--cfg.model.hidden=0b10000, parsed as kauldron.main parses it")
        lesson.check((parsed.train_ds.shuffle, parsed.train_ds.drop_remainder) == (False, True),
                     "bare false and true in a --cfg value are parsed as the booleans False and True")
        lesson.check_equal((json_utils.arg_to_json(None), parsed.profiler), ("null", "null"),
                           "arg_to_json(None), the launcher's JSON of a sweep value None, and --cfg.profiler=null parsed"
                           " as kauldron.main parses it: the string 'null'", internal="a private name")
        lesson.check_raises(TypeError, lambda: parsed_config(["--cfg=configs/regression.py", "--cfg.num_train_steps=null"]),
                            "--cfg.num_train_steps=null, parsed as kauldron.main parses it,")
        lesson.check_raises(TypeError, lambda: parsed_config(["--cfg=configs/regression.py", f"--cfg.optimizer={ADAMW_JSON}"]),
                            "the same JSON parsed in this process, as kauldron.main parses it,")
        PY_ADAMW = "py::optax.adamw(0.001, nesterov=True)"
        lesson.check_equal(json_utils.arg_to_json(PY_ADAMW), PY_ADAMW,
                           "arg_to_json of the string py::optax.adamw(0.001, nesterov=True): the string, unquoted",
                           internal="a private name")
        lesson.check(parsed_config(["--cfg=configs/regression.py", f"--cfg.optimizer={PY_ADAMW}"]).optimizer
                     == optax_cfg.adamw(0.001, nesterov=True),
                     "--cfg.optimizer=py::optax.adamw(0.001, nesterov=True), parsed as kauldron.main parses it: the"
                     " config of optax.adamw(0.001, nesterov=True)")
        lesson.check('kd.konfig.DEFINE_config_file(\n      "cfg"' in library_source("kauldron.main"),
                     "kauldron/main.py defines --cfg with kd.konfig.DEFINE_config_file", internal="reads Kauldron's source")

    lesson.md("""
    ## A sweep, from the command line

    Kauldron's launcher turns each dict of a config file's `sweep()` (section 7) into
    such a command, each value encoded by `arg_to_json`. This page imports it from its
    private module, `kauldron.xm._src.json_utils`: neither pin has a public name for it,
    and the launcher's public module, `kauldron.kxm`, does not import from PyPI (section
    7). Section 7's sweep holds no `None` and no object with a boolean inside, so each of
    its commands parses: an optimizer without one, as a JSON object, is parsed into the
    config it describes.
    """)
    for overrides in regression_config.sweep():
        print(shlex.join(["python", "-m", "kauldron.main", "--cfg=configs/regression.py",
                          *(f"--cfg.{path}={json_utils.arg_to_json(value)}" for path, value in overrides.items())]))
    with lesson.checks():
        commands = [["--cfg=configs/regression.py", *(f"--cfg.{path}={json_utils.arg_to_json(value)}"
                                                      for path, value in overrides.items())]
                    for overrides in regression_config.sweep()]
        for overrides, argv in zip(regression_config.sweep(), commands):
            parsed = parsed_config(argv)
            for path, value in overrides.items():
                got = kd.kontext.get_by_path(parsed, path)
                lesson.check_equal(json.loads(got.to_json()) if isinstance(got, kd.konfig.ConfigDict) else got,
                                   json.loads(value.to_json()) if isinstance(value, kd.konfig.ConfigDict) else value,
                                   f"--cfg.{path} from the launcher's JSON, parsed as kauldron.main parses it",
                                   internal="a private name")
        lesson.fact("sweep_commands", [shlex.join(["python", "-m", "kauldron.main", *argv]) for argv in commands])
        lesson.check_equal(public_files_naming("arg_to_json", "json_utils"), [],
                           "the files of the kauldron package outside its _src folders that name arg_to_json or"
                           " json_utils", internal="reads Kauldron's source")
        import importlib

        lesson.check_raises(ImportError, lambda: importlib.import_module("kauldron.kxm"),
                            "importing kauldron.kxm, the launcher's public module, from PyPI")

    lesson.md("""
    ## `--eval_names` names standalone evaluators only

    With `--eval_names=NAME`, `kauldron.main` runs `trainer.continuous_eval(NAME)`
    instead of `train()`: the job Kauldron's launcher starts beside the training job, on
    its workdir, for each standalone evaluator (`kd.evals.StandaloneEveryCheckpoint`,
    `StandaloneLastCheckpoint`), or one for each `job_group`, with `--eval_names=a,b`;
    section 15 runs one. An evaluator that runs inside
    training, such as `kd.evals.EveryNSteps`, cannot be named: `continuous_eval` refuses
    it with a `ValueError`, but only after building a state from the workdir's
    `element_spec.json`, which it waits for with no timeout: on a workdir nothing trained
    in, the command hangs instead (section 15 shows the wait). Here `heldout`, the
    `EveryNSteps` evaluator of `configs/heldout.py`, asked of the run above:
    """)
    refused = lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run --eval_names=heldout",
                           check=False, shows=r"^(ValueError|Initialize the state)|trainer\.continuous_eval\(")
    with lesson.checks():
        lesson.check(refused.returncode != 0 and "ValueError: Remote eval ('heldout') should be standalone" in refused.output,
                     "--eval_names=heldout, an EveryNSteps evaluator, fails with ValueError: it should be standalone")
        lesson.check(all(line in refused.output for line in ("/kauldron/main.py", "trainer.continuous_eval(eval_names)",
                                                             "in continuous_eval")),
                     "the refusal's traceback: kauldron/main.py called trainer.continuous_eval(eval_names)")
        lesson.check(0 <= refused.output.find("Initialize the state") < refused.output.find("ValueError: Remote eval"),
                     "continuous_eval logged 'Initialize the state...' before it refused")
        lesson.skip_check("continuous_eval waits for element_spec.json with no timeout",
                          "section 15 checks the wait, on a workdir without element_spec.json")
        launcher = library_source("kauldron.xm._src.kauldron_utils")
        lesson.check(all(text in launcher for text in ('script_path="//third_party/py/kauldron/main.py"',
                                                       '"cfg.workdir": dir_utils.WU_DIR_PROXY',
                                                       "isinstance(run, run_strategies.Standalone)",
                                                       'args={"eval_names": ",".join(eval_names)}')),
                     "the launcher runs kauldron/main.py for every job, all on the work unit's workdir, and one job"
                     " with --eval_names per standalone evaluator (or job group)", internal="reads Kauldron's source")

    lesson.md("""
    ## The `kauldron` command does not run from PyPI; its subcommands do, from Python

    Kauldron's docs also describe a `kauldron` command (`kauldron data element_spec
    --cfg=...`). From PyPI, its console script imports a module where it expects a
    function, and `python -m kauldron.cli.main` passes its `main` the list of arguments
    where it expects the parsed ones:
    """)
    script = lesson.shell("kauldron data element_spec --cfg=configs/regression.py", check=False, shows=r"^TypeError")
    module = lesson.shell("python -m kauldron.cli.main data element_spec --cfg=configs/regression.py",
                          check=False, shows=r"^AttributeError")
    with lesson.checks():
        lesson.check(script.returncode != 0 and "TypeError: 'module' object is not callable" in script.output,
                     "the `kauldron` console script calls a module (TypeError)")
        lesson.check(module.returncode != 0 and "AttributeError: 'list' object has no attribute 'patch'" in module.output,
                     "kauldron.cli.main's main with the argv list `python -m` gives it (AttributeError)")

    lesson.md("""
    ## The subcommands are dataclasses you call

    `kd.cli.data.ElementSpec(cfg=cfg)()` prints the element spec of a config's data,
    without training; `kauldron.cli.run.EvalShape(cfg=cfg)()` (a module `kd.cli` does
    not import: `import kauldron.cli.run` first) prints the shapes of everything a
    training step computes. They also print how long each stage took, which this page
    leaves out. The package's own `kauldron/cli/README.md` writes
    `kd.cli.data.ElementSpec(cfg).execute()`: a `TypeError`, as they take keyword
    arguments only, and they have no `execute`.
    """)
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir / "inspected")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        kd.cli.data.ElementSpec(cfg=cfg)()
    print("\n".join(line for line in printed.getvalue().splitlines() if " sec)" not in line).strip())
    with lesson.checks():
        lesson.check("batch:\n  x: float32[32, 16]\n  y: float32[32, 1]" in printed.getvalue(),
                     "ElementSpec printed the batch's two arrays, float32[32, 16] and float32[32, 1]")
        import pathlib
        import sys

        lesson.check(re.search(r"^Resolving config\.\.\.done \(\d+\.\d sec\)$", printed.getvalue(), re.M)
                     and re.search(r"^Getting element spec\.\.\.done \(\d+\.\d sec\)$", printed.getvalue(), re.M),
                     "ElementSpec printed how long resolving the config and getting the element spec took")
        readme = pathlib.Path(kd.cli.__file__).with_name("README.md").read_text()
        lesson.check("kd.cli.data.ElementSpec(cfg).execute()" in readme,
                     "kauldron/cli/README.md writes kd.cli.data.ElementSpec(cfg).execute()",
                     internal="reads a file of the package (kauldron/cli/README.md)")
        lesson.check_raises(TypeError, lambda: kd.cli.data.ElementSpec(cfg).execute(),
                            "kd.cli.data.ElementSpec(cfg).execute(), as kauldron/cli/README.md writes it,")
        lesson.check_raises(AttributeError, lambda: kd.cli.data.ElementSpec(cfg=cfg).execute,
                            "kd.cli.data.ElementSpec(cfg=cfg).execute, with cfg given by keyword,")
        lesson.check("kauldron.cli.run" not in sys.modules, "importing kd.cli did not import kauldron.cli.run")
        import kauldron.cli.run

        with contextlib.redirect_stdout(io.StringIO()) as shapes:
            kauldron.cli.run.EvalShape(cfg=cfg)()
        lesson.check("context_specs: Context(" in shapes.getvalue() and "loss_total=f32[]" in shapes.getvalue(),
                     "EvalShape printed the training step's context, down to loss_total=f32[]")
        lesson.summary = ("kauldron.main trained 50 steps with a py:: optimizer; config.json recorded it;"
                          " a JSON object with true fails; --eval_names refused an EveryNSteps evaluator")


def parsed_config(argv: list[str]):
    """The config kauldron.main would train, from these flags: its own --cfg flag, in a
    FlagValues of its own, so this process's flags are left alone. ml_collections reads
    the overrides from sys.argv, which in kauldron.main's process holds these flags."""
    import sys

    from absl import flags

    flag_values = flags.FlagValues()
    cfg = kd.konfig.DEFINE_config_file("cfg", None, flag_values=flag_values, lock_config=False)
    saved, sys.argv = sys.argv, ["kauldron.main", *argv]
    try:
        flag_values(sys.argv)
        return cfg.value
    finally:
        sys.argv = saved


def library_source(module: str) -> str:
    """The text of an installed module's file, read without importing it."""
    import importlib.util
    import pathlib

    return pathlib.Path(importlib.util.find_spec(module).origin).read_text()


def public_files_naming(*names: str) -> list[str]:
    """The installed kauldron package's files, outside its `_src` folders, whose text
    holds any of `names`: where a public name for them would be."""
    import importlib.util
    import pathlib

    root = pathlib.Path(importlib.util.find_spec("kauldron").origin).parent
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                  if "_src" not in path.parts and any(name in path.read_text() for name in names))


# How the lesson checks itself.
from sections.parts import accelerator  # noqa: E402 - the checks' own, not the page's
