"""The parts of the regression experiment most lessons share (configs/regression.py).

16 features -> 1 target, y = x @ w + noise with fixed seeds (the original guide's data):
512 training rows, 128 evaluation rows. The model, loss and metric are the ones the lessons
teach. This is a real importable module, not `__main__`, so a config can name anything
here with `konfig.imports()` and a separate process can rebuild it from the config.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import flax
import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import optax
from kauldron import kd, kontext
from kauldron import ktyping as kt

FEATURES = 16
ROWS = {"train": 512, "eval": 128}
BATCH_SIZE = 32
_TRUE_WEIGHTS = np.random.default_rng(7).normal(size=(FEATURES, 1)).astype("float32")


def make_data(split: str) -> dict[str, np.ndarray]:
    """The rows of one split: {"x": f32[n 16], "y": f32[n 1]}, the same on every call."""
    rng = np.random.default_rng({"train": 0, "eval": 1}[split])
    x = rng.normal(size=(ROWS[split], FEATURES)).astype("float32")
    y = (x @ _TRUE_WEIGHTS + 0.1 * rng.normal(size=(ROWS[split], 1))).astype("float32")
    return {"x": x, "y": y}


def make_loader(split: str) -> Callable[[], dict[str, np.ndarray]]:
    """A loader for `kd.data.InMemoryPipeline`: any callable returning an array tree."""
    return lambda: make_data(split)


class MLP(nn.Module):
    """Dense `enc` -> relu -> Dense `out`. The field `inputs` names the argument of
    `__call__`; its value is the key path the Trainer feeds it from (`"batch.x"`). The
    shapes in the signature are checked on every call (`@kt.typechecked`)."""

    inputs: kontext.Key = kontext.REQUIRED
    hidden: int = 32

    @kt.typechecked
    @nn.compact
    def __call__(self, inputs: kt.Float["*b f"]) -> dict[str, kt.Float["*b 1"]]:
        h = nn.relu(nn.Dense(self.hidden, name="enc")(inputs))
        return {"y": nn.Dense(1, name="out")(h)}


@dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
class LogCosh(kd.losses.Loss):
    """log(cosh(preds - targets)): quadratic near zero, linear in the tails.

    `kd.losses.Loss` does the rest: masking, averaging into a mergeable state, `weight`.
    """

    preds: kontext.Key = kontext.REQUIRED
    targets: kontext.Key = kontext.REQUIRED

    @kt.typechecked
    def get_values(self, preds: kt.Float["*a"], targets: kt.Float["*a"]) -> kt.Float["*a"]:
        return jnp.log(jnp.cosh(preds - targets))


@dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
class WithinTol(kd.metrics.Metric):
    """The fraction of predictions within `tol` of their target, over every batch seen."""

    preds: kontext.Key = kontext.REQUIRED
    targets: kontext.Key = kontext.REQUIRED
    tol: float = 0.25

    @flax.struct.dataclass
    class State(kd.metrics.AverageState):
        """Kauldron's state for averages: `total` sums the values (here the hits) and
        `count` the values summed (the predictions). Merging adds each, so the merged
        ratio is the pooled one, whatever the batch sizes were."""

    @kt.typechecked
    def get_state(self, preds: kt.Float["*a"], targets: kt.Float["*a"]) -> WithinTol.State:
        hit = (jnp.abs(preds - targets) < self.tol).astype(jnp.float32)
        return self.State.from_values(values=hit)


def adam_recording_lr(learning_rate: float | optax.Schedule) -> optax.GradientTransformation:
    """`optax.adam` whose state records the learning rate of its latest update
    (`state.hyperparams["learning_rate"]`), through `optax.inject_hyperparams`. A function,
    so that a config can call it: konfig records one call, not a call of a call's result."""
    return optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate)


@dataclasses.dataclass(frozen=True)
class RegressionRows:
    """The rows of one split as a PyGrain random-access data source (`len` and `[i]`).

    For `kd.data.py.DataSource`, whose iterator position goes into the checkpoint. Frozen,
    so the pipeline holding it stays hashable like every Kauldron config object.
    """

    split: str

    @functools.cached_property
    def _data(self) -> dict[str, np.ndarray]:
        return make_data(self.split)

    def __len__(self) -> int:
        return ROWS[self.split]

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {key: value[index] for key, value in self._data.items()}
