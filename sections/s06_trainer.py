"""A real Trainer on synthetic data, and a look inside the model.

`kd.train.Trainer` is a frozen dataclass that names every part of an experiment: data,
model, losses, metrics, optimizer. Before training anything, `kd.inspect` describes the
data; then the Trainer's own `trainstep` runs a manual loop, returning the loss and
metric states only when asked. One metric watches an *inner* layer: `kd.metrics.Norm`
reads `interms.enc.__call__[0]`, the output of the Dense layer named `enc`, captured by
Flax without any change to the model.
"""

import jax
import numpy as np
import optax
from kauldron import kd

from sections.registry import Lesson, Panel, section
from sections.shared import BATCH_SIZE, MLP, LogCosh, WithinTol, make_loader

STEPS = 300
PRINT_AT = (1, 25, 50, 100, 200, 300)


@jax.jit
def _compute(states: dict) -> dict:
    """Each state's value, in one compiled call. Called eagerly instead, Norm's state
    compiles a fresh `lax.cond` every time."""
    return {name: state.compute() for name, state in states.items()}


def _enc_norm(params, x) -> float:
    """The mean L2 norm of the `enc` layer's output rows, computed by hand."""
    _, captured = MLP(inputs="batch.x").apply(
        {"params": params}, x, capture_intermediates=True, mutable=["intermediates"])
    enc_out = np.asarray(captured["intermediates"]["enc"]["__call__"][0])
    return float(np.mean(np.linalg.norm(enc_out, axis=-1)))


@section(6, "trainer", "A real Trainer on synthetic data, and a look inside the model", trains=True)
def lesson(lesson: Lesson) -> str:
    train_ds = kd.data.InMemoryPipeline(
        loader=make_loader("train"), batch_size=BATCH_SIZE, shuffle=True, num_epochs=None, seed=0)
    spec = kd.inspect.json_spec_like(train_ds.element_spec)
    print(f"  element_spec: {spec}")
    lesson.check_equal(spec, {"x": "f32[32 16]", "y": "f32[32 1]"}, "the pipeline's element spec")

    batch = next(iter(train_ds))
    stats = kd.inspect.get_batch_stats(batch)
    print("\n  kd.inspect.get_batch_stats(first batch):")
    print("    " + stats.to_string(index=False).replace("\n", "\n    "))
    for row in stats.to_dict("records"):
        values = np.asarray(batch[row["Name"].removeprefix("batch.")])
        lesson.check_close(row["Mean"], float(values.mean()), f"{row['Name']} mean", rel=1e-5)
        lesson.check_equal((row["Min"], row["Max"]), (float(values.min()), float(values.max())),
                           f"{row['Name']} min and max")

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
                                "out": {"bias": (1,), "kernel": (32, 1)}}, "parameter shapes")

    print(f"\n  {'step':>6} {'logcosh':>9} {'within .25':>11} {'enc_norm':>9}")
    batches = iter(trainer.train_ds)
    curve, every_step = {}, {}
    for step in range(1, STEPS + 1):
        batch = next(batches)
        if step == STEPS:  # the step donates its input buffers: keep a host copy to check
            params_before, last_x = jax.tree.map(np.asarray, state.params), np.asarray(batch["x"])
        state, aux = trainer.trainstep.step(state, batch, return_losses=True, return_metrics=True)
        row = {k: float(v) for k, v in _compute({**aux.loss_states, **aux.metric_states}).items()}
        every_step[step] = row
        if step in PRINT_AT:
            curve[step] = row
            print(f"  {step:>6} {row['logcosh']:>9.4f} {row['within_tol']:>11.4f} {row['enc_norm']:>9.4f}")

    first, last = curve[1]["logcosh"], curve[STEPS]["logcosh"]
    lesson.check(last * 10 <= first, f"the loss fell at least 10x ({first:.4f} -> {last:.4f})")
    lesson.check(all(np.isfinite(r["enc_norm"]) for r in curve.values()), "enc_norm is finite at every step")
    by_hand = _enc_norm(params_before, last_x)
    lesson.check_close(curve[STEPS]["enc_norm"], by_hand, "enc_norm against the norm computed by hand", rel=1e-5)
    lesson.check_equal(int(state.step), STEPS, "state.step after the manual loop")
    lesson.fact("loss_curve", {str(k): v["logcosh"] for k, v in curve.items()})
    lesson.fact("enc_norm_curve", {str(k): v["enc_norm"] for k, v in curve.items()})
    lesson.fact("loss_drop", first / last)
    steps = list(every_step)
    lesson.plot("Section 6: the Trainer's train step, by hand",
                Panel("training loss", "step", "logcosh (log scale)", log_y=True,
                      lines={"logcosh": (steps, [every_step[k]["logcosh"] for k in steps])}),
                Panel("an inner layer, read by key path", "step", "mean row norm",
                      lines={"enc_norm ('interms.enc.__call__[0]')": (steps, [every_step[k]["enc_norm"] for k in steps])}))
    print(f"\n  The loss fell {first / last:.0f}x. enc_norm was never returned by MLP: the key"
          f"\n  'interms.enc.__call__[0]' reached into the layer named enc, and its value matches"
          f"\n  the mean row norm of that layer's output computed by hand ({by_hand:.4f}).")
    return f"logcosh {first:.4f} -> {last:.4f} over {STEPS} steps ({first / last:.0f}x); enc_norm {curve[STEPS]['enc_norm']:.4f}"
