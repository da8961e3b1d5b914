r"""The regression experiment as a job of several processes (section 18).

The same experiment as `configs/regression.py`, for 20 steps with a checkpoint at the end,
whose training pipeline also writes down which rows the process running it read in its
first batch (`rows-process-<i>.json` in the workdir), to show how the data is shared out.
Start every process of the job with the same command (see sections/distributed_main.py):

    python -m sections.distributed_main --coordinator_address=HOST:PORT --num_processes=2 \
        --process_id=0 --cfg=configs/multihost.py --cfg.workdir=/absolute/shared/path
"""

from kauldron import konfig

from configs import regression as regression_config

with konfig.imports():
    from kauldron import kd

    from sections.parts import regression
    from sections.parts import multihost as multihost_parts


def get_config():
    cfg = regression_config.get_config()
    cfg.num_train_steps = 20
    cfg.train_ds = multihost_parts.InMemoryRowsRecorded(
        loader=regression.make_loader("train"), batch_size=32, shuffle=True, num_epochs=None,
        record_dir=cfg.ref.workdir,
    )
    cfg.checkpointer = kd.ckpts.Checkpointer(save_interval_steps=20)
    return cfg
