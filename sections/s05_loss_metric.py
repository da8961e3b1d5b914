"""A custom loss and a custom metric, in the shape Kauldron expects.

A loss subclasses `kd.losses.Loss`, names its inputs with kontext keys and implements
`get_values`; the base class averages, masks and applies `weight`. A metric is not a
number but a *state* that merges: `WithinTol` keeps hits and totals as two `sum_field`s,
so merging the states of a 6-row and a 2-row batch gives the pooled ratio, not the mean
of two ratios. Both live in `sections/shared.py`, where the Trainer lessons use them.
"""

import jax.numpy as jnp
import numpy as np
from kauldron import kd

from sections.registry import Lesson, section
from sections.shared import LogCosh, WithinTol


def _float(x) -> float:
    return float(np.asarray(x))


@section(5, "loss-metric", "A custom loss and a custom metric, in the shape Kauldron expects")
def lesson(lesson: Lesson) -> str:
    rng = np.random.default_rng(0)
    preds = jnp.asarray(rng.normal(size=(8, 4)).astype("float32"))
    targets = jnp.asarray(rng.normal(size=(8, 4)).astype("float32"))
    err = np.asarray(preds) - np.asarray(targets)

    loss = LogCosh(preds="preds.y", targets="batch.y")
    value = _float(loss(preds=preds, targets=targets))
    half = _float(LogCosh(preds="preds.y", targets="batch.y", weight=0.5)(preds=preds, targets=targets))
    from_context = _float(loss(context={"preds": {"y": preds}, "batch": {"y": targets}, "step": 0}))
    l2 = _float(kd.losses.L2(preds="preds.y", targets="batch.y")(preds=preds, targets=targets))
    print(f"  {'LogCosh(preds, targets)':36} {value:.6f}   (numpy: mean(log(cosh(err))) = "
          f"{np.mean(np.log(np.cosh(err))):.6f})")
    print(f"  {'the same loss, weight=0.5':36} {half:.6f}   exactly half")
    print(f"  {'LogCosh read from a context by key':36} {from_context:.6f}")
    print(f"  {'built-in kd.losses.L2':36} {l2:.6f}   (mean squared error: {np.mean(err ** 2):.6f})")
    lesson.check_close(value, float(np.mean(np.log(np.cosh(err)))), "LogCosh against numpy", rel=1e-5)
    lesson.check_equal(half, value * 0.5, "LogCosh with weight=0.5")
    lesson.check_equal(from_context, value, "LogCosh resolved from a context by its keys")
    lesson.check_close(l2, float(np.mean(err ** 2)), "kd.losses.L2 is the mean squared error", rel=1e-5)
    lesson.fact("logcosh", value)
    lesson.fact("logcosh_weight_half", half)
    lesson.fact("l2", l2)

    print("\n  A metric returns a state that merges. Split 8 rows into batches of 6 and 2:")
    metric = WithinTol(preds="preds.y", targets="batch.y", tol=0.5)
    big = metric.get_state(preds=preds[:6], targets=targets[:6])
    small = metric.get_state(preds=preds[6:], targets=targets[6:])
    merged = big.merge(small)
    rows = {"batch of 6 rows": big, "batch of 2 rows": small, "big.merge(small)": merged}
    for label, state in rows.items():
        print(f"    {label:22} {_float(state.n_hit):>3.0f} / {_float(state.n_total):>2.0f}"
              f" = {_float(state.compute()):.4f}")
    mean_of_rates = (_float(big.compute()) + _float(small.compute())) / 2
    print(f"    {'mean of the two rates':22} {'':>8} = {mean_of_rates:.4f}   <- not the answer")

    pooled = float(np.mean(np.abs(err) < 0.5))
    counts = [(_float(s.n_hit), _float(s.n_total)) for s in rows.values()]
    lesson.check_equal(counts, [(9.0, 24.0), (5.0, 8.0), (14.0, 32.0)], "hits / totals per state")
    lesson.check_equal(_float(merged.compute()), pooled, "the merged state computes the pooled ratio")
    lesson.check(mean_of_rates != pooled, "the mean of the two rates differs from the pooled ratio")
    reverse = small.merge(big)
    lesson.check_equal((_float(reverse.n_hit), _float(reverse.n_total), _float(reverse.compute())),
                       (_float(merged.n_hit), _float(merged.n_total), _float(merged.compute())),
                       "small.merge(big) against big.merge(small)")
    lesson.fact("merged_ratio", _float(merged.compute()))
    lesson.fact("mean_of_rates", mean_of_rates)
    print("    small.merge(big) gives the same 14 / 32: merging does not depend on the order.")

    # Why compute() returns a jax scalar: Kauldron turns jax arrays into 0-d numpy arrays
    # before its checkpointer writes logged metrics as JSON, and that writer
    # (`_normalize_to_json`, Kauldron 1.4.2-1.4.4) rejects a numpy scalar such as np.float32.
    from kauldron.checkpoints import checkpointer

    as_logged = np.asarray(merged.compute())
    lesson.check_equal(checkpointer._normalize_to_json(as_logged), _float(merged.compute()),
                       "the checkpointer's JSON of WithinTol's value")
    error = lesson.check_raises(ValueError, lambda: checkpointer._normalize_to_json(np.float32(0.4375)),
                                "the checkpointer's JSON of a numpy float32")
    lesson.check("Unknown type" in str(error), "the checkpointer names the unknown type")
    print("\n  compute() returns a jax scalar, not a numpy one: Kauldron converts it to a 0-d array"
          f"\n  that its checkpointer can write, while np.float32 fails there with '{error}'."
          "\n  Kauldron's evaluator merges the states of its batches like big.merge(small) before"
          "\n  compute(); section 9 checks an evaluator's number against the pooled value.")
    return (f"LogCosh {value:.4f}, weight 0.5 exactly half; WithinTol merged "
            f"{counts[2][0]:.0f}/{counts[2][1]:.0f} = {_float(merged.compute()):.4f} vs {mean_of_rates:.4f} "
            f"from averaging rates")
