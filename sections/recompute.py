"""What the lessons compute by hand to check Kauldron against: equality of parameter
trees, a logged curve, losses and metrics by numpy (over a batch, held-out rows, a
checkpoint's parameters), an inner layer by Flax, and the text of a library file. The
`check_*` functions record their comparisons as the lesson's checks."""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp

from sections.lesson import Lesson
from sections.shared import MLP, WithinTol, event_files, make_data, read_scalars


def same(a, b) -> bool:
    """Whether two trees of arrays are equal, bit for bit."""
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def max_difference(a, b) -> float:
    """The largest |difference| between two trees of arrays."""
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def logged(workdir, tag: str, collection: str = "train") -> dict[int, float]:
    """{step: value} of one scalar a run logged."""
    return {step: row[tag] for step, row in read_scalars(*event_files(workdir, collection)).items() if tag in row}


def largest_relative_difference(a: dict[int, float], b: dict[int, float]) -> float:
    """Between two curves logged at the same steps (an AssertionError if they were not)."""
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    return max(abs(a[step] - b[step]) / abs(b[step]) for step in b)


def within_tol_of_first_batch(trainer) -> float:
    """WithinTol over the Trainer's first batch with its initial parameters, by numpy."""
    batch = next(iter(trainer.train_ds))
    preds = trainer.model.apply({"params": trainer.init_state().params}, batch["x"])["y"]
    return float(np.mean(np.abs(np.asarray(preds) - batch["y"]) < WithinTol(preds="", targets="").tol))


def library_source(module: str) -> str:
    """The text of an installed module's file, read without importing it."""
    return pathlib.Path(importlib.util.find_spec(module).origin).read_text()


def heldout_predictions(trainer, params) -> tuple[np.ndarray, np.ndarray]:
    """The model's predictions for the 128 held-out rows with `params`, and their targets."""
    data = make_data("eval")
    return np.asarray(trainer.model.apply({"params": params}, data["x"])["y"]), data["y"]


def check_batch_stats(lesson: Lesson, stats, batch: dict) -> None:
    """kd.inspect's statistics of a batch against numpy's."""
    for row in stats.to_dict("records"):
        values = np.asarray(batch[row["Name"].removeprefix("batch.")])
        lesson.check_close(row["Mean"], float(values.mean()), f"get_batch_stats' mean of {row['Name']}", rel=1e-5)
        lesson.check_equal((row["Min"], row["Max"]), (float(values.min()), float(values.max())),
                           f"get_batch_stats' min and max of {row['Name']}")


def enc_norm_by_hand(params, x) -> float:
    """The mean L2 norm of the `enc` layer's output rows, computed with Flax directly."""
    _, captured = MLP(inputs="batch.x").apply({"params": params}, x, capture_intermediates=True,
                                              mutable=["intermediates"])
    return float(np.mean(np.linalg.norm(np.asarray(captured["intermediates"]["enc"]["__call__"][0]), axis=-1)))


def check_evaluations_at_step_0(lesson: Lesson, trainer, evals: dict, default: dict) -> None:
    """Step 0 evaluated the initial parameters: recompute both evaluators' numbers by hand."""
    preds, targets = heldout_predictions(trainer, trainer.init_state().params)
    hits = np.abs(preds - targets) < WithinTol(preds="", targets="").tol
    lesson.check_close(evals[0]["metrics/within_tol"], float(hits.mean()),
                       "eval within_tol at step 0 = the pooled ratio over all 128 rows")
    lesson.check_close(default[0]["metrics/within_tol"], float(hits[:96].mean()),
                       "eval_default within_tol at step 0 = the pooled ratio over the first 96 rows (remainder dropped)")
    lesson.check_close(evals[0]["losses/logcosh"], float(np.mean(np.log(np.cosh(preds - targets)))),
                       "eval logcosh at step 0 = numpy's over the 128 rows", rel=1e-5)


def eval_mode_loss(trainer, state) -> float:
    """logcosh over the held-out rows with the model in evaluation mode, by numpy."""
    data = make_data("eval")
    preds = trainer.model.apply({"params": state.params}, data["x"], is_training_property=False)["y"]
    return float(np.mean(np.log(np.cosh(np.asarray(preds) - data["y"]))))


def check_heldout_against_checkpoints(lesson: Lesson, trainer, written: dict) -> None:
    """Section 15's evaluator `heldout`, as written at each step, against numpy with that
    step's checkpoint, restored with Orbax directly."""
    for step in sorted(written["metrics/within_0.1"]):
        params = ocp.StandardCheckpointer().restore(trainer.workdir / "checkpoints" / f"ckpt_{step}" / "default")["params"]
        preds, targets = heldout_predictions(trainer, params)
        lesson.check_close(float(written["losses/logcosh"][step]), float(np.mean(np.log(np.cosh(preds - targets)))),
                           f"heldout logcosh at step {step} = numpy's with ckpt_{step}", rel=1e-5)
        lesson.check_close(float(written["metrics/within_0.1"][step]), float(np.mean(np.abs(preds - targets) < 0.1)),
                           f"heldout within_0.1 at step {step} = numpy's with ckpt_{step}")
