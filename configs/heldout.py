"""The regression experiment, evaluated on held-out rows and summarised (section 15).

An evaluator along training (`heldout`, every 20 steps), two that only an eval job runs
(`every`, on each checkpoint it finds, and `final`, once training is done), a histogram
and an image among the training summaries, and a checkpoint every 20 steps. Train it,
then evaluate the finished run:

    python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=/absolute/path
    python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=/absolute/path --eval_names=every,final
"""

from kauldron import konfig

from configs import regression as regression_config

with konfig.imports():
    from kauldron import kd

    from sections.parts import regression


def get_config():
    cfg = regression_config.get_config()
    cfg.num_train_steps = 40
    cfg.checkpointer = kd.ckpts.Checkpointer(save_interval_steps=20)
    heldout = kd.data.InMemoryPipeline(loader=regression.make_loader("eval"), batch_size=32, num_epochs=1)
    cfg.evals = {
        "heldout": kd.evals.Evaluator(
            run=kd.evals.EveryNSteps(20), ds=heldout,
            losses={"logcosh": regression.LogCosh(preds="preds.y", targets="batch.y")},
            metrics={"within_0.1": regression.WithinTol(preds="preds.y", targets="batch.y", tol=0.1)},
        ),
        # Standalone: train() never runs them; an eval job does (`--eval_names=every,final`).
        # No losses or metrics given: they use the training ones.
        "every": kd.evals.Evaluator(run=kd.evals.StandaloneEveryCheckpoint(), ds=heldout),
        "final": kd.evals.Evaluator(run=kd.evals.StandaloneLastCheckpoint(), ds=heldout),
    }
    cfg.log_summaries_every = 20
    cfg.train_summaries = {
        "preds": kd.summaries.HistogramSummary(tensor="preds.y", num_buckets=10),
        "enc": kd.summaries.ShowImages(images="interms.enc.__call__[0]", rearrange="b f -> 1 b f 1", num_images=1),
    }
    return cfg
