"""A custom loss and a custom metric, in the shape Kauldron expects.

A loss subclasses `kd.losses.Loss`, names its inputs with kontext keys and implements
`get_values`; the base class does the rest: weighting, masking, and averaging into a state
that merges. A metric is not a number but such a *state*. The two this lesson studies,
`LogCosh` and `WithinTol`, live in `sections/shared.py` (shown below), where the
Trainer lessons use them.
"""

import jax.numpy as jnp
import numpy as np
from kauldron import kd

from sections.lesson import Lesson
from sections.registry import section
from sections.shared import LogCosh, WithinTol


@section(5, "loss-metric", "A custom loss and a custom metric, in the shape Kauldron expects", part="parts",
         shows="a kd.losses.Loss with weight and a mask from the context; a kd.metrics.Metric state that merges",
         reference="https://kauldron.readthedocs.io/en/latest/metrics.html")
def loss_and_metric(lesson: Lesson) -> str:
    lesson.md("""
    ## A loss implements `get_values`; the base class averages and weighs

    `LogCosh.get_values` returns one value per element. Called with arrays, the loss
    averages them; `weight=0.5` halves the result. Kauldron's built-in `kd.losses.L2` has
    the same shape.
    """)
    rng = np.random.default_rng(0)
    preds, targets = (jnp.asarray(rng.normal(size=(8, 4)), jnp.float32) for _ in range(2))
    loss = LogCosh(preds="preds.y", targets="batch.y")
    values = {
        "LogCosh": float(loss(preds=preds, targets=targets)),
        "LogCosh, weight=0.5": float(LogCosh(preds="preds.y", targets="batch.y", weight=0.5)(preds=preds, targets=targets)),
        "kd.losses.L2": float(kd.losses.L2(preds="preds.y", targets="batch.y")(preds=preds, targets=targets)),
    }
    print({name: round(value, 6) for name, value in values.items()})
    error = np.asarray(preds) - np.asarray(targets)
    lesson.check_close(values["LogCosh"], float(np.mean(np.log(np.cosh(error)))),
                       "LogCosh = numpy's mean(log(cosh(preds - targets)))", rel=1e-5)
    lesson.check_equal(values["LogCosh, weight=0.5"], values["LogCosh"] * 0.5, "LogCosh with weight=0.5")
    lesson.check_close(values["kd.losses.L2"], float(np.mean(error ** 2)), "kd.losses.L2 = the mean squared error", rel=1e-5)
    lesson.fact("losses", values)

    lesson.md("""
    ## In training, the loss reads its inputs from the context

    The Trainer does not pass arrays by hand: it gives the loss the step's context, and
    the loss fetches what its keys name (section 3). A loss also reads the step (its
    `step` key), for weights that follow a schedule.
    """)
    context = {"step": 0, "preds": {"y": preds}, "batch": {"y": targets, "mask": jnp.asarray([[1.0]] * 3 + [[0.0]] * 5)}}
    print(round(float(loss(context=context)), 6))
    lesson.check_equal(float(loss(context=context)), values["LogCosh"], "LogCosh read from a context by its keys")

    lesson.md("""
    ## A mask is a key too

    Give the loss `mask="batch.mask"`, and it masks by the array the context holds there:
    only values where the mask is 1 count, and the average is over those. A loss without
    the key ignores the mask in the batch. (Called with arrays, `mask=` is an array and
    the key plays no part.)
    """)
    masked = LogCosh(preds="preds.y", targets="batch.y", mask="batch.mask")
    print(f"with the mask key {float(masked(context=context)):.6f}, without it {float(loss(context=context)):.6f}")
    without_mask = {**context, "batch": {"y": targets}}
    lesson.check_close(float(masked(context=context)), float(np.mean(np.log(np.cosh(error[:3])))),
                       "LogCosh with mask='batch.mask' = the mean over the 3 rows the mask keeps", rel=1e-5)
    lesson.check_equal(float(loss(context=context)), values["LogCosh"],
                       "LogCosh without a mask key, on the same context: unmasked")
    lesson.check_raises(KeyError, lambda: masked(context=without_mask), "mask='batch.mask' on a context with no batch.mask")
    lesson.fact("masked_logcosh", float(masked(context=context)))

    lesson.md("""
    ## A metric's value is a state that merges

    `WithinTol` counts the predictions within `tol` of their target. Its state keeps hits
    and totals apart, so merging the states of a batch of 6 rows and one of 2 gives the
    pooled ratio over all 8, not the mean of the two batches' ratios. This is how an
    evaluator combines its batches (section 9).
    """)
    metric = WithinTol(preds="preds.y", targets="batch.y", tol=0.5)
    big, small = metric.get_state(preds=preds[:6], targets=targets[:6]), metric.get_state(preds=preds[6:], targets=targets[6:])
    merged = big.merge(small)
    for name, state in {"6 rows": big, "2 rows": small, "merged": merged}.items():
        print(f"{name:7} {float(state.n_hit):>3.0f} / {float(state.n_total):>2.0f} = {float(state.compute()):.4f}")
    print(f"the mean of the two rates would be {(float(big.compute()) + float(small.compute())) / 2:.4f}")
    lesson.check_equal(float(merged.compute()), float(np.mean(np.abs(error) < 0.5)),
                       "the merged state's value = the pooled ratio over all 8 rows")
    lesson.check_equal(float(small.merge(big).compute()), float(merged.compute()), "merging in the other order")
    lesson.fact("merged_ratio", float(merged.compute()))

    lesson.md("""
    ## `AverageState` is the usual state; `AutoState` is for custom merges

    Metrics that average, such as `kd.metrics.Accuracy`, keep a total and a count in a
    `kd.metrics.AverageState`, the usual state, which merges the same pooled way. `WithinTol` uses
    `kd.metrics.AutoState` instead, whose fields say how each one merges (`sum_field`,
    `concat_field`, ...): the tool for states that are not an average.
    """)
    print("kd.metrics.Accuracy.State:", kd.metrics.Accuracy.State.__bases__)
    print("WithinTol.State:", WithinTol.State.__bases__)
    lesson.check(issubclass(kd.metrics.Accuracy.State, kd.metrics.AverageState),
                 "kd.metrics.Accuracy's state is an AverageState")
    lesson.check(issubclass(WithinTol.State, kd.metrics.AutoState), "WithinTol's state is an AutoState")
    return f"LogCosh {values['LogCosh']:.4f}, masked by the context's mask; WithinTol merged to the pooled ratio"
