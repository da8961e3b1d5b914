"""A custom loss and a custom metric, in the shape Kauldron expects.

A loss subclasses `kd.losses.Loss`, names its inputs with kontext keys and implements
`get_values`; the base class does the rest: weighting, masking, and averaging into a state
that merges. A metric implements `get_state` instead, and returns such a *state*; calling
the metric computes its value from the state. (A loss is itself a metric:
`kd.losses.Loss` subclasses `kd.metrics.Metric`.) The two this lesson studies, `LogCosh`
and `WithinTol`, live in `sections/parts/regression.py` (shown below), where the Trainer
lessons use them; the last step writes a metric that is not an average.
"""

import dataclasses

import flax
import jax
import jax.numpy as jnp
import numpy as np
from kauldron import kd, kontext

from harness import Lesson, section
from sections.parts.regression import LogCosh, WithinTol


@section(5, "loss-metric", "A custom loss and a custom metric, in the shape Kauldron expects", part="parts",
         shows="a kd.losses.Loss with weight and a mask from the context; metric states that merge: AverageState, AutoState",
         reference="https://kauldron.readthedocs.io/en/latest/metrics.html")
def loss_and_metric(lesson: Lesson):
    lesson.md("""
    ## A loss implements `get_values`; the base class averages and weighs

    `LogCosh.get_values` returns one value per element. Called with arrays, the loss
    averages them; `weight=0.5` halves the result. Kauldron's built-in `kd.losses.L2` is
    written the same way: keys for its inputs, and `get_values`. (LogCosh's values agree
    with numpy's to five digits on a CPU; on a TPU, whose float32 `log` and `cosh` are less
    exact, to four: the checks allow for it.)
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
    with lesson.checks():
        error = np.asarray(preds) - np.asarray(targets)
        lesson.check_close(values["LogCosh"], float(np.mean(np.log(np.cosh(error)))),
                           "LogCosh = numpy's mean(log(cosh(preds - targets)))", rel=accelerator.elementwise_rel())
        lesson.check_equal(values["LogCosh, weight=0.5"], values["LogCosh"] * 0.5, "LogCosh with weight=0.5")
        lesson.check_close(values["kd.losses.L2"], float(np.mean(error ** 2)), "kd.losses.L2 = the mean squared error",
                           rel=1e-5)
        lesson.check(issubclass(kd.losses.L2, kd.losses.Loss) and "get_values" in vars(kd.losses.L2)
                     and {"preds", "targets"} <= {field.name for field in dataclasses.fields(kd.losses.L2)},
                     "kd.losses.L2 is a kd.losses.Loss with keys preds and targets that implements get_values")
        lesson.check(issubclass(kd.losses.Loss, kd.metrics.Metric), "kd.losses.Loss subclasses kd.metrics.Metric")
        lesson.fact("losses", values)

    lesson.md("""
    ## In training, the loss reads its inputs from the context

    The Trainer does not pass arrays by hand: it gives the loss the step's context, and
    the loss fetches what its keys name (section 3). A loss also reads the step (its
    `step` key, `"step"` by default), for weights that follow a schedule: a context
    without a `step` raises a `KeyError`, even for a constant weight.
    """)
    context = {"step": 0, "preds": {"y": preds}, "batch": {"y": targets, "mask": jnp.asarray([[1.0]] * 3 + [[0.0]] * 5)}}
    print(round(float(loss(context=context)), 6))
    with lesson.checks():
        lesson.check_equal(float(loss(context=context)), values["LogCosh"], "LogCosh read from a context by its keys")
        no_step = {key: value for key, value in context.items() if key != "step"}
        lesson.check((loss.step, loss.weight) == ("step", 1.0), "a loss's default step key and weight")
        lesson.check_raises(KeyError, lambda: loss(context=no_step), "LogCosh (weight 1.0) on a context without a step")
        scheduled = LogCosh(preds="preds.y", targets="batch.y", weight=lambda step: 0.1 * step)
        lesson.check_close(float(scheduled(context={**context, "step": 3})), 0.3 * values["LogCosh"],
                           "LogCosh with weight=lambda step: 0.1 * step, on a context at step 3: 0.3 x LogCosh", rel=1e-5)

    lesson.md("""
    ## A mask is a key too

    Give the loss `mask="batch.mask"`, and it masks by the array the context holds
    there: with a mask of 0s and 1s, only values where it is 1 count, and the average is
    over those (the default, `normalize_by="mask"`; `normalize_by="values"` divides
    their sum by the number of all the values). A loss without the key ignores the mask
    in the batch. (Called with arrays, `mask=` is an array and the key plays no part.)
    """)
    masked = LogCosh(preds="preds.y", targets="batch.y", mask="batch.mask")
    print(f"with the mask key {float(masked(context=context)):.6f}, without it {float(loss(context=context)):.6f}")
    with lesson.checks():
        lesson.check_close(float(masked(context=context)), float(np.mean(np.log(np.cosh(error[:3])))),
                           "LogCosh with mask='batch.mask' = the mean over the 3 rows the mask keeps",
                           rel=accelerator.elementwise_rel())
        lesson.check_equal(float(loss(context=context)), values["LogCosh"],
                           "LogCosh without a mask key, on the same context: unmasked")
        lesson.check_raises(KeyError, lambda: masked(context={**context, "batch": {"y": targets}}),
                            "mask='batch.mask' on a context with no batch.mask")
        lesson.check_equal(float(masked(preds=preds, targets=targets)), values["LogCosh"],
                           "LogCosh with mask='batch.mask', called with arrays and no mask=: unmasked")
        lesson.check_close(float(masked(preds=preds, targets=targets, mask=context["batch"]["mask"])),
                           float(masked(context=context)), "the same loss called with arrays and mask=batch.mask's array:"
                           " the masked mean", rel=1e-6)
        by_values = LogCosh(preds="preds.y", targets="batch.y", mask="batch.mask", normalize_by="values")
        lesson.check_close(float(by_values(context=context)), float(np.log(np.cosh(error[:3])).sum() / error.size),
                           "the same with normalize_by='values': the 3 rows' sum over all the values",
                           rel=accelerator.elementwise_rel())
        lesson.fact("masked_logcosh", float(masked(context=context)))

    lesson.md("""
    ## A metric's state merges; its number is computed from it

    `WithinTol` counts the predictions within `tol` of their target. Its state is
    `kd.metrics.AverageState`, the state of Kauldron's averaging metrics
    (`kd.metrics.Accuracy`, `Psnr`, `Norm`...; a loss's is `AllReduceMean`, from
    `kauldron.losses.base`, which `kd.losses` does not export): `total` sums the values,
    here the hits, and `count` counts them. Merging adds each, so merging the states of a
    batch of 6 rows and one of 2 gives the pooled ratio over all 8, not the mean of the
    two batches' ratios (the last line: wrong, and quietly so). This is how an evaluator
    combines its batches (section 9); a training metric is not merged across steps: each
    logging step writes its own batch's (section 0 shows it). A state remembers the
    metric that made it: merging the states of two metrics that differ in any setting,
    keys included, raises `ValueError`; two equal ones, even built apart, merge.
    """)
    metric = WithinTol(preds="preds.y", targets="batch.y", tol=0.5)
    big, small = metric.get_state(preds=preds[:6], targets=targets[:6]), metric.get_state(preds=preds[6:], targets=targets[6:])
    merged = big.merge(small)
    for name, state in {"6 rows": big, "2 rows": small, "merged": merged}.items():
        print(f"{name:7} {float(state.total):>3.0f} / {float(state.count):>2.0f} = {float(state.compute()):.4f}")
    print(f"the mean of the two rates: {(float(big.compute()) + float(small.compute())) / 2:.4f}")
    with lesson.checks():
        lesson.check(all(issubclass(m.State, kd.metrics.AverageState)
                         for m in (WithinTol, kd.metrics.Accuracy, kd.metrics.Psnr, kd.metrics.Norm)),
                     "WithinTol's state, like kd.metrics.Accuracy's, Psnr's and Norm's, is an AverageState")
        from kauldron.losses.base import AllReduceMean

        lesson.check(all(m.State is AllReduceMean and not issubclass(m.State, kd.metrics.AverageState)
                         for m in (kd.losses.Loss, kd.losses.L2, LogCosh)),
                     "a loss's state (kd.losses.Loss's, L2's, LogCosh's) is AllReduceMean, not an AverageState")
        lesson.check(not hasattr(kd.losses, "AllReduceMean"), "kd.losses does not export AllReduceMean")
        lesson.check_equal(float(merged.compute()), float(np.mean(np.abs(error) < 0.5)),
                           "the merged state's value = the pooled ratio over all 8 rows")
        other = WithinTol(preds="preds.y", targets="batch.y", tol=0.25).get_state(preds=preds[6:], targets=targets[6:])
        mixed = lesson.check_raises(ValueError, lambda: big.merge(other),
                                    "merging WithinTol(tol=0.5)'s state with WithinTol(tol=0.25)'s")
        lesson.check("different metrics" in str(mixed) and big.parent == metric,
                     "the error: the states come from different metrics (a state's parent: the metric that made it)")
        equal = WithinTol(preds="preds.y", targets="batch.y", tol=0.5).get_state(preds=preds[6:], targets=targets[6:])
        lesson.check_equal(float(big.merge(equal).compute()), float(merged.compute()),
                           "merging with the state of an equal WithinTol built apart: the same pooled ratio")
        lesson.check_equal(float(small.merge(big).compute()), float(merged.compute()), "merging in the other order")
        called = metric(preds=preds, targets=targets)
        lesson.check(not isinstance(called, kd.metrics.State)
                     and float(called) == float(metric.get_state(preds=preds, targets=targets).compute()),
                     "calling the metric returns the number its state computes, not the state")
        lesson.check(abs((float(big.compute()) + float(small.compute())) / 2 - float(merged.compute())) > 0.05,
                     "here, the mean of the two batches' rates is not the pooled ratio")
        lesson.skip_check("a training metric is not merged across steps: each logging step writes its own batch's",
                          "this lesson runs no training loop; section 0's run checks it, its train accuracy at step"
                          " 100 a count out of one batch of 32")
        lesson.fact("merged_ratio", float(merged.compute()))

    lesson.md("""
    ## A mask's shape: a loss aligns it right, `AverageState` left

    A loss's state, `AllReduceMean`, broadcasts its mask against its values as numpy
    does, from the last axis: for values of shape (8, 4), a mask of one value per row has
    shape (8, 1), as `batch.mask` above; one of shape (8,) is refused, and one of shape
    (4,) would mask columns. `kd.metrics.AverageState.from_values` aligns the mask on the
    first axis, the batch, and adds the missing axes after it: there (8,) masks rows. An
    averaging metric masks only if it declares a `mask` key and passes the mask to
    `from_values`, as `kd.metrics.Accuracy` does (whose type annotations still ask for a
    mask of shape (8, 1) here, as a loss does): `kd.metrics.Metric` has no `mask` field,
    so `WithinTol` takes no mask.
    """)
    rows = jnp.asarray([1.0] * 3 + [0.0] * 5)  # one value per row: shape (8,)
    try:
        loss(preds=preds, targets=targets, mask=rows)
    except ValueError as e:
        print("loss, mask (8,):", e)
    print("loss, mask (8, 1):", round(float(loss(preds=preds, targets=targets, mask=rows[:, None])), 6))
    hits = (jnp.abs(preds - targets) < 0.5).astype(jnp.float32)
    rows_state = kd.metrics.AverageState.from_values(values=hits, mask=rows)
    print("AverageState, mask (8,):", float(rows_state.total), "/", float(rows_state.count))
    with lesson.checks():
        lesson.check_raises(ValueError, lambda: loss(preds=preds, targets=targets, mask=rows),
                            "a loss given a mask of shape (8,) for values of shape (8, 4)")
        lesson.check_close(float(loss(preds=preds, targets=targets, mask=rows[:, None])),
                           float(np.mean(np.log(np.cosh(error[:3])))), "with a mask of shape (8, 1): the mean over"
                           " its 3 rows (a mask array, given a loss with no mask key)", rel=accelerator.elementwise_rel())
        columns = jnp.asarray([1.0, 0.0, 0.0, 0.0])
        lesson.check_close(float(loss(preds=preds, targets=targets, mask=columns)),
                           float(np.mean(np.log(np.cosh(error[:, 0])))),
                           "a loss with a mask of shape (4,): the mean over the first column",
                           rel=accelerator.elementwise_rel())
        lesson.check((float(rows_state.total), float(rows_state.count)) == (float(np.sum(np.abs(error[:3]) < 0.5)), 12.0),
                     "AverageState.from_values with a mask of shape (8,): the hits and count of the first 3 rows")
        lesson.check_raises(ValueError, lambda: kd.metrics.AverageState.from_values(values=hits, mask=columns),
                            "AverageState.from_values with a mask of shape (4,) for values of shape (8, 4)")
        lesson.check_raises(TypeError, lambda: WithinTol(preds="preds.y", targets="batch.y", mask="batch.mask"),
                            "WithinTol(..., mask='batch.mask'): no mask field")
        labels = jnp.argmax(preds + targets, axis=-1, keepdims=True)
        hit = np.asarray(jnp.argmax(preds, axis=-1, keepdims=True) == labels, np.float32)
        accuracy = {"preds": {"y": preds}, "batch": {"label": labels, "mask": context["batch"]["mask"]}}
        lesson.check_close(float(kd.metrics.Accuracy(logits="preds.y", labels="batch.label", mask="batch.mask")
                                 (context=accuracy)), float(hit[:3].mean()),
                           "kd.metrics.Accuracy with mask='batch.mask': the accuracy over the mask's 3 rows", rel=1e-6)
        lesson.check(float(hit[:3].mean()) != float(hit.mean()), "here, the accuracy over 3 rows is not the one over 8")
        from typeguard import TypeCheckError

        lesson.check_raises(TypeCheckError, lambda: kd.metrics.Accuracy(
            logits="preds.y", labels="batch.label", mask="batch.mask")(context={**accuracy, "batch": {
                "label": labels, "mask": rows}}), "kd.metrics.Accuracy given a mask of shape (8,): its type check")

    lesson.md("""
    ## `AutoState`, for a state that is not an average

    A median cannot be merged from sums: the median of 8 rows is not made from the
    medians of 6 and of 2. `kd.metrics.AutoState` builds a state from fields that each
    say how they merge: `kd.metrics` exports `sum_field`, `concat_field`,
    `truncate_field`, `state_field` and `static_field`; `min_field` and `max_field` are
    in `kauldron.metrics.auto_state` only. `MedianAbsError` keeps every error in a
    `concat_field`, and takes the median of all of them when it is computed. The price:
    its state grows with every batch, and a merge copies its arrays to the host (numpy),
    so it runs outside `jax.jit` (inside, Kauldron raises a `RuntimeError`). A metric's
    `State` must be a `flax.struct.dataclass`: defining a metric whose `State` is any
    other class raises a `TypeError`.
    """)

    @dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
    class MedianAbsError(kd.metrics.Metric):
        """The median of |preds - targets| over every batch seen: not an average, so no sum merges it."""

        preds: kontext.Key = kontext.REQUIRED
        targets: kontext.Key = kontext.REQUIRED

        @flax.struct.dataclass
        class State(kd.metrics.AutoState):
            errors: jax.Array = kd.metrics.concat_field()  # merged by concatenating: every error is kept

            def compute(self):
                return np.median(self.finalize().errors)  # finalize() joins what the merges kept

        def get_state(self, preds, targets):
            return self.State(errors=jnp.abs(preds - targets).reshape(-1))

    median = MedianAbsError(preds="preds.y", targets="batch.y")
    big, small = median.get_state(preds=preds[:6], targets=targets[:6]), median.get_state(preds=preds[6:], targets=targets[6:])
    merged = big.merge(small)
    for name, state in {"6 rows": big, "2 rows": small, "merged": merged}.items():
        print(f"{name:7} {state.finalize().errors.size:>2} errors, median {float(state.compute()):.4f}")
    print(f"the mean of the two medians: {(float(big.compute()) + float(small.compute())) / 2:.4f}")
    with lesson.checks():
        lesson.check(issubclass(MedianAbsError.State, kd.metrics.AutoState), "MedianAbsError's state is an AutoState")
        import kauldron.metrics.auto_state

        lesson.check_equal(sorted(name for name in dir(kd.metrics) if name.endswith("_field")),
                           ["concat_field", "state_field", "static_field", "sum_field", "truncate_field"],
                           "the *_field functions kd.metrics exports")
        lesson.check(hasattr(kauldron.metrics.auto_state, "min_field") and hasattr(kauldron.metrics.auto_state, "max_field"),
                     "kauldron.metrics.auto_state has min_field and max_field")
        lesson.check_equal(merged.finalize().errors.size, big.finalize().errors.size + small.finalize().errors.size,
                           "the errors the merged state keeps: all of both batches'")
        lesson.check_close(float(merged.compute()), float(np.median(np.abs(error))),
                           "the merged state's median = numpy's median of all 32 errors", rel=1e-6)
        lesson.check_close(float(small.merge(big).compute()), float(merged.compute()), "merging in the other order",
                           rel=1e-6)
        lesson.check(abs((float(big.compute()) + float(small.compute())) / 2 - float(merged.compute())) > 1e-3,
                     "here, the mean of the two batches' medians is not the median of all rows")
        lesson.check(isinstance(big.errors, jax.Array) and len(merged.errors) == 2
                     and all(type(part) is np.ndarray for part in merged.errors),
                     "a batch's errors are a jax array; the merged state keeps each batch's as a numpy array")
        refused = lesson.check_raises(RuntimeError, lambda: jax.jit(lambda a, b: a.merge(b))(big, small),
                                      "merging MedianAbsError's states inside jax.jit")
        lesson.check("Tracer detected" in str(refused), "... with Kauldron's message: 'Tracer detected! ...'")
        six, two = (metric.get_state(preds=preds[span], targets=targets[span]) for span in (slice(6), slice(6, 8)))
        lesson.check_equal(float(jax.jit(lambda a, b: a.merge(b))(six, two).compute()),
                           float(np.mean(np.abs(error) < 0.5)),
                           "WithinTol's AverageStates of 6 and 2 rows, merged inside jax.jit: the pooled ratio")
        undecorated = lesson.check_raises(TypeError, lambda: plain_state_metric(),
                                          "a Metric whose State is a plain dataclass, when its class is defined")
        lesson.check("must be defined with @flax.struct.dataclass" in str(undecorated),
                     "... with Kauldron's message: '... must be defined with @flax.struct.dataclass decorator.'")
        lesson.fact("merged_median", float(merged.compute()))
        lesson.summary = (f"LogCosh {values['LogCosh']:.4f}, masked by the context's mask; WithinTol (AverageState) merged"
                          f" to the pooled ratio {float(metric.get_state(preds=preds, targets=targets).compute()):.4f},"
                          " not the batches' mean rate; a loss's mask aligned right, AverageState's left;"
                          f" MedianAbsError (AutoState) to the median of all rows")


# How the lesson checks itself.
from sections.parts import accelerator  # noqa: E402 - the checks' own, not the page's


def plain_state_metric() -> type:
    """Defines a metric whose `State` is a plain frozen dataclass, not a flax one."""

    @dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
    class PlainState(kd.metrics.Metric):
        @dataclasses.dataclass(frozen=True)
        class State(kd.metrics.AverageState):
            pass

        def get_state(self):
            return self.State.empty()

    return PlainState
