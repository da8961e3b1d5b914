"""What changes for the checks where jax computes on a TPU: how closely float32 results
agree with numpy's, and what a program meets that opens the chip another process holds.

Measured on a TPU v5e (jax 0.10.2) against numpy in float64:
- elementwise functions (log, cosh, exp) agree within 1e-5 on a CPU; on a TPU to about
  four digits (section 5's masked LogCosh: 1.6e-5 relative): 1e-4 there;
- a float32 matrix product at jax's default precision is, on a TPU, one bfloat16 pass:
  each factor rounded to bfloat16, then summed in float32 (numpy given the factors so
  rounded agreed with the chip to 9e-8 of the terms' magnitude). `as_the_chip_multiplies`
  rounds a factor so; `jax.default_matmul_precision("highest")` would buy the digits back,
  at several passes a product.

One process at a time holds a TPU: a second program that opens it fails (RuntimeError,
libtpu's lockfile), with JAX_PLATFORMS unset too, since jax then asks for "tpu,cpu" on a
TPU machine (jax/_src/cloud_tpu_init.py); it does not fall back to the CPU (measured on a
v5e, 2026-12). Where the tutorial's process holds it, a lesson that starts Python
processes runs with them in a worker on the CPU (runner/__init__.py), which sets
CHIP_HELD_ENV there.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import numpy as np

CHIP_HELD_ENV = "KAULDRON_TUTORIAL_CHIP_HELD"  # set by the runner: this run's own process holds the TPU


def on_tpu() -> bool:
    """Whether this process computes on a TPU (it starts jax's backend)."""
    return jax.default_backend() == "tpu"


def elementwise_rel() -> float:
    return 1e-4 if on_tpu() else 1e-5


def as_the_chip_multiplies(factor) -> np.ndarray:
    """A float32 factor of a matrix product as this process's device multiplies it at jax's
    default precision: rounded to bfloat16 on a TPU, as it is elsewhere."""
    factor = np.asarray(factor, np.float32)
    if not on_tpu():
        return factor
    import ml_dtypes  # jax's own dependency

    return factor.astype(ml_dtypes.bfloat16).astype(np.float32)


def check_one_chip(lesson) -> None:
    """Where this run's own process holds a TPU (the runner says so): a Python program
    left to open it (JAX_PLATFORMS unset) fails, saying the chip is taken. Elsewhere (a
    CPU, or a TPU the run keeps off with JAX_PLATFORMS=cpu) a skipped check."""
    claim = "a Python program that opens the TPU while another process holds it fails: libtpu's lock is taken"
    if os.environ.get(CHIP_HELD_ENV) != "1":
        lesson.skip_check(claim, "no process of this run holds a TPU here")
        return
    env = {name: value for name, value in os.environ.items() if name != "JAX_PLATFORMS"}
    opened = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True,
                            text=True, timeout=120)
    lesson.check(opened.returncode != 0 and ("lockfile" in opened.stderr or "already in use" in opened.stderr), claim)
