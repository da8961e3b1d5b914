"""What several lessons compute by hand to check Kauldron against: equality of parameter
trees, a logged curve, the metric over a batch by numpy, and the text of a library file."""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np

from sections.shared import WithinTol, event_files, read_scalars


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
