"""A custom loss and a custom metric, in the shape Kauldron expects.

A loss subclasses `kd.losses.Loss`, names its inputs with kontext keys and implements
`get_values`; the base class averages, applies `weight`, and masks: with `mask=` set to a
key, only the values where the mask is 1 count, and the average is over those. A metric
is not a number but a *state* that merges: `WithinTol` keeps hits and totals as two
`sum_field`s, so merging the states of a 6-row and a 2-row batch gives the pooled ratio,
not the mean of two ratios. Both live in `sections/shared.py`, where the Trainer lessons
use them.
"""

import jax.numpy as jnp
import numpy as np
from kauldron import kd

from sections.lesson import Lesson
from sections.registry import section
from sections.shared import LogCosh, WithinTol


def as_float(x) -> float:
    return float(np.asarray(x))


def print_states(rows: dict) -> None:
    for label, state in rows.items():
        print(f"    {label:22} {as_float(state.n_hit):>3.0f} / {as_float(state.n_total):>2.0f}"
              f" = {as_float(state.compute()):.4f}")


def states_merge_to_the_pooled_ratio(lesson: Lesson, preds, targets) -> tuple[float, float]:
    """WithinTol over 8 rows, as batches of 6 and 2 merged; returns (merged, mean of rates)."""
    err = np.asarray(preds) - np.asarray(targets)
    print("\n  A metric returns a state that merges. Split 8 rows into batches of 6 and 2:")
    metric = WithinTol(preds="preds.y", targets="batch.y", tol=0.5)
    big = metric.get_state(preds=preds[:6], targets=targets[:6])
    small = metric.get_state(preds=preds[6:], targets=targets[6:])
    merged = big.merge(small)
    print_states({"batch of 6 rows": big, "batch of 2 rows": small, "big.merge(small)": merged})
    mean_of_rates = (as_float(big.compute()) + as_float(small.compute())) / 2
    print(f"    {'mean of the two rates':22} {'':>8} = {mean_of_rates:.4f}   <- not the answer")

    pooled = float(np.mean(np.abs(err) < 0.5))
    counts = [(as_float(s.n_hit), as_float(s.n_total)) for s in (big, small, merged)]
    lesson.check_equal(counts, [(9.0, 24.0), (5.0, 8.0), (14.0, 32.0)], "hits and totals of the three states")
    lesson.check_equal(as_float(merged.compute()), pooled, "the merged state's value = the pooled ratio 14 / 32")
    lesson.check(mean_of_rates != pooled, "the mean of the two rates is not the pooled ratio")
    reverse = small.merge(big)
    lesson.check_equal((as_float(reverse.n_hit), as_float(reverse.n_total)), counts[2],
                       "small.merge(big) holds the same hits and totals as big.merge(small)")
    lesson.fact("merged_ratio", as_float(merged.compute()))
    lesson.fact("mean_of_rates", mean_of_rates)
    print("    small.merge(big) gives the same 14 / 32: merging does not depend on the order."
          "\n  Kauldron's evaluator merges its batches' states like this before compute();"
          "\n  section 9 checks an evaluator's number against the pooled value.")
    return as_float(merged.compute()), mean_of_rates


@section(5, "loss-metric", "A custom loss and a custom metric, in the shape Kauldron expects",
         shows="a kd.losses.Loss with weight and mask; a kd.metrics.Metric whose states merge to the pooled value")
def loss_and_metric(lesson: Lesson) -> str:
    rng = np.random.default_rng(0)
    preds = jnp.asarray(rng.normal(size=(8, 4)).astype("float32"))
    targets = jnp.asarray(rng.normal(size=(8, 4)).astype("float32"))
    err = np.asarray(preds) - np.asarray(targets)
    mask = jnp.asarray([[1.0]] * 3 + [[0.0]] * 5)  # the first 3 rows count; broadcast over 4 columns

    loss = LogCosh(preds="preds.y", targets="batch.y")
    values = {
        "LogCosh(preds, targets)": as_float(loss(preds=preds, targets=targets)),
        "the same loss, weight=0.5": as_float(
            LogCosh(preds="preds.y", targets="batch.y", weight=0.5)(preds=preds, targets=targets)),
        "read from a context by key": as_float(loss(context={"preds": {"y": preds}, "batch": {"y": targets}, "step": 0})),
        "mask='batch.mask' (3 of 8 rows)": as_float(
            LogCosh(preds="preds.y", targets="batch.y", mask="batch.mask")(preds=preds, targets=targets, mask=mask)),
        "built-in kd.losses.L2": as_float(kd.losses.L2(preds="preds.y", targets="batch.y")(preds=preds, targets=targets)),
    }
    for label, value in values.items():
        print(f"  {label:34} {value:.6f}")
    logcosh = np.log(np.cosh(err))
    value = values["LogCosh(preds, targets)"]
    lesson.check_close(value, float(logcosh.mean()), "LogCosh = numpy's mean(log(cosh(preds - targets)))", rel=1e-5)
    lesson.check_equal(values["the same loss, weight=0.5"], value * 0.5, "LogCosh with weight=0.5")
    lesson.check_equal(values["read from a context by key"], value, "LogCosh resolved from a context by its keys")
    lesson.check_close(values["mask='batch.mask' (3 of 8 rows)"], float(logcosh[:3].mean()),
                       "LogCosh with a mask = the mean over the 3 unmasked rows only", rel=1e-5)
    lesson.check_close(values["built-in kd.losses.L2"], float(np.mean(err ** 2)),
                       "kd.losses.L2 = the mean squared error", rel=1e-5)
    print(f"  (numpy: mean log cosh {logcosh.mean():.6f}; over the 3 unmasked rows {logcosh[:3].mean():.6f};"
          f" mean squared error {np.mean(err ** 2):.6f})")
    lesson.fact("losses", values)

    merged, mean_of_rates = states_merge_to_the_pooled_ratio(lesson, preds, targets)
    masked = values["mask='batch.mask' (3 of 8 rows)"]
    return (f"LogCosh {value:.4f}, weight 0.5 exactly half, masked to 3 rows {masked:.4f}; "
            f"WithinTol merged 14/32 = {merged:.4f}, not {mean_of_rates:.4f}")
