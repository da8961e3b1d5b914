"""A real Trainer on synthetic data, and a look inside the model.

`kd.train.Trainer` is a frozen dataclass that names every part of an experiment: data,
model, losses, metrics, optimizer. Before training anything, `kd.inspect` describes the
data; then the Trainer's own `trainstep` runs a loop by hand (what `train()` does, minus
logging), returning the loss and metric states only when asked. The step donates the
training state to XLA (its buffers become the new state's, so the state passed in is
gone afterwards), but not the batch.
One metric watches an *inner* layer: `kd.metrics.Norm` reads
`interms.enc.__call__[0]`, the output of the Dense layer named `enc`, captured by Flax
without any change to the model. The model's shape annotations are enforced.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from kauldron import kd
from kauldron import ktyping as kt

from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import BATCH_SIZE, MLP, LogCosh, WithinTol, make_loader

STEPS = 300
PRINT_AT = (1, 25, 50, 100, 200, 300)


@jax.jit
def compute_all(states: dict) -> dict:
    """Each state's value, in one compiled call. Called eagerly instead, Norm's state
    compiles a fresh `lax.cond` every time."""
    return {name: state.compute() for name, state in states.items()}


def enc_norm_by_hand(params, x) -> float:
    """The mean L2 norm of the `enc` layer's output rows, computed by hand."""
    _, captured = MLP(inputs="batch.x").apply(
        {"params": params}, x, capture_intermediates=True, mutable=["intermediates"])
    enc_out = np.asarray(captured["intermediates"]["enc"]["__call__"][0])
    return float(np.mean(np.linalg.norm(enc_out, axis=-1)))


def check_batch_stats(lesson: Lesson, batch: dict) -> None:
    stats = kd.inspect.get_batch_stats(batch)
    print("\n  kd.inspect.get_batch_stats(first batch):")
    print("    " + stats.to_string(index=False).replace("\n", "\n    "))
    for row in stats.to_dict("records"):
        values = np.asarray(batch[row["Name"].removeprefix("batch.")])
        lesson.check_close(row["Mean"], float(values.mean()), f"get_batch_stats' mean of {row['Name']}", rel=1e-5)
        lesson.check_equal((row["Min"], row["Max"]), (float(values.min()), float(values.max())),
                           f"get_batch_stats' min and max of {row['Name']}")


def print_row(step: int, row: dict) -> None:
    if step == PRINT_AT[0]:
        print(f"\n  {'step':>6} {'logcosh':>9} {'within .25':>11} {'enc_norm':>9}")
    print(f"  {step:>6} {row['logcosh']:>9.4f} {row['within_tol']:>11.4f} {row['enc_norm']:>9.4f}")


def plot_curves(lesson: Lesson, rows: dict[int, dict]) -> None:
    steps = list(rows)
    lesson.plot("Section 6: the Trainer's train step, by hand",
                Panel("training loss", "step", "logcosh (log scale)", log_y=True,
                      lines={"logcosh": (steps, [rows[k]["logcosh"] for k in steps])}),
                Panel("an inner layer, read by key path", "step", "mean row norm",
                      lines={"enc_norm ('interms.enc.__call__[0]')": (steps, [rows[k]["enc_norm"] for k in steps])}))


def train_by_hand(trainer, state):
    """The Trainer's own train step, STEPS times: the final state, the values of every step,
    and what the last step was given (its state, a copy of its parameters, its batch)."""
    batches, rows = iter(trainer.train_ds), {}
    for step in range(1, STEPS + 1):
        batch = next(batches)
        if step == STEPS:
            # The step below donates `state`: keep a copy of its parameters. np.array copies;
            # on a CPU np.asarray would share the buffer, and jax does not donate a shared one.
            old_state, params_before = state, jax.tree.map(np.array, state.params)
            batch = jax.device_put(batch)  # on the device, to see that it is not donated
        state, aux = trainer.trainstep.step(state, batch, return_losses=True, return_metrics=True)
        rows[step] = {k: float(v) for k, v in compute_all({**aux.loss_states, **aux.metric_states}).items()}
        if step in PRINT_AT:
            print_row(step, rows[step])
    return state, rows, old_state, params_before, batch


@section(6, "trainer", "A real Trainer on synthetic data, and a look inside the model", trains=True,
         shows="a kd.train.Trainer built by hand: kd.inspect, its train step in a loop, an inner layer's norm")
def a_real_trainer(lesson: Lesson) -> str:
    train_ds = kd.data.InMemoryPipeline(
        loader=make_loader("train"), batch_size=BATCH_SIZE, shuffle=True, num_epochs=None, seed=0)
    spec = kd.inspect.json_spec_like(train_ds.element_spec)
    print(f"  element_spec: {spec}")
    lesson.check_equal(spec, {"x": "f32[32 16]", "y": "f32[32 1]"}, "the pipeline's element spec")
    check_batch_stats(lesson, next(iter(train_ds)))

    trainer = kd.train.Trainer(
        seed=0,
        workdir=str(lesson.workdir),
        train_ds=train_ds,
        model=MLP(inputs="batch.x"),
        num_train_steps=STEPS,
        train_losses={"logcosh": LogCosh(preds="preds.y", targets="batch.y")},
        train_metrics={
            "within_tol": WithinTol(preds="preds.y", targets="batch.y"),
            "enc_norm": kd.metrics.Norm(tensor="interms.enc.__call__[0]"),  # an inner layer
        },
        optimizer=optax.adam(learning_rate=1e-2),
    )
    state = trainer.trainstep.init(trainer.train_ds.element_spec)
    shapes = jax.tree.map(lambda x: tuple(x.shape), state.params)
    print(f"\n  params: {shapes}")
    lesson.check_equal(shapes, {"enc": {"bias": (32,), "kernel": (16, 32)},
                                "out": {"bias": (1,), "kernel": (32, 1)}}, "the parameter shapes")
    for bad in (jnp.zeros((BATCH_SIZE, 16), jnp.int32), jnp.zeros((), jnp.float32)):
        lesson.check_raises(kt.KTypeCheckError, lambda bad=bad: trainer.model.apply({"params": state.params}, bad),
                            f"the MLP applied to an {bad.dtype}{list(bad.shape)} input (annotated Float['*b f'])")
    print("  The MLP's annotations are enforced: an int32 input and a 0-d input are refused.")

    state, rows, old_state, params_before, batch = train_by_hand(trainer, state)
    lesson.check(all(p.is_deleted() for p in jax.tree.leaves(old_state.params)),
                 "the step donated the state it was given: its parameters' buffers are gone")
    lesson.check(not batch["x"].is_deleted(), "the step did not donate the batch: it is still there")
    first, last = rows[1]["logcosh"], rows[STEPS]["logcosh"]
    lesson.check(last * 10 <= first, "the training loss fell at least 10x over 300 steps")
    by_hand = enc_norm_by_hand(params_before, batch["x"])
    lesson.check_close(rows[STEPS]["enc_norm"], by_hand,
                       "enc_norm at step 300 = the mean row norm of enc's output computed by hand", rel=1e-5)
    lesson.check_equal(int(state.step), STEPS, "state.step after 300 steps by hand")
    lesson.fact("loss_curve", {str(k): rows[k]["logcosh"] for k in PRINT_AT})
    lesson.fact("enc_norm_curve", {str(k): rows[k]["enc_norm"] for k in PRINT_AT})
    plot_curves(lesson, rows)
    print(f"\n  The loss fell {first / last:.0f}x. enc_norm was never returned by MLP: the key"
          f"\n  'interms.enc.__call__[0]' reached into the layer named enc, and its value matches"
          f"\n  the mean row norm of that layer's output computed by hand ({by_hand:.4f}).")
    return f"logcosh {first:.4f} -> {last:.4f} over {STEPS} steps ({first / last:.0f}x); enc_norm {rows[STEPS]['enc_norm']:.4f}"
