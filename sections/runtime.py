"""Process-wide settings the lessons need before jax, TensorFlow or tqdm start.

The driver calls this before anything imports jax (whose C++ logging reads
TF_CPP_MIN_LOG_LEVEL at import); the registry calls it again before each lesson, which
costs nothing after the first time.
"""

from __future__ import annotations

import functools
import os
import sys


@functools.cache
def prepare() -> None:
    # Kauldron draws tqdm bars for training and evaluation, and has no option to turn them
    # off. In a log file they are a flood of carriage returns: keep them for terminals only.
    # tqdm reads this when it is imported, so it must be set before Kauldron imports it.
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")
    # TensorFlow's C++ log lines, among them a misleading "CUDA error" on CPU-only machines.
    # (The few lines TensorFlow prints while it is imported come before this takes effect.)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    from absl import logging as absl_logging

    # Kauldron and Orbax log through absl; INFO is hundreds of lines per training run.
    absl_logging.set_verbosity(absl_logging.WARNING)
