"""What every training lesson and its child processes import, imported once by the process
that forks them all: multiprocessing's forkserver (harness/warm_start.py's `warm_context`),
which forks the --jobs workers and the warm-start server, which forks the lessons'
children. Each starts with it instead of paying about 8 CPU seconds of its own.
Importing starts no jax backend, so forking after it is safe."""

import gc

from harness import runtime

# Python's docs on gc.freeze: disable collection early in the parent, freeze before the
# fork, enable it in the children. Importing TensorFlow creates millions of objects, and
# the full collections that triggers cost about 0.9 of its 4.8 CPU seconds (measured),
# on the path every run waits on; whatever garbage the imports leave is a few hundred
# objects, kept.
gc.disable()

# The run's settings are in the environment already. Nothing else is set here: a process
# forked from this one runs `python -m kauldron.main` as it would run on its own (absl's
# verbosity included), or a lesson, whose worker sets what lessons need.
runtime.quiet_tensorflow_startup()

try:
    import flax.linen  # noqa: F401
    import jax  # noqa: F401
    import optax  # noqa: F401
    from kauldron import kd

    kd.train.Trainer, kd.data.InMemoryPipeline  # Kauldron's modules load on first use
except Exception:  # noqa: BLE001 - a forked process imports it again, and its lesson says what failed
    pass
finally:
    # What the imports made lives as long as the process. Frozen, a forked process's
    # garbage collections skip it (with TensorFlow loaded, a full collection otherwise
    # takes 0.3-0.4 s) and never write to its memory pages, which then stay shared.
    gc.freeze()
    gc.enable()
