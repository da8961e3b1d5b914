"""Process-wide settings the lessons need before jax, TensorFlow or tqdm start.

The driver calls `prepare` before anything imports jax: jax reads its compilation-cache
settings and its C++ log level when it is imported. They are set as environment
variables, so the processes a lesson starts (`python -m kauldron.main`, a child with 8
simulated devices) get the same settings.
"""

from __future__ import annotations

import functools
import os
import pathlib
import sys

# Cache every compiled program, however small or fast to compile: on a CPU almost all of
# Kauldron's programs compile in under a second, below jax's default threshold of 1 s.
# A size cap turns on jax's LRU eviction, which also locks the directory (with filelock),
# so two runs can share the cache safely.
_COMPILE_CACHE_SETTINGS = {
    "jax_persistent_cache_min_compile_time_secs": 0,
    "jax_persistent_cache_min_entry_size_bytes": -1,
    "jax_compilation_cache_max_size": 1 << 30,
}


def default_cache() -> pathlib.Path:
    """Per user, shared by runs: $XDG_CACHE_HOME/kauldron-tutorial (~/.cache/...)."""
    root = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(root) / "kauldron-tutorial"


@functools.cache
def prepare(cache: pathlib.Path | None = None, workdir: pathlib.Path | None = None) -> None:
    """`cache`: the directory runs share (jax's compiled programs in `jax/`, matplotlib's
    font list in `matplotlib/`; both written under locks), or None for none. `workdir`:
    the run's own directory, for what libraries would otherwise write to the home
    directory. Either way, two runs share no other file."""
    # Kauldron draws tqdm bars for training and evaluation, and has no option to turn them
    # off. In a log file they are a flood of carriage returns: keep them for terminals only.
    # tqdm reads this when it is imported, so it must be set before Kauldron imports it.
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")
    # TensorFlow's and jaxlib's C++ log lines, among them a misleading "CUDA error" on
    # CPU-only machines. (TensorFlow still prints a few lines while it is imported.)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    # Libraries imported along the way write to the home directory: Keras its keras.json,
    # matplotlib (imported by Kauldron) a font list that takes half a second to build.
    if workdir is not None:
        os.environ.setdefault("KERAS_HOME", str(workdir / ".keras"))
        os.environ.setdefault("MPLCONFIGDIR", str((cache or workdir) / "matplotlib"))

    if cache is not None:
        settings = {**_COMPILE_CACHE_SETTINGS, "jax_compilation_cache_dir": str(cache / "jax")}
        os.environ.update({name.upper(): str(value) for name, value in settings.items()})
        if "jax" in sys.modules:  # too late for the environment: tell jax directly
            import jax

            for name, value in settings.items():
                jax.config.update(name, value)

    from absl import logging as absl_logging

    # Kauldron and Orbax log through absl; INFO is hundreds of lines per training run.
    absl_logging.set_verbosity(absl_logging.WARNING)


def release_memory() -> None:
    """Drops what a finished lesson left behind: jax's in-memory caches of compiled
    programs (keyed by each Trainer, so they keep every Trainer alive) and the garbage.
    The next lesson recompiles nothing it needs: the persistent cache still has it."""
    import gc

    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    gc.collect()
