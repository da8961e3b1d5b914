"""What changes for the checks where jax computes on a TPU: how closely float32 results
agree with numpy's, and what a program meets that opens the chip another process holds.

Tolerances, measured on a TPU v5e (jax 0.10.2) against numpy in float64:
- elementwise functions (log, cosh, exp): within 1e-5 on a CPU; on a TPU to about four
  digits (section 5's masked LogCosh: 1.6e-5 relative), so 1e-4 there;
- results of float32 matrix products: within 1e-5 on a CPU; on a TPU, jax's default
  precision multiplies float32 in one bfloat16 pass, rounding each factor to bfloat16
  (2**-8 relative each), so a product is within 2**-7 of its terms' magnitude there
  (measured: section 17's norm of x @ kernel, 3.4e-4 relative; elementwise, up to 1.15 x
  2**-8 of |x| @ |kernel|); `jax.default_matmul_precision("highest")` buys the digits
  back, at several passes a product.

One process at a time holds a TPU. On such a machine the tutorial's process holds it, and
a lesson that starts Python processes runs, with them, on the CPU (runner/__init__.py).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import jax


def on_tpu() -> bool:
    """Whether this process computes on a TPU (it starts jax's backend)."""
    return jax.default_backend() == "tpu"


def elementwise_rel() -> float:
    return 1e-4 if on_tpu() else 1e-5


def matmul_rel() -> float:
    return 2.0**-7 if on_tpu() else 1e-5


def check_one_chip(lesson) -> None:
    """Where libtpu is installed, as on a TPU machine, whose chip the tutorial's own process
    holds: a Python program left to open it (JAX_PLATFORMS unset) fails, saying why.
    Elsewhere a skipped check."""
    claim = "a Python program that opens the TPU while another process holds it fails: libtpu's lockfile"
    if importlib.util.find_spec("libtpu") is None:
        lesson.skip_check(claim, "libtpu is not installed here: no TPU")
        return
    env = {name: value for name, value in os.environ.items() if name != "JAX_PLATFORMS"}
    opened = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True,
                            text=True, timeout=120)
    lesson.check(opened.returncode != 0 and "lockfile" in opened.stderr, claim)
