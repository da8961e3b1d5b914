"""What several lessons share: one small synthetic regression problem, and its parts.

16 features -> 1 target, y = x @ w + noise with fixed seeds (the original guide's data):
512 training rows, 128 evaluation rows. The model, loss and metric are the ones the lessons
teach. This is a real importable module, not `__main__`, so a config can name anything
here with `konfig.imports()` and a separate process can rebuild it from the config.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
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
    class State(kd.metrics.AutoState):
        # sum_field: merged by adding. Numerator and denominator are kept apart, so the
        # merged ratio is the pooled one, whatever the batch sizes were.
        n_hit: kt.Float[""] = kd.metrics.sum_field()
        n_total: kt.Float[""] = kd.metrics.sum_field()

        def compute(self) -> kt.Float[""]:
            # A jax scalar, not a numpy one: Kauldron 1.4.2-1.4.4's checkpointer writes the
            # metrics it logs as JSON and rejects a numpy scalar such as np.float32.
            return jnp.asarray(self.n_hit) / jnp.maximum(jnp.asarray(self.n_total), 1.0)

    @kt.typechecked
    def get_state(self, preds: kt.Float["*a"], targets: kt.Float["*a"]) -> WithinTol.State:
        hit = (jnp.abs(preds - targets) < self.tol).astype(jnp.float32)
        return self.State(n_hit=hit.sum(), n_total=jnp.asarray(hit.size, jnp.float32))


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


def event_files(workdir: str | pathlib.Path, collection: str) -> list[pathlib.Path]:
    """The TensorBoard event files Kauldron wrote for a collection (`train`, or an
    evaluator's name), oldest first: each `train()` call starts a new one."""
    return sorted(pathlib.Path(workdir, collection).glob("events.out.tfevents.*"), key=_written_order)


def _written_order(path: pathlib.Path) -> tuple[int, int]:
    """An event file's name, `events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2`, as the
    order it was opened in: by time, then by the writer's counter (two train() calls can
    open theirs in the same second, and as text "12" sorts before "3")."""
    parts = path.name.split(".")
    return int(parts[3]), int(parts[-2])


def read_scalars(*paths: pathlib.Path) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} from event files; a step logged twice keeps its last value."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    scalars: dict[int, dict[str, float]] = {}
    for path in paths:
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.HasField("tensor"):
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.ndim == 0 and array.dtype.kind in "fiu":
                        scalars.setdefault(int(event.step), {})[value.tag] = float(array)
    return scalars


def read_tensors(workdir: str | pathlib.Path, collection: str) -> dict[str, dict[int, np.ndarray]]:
    """{tag: {step: value}} of everything Kauldron wrote for a collection, summaries
    included (a histogram is a [buckets, 3] array of left edge, right edge, count; an image
    is [width, height, PNG bytes]), read with TensorBoard's EventAccumulator."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    # TENSORS: 0 keeps every event: by default the accumulator samples 10 per tag.
    events = event_accumulator.EventAccumulator(str(pathlib.Path(workdir, collection)),
                                                size_guidance={event_accumulator.TENSORS: 0})
    events.Reload()
    return {tag: {e.step: tensor_util.make_ndarray(e.tensor_proto) for e in events.Tensors(tag)}
            for tag in events.Tags()["tensors"]}
