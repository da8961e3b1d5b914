"""Evaluators and summaries, and evaluating a finished run.

An evaluator (`kd.evals.Evaluator`) runs the model on its own data with its own losses
and metrics, along training every N steps or in a job of its own once training is done.
Summaries go beyond scalars: a histogram, an image. All of it lands in the workdir as
TensorBoard event files, where this lesson reads it back with TensorBoard's own reader
and recomputes it by hand from the checkpoints.
"""

import io

import numpy as np
import orbax.checkpoint as ocp
from kauldron import kd, konfig
from PIL import Image

from configs import heldout
from sections.children import ROOT, finish, python_m, start_in_background
from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import make_data, read_tensors

with konfig.imports():
    from kauldron import kd as kd_cfg

CONFIG_FILE = ROOT / "configs" / "heldout.py"


@section(15, "evals", "Evaluators and summaries, and evaluating a finished run", trains=True,
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
    eval_job = start_in_background(lesson, python_m("kauldron.main", f"--cfg={CONFIG_FILE}", f"--cfg.workdir={cfg.workdir}",
                                                    "--eval_names=final"), lesson.workdir / "eval-job.log")
    print(f"python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir={cfg.workdir} --eval_names=final")
    eval_only = kd_cfg.train.Trainer.eval_only()
    eval_only.workdir = str(lesson.workdir / "eval-only")
    error = lesson.check_raises(AttributeError, lambda: konfig.resolve(eval_only), "resolving kd.train.Trainer.eval_only()")
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
    check_against_checkpoints(lesson, trainer, written)

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
    running = eval_job.poll() is None
    seconds = finish(eval_job, "python -m kauldron.main --eval_names=final")
    lesson.check(running and seconds >= 19,
                 "the eval job ran on while the lesson read the run, for at least its two 10-s waits (>= 19 s)")
    final = read_tensors(trainer.workdir, "final")
    print({tag: {step: round(float(value), 6) for step, value in values.items()} for tag, values in final.items()
           if tag.startswith(("losses", "metrics"))})
    data, params = make_data("eval"), restored.params
    preds = np.asarray(trainer.model.apply({"params": params}, data["x"])["y"])
    lesson.check_equal(sorted(final["losses/logcosh"]), [40], "the step final/ evaluated: the last checkpoint's")
    lesson.check_close(float(final["metrics/within_tol"][40]), float(np.mean(np.abs(preds - data["y"]) < 0.25)),
                       "final's within_tol (the training metric) = numpy's on ckpt_40")
    lesson.fact("heldout", {str(step): float(written["losses/logcosh"][step]) for step in sorted(written["losses/logcosh"])})
    return (f"heldout logcosh {float(written['losses/logcosh'][0]):.3f} -> {float(written['losses/logcosh'][40]):.4f}, equal to"
            " numpy on each checkpoint; summaries read back; kauldron.main --eval_names evaluated the finished run")


def check_against_checkpoints(lesson: Lesson, trainer, written: dict) -> None:
    data = make_data("eval")
    for step in sorted(written["metrics/within_0.1"]):
        params = ocp.StandardCheckpointer().restore(trainer.workdir / "checkpoints" / f"ckpt_{step}" / "default")["params"]
        preds = np.asarray(trainer.model.apply({"params": params}, data["x"])["y"])
        lesson.check_close(float(written["losses/logcosh"][step]), float(np.mean(np.log(np.cosh(preds - data["y"])))),
                           f"heldout logcosh at step {step} = numpy's with ckpt_{step}", rel=1e-5)
        lesson.check_close(float(written["metrics/within_0.1"][step]), float(np.mean(np.abs(preds - data["y"]) < 0.1)),
                           f"heldout within_0.1 at step {step} = numpy's with ckpt_{step}")


def plot_read_back(lesson: Lesson, summaries: dict, written: dict) -> None:
    loss = {step: float(v) for step, v in summaries["losses/logcosh"].items()}
    metric = {step: float(v) for step, v in written["metrics/within_0.1"].items()}
    lesson.plot("Section 15: read back from the workdir",
                Panel("training loss (train/)", "step", "logcosh (log scale)", log_y=True,
                      lines={"train logcosh": (sorted(loss), [loss[s] for s in sorted(loss)])}),
                Panel("evaluator's metric (heldout/)", "step", "fraction within 0.1",
                      lines={"heldout within_0.1": (sorted(metric), [metric[s] for s in sorted(metric)])}))
