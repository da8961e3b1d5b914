"""The shared MLP regression as a Kauldron config file.

`get_config()` returns the experiment as a ConfigDict: nothing is built until it is
resolved. The same file serves the sweep lesson (section 7) and the command line:

    python -m kauldron.main --cfg=configs/regression.py --cfg.model.hidden=128 \
        --cfg.workdir=/path/to/workdir

It imports `sections.shared`, so run it from the repository root (or put the root on
PYTHONPATH).
"""

from kauldron import konfig

with konfig.imports():
    import optax
    from kauldron import kd

    from sections import shared


def get_config():
    cfg = kd.train.Trainer()
    cfg.seed = 0
    cfg.train_ds = kd.data.InMemoryPipeline(
        loader=shared.make_loader("train"), batch_size=32, shuffle=True, num_epochs=None
    )
    cfg.model = shared.MLP(inputs="batch.x", hidden=32)
    cfg.num_train_steps = 200
    cfg.log_metrics_every = 10
    cfg.train_losses = {"logcosh": shared.LogCosh(preds="preds.y", targets="batch.y")}
    cfg.optimizer = optax.adam(learning_rate=1e-2)
    return cfg


def sweep():
    """The overrides of the sweep lesson, as Kauldron's `def sweep()` convention yields them:
    one dict per run, mapping a key path in the config to its new value."""
    yield {}  # the baseline
    yield {"model.hidden": 4}
    yield {"model.hidden": 128}
    yield {"optimizer.learning_rate": 0.1}
    yield {"optimizer": optax.sgd(0.05)}
