r"""The regression experiment as a job of several processes (section 18).

The same experiment as `configs/regression.py`, for 20 steps with a checkpoint at the end,
and an evaluator on the held-out rows every 20 steps. Each pipeline also writes down which
rows the process running it read in its first batch (`train-rows-process-<i>.json` and
`eval-rows-process-<i>.json` in the workdir), to show how the data is shared out. Start
every process of the job with the same command (see sections/parts/distributed_main.py):

    python -m sections.parts.distributed_main --coordinator_address=HOST:PORT --num_processes=2 \
        --process_id=0 --cfg=configs/multihost.py --cfg.workdir=/absolute/shared/path
"""

from kauldron import konfig

from configs import regression as regression_config

with konfig.imports():
    from kauldron import kd

    from sections.parts import multihost, regression


def get_config():
    cfg = regression_config.get_config()
    cfg.num_train_steps = 20
    # batch_size is the global batch: with 2 processes, each loads 16 of the 32 rows.
    cfg.train_ds = multihost.InMemoryRowsRecorded(
        loader=regression.make_loader("train"), batch_size=32, shuffle=True, num_epochs=None,
        record_dir=cfg.ref.workdir,
    )
    cfg.evals = {
        "eval": kd.evals.Evaluator(
            run=kd.evals.EveryNSteps(20),
            # PyGrain: with shard_by_process=True (the default), process i keeps records
            # i, i + n, i + 2n... of the n processes', then shuffles its share.
            ds=multihost.DataSourceRowsRecorded(
                data_source=multihost.IndexedRows("eval"), shuffle=True, batch_size=32, num_epochs=1,
                num_workers=0, record_dir=cfg.ref.workdir,
            ),
        ),
    }
    # Kauldron's default, written out: each batch split along its first axis over every
    # device of the job (8 here), the parameters replicated on each.
    cfg.sharding = kd.sharding.ShardingStrategy(batch=kd.sharding.FIRST_DIM, params=kd.sharding.REPLICATED)
    cfg.checkpointer = kd.ckpts.Checkpointer(save_interval_steps=20)
    return cfg
