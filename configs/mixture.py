"""Section 0's classifier, trained on a mixture (section 20): the digits, and copies of them
shifted two pixels right, three to one, every image randomly rotated.

`kd.data.py.Mix` mixes two pipelines by weight. Each source's transforms run on its own
examples before mixing (a `shifted` flag, and the shift); the mixture's run on every
example after (scaling, the random rotation, the label's trailing axis). The pipeline
sets no seed: it takes the Trainer's.
"""

from kauldron import konfig

with konfig.imports():
    import optax
    from kauldron import kd

    from sections.parts import digits, mixture


def get_config():
    cfg = kd.train.Trainer()
    cfg.seed = 0
    cfg.train_ds = kd.data.py.Mix(
        datasets=[
            kd.data.py.DataSource(data_source=mixture.Digits(split="train"), shuffle=True,
                                  transforms=[kd.data.py.AddConstants(values={"shifted": 0})]),
            kd.data.py.DataSource(data_source=mixture.Digits(split="train"), shuffle=True,
                                  transforms=[kd.data.py.AddConstants(values={"shifted": 1}),
                                              mixture.ShiftRight(key="image", pixels=2)]),
        ],
        weights=[0.75, 0.25],
        transforms={
            "scale": kd.data.py.ValueRange(key="image", in_vrange=(0, 255), vrange=(0, 1)),
            "augment": mixture.RandomRotate(key="image", max_degrees=15),
            "label": kd.data.py.Rearrange(key="label", pattern="... -> ... 1"),  # the loss wants [..., 1]
        },
        batch_size=64,
        num_workers=0,  # 64-byte images: worker processes would cost more than they save
    )
    cfg.model = digits.DigitsMLP(image="batch.image", hidden=128)
    cfg.num_train_steps = 200
    cfg.train_losses = {"xent": kd.losses.SoftmaxCrossEntropyWithIntLabels(logits="preds.logits", labels="batch.label")}
    cfg.train_metrics = {"accuracy": kd.metrics.Accuracy(logits="preds.logits", labels="batch.label")}
    cfg.optimizer = optax.adam(learning_rate=1e-2)
    cfg.profiler = None
    return cfg
