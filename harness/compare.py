"""Comparisons the lessons' checks make between trees of arrays (parameters, states)."""

from __future__ import annotations

import jax
import numpy as np


def same(a, b) -> bool:
    """Whether two trees of arrays are equal, bit for bit."""
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(np.array_equal(np.asarray(x), np.asarray(y))
                                                  for x, y in zip(leaves_a, leaves_b))


def max_difference(a, b) -> float:
    """The largest |difference| between two trees of arrays of the same structure."""
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
