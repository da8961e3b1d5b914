"""The shared MLP regression as a Kauldron config file.

`get_config()` returns the experiment as a ConfigDict: nothing is built until it is
resolved. Lessons that are not about building a Trainer start from it and override what
they need; the same file serves the command line:

    python -m kauldron.main --cfg=configs/regression.py --cfg.model.hidden=128 \
        --cfg.workdir=/path/to/workdir

`sweep()` yields the overrides of the sweep lesson. It imports `sections.parts.regression`, so run
it from the repository root (or put the root on PYTHONPATH).
"""

from kauldron import konfig

with konfig.imports():
    import optax
    from kauldron import kd

    from sections.parts import regression


def get_config():
    cfg = kd.train.Trainer()
    cfg.seed = 0
    cfg.train_ds = kd.data.InMemoryPipeline(
        loader=regression.make_loader("train"), batch_size=32, shuffle=True, num_epochs=None
    )
    cfg.model = regression.MLP(inputs="batch.x", hidden=32)
    cfg.num_train_steps = 200
    cfg.log_metrics_every = 10
    cfg.train_losses = {"logcosh": regression.LogCosh(preds="preds.y", targets="batch.y")}
    cfg.train_metrics = {"within_tol": regression.WithinTol(preds="preds.y", targets="batch.y")}
    cfg.optimizer = optax.adam(learning_rate=1e-2)
    # Kauldron's default profiler cannot start twice in one process ("Profile has already
    # been started"), and the lessons train several times in one.
    cfg.profiler = None
    return cfg


def sweep():
    """One dict of overrides per run (key path -> new value): Kauldron's `def sweep()`
    convention, which its XManager launcher reads (`--xp.sweep`)."""
    yield {}  # the baseline
    yield {"model.hidden": 128}
    yield {"optimizer.learning_rate": 0.1}
    yield {"optimizer": optax.sgd(0.05)}
