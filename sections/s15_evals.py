"""Evaluators and summaries, read back from what the run wrote.

An evaluator (`kd.evals.Evaluator`) runs every N steps on its own data, here the 128
held-out rows, with its own losses and metrics, and writes them under
`workdir/<its name>/` as TensorBoard event files; training writes to `workdir/train/`.
Summaries go beyond scalars: `kd.summaries.HistogramSummary` logs a histogram of a key
path, `kd.summaries.ShowImages` an image, every `log_summaries_every` steps. This lesson
reads all of it back with TensorBoard's own reader (`EventAccumulator`) and recomputes each
evaluation by hand from the checkpoint saved at that step.

Kauldron's evaluation-only config, `kd.train.Trainer.eval_only()` (its
`examples/mnist_eval_only.py`), does not resolve from the PyPI install, on a CPU or
anywhere: it describes the data through `kd.data.tf`, which needs `grain.tensorflow`,
missing from the pinned grain; and it takes the model and weights from an XManager
experiment id, loading them with `PartialKauldronLoader` (which section 13 shows
failing). So the lesson evaluates the finished checkpoint the way the evaluator is built
to be used: restore the state, and call `evaluator.evaluate(state, step)`.
"""

import io

import numpy as np
import orbax.checkpoint as ocp
from kauldron import kd, konfig

from configs import regression
from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import make_data, read_tensors

STEPS, EVERY, TOL = 200, 100, 0.1


def experiment(workdir):
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir), STEPS
    cfg.log_summaries_every = EVERY
    cfg.train_summaries = {
        "preds": kd_cfg.summaries.HistogramSummary(tensor="preds.y", num_buckets=10),
        "enc": kd_cfg.summaries.ShowImages(images="interms.enc.__call__[0]", rearrange="b f -> 1 b f 1", num_images=1),
    }
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=EVERY)
    cfg.evals = {"heldout": kd_cfg.evals.Evaluator(
        run=kd_cfg.evals.EveryNSteps(EVERY),
        ds=kd_cfg.data.InMemoryPipeline(loader=shared_cfg.make_loader("eval"), batch_size=32, num_epochs=1),
        losses={"logcosh": shared_cfg.LogCosh(preds="preds.y", targets="batch.y")},
        metrics={"within_0.1": shared_cfg.WithinTol(preds="preds.y", targets="batch.y", tol=TOL)},
    )}
    return cfg


def by_hand(trainer, params) -> dict[str, float]:
    """The evaluator's loss and metric over the 128 held-out rows, with numpy."""
    data = make_data("eval")
    preds = np.asarray(trainer.model.apply({"params": params}, data["x"])["y"])
    return {"losses/logcosh": float(np.mean(np.log(np.cosh(preds - data["y"])))),
            "metrics/within_0.1": float(np.mean(np.abs(preds - data["y"]) < TOL))}


def check_evaluations(lesson: Lesson, workdir, trainer) -> dict:
    heldout = read_tensors(workdir, "heldout")
    steps = sorted(heldout["metrics/within_0.1"])
    lesson.check_equal(steps, [0, 100, 200], "the steps at which heldout/ has the evaluator's metric")
    print(f"  {workdir.name}/heldout/, read with EventAccumulator, against numpy on the held-out rows with"
          f" each step's checkpoint:\n  {'step':>6} {'logcosh on disk':>16} {'by hand':>9} {'within 0.1':>11} {'by hand':>8}")
    for step in steps:
        params = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / f"ckpt_{step}" / "default")["params"]
        hand = by_hand(trainer, params)
        disk = {tag: float(heldout[tag][step]) for tag in hand}
        print(f"  {step:>6} {disk['losses/logcosh']:>16.6f} {hand['losses/logcosh']:>9.6f}"
              f" {disk['metrics/within_0.1']:>11.4f} {hand['metrics/within_0.1']:>8.4f}")
        for tag in hand:
            lesson.check_close(disk[tag], hand[tag], f"{tag} on disk at step {step} = numpy with ckpt_{step}'s params", rel=1e-5)
    return heldout


def check_summaries(lesson: Lesson, workdir) -> None:
    from PIL import Image

    train = read_tensors(workdir, "train")
    histograms, images = train["summaries/preds"], train["summaries/enc"]
    lesson.check_equal((sorted(histograms), sorted(images)), ([0, 100, 200], [0, 100, 200]),
                       "the steps with a histogram and an image (log_summaries_every=100)")
    last = histograms[STEPS]
    lesson.check_equal((last.shape, float(last[:, 2].sum())), ((10, 3), 32.0),
                       "the histogram at step 200: 10 buckets of (left, right, count), counting one batch of 32")
    picture = Image.open(io.BytesIO(images[STEPS][2]))
    lesson.check_equal(picture.size, (32, 32), "the image at step 200 (the enc layer's 32 x 32 output), decoded")
    print(f"\n  train/ also holds summaries: a histogram of preds.y ({last.shape[0]} buckets, {last[:, 2].sum():.0f}"
          f" predictions)\n  and a {picture.size[0]}x{picture.size[1]} image of the enc layer's output, at steps {sorted(images)}")


def check_eval_only(lesson: Lesson, workdir, heldout) -> None:
    with konfig.imports():
        from kauldron import kd as kd_cfg

    eval_only = kd_cfg.train.Trainer.eval_only()
    eval_only.workdir = str(lesson.workdir / "eval-only-config")
    error = lesson.check_raises(AttributeError, lambda: konfig.resolve(eval_only),
                                "resolving kd.train.Trainer.eval_only() from the PyPI install")
    lesson.check("'kauldron.data' has no attribute 'tf'" in str(error), "it fails on kd.data.tf")
    missing = lesson.check_raises(ModuleNotFoundError, lambda: __import__("kauldron.data.tf"), "import kauldron.data.tf")
    print(f"\n  kd.train.Trainer.eval_only() does not resolve: {str(error).splitlines()[-1]};"
          f"\n  import kauldron.data.tf -> ModuleNotFoundError: {missing}")

    cfg = experiment(lesson.workdir / "evaluate-only")
    trainer = konfig.resolve(cfg)
    reader = kd.ckpts.Checkpointer(workdir=str(workdir), save_interval_steps=1)  # the finished run's checkpoints
    state = reader.restore(trainer.init_state(), step=STEPS)
    values = trainer.evals["heldout"].evaluate(state, STEPS).compute()
    again = {**values.loss_values, **values.metric_values}
    lesson.check_equal({tag: float(again[tag]) for tag in ("losses/logcosh", "metrics/within_0.1")},
                       {tag: float(heldout[tag][STEPS]) for tag in ("losses/logcosh", "metrics/within_0.1")},
                       "evaluating ckpt_200 without training = what the run logged at step 200, bit for bit")
    print(f"  Restored ckpt_{STEPS} and called evaluator.evaluate(state, {STEPS}): the same numbers as the run"
          " logged, bit for bit.")


@section(15, "evals", "Evaluators and summaries, read back from what the run wrote", trains=True,
         shows="an evaluator on held-out data and histogram/image summaries, read back from disk and recomputed by hand",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html")
def evaluators_and_summaries(lesson: Lesson) -> str:
    workdir = lesson.workdir / "run"
    trainer = konfig.resolve(experiment(workdir))
    trainer.train()
    heldout = check_evaluations(lesson, workdir, trainer)
    check_summaries(lesson, workdir)
    check_eval_only(lesson, workdir, heldout)
    train_loss = {step: float(v) for step, v in read_tensors(workdir, "train")["losses/logcosh"].items()}
    metric = {step: float(v) for step, v in heldout["metrics/within_0.1"].items()}
    lesson.plot("Section 15: read back from the workdir",
                Panel("training loss (train/)", "step", "logcosh (log scale)", log_y=True,
                      lines={"train logcosh": (sorted(train_loss), [train_loss[s] for s in sorted(train_loss)])}),
                Panel("evaluator's metric (heldout/)", "step", "fraction within 0.1",
                      lines={"heldout within_0.1": (sorted(metric), [metric[s] for s in sorted(metric)])}))
    lesson.fact("heldout", {str(step): {"logcosh": float(heldout["losses/logcosh"][step]), "within_0.1": metric[step]}
                            for step in sorted(metric)})
    return (f"heldout logcosh {float(heldout['losses/logcosh'][0]):.3f} -> {float(heldout['losses/logcosh'][STEPS]):.4f},"
            f" equal to numpy on each step's checkpoint; histogram and image read back; ckpt_{STEPS} re-evaluated exactly")
