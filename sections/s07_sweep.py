"""A sweep is a for-loop over config overrides.

An experiment's config file can also say how to vary it: besides `get_config()`, it
defines `sweep()`, which yields one dict of overrides per run, mapping a key path to a new
value. That is Kauldron's convention; its XManager launcher, given `--xp.sweep`, reads
`sweep()` and starts one work unit per dict. This lesson runs the same loop in one process:
apply the overrides, resolve, train. Not a character of the model, the loss or the loop
changes.
"""

import importlib

import matplotlib.pyplot as plt
from kauldron import konfig, kontext

from configs import regression as regression_config
from harness import Lesson, section


@section(7, "sweep", "A sweep is a for-loop over config overrides", part="training", trains=True,
         shows="a config file's get_config() and sweep(): each override checked on the resolved Trainer, then trained",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/xm/README.md")
def sweep_over_overrides(lesson: Lesson, workdir):
    lesson.md("""
    ## The experiment and its sweep, in one file

    `configs/regression.py` (below) returns the experiment from `get_config()`, and
    `sweep()` yields the overrides: a baseline, a wider model, a learning rate, and a
    different optimizer. A value can be a number or a whole config (`optax.sgd(0.05)`,
    recorded by `konfig.imports()`, not called).
    """)
    base = regression_config.get_config()
    print("model:", base.model)
    print("optimizer:", base.optimizer)
    print("num_train_steps:", base.num_train_steps)
    for overrides in regression_config.sweep():
        print(overrides)
    with lesson.checks():
        sgd = list(regression_config.sweep())[-1]["optimizer"]
        lesson.check(isinstance(sgd, konfig.ConfigDict) and sgd.__qualname__ == "optax:sgd" and sgd[0] == 0.05,
                     "the last override's optimizer is a config of the call optax.sgd(0.05), not an optimizer")

    lesson.md("""
    ## The sweep is a for-loop

    For each dict: a fresh config, the overrides set by key path with
    `kontext.set_by_path`, `konfig.resolve` into a frozen Trainer, `train()`, in a
    workdir of its own. This page reads what `train()` returns, so its runs write no
    logs: `cfg.writer = None` makes the Trainer's writer a `NoopWriter`, which also
    skips the `config.json` and `element_spec.json` a later evaluation reads back (a
    real sweep keeps the default writer, to compare its runs in TensorBoard and evaluate
    them later). A path must match how the config was written: `optimizer.learning_rate`
    works because `get_config` passes `learning_rate=` by keyword; on `optax.sgd(0.05)`,
    written positionally, it adds a second learning rate, and `konfig.resolve` raises
    `TypeError`: there the path is `optimizer[0]`. Every run is cut to 50 steps, and the
    loop runs steps 0 to 50: 51 updates. `train()` returns the final state and, as
    `aux`, what its last step returned. Step 50 is a multiple of `log_metrics_every`
    (10), a step that logs, so `aux` holds its loss: on its one batch of 32 rows, with
    the parameters before its update. One batch is a rough ranking; here it only shows
    that every override changed the run. The checks below make sure every override
    reached the resolved Trainer, not just the config: the parameter shapes and the
    optimizer's updates are the ones the overrides describe.
    """)

    final_loss, trainers = {}, {}
    for run, overrides in enumerate(regression_config.sweep()):
        cfg = regression_config.get_config()
        cfg.workdir = str(workdir / f"run-{run}")
        cfg.num_train_steps = 50  # short runs, the same for every override
        cfg.writer = None  # no logs: the final loss comes from what train() returns
        for path, value in overrides.items():
            kontext.set_by_path(cfg, path, value)
        trainer = konfig.resolve(cfg)
        state, aux = trainer.train()
        # The run's name: its overrides, a config value shown as the call it records.
        name = ", ".join(f"{path}={value!r}" for path, value in overrides.items()) or "(baseline)"
        name = name.replace("<ConfigDict[", "").replace("]>", "")
        trainers[name], final_loss[name] = trainer, float(aux.loss_states["logcosh"].compute())  # step 50's
        print(f"{name:28} state.step {int(state.step)}  final logcosh {final_loss[name]:.4f}")
    fig, ax = plt.subplots(figsize=(7.5, 3), layout="constrained")
    ax.barh(list(final_loss), list(final_loss.values()))
    ax.set(title=f"One config, {len(final_loss)} overrides, {cfg.num_train_steps + 1} updates each",
           xlabel="final training logcosh")
    ax.invert_yaxis()  # the first run on top
    plt.show()
    with lesson.checks():
        for overrides, (name, trainer) in zip(regression_config.sweep(), trainers.items(), strict=True):
            check_the_override_took(lesson, trainer, overrides, name)
        lesson.check_equal(int(state.step), 51, "state.step after a run with num_train_steps=50")
        check_the_last_step_loss(lesson, trainer, state, overrides, final_loss[name], workdir / "one-step-short")
        lesson.check_equal(trainer.log_metrics_every, 10, "log_metrics_every in configs/regression.py")
        loop, context = library_text("kauldron", "train/train_loop.py"), library_text("kauldron", "train/context.py")
        lesson.check("log_metrics = i % trainer.log_metrics_every == 0" in loop and "return_losses=log_any," in loop
                     and "loss_states=self.loss_states if return_losses else None" in context,
                     "a step's losses reach aux only on a step that logs", internal="reads Kauldron's source")
        lesson.check(all(type(trainer.writer).__name__ == "NoopWriter" for trainer in trainers.values())
                     and not any(workdir.glob("run-*/**/events.out.tfevents.*"))
                     and not any(workdir.glob("run-*/*.json")),
                     "with cfg.writer = None, every run's writer is a NoopWriter, and no run wrote an event file,"
                     " config.json or element_spec.json")
        lesson.check(len(set(final_loss.values())) == len(final_loss), "every override changed the final loss")
        import dataclasses

        with konfig.imports():
            import optax as optax_cfg

        lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer, "num_train_steps", 10),
                            "assigning a field of a resolved Trainer")
        positional = regression_config.get_config()
        positional.optimizer = optax_cfg.sgd(0.05)
        kontext.set_by_path(positional, "optimizer.learning_rate", 0.1)
        error = lesson.check_raises(TypeError, lambda: konfig.resolve(positional.optimizer),
                                    "resolving optax.sgd(0.05) after set_by_path('optimizer.learning_rate', 0.1)")
        lesson.check("multiple values for argument 'learning_rate'" in str(error),
                     "the error: sgd() got multiple values for argument 'learning_rate'")
        kontext.set_by_path(positional, "optimizer", optax_cfg.sgd(0.05))
        kontext.set_by_path(positional, "optimizer[0]", 0.1)
        import optax

        lesson.check(updates_alike(konfig.resolve(positional.optimizer), optax.sgd(0.1)),
                     "after set_by_path('optimizer[0]', 0.1) on optax.sgd(0.05), the resolved optimizer updates like"
                     " optax.sgd(0.1)")
        lesson.fact("final_logcosh", final_loss)

    lesson.md("""
    ## Kauldron's launcher runs the same loop as jobs, on Google's infrastructure

    `kauldron.kxm`, the XManager launcher, with its default `--xp` config (`kd_base.py`),
    reads `sweep()` when given `--xp.sweep=True` (`--xp.sweep=a,b` combines `sweep_a()`
    and `sweep_b()` as a product) and, by default, starts one work unit per dict: its
    training job, and one job per standalone evaluator or job group (section 10), each a
    `kauldron/main.py` given every override as a flag; without `--xp.sweep` it starts
    one work unit, with no overrides. It needs Google's internal tools: from the PyPI
    package it does not even import. Section 10 runs one of these jobs from the command
    line, with the flags the launcher would pass.
    """)
    try:
        importlib.import_module("kauldron.kxm")
    except ImportError as e:
        print(f"import kauldron.kxm -> {type(e).__name__}: {str(e).split(' (')[0]}")  # without the file it names
    with lesson.checks():
        error = lesson.check_raises(ImportError, lambda: importlib.import_module("kauldron.kxm"),
                                    "kauldron.kxm does not import from the PyPI package (it needs etils.g3_utils):"
                                    " importing it")
        lesson.check("g3_utils" in str(error), "what it misses, as the error names it: etils' g3_utils")
        launcher = library_text("kauldron", "xm/_src/kauldron_utils.py")
        lesson.check("If multiple sweep names are given run all their combinations (product)." in launcher
                     and 'return {f"cfg.{k}": json_utils.arg_to_json(v)' in launcher
                     and 'script_path="//third_party/py/kauldron/main.py"' in launcher,
                     "kxm's KauldronSweep runs the product of the sweeps named, and its jobs run kauldron/main.py"
                     " with each override as a cfg.<path> flag", internal="reads Kauldron's source")
        experiment = library_text("kauldron", "xm/_src/experiment.py")
        no_sweep = library_text("kauldron", "xm/_src/sweep_utils.py")
        lesson.check("if self.sweep in (None, False):\n      new_sweep = sweep_utils.NoSweep()" in experiment
                     and "class NoSweep(SweepInfo):" in no_sweep
                     and "def __iter__(self) -> Iterable[SweepItem]:\n    yield SweepItem({})" in no_sweep,
                     "kxm without --xp.sweep: the Experiment swaps in NoSweep(), which yields one SweepItem({}):"
                     " one work unit, no overrides", internal="reads Kauldron's source")
        orchestrator = library_text("kauldron", "xm/_src/orchestrator.py")
        lesson.check("default_factory=orchestrator_lib.SweepOrchestrator" in experiment
                     and "for i, sweep_item in enumerate(sweep_info):\n      xp.add(" in orchestrator
                     and "xm_jobs = xm.JobGroup(**{\n        k: job.make_xm_job(\n"
                         "            sweep_args=sweep_item.job_kwargs," in orchestrator
                     and 'jobs["train"] = self.trainer_job\n    jobs.update(self.eval_jobs)' in launcher
                     and "isinstance(run, run_strategies.Standalone)" in launcher
                     and "job_group = run.job_group or eval_name" in launcher,
                     "kxm's default SweepOrchestrator adds one work unit per sweep item, holding every job of the"
                     " config (training, and one per standalone evaluator or job group), each given the item's"
                     " overrides",
                     internal="reads Kauldron's source")
        sweeps = library_text("kauldron", "xm/_src/sweep_cfg_utils.py")
        lesson.check("case True:\n        return [\"\"]" in sweeps
                     and 'fn_name = "sweep_" + fn_name if fn_name else "sweep"' in sweeps
                     and "for sweep_kwargs in itertools.product(*sweeps):" in sweeps,
                     "kxm's sweep names: sweep() for --xp.sweep=True, sweep_<name>() for each name given,"
                     " combined as a product", internal="reads Kauldron's source")
        default_xp = library_text("kauldron", "xm/configs/kd_base.py")
        lesson.check('"xp",\n      "third_party/py/kauldron/xm/configs/kd_base.py",' in library_text("kauldron", "xm/launch.py")
                     and "sweep_info=kxm.KauldronSweep()," in default_xp
                     and "new_sweep = dataclasses.replace(self.sweep_info, _sweep_value=self.sweep)" in experiment,
                     "kxm's default --xp config, kd_base.py, sets sweep_info=kxm.KauldronSweep(), which the Experiment"
                     " gives the --xp.sweep value: so --xp.sweep=True alone reads sweep()", internal="reads Kauldron's source")
        best = min(final_loss, key=final_loss.get)
        lesson.summary = (f"{len(final_loss)} runs; lowest final logcosh {final_loss[best]:.4f} ({best}); kxm does not"
                          " import from PyPI")


def check_the_override_took(lesson: Lesson, trainer, overrides: dict, label: str) -> None:
    """The override must have reached the resolved Trainer, not just the config: the enc
    kernel's shape, and three updates of the optimizer against those of the one
    described."""
    import optax

    from sections.parts.regression import FEATURES

    hidden = overrides.get("model.hidden", 32)  # the config's default
    params = trainer.init_state().params
    lesson.check_equal(params["enc"]["kernel"].shape, (FEATURES, hidden), f"{label}: the enc kernel's shape")
    expected = (konfig.resolve(overrides["optimizer"]) if "optimizer" in overrides
                else optax.adam(overrides.get("optimizer.learning_rate", 1e-2)))  # the config's default
    lesson.check(updates_alike(trainer.optimizer, expected),
                 f"{label}: the resolved optimizer updates like the one the overrides describe")


def library_text(package: str, path: str) -> str:
    """The text of a file of an installed package, read without importing it."""
    import importlib.util
    import pathlib

    return (pathlib.Path(importlib.util.find_spec(package).origin).parent / path).read_text()


def updates_alike(transform, other) -> bool:
    """Whether two optax transforms make the same updates from the same gradients."""
    import numpy as np

    return all(np.allclose(a, b) for a, b in zip(updates_from_fixed_gradients(transform),
                                                  updates_from_fixed_gradients(other), strict=True))


def updates_from_fixed_gradients(transform) -> list:
    """Three updates of a small vector from three fixed gradients: different gradients, so
    that an Adam of other betas would differ too (under one constant gradient, every
    Adam's updates are about -lr * sign(g)); enough to tell adam(0.01), adam(0.1) and
    sgd(0.05) apart."""
    import numpy as np

    params = np.ones(4, np.float32)  # not zeros: a weight decay would then do nothing
    state, found = transform.init(params), []
    for grads in np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32):
        updates, state = transform.update(grads, state, params)
        found.append(np.asarray(updates))
    return found


def check_the_last_step_loss(lesson: Lesson, trainer, state, overrides: dict, logged: float, workdir) -> None:
    """The loss the last run's step 50 returned, by hand: logcosh on the pipeline's 51st
    batch with the parameters of the same run stopped after step 49 (one update short),
    not with its final ones."""
    import itertools

    import numpy as np

    from sections.parts import accelerator

    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps, cfg.writer = str(workdir), 49, None
    for path, value in overrides.items():
        kontext.set_by_path(cfg, path, value)
    one_short, _ = konfig.resolve(cfg).train()
    batch = next(itertools.islice(iter(trainer.train_ds), 50, None))  # an InMemoryPipeline repeats its order

    def logcosh(params) -> float:
        preds = np.asarray(trainer.model.apply({"params": params}, batch["x"])["y"])
        return float(np.mean(np.log(np.cosh(preds - batch["y"]))))

    lesson.check_equal(len(batch["x"]), 32, "the rows of batch 50")
    rel = accelerator.elementwise_rel()  # log and cosh: a TPU agrees with numpy to about four digits
    lesson.check_close(logged, logcosh(one_short.params),
                       "the last run's final logcosh = numpy's on batch 50 with the parameters before step 50's update",
                       rel=rel)
    after = abs(logged - logcosh(state.params)) / logged
    lesson.check(after > 10 * rel, f"it is not the loss with the final parameters, after that update ({after:.1g} apart)")
