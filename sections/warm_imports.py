"""What every training lesson imports, imported once by the server that forks the --jobs
workers (tutorial.py), so that each worker starts with it instead of paying about 8 CPU
seconds of its own. Importing starts no jax backend, so forking after it is safe."""

import gc

from sections import runtime

runtime.prepare()  # the driver's settings are in the environment; this quiets TensorFlow's start

try:
    import flax.linen  # noqa: F401
    import jax  # noqa: F401
    import optax  # noqa: F401
    from kauldron import kd

    kd.train.Trainer, kd.data.InMemoryPipeline  # Kauldron's modules load on first use
except Exception:  # noqa: BLE001 - a worker imports it again, and its lesson says what failed
    pass

# What the imports made lives as long as the process. Frozen, a forked process's garbage
# collections skip it (with TensorFlow loaded, a full collection otherwise takes 0.3-0.4 s)
# and never write to its memory pages, which then stay shared (Python's docs on gc.freeze).
gc.collect()
gc.freeze()
