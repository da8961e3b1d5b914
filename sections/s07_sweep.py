"""A sweep is a for-loop over config overrides.

An experiment's config file can also say how to vary it: besides `get_config()`, it
defines `sweep()`, which yields one dict of overrides per run, mapping a key path to a new
value. That is Kauldron's convention; its XManager launcher reads `sweep()` and starts one
job per dict. This lesson runs the same loop in one process: apply the overrides, resolve,
train. Not a character of the model, the loss or the loop changes.
"""

import numpy as np
import optax
from kauldron import konfig, kontext

from configs import regression
from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import FEATURES

DEFAULT_HIDDEN, DEFAULT_LR = 32, 1e-2


@section(7, "sweep", "A sweep is a for-loop over config overrides", part="training", trains=True,
         shows="a config file's get_config() and sweep(): each override checked on the resolved Trainer, then trained",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/xm/README.md")
def sweep_over_overrides(lesson: Lesson) -> str:
    lesson.md("""
    ## The experiment and its sweep, in one file

    `configs/regression.py` (below) returns the experiment from `get_config()`, and
    `sweep()` yields the overrides: a baseline, a wider model, a learning rate, and a
    different optimizer. A value can be a number or a whole config (`optax.sgd(0.05)`,
    recorded by `konfig.imports()`).
    """)
    base = regression.get_config()
    print("model:", base.model, "\noptimizer:", base.optimizer, "\nnum_train_steps:", base.num_train_steps)
    for overrides in regression.sweep():
        print(overrides)

    lesson.md("""
    ## The sweep is a for-loop

    For each dict: a fresh config, the overrides set by key path with
    `kontext.set_by_path`, `konfig.resolve` into a frozen Trainer, `train()`. Each run
    makes `num_train_steps + 1` = 201 updates. The lesson checks that every override
    reached the resolved Trainer, not just the config: the parameter shapes and the
    optimizer's updates are the ones the overrides describe.
    """)
    final_loss = {}
    for run, overrides in enumerate(regression.sweep()):
        cfg = regression.get_config()
        cfg.workdir = str(lesson.workdir / f"run-{run}")
        for path, value in overrides.items():
            kontext.set_by_path(cfg, path, value)
        trainer = konfig.resolve(cfg)
        check_the_override_took(lesson, trainer, overrides)
        state, aux = trainer.train()
        final_loss[describe(overrides)] = float(aux.loss_states["logcosh"].compute())  # the last step's
        print(f"{describe(overrides):36} step {int(state.step)}  final logcosh {final_loss[describe(overrides)]:.4f}")
    lesson.check_equal(int(state.step), base.num_train_steps + 1, "state.step after a run with num_train_steps=200")
    lesson.check(len(set(final_loss.values())) == len(final_loss), "every override changed the final loss")
    lesson.fact("final_logcosh", final_loss)
    lesson.plot(f"Section 7: one config, {len(final_loss)} overrides, {base.num_train_steps + 1} updates each",
                Panel("final training loss per run", "final logcosh", "", bars=final_loss))

    lesson.md("""
    ## Kauldron's launcher runs the same loop as jobs, on Google's infrastructure

    `kauldron.kxm`, the XManager launcher, reads `sweep()` (and combines several
    `sweep_<name>()` functions as a product with `--xp.sweep=a,b`) and starts one
    `python -m kauldron.main` job per dict, passing each override as a flag. It needs
    Google's internal tools: from the PyPI package it does not even import. Section 10
    runs one of these jobs from the command line, with the flags the launcher would pass.
    """)
    why = launcher_import_error()
    print("from kauldron import kxm ->", why)
    lesson.check(why is not None and "g3_utils" in why,
                 "kauldron.kxm does not import from the PyPI package (it needs etils.g3_utils)")
    best = min(final_loss, key=final_loss.get)
    return f"{len(final_loss)} runs; best {final_loss[best]:.4f} ({best}); kxm does not import from PyPI"


def describe(overrides: dict) -> str:
    """`path=value, ...`, a config value shown as the call it records."""
    shown = {path: repr(value).removeprefix("<ConfigDict[").removesuffix("]>") if isinstance(value, konfig.ConfigDict)
             else value for path, value in overrides.items()}
    return ", ".join(f"{path}={value}" for path, value in shown.items()) or "(baseline)"


def check_the_override_took(lesson: Lesson, trainer, overrides: dict) -> None:
    """The override must have reached the resolved Trainer, not just the config."""
    params = trainer.init_state().params
    hidden = overrides.get("model.hidden", DEFAULT_HIDDEN)
    label = describe(overrides)
    lesson.check_equal(params["enc"]["kernel"].shape, (FEATURES, hidden), f"{label}: the enc kernel's shape")
    expected = (konfig.resolve(overrides["optimizer"]) if "optimizer" in overrides
                else optax.adam(overrides.get("optimizer.learning_rate", DEFAULT_LR)))
    same = all(np.allclose(a, b) for a, b in zip(updates_from_fixed_gradients(trainer.optimizer),
                                                 updates_from_fixed_gradients(expected)))
    lesson.check(same, f"{label}: the resolved optimizer updates like the one the overrides describe")


def updates_from_fixed_gradients(transform: optax.GradientTransformation) -> list[np.ndarray]:
    """Two updates of a small vector from a fixed gradient: enough to tell adam(0.01),
    adam(0.1) and sgd(0.05) apart."""
    params = np.zeros(4, np.float32)
    grads = np.random.default_rng(0).normal(size=4).astype(np.float32)
    state, found = transform.init(params), []
    for _ in range(2):
        updates, state = transform.update(grads, state, params)
        found.append(np.asarray(updates))
    return found


def launcher_import_error() -> str | None:
    """Why Kauldron's XManager launcher cannot be imported here, or None if it can."""
    try:
        from kauldron import kxm  # noqa: F401
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None
