"""Handwritten digits, classified: the shape of every Kauldron example (section 0).

A TFDS dataset read by PyGrain, a classifier, a cross-entropy loss and an accuracy
metric, an evaluator on the test split, and a checkpointer that keeps the checkpoint with
the best test accuracy. `aux.data_dir` says where the dataset is (None: TFDS's default):

    python -m kauldron.main --cfg=configs/digits.py --cfg.workdir=/absolute/path \
        --cfg.aux.data_dir=/where/tensorflow_datasets
"""

from kauldron import konfig

with konfig.imports():
    import optax
    from kauldron import kd

    from sections.parts import digits

# The checkpointer ranks each checkpoint by the metrics the evaluator computed at its step:
# ranking one saved on a step the evaluator skips fails (KeyError on `test.accuracy`), so
# save on multiples of the evaluator's interval; here both run every 25 steps.
EVAL_AND_SAVE_EVERY = 25


def get_config():
    cfg = kd.train.Trainer()
    cfg.seed = 0
    cfg.aux = {"data_dir": None}
    cfg.train_ds = _digits("train", cfg.ref.aux.data_dir, shuffle=True, num_epochs=None, batch_size=32)
    cfg.model = digits.DigitsMLP(image="batch.image", hidden=128)
    cfg.num_train_steps = 100
    cfg.train_losses = {"xent": kd.losses.SoftmaxCrossEntropyWithIntLabels(logits="preds.logits", labels="batch.label")}
    cfg.train_metrics = {"accuracy": kd.metrics.Accuracy(logits="preds.logits", labels="batch.label")}
    # A 20-step warm-up, then a constant rate: no decay.
    cfg.schedules = {"learning_rate": optax.warmup_constant_schedule(
        init_value=0.0, peak_value=3e-2, warmup_steps=20)}
    cfg.optimizer = optax.adam(learning_rate=cfg.ref.schedules["learning_rate"])
    cfg.evals = {
        "test": kd.evals.Evaluator(
            run=kd.evals.EveryNSteps(n=EVAL_AND_SAVE_EVERY),
            ds=_digits("test", cfg.ref.aux.data_dir, shuffle=False, num_epochs=1, batch_size=120),
            metrics={"accuracy": kd.metrics.Accuracy(logits="preds.logits", labels="batch.label")},
        ),
    }
    # Orbax keeps the `max_to_keep` checkpoints with the best test accuracy, not the latest;
    # a restarted run resumes from the latest of those: with one kept, the best.
    cfg.checkpointer = kd.ckpts.Checkpointer(save_interval_steps=EVAL_AND_SAVE_EVERY, max_to_keep=1,
                                             best_metric_path="test.accuracy", best_mode="max")
    cfg.profiler = None
    return cfg


def _digits(split: str, data_dir, **kwargs):
    return kd.data.py.Tfds(
        name="digits", split=split, data_dir=data_dir,
        transforms=[kd.data.py.Elements(keep=["image", "label"]),
                    kd.data.py.ValueRange(key="image", in_vrange=(0, 255), vrange=(0, 1)),
                    kd.data.py.Rearrange(key="label", pattern="... -> ... 1")],  # the loss wants [..., 1]
        # The images are 64 bytes: worker processes would cost more than they save.
        num_workers=0, **kwargs,
    )
