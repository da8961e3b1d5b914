"""A sweep is a for-loop over config overrides.

The experiment lives in a config file, `configs/regression.py`: `get_config()` returns
the Trainer as a ConfigDict, and `sweep()` yields overrides, one dict per run, mapping a
key path to a new value. That is Kauldron's convention: its XManager launcher
(`kauldron.kxm`, with `--xp.sweep`) reads `sweep()`, combines several `sweep_<name>()`
functions as a product, and starts one `python -m kauldron.main` job per dict, passing
each value as a JSON flag. That launcher needs Google's XManager setup and does not even
import from the PyPI package (checked below), so this lesson runs the same loop in one
process: apply the overrides, resolve the config into a frozen Trainer, train. Not a
character of the model, the loss or the loop changes. Section 10 runs one of these runs
from the command line, with the flags the launcher would pass.
"""

import jax
import numpy as np
import optax
from kauldron import konfig, kontext

from configs import regression
from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import FEATURES

DEFAULT_HIDDEN, DEFAULT_LR = 32, 1e-2


def updates_from_fixed_gradients(transform: optax.GradientTransformation, params) -> list[np.ndarray]:
    """Two updates from a fixed gradient: enough to tell adam(0.01), adam(0.1) and sgd apart."""
    grads = jax.tree.map(lambda p: np.random.default_rng(0).normal(size=p.shape).astype(p.dtype), params)
    state = transform.init(params)
    out = []
    for _ in range(2):
        updates, state = transform.update(grads, state, params)
        out += [np.asarray(u) for u in jax.tree.leaves(updates)]
    return out


def expected_optimizer(overrides: dict) -> optax.GradientTransformation:
    """The optimizer each run should end up with, built directly with optax."""
    if "optimizer" in overrides:
        return konfig.resolve(overrides["optimizer"])
    return optax.adam(overrides.get("optimizer.learning_rate", DEFAULT_LR))


def describe(overrides: dict) -> str:
    """`path=value, ...`, a config value shown as the call it records."""
    shown = {path: repr(value).removeprefix("<ConfigDict[").removesuffix("]>") if isinstance(value, konfig.ConfigDict)
             else value for path, value in overrides.items()}
    return ", ".join(f"{path}={value}" for path, value in shown.items()) or "(baseline)"


def check_the_override_took(lesson: Lesson, trainer, overrides: dict, label: str) -> None:
    """The override must have reached the resolved Trainer, not just the config."""
    params = trainer.init_state().params
    hidden = overrides.get("model.hidden", DEFAULT_HIDDEN)
    lesson.check_equal(params["enc"]["kernel"].shape, (FEATURES, hidden), f"{label}: the enc kernel's shape")
    same = all(np.allclose(a, b) for a, b in zip(updates_from_fixed_gradients(trainer.optimizer, params),
                                                 updates_from_fixed_gradients(expected_optimizer(overrides), params)))
    lesson.check(same, f"{label}: the resolved optimizer updates like the one the overrides describe")


def launcher_importable() -> str | None:
    """Why Kauldron's XManager launcher cannot be imported here, or None if it can."""
    try:
        from kauldron import kxm  # noqa: F401
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    return None


@section(7, "sweep", "A sweep is a for-loop over config overrides", trains=True,
         shows="a config file's get_config() and sweep(): five runs, each override checked on the resolved Trainer")
def sweep_over_overrides(lesson: Lesson) -> str:
    base = regression.get_config()
    print(f"  cfg.model = {base.model}\n  cfg.optimizer = {base.optimizer}\n  cfg.num_train_steps = {base.num_train_steps}")
    print(f"\n  {'overrides':36} {'final logcosh':>13}")
    results = {}
    for run, overrides in enumerate(regression.sweep()):
        cfg = regression.get_config()
        cfg.workdir = str(lesson.workdir / f"run-{run}")
        for path, value in overrides.items():
            kontext.set_by_path(cfg, path, value)
        trainer = konfig.resolve(cfg)  # ConfigDict -> a real, frozen Trainer
        label = describe(overrides)
        check_the_override_took(lesson, trainer, overrides, label)
        _, aux = trainer.train()
        results[label] = float(aux.loss_states["logcosh"].compute())  # the last step's loss
        print(f"  {label:36} {results[label]:>13.4f}")

    lesson.check_equal(len(results), 5, "the number of runs sweep() yields")
    lesson.check(len(set(results.values())) == len(results), "every override changed the final loss")
    why = launcher_importable()
    lesson.check(why is not None, "Kauldron's XManager launcher (kauldron.kxm) does not import from the PyPI package")
    print(f"\n  from kauldron import kxm -> {why}")
    lesson.fact("final_logcosh", results)
    lesson.plot(f"Section 7: one config, five overrides, {base.num_train_steps} steps each",
                Panel("final training loss per run", "final logcosh", "", bars=results))
    best, worst = min(results, key=results.get), max(results, key=results.get)
    print(f"  best: {best} ({results[best]:.4f}); worst: {worst} ({results[worst]:.4f})")
    return f"best {results[best]:.4f} ({best}), worst {results[worst]:.4f} ({worst})"
