"""Evaluators and summaries, and evaluating a finished run.

An evaluator (`kd.evals.Evaluator`) runs the model on its own data with its own losses
and metrics, along training every N steps or in a job of its own once training is done.
Summaries go beyond scalars: a histogram, an image. All of it lands in the workdir as
TensorBoard event files, read back here and recomputed from the checkpoints.
"""

import io

import numpy as np
from kauldron import kd, konfig
from PIL import Image

from configs import heldout
from sections.children import finish, python_m, start_in_background
from sections.figures import plot_read_back
from sections.lesson import Lesson
from sections.recompute import check_heldout_against_checkpoints, heldout_predictions
from sections.registry import section
from sections.shared import read_tensors

with konfig.imports():
    from kauldron import kd as kd_cfg


@section(15, "evals", "Evaluators and summaries, and evaluating a finished run", part="for-real", trains=True,
         starts_processes=True, start_early=True,
         shows="an evaluator on held-out data, histogram and image summaries, and an eval job: kauldron.main --eval_names",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html")
def evaluators_and_summaries(lesson: Lesson) -> str:
    lesson.md("""
    ## Evaluators and summaries are config entries

    `configs/heldout.py` (below) adds to the regression experiment an evaluator `heldout`
    that runs every 20 steps on the 128 held-out rows with its own loss and metric, a
    second evaluator `final` that training does not run (`StandaloneLastCheckpoint`),
    two summaries, and a checkpoint every 20 steps.
    """)
    cfg = heldout.get_config()
    cfg.workdir = str(lesson.workdir / "run")
    trainer = konfig.resolve(cfg)
    print({name: type(evaluator.run).__name__ for name, evaluator in trainer.evals.items()})

    lesson.md("""
    ## Train

    `train()` runs the evaluators that run along training, here `heldout`, and writes
    each one's results under `workdir/<its name>/`; `final` is left to the eval job.
    """)
    state, _ = trainer.train()
    print(sorted(p.name for p in trainer.workdir.iterdir()))
    lesson.check((trainer.workdir / "heldout").is_dir() and not (trainer.workdir / "final").exists(),
                 "train() ran the evaluator heldout and not final")

    lesson.md("""
    ## An eval job on the finished run

    `--eval_names=final` makes `kauldron.main` evaluate instead of train, in a job of its
    own: it waits for the workdir's checkpoints, evaluates them, and stops once training
    has written `train_complete.txt` (on a cluster, it runs beside the training). It polls
    every 10 seconds, so even on a finished run it takes about 20 seconds: it runs while
    this lesson reads the run. Kauldron's ready-made eval-only config,
    `kd.train.Trainer.eval_only()`, does not resolve from PyPI: it reads its data through
    `kd.data.tf`, which needs the unpublished `grain.tensorflow`.
    """)
    eval_job = start_in_background(lesson, python_m("kauldron.main", f"--cfg={heldout.__file__}", f"--cfg.workdir={cfg.workdir}",
                                                    "--eval_names=final"), lesson.workdir / "eval-job.log")
    print(f"python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir={cfg.workdir} --eval_names=final")
    error = lesson.check_raises(AttributeError, lambda: konfig.resolve(kd_cfg.train.Trainer.eval_only()),
                                "resolving kd.train.Trainer.eval_only()")
    print(str(error).splitlines()[-1])
    lesson.check("has no attribute 'tf'" in str(error), "kd.train.Trainer.eval_only() fails on kd.data.tf")

    lesson.md("""
    ## What the evaluator wrote, recomputed by hand

    `heldout/` holds the evaluator's loss and metric at steps 0, 20 and 40, pooled over all
    128 rows. Restoring each step's checkpoint and computing them with numpy gives the same
    numbers.
    """)
    written = read_tensors(trainer.workdir, "heldout")
    for step in sorted(written["metrics/within_0.1"]):
        print(step, {tag: round(float(written[tag][step]), 6) for tag in ("losses/logcosh", "metrics/within_0.1")})
    check_heldout_against_checkpoints(lesson, trainer, written)

    lesson.md("""
    ## Summaries: a histogram and an image

    Every `log_summaries_every` steps, `train/` gets a histogram of the predictions
    (buckets of left edge, right edge, count) and an image of the encoder's output, a
    32 x 32 PNG for a batch of 32 rows.
    """)
    summaries = read_tensors(trainer.workdir, "train")
    histogram, png = summaries["summaries/preds"][40], summaries["summaries/enc"][40][2]
    print(histogram.shape, Image.open(io.BytesIO(png)).size)
    lesson.check_equal((sorted(summaries["summaries/preds"]), sorted(summaries["summaries/enc"])), ([0, 20, 40], [0, 20, 40]),
                       "the steps with a histogram and an image")
    lesson.check_equal((histogram.shape, float(histogram[:, 2].sum())), ((10, 3), 32.0),
                       "the histogram at step 40: 10 buckets counting one batch of 32")
    lesson.check_equal(Image.open(io.BytesIO(png)).size, (32, 32), "the image at step 40, decoded")

    lesson.md("""
    ## What an eval job does inside

    For each checkpoint it restores the state and calls the evaluator's
    `evaluate(state, step)`. Done by hand on the last checkpoint, it gives back what the
    run logged at step 40, bit for bit.
    """)
    restored = kd.ckpts.Checkpointer(workdir=cfg.workdir, save_interval_steps=1).restore(trainer.init_state(), step=40)
    by_hand = trainer.evals["heldout"].evaluate(restored, 40).compute()
    print({tag: float(value) for tag, value in {**by_hand.loss_values, **by_hand.metric_values}.items()})
    lesson.check_equal([float(by_hand.loss_values["losses/logcosh"]), float(by_hand.metric_values["metrics/within_0.1"])],
                       [float(written["losses/logcosh"][40]), float(written["metrics/within_0.1"][40])],
                       "evaluate(ckpt_40's state, 40) = what the run logged at step 40")
    plot_read_back(lesson, summaries, written)

    lesson.md("""
    ## The eval job's result

    Once training had completed, the job evaluated the last checkpoint with `final`,
    which uses the training loss and metric, and wrote them to `final/`.
    """)
    running, seconds = eval_job.poll() is None, finish(eval_job, "python -m kauldron.main --eval_names=final")
    lesson.check(running and seconds >= 19, "the eval job ran on while the lesson read the run, for its two 10-s waits")
    final = read_tensors(trainer.workdir, "final")
    print({tag: {step: round(float(value), 6) for step, value in values.items()} for tag, values in final.items()
           if tag.startswith(("losses", "metrics"))})
    preds, targets = heldout_predictions(trainer, restored.params)
    lesson.check_equal(sorted(final["losses/logcosh"]), [40], "the step final/ evaluated: the last checkpoint's")
    lesson.check_close(float(final["metrics/within_tol"][40]), float(np.mean(np.abs(preds - targets) < 0.25)),
                       "final's within_tol (the training metric) = numpy's on ckpt_40")
    lesson.fact("heldout", {str(step): float(written["losses/logcosh"][step]) for step in sorted(written["losses/logcosh"])})
    return (f"heldout logcosh {float(written['losses/logcosh'][0]):.3f} -> {float(written['losses/logcosh'][40]):.4f}, equal to"
            " numpy on each checkpoint; summaries read back; kauldron.main --eval_names evaluated the finished run")
