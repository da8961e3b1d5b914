"""The regression experiment, ready for preemptible machines.

Its data comes from a PyGrain pipeline (`kd.data.py.DataSource`), whose position goes
into every checkpoint, and it checkpoints every 100 steps. Kill it at any point and run
the same command again: it resumes from the last committed checkpoint and ends bit for
bit where an uninterrupted run ends.

    python -m kauldron.main --cfg=configs/preemptible.py --cfg.workdir=/absolute/path

(On a combination the compat layer has to fix, start it as `python -m compat.run
kauldron.main ...`.) Run from the repository root: it imports `configs` and `sections`.
"""

from kauldron import konfig

from configs import regression as regression_config

with konfig.imports():
    from kauldron import kd

    from sections.parts import regression


def get_config():
    cfg = regression_config.get_config()
    cfg.train_ds = kd.data.py.DataSource(
        data_source=regression.RegressionRows("train"), batch_size=32, shuffle=True,
        num_epochs=None, num_workers=0,
    )
    cfg.num_train_steps = 1000
    cfg.checkpointer = kd.ckpts.Checkpointer(save_interval_steps=100)
    return cfg
