"""Evaluators and summaries, and evaluating a finished run.

An evaluator (`kd.evals.Evaluator`) runs the model on its own data with its own losses
and metrics, along training every N steps or in a job of its own, an eval job, which
evaluates the checkpoints training writes. Summaries go beyond scalars: a histogram, an
image. All of it lands in the workdir as TensorBoard event files, read back here and
recomputed from the checkpoints.
"""

import io

import matplotlib.pyplot as plt
from kauldron import kd, konfig
from PIL import Image

from configs import heldout as heldout_config
from harness import Lesson, section
from sections.parts.logs import read_tensors

with konfig.imports():
    from kauldron import kd as kd_cfg


@section(15, "evals", "Evaluators and summaries, and evaluating a finished run", part="for-real", trains=True,
         starts_processes=True, start_early=True,
         shows="an evaluator on held-out data, histogram and image summaries, and an eval job: kauldron.main --eval_names",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html")
def evaluators_and_summaries(lesson: Lesson, workdir):
    lesson.md("""
    ## Evaluators and summaries are config entries; train with `kauldron.main`

    `configs/heldout.py` (below) adds to the regression experiment three evaluators on
    the 128 held-out rows: `heldout` runs every 20 steps along training, with its own
    loss and metric; `every` and `final` are *standalone*: training never runs them, an
    eval job does. It also adds two summaries and a checkpoint every 20 steps. Training
    runs the evaluators that run along training, here `heldout`, and writes each one's
    results under `workdir/<its name>/`.
    """)
    lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run",
                 shows=r"Starting training loop|collection=heldout losses")
    print(sorted(path.name for path in (workdir / "run").iterdir()))
    print(sorted(path.name for path in (workdir / "run" / "checkpoints").iterdir()))
    with lesson.checks():
        lesson.check((workdir / "run" / "heldout").is_dir()
                     and not (workdir / "run" / "every").exists() and not (workdir / "run" / "final").exists(),
                     "training ran the evaluator heldout, and neither every nor final")
        lesson.check_equal(sorted(path.name for path in (workdir / "run" / "checkpoints").iterdir()),
                           ["ckpt_0", "ckpt_20", "ckpt_40"], "the checkpoints the run left",
                           internal="reads orbax's file layout")

    lesson.md("""
    ## An eval job on the finished run, and what `heldout` wrote

    `--eval_names=every,final` makes `kauldron.main` run `continuous_eval` instead of
    `train()`: a job of its own, which on a cluster runs beside the training. Each time
    it looks at the checkpoints, orbax's `checkpoints_iterator` gives it the *newest*
    one: `every` (`StandaloneEveryCheckpoint`) evaluates that one, and never sees those
    saved in between; `final` (`StandaloneLastCheckpoint`) evaluates once, at the end,
    the last checkpoint the job restored. After each checkpoint it waits 10 s, then
    looks for a newer one for up to 10 s, and it stops when none came and
    `train_complete.txt`, which `train()` writes at its end, exists: even on a finished
    run it takes about 20 s. Before all that, it waits for the `element_spec.json` that
    `train()` writes as a run starts. It never gives up by itself: pointed at a mistyped
    workdir, or at a run that crashed, it waits for ever, logging `Waiting for
    element_spec` or `Timed out waiting for new checkpoint` every 10 s.

    The config resolved here, on the same workdir, is for reading the run back: it
    names each evaluator by its key in `cfg.evals`. `heldout/` holds what that
    evaluator wrote along training: its loss and metric at steps 0, 20 and 40, each
    pooled over all 128 rows. Restoring each step's checkpoint and computing them with
    numpy gives the same numbers.
    """)
    eval_job = lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run"
                            " --eval_names=every,final", background=True, needed_by="The eval job's result",
                            shows=r"Found new checkpoint step|Running final evals|collection=(every|final) losses")
    cfg = heldout_config.get_config()
    cfg.workdir = str(workdir / "run")
    trainer = konfig.resolve(cfg)
    print({name: type(evaluator.run).__name__ for name, evaluator in trainer.evals.items()})
    written = read_tensors(workdir / "run", "heldout")
    for step in sorted(written["metrics/within_0.1"]):
        print(step, {tag: round(float(written[tag][step]), 6) for tag in ("losses/logcosh", "metrics/within_0.1")})
    with lesson.checks():
        lesson.check_equal({key: evaluator.name for key, evaluator in trainer.evals.items()},
                           {"heldout": "heldout", "every": "every", "final": "final"},
                           "each resolved evaluator's name: its key in cfg.evals")
        check_waits(lesson, trainer, workdir)
        lesson.skip_check("on a cluster, Kauldron's launcher runs the eval job beside the training job",
                          "kauldron.kxm, the XManager launcher, does not import from PyPI")
        check_heldout_against_checkpoints(lesson, trainer, written)

    lesson.md("""
    ## Summaries: a histogram and an image

    Every `log_summaries_every` steps, `train/` gets a histogram of the predictions
    (buckets of left edge, right edge, count) and an image of the encoder's output, a
    32 x 32 PNG for a batch of 32 rows. The same files hold the training loss, drawn
    below beside the evaluator's metric.
    """)
    summaries = read_tensors(workdir / "run", "train")
    histogram, png = summaries["summaries/preds"][40], summaries["summaries/enc"][40][2]
    print(histogram.shape, Image.open(io.BytesIO(png)).size)
    fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    loss, metric = summaries["losses/logcosh"], written["metrics/within_0.1"]
    loss_ax.semilogy(sorted(loss), [float(loss[step]) for step in sorted(loss)], marker="o")
    loss_ax.set(title="training loss (train/)", xlabel="step", ylabel="logcosh (log scale)")
    metric_ax.plot(sorted(metric), [float(metric[step]) for step in sorted(metric)], marker="o")
    metric_ax.set(title="evaluator's metric (heldout/)", xlabel="step", ylabel="fraction within 0.1")
    fig.suptitle("Read back from the run's event files")
    plt.show()
    with lesson.checks():
        lesson.check_equal((sorted(summaries["summaries/preds"]), sorted(summaries["summaries/enc"])),
                           ([0, 20, 40], [0, 20, 40]), "the steps with a histogram and an image")
        lesson.check_equal((histogram.shape, float(histogram[:, 2].sum())), ((10, 3), 32.0),
                           "the histogram at step 40: 10 buckets counting one batch of 32")
        lesson.check_equal(Image.open(io.BytesIO(png)).size, (32, 32), "the image at step 40, decoded")

    lesson.md("""
    ## What an eval job does inside

    For each checkpoint it restores the state and calls each evaluator's
    `evaluate(state, step)`. Done by hand on the last checkpoint (a checkpointer on the
    run's workdir restores it into a state of the right structure), it gives back what
    the run logged at step 40, bit for bit.
    """)
    checkpointer = kd.ckpts.Checkpointer(workdir=workdir / "run", save_interval_steps=1)
    restored = checkpointer.restore(trainer.init_state(), step=40)
    by_hand = trainer.evals["heldout"].evaluate(restored, 40).compute()
    print({tag: float(value) for tag, value in {**by_hand.loss_values, **by_hand.metric_values}.items()})
    with lesson.checks():
        lesson.check_equal([float(by_hand.loss_values["losses/logcosh"]), float(by_hand.metric_values["metrics/within_0.1"])],
                           [float(written["losses/logcosh"][40]), float(written["metrics/within_0.1"][40])],
                           "evaluate(ckpt_40's state, 40) = what the run logged at step 40")

    lesson.md("""
    ## From PyPI, an eval job without the optimizer state fails

    An evaluator with `discard_opt=True` drops the optimizer state. When every evaluator
    of an eval job does, the job builds its state without one and restores each
    checkpoint through `kd.ckpts.PartialKauldronLoader`, which needs a part of orbax
    that is not published: the job fails.
    """)
    params_only = lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run"
                               " --eval_names=final --cfg.evals.final.discard_opt=True",
                               check=False, shows=r"Found new checkpoint step|^ModuleNotFoundError")
    with lesson.checks():
        lesson.check(params_only.returncode != 0 and "No module named 'orbax.checkpoint.experimental.model_surgery"
                     in params_only.output,
                     "an eval job whose evaluators all set discard_opt=True fails from PyPI, in PartialKauldronLoader's"
                     " orbax import")

    lesson.md("""
    ## From PyPI, `kd.train.Trainer.eval_only()` does not resolve either

    Kauldron's ready-made eval-only config, `kd.train.Trainer.eval_only()`, finds the
    run to evaluate by its XManager experiment id (`cfg.aux.xid`, `cfg.aux.wid`): the
    model from that run's config, the weights through `PartialKauldronLoader`. It does
    not resolve from PyPI: it reads its data through `kd.data.tf`, which needs the
    unpublished `grain.tensorflow`. From PyPI, evaluate a run as above:
    `python -m kauldron.main --eval_names=...` on its own config, with standalone
    evaluators.
    """)
    eval_cfg = kd_cfg.train.Trainer.eval_only()
    print(eval_cfg.aux)
    print(eval_cfg.init_transform.workdir)
    try:
        konfig.resolve(eval_cfg)
    except AttributeError as error:
        print("AttributeError:", str(error).splitlines()[-1])
    with lesson.checks():
        lesson.check_equal((eval_cfg.aux.to_dict(),
                            eval_cfg.init_transform.__qualname__, eval_cfg.init_transform.workdir.__qualname__),
                           ({"xid": None, "wid": 1}, "kauldron.kd:ckpts.PartialKauldronLoader",
                            "kauldron.kd:ckpts.workdir_from_xid"),
                           "eval_only(): the run is found by cfg.aux.xid, its weights restored by PartialKauldronLoader")
        error = lesson.check_raises(AttributeError, lambda: konfig.resolve(kd_cfg.train.Trainer.eval_only()),
                                    "resolving kd.train.Trainer.eval_only()")
        lesson.check("has no attribute 'tf'" in str(error), "kd.train.Trainer.eval_only() fails on kd.data.tf")


    lesson.md("""
    ## The eval job's result

    The job found one checkpoint, the newest: `every/` holds step 40 only, although
    `ckpt_0` and `ckpt_20` are there too. Once its waits were over, `final` evaluated
    the same checkpoint. Neither names losses or metrics, so both use the training ones.
    """)
    for name in ("every", "final"):
        print(name, {tag: {step: round(float(value), 6) for step, value in values.items()}
                     for tag, values in read_tensors(workdir / "run", name).items() if tag.startswith(("losses", "metrics"))})
    with lesson.checks():
        lesson.check(eval_job.seconds >= 19, "the eval job took at least its two 10-s waits")
        every, final = read_tensors(workdir / "run", "every"), read_tensors(workdir / "run", "final")
        lesson.check_equal(sorted(every["losses/logcosh"]), [40],
                           "the steps every/ evaluated on a finished run: the newest checkpoint's only")
        lesson.check_equal(sorted(final["losses/logcosh"]), [40], "the step final/ evaluated: the last checkpoint's")
        log = eval_job.output
        lesson.check(0 <= log.find("Timed out waiting for new checkpoint") < log.find("collection=final"),
                     "final evaluated after the job's last wait for a new checkpoint",
                     internal="reads Kauldron's and orbax's log lines")
        preds, targets = heldout_predictions(trainer, restored.params)
        lesson.check_close(float(final["metrics/within_tol"][40]), float(np.mean(np.abs(preds - targets) < 0.25)),
                           "final's within_tol (the training metric) = numpy's on ckpt_40")
        lesson.fact("heldout", {str(step): float(written["losses/logcosh"][step]) for step in sorted(written["losses/logcosh"])})
        lesson.summary = (f"heldout logcosh {float(written['losses/logcosh'][0]):.3f} ->"
                          f" {float(written['losses/logcosh'][40]):.4f}, equal to numpy on each checkpoint; summaries"
                          " read back; an eval job evaluated the newest checkpoint of the finished run")


# How the lesson checks itself.
import types  # noqa: E402 - the checks' own, not the page's

import numpy as np  # noqa: E402

from sections.parts.regression import make_data  # noqa: E402


def check_waits(lesson: Lesson, trainer, workdir) -> None:
    """What an eval job waits for, on the finished run and on a workdir that holds nothing
    of a run, as a mistyped one would."""
    lesson.check((workdir / "run" / "element_spec.json").is_file(), "train() wrote element_spec.json to the workdir",
                 internal="reads Kauldron's file layout")
    on_run, _, _ = eval_job_waits(trainer)
    lesson.check_equal(on_run, [], "seconds slept waiting for element_spec.json on the finished run",
                       internal="runs Kauldron's private eval functions")
    cfg = heldout_config.get_config()
    cfg.workdir = str(workdir / "mistyped")
    sleeps, logged, iterator = eval_job_waits(konfig.resolve(cfg))
    lesson.check(sleeps == [10, 10, 10] and len(logged) == 3 and all(line.startswith("Waiting for element_spec")
                                                                     for line in logged),
                 "on a workdir without element_spec.json: a 10-s sleep and a 'Waiting for element_spec' line, three"
                 " times (stopped here), and on", internal="runs Kauldron's private eval functions")
    lesson.check_equal((iterator["min_interval_secs"], iterator["timeout"]), (10, 10),
                       "the eval job's (min_interval_secs, timeout) for orbax's checkpoints_iterator",
                       internal="runs Kauldron's private eval functions")
    stops_without = iterator["timeout_fn"]()
    (workdir / "mistyped" / "train_complete.txt").touch()
    lesson.check(not stops_without and iterator["timeout_fn"](),
                 "after a timeout, the eval job stops only once train_complete.txt exists in the workdir",
                 internal="runs Kauldron's private eval functions")


def eval_job_waits(trainer) -> tuple[list, list, dict]:
    """What an eval job on `trainer`'s workdir waits on, from Kauldron's eval code run
    here with its sleeps stopped: the seconds slept and lines logged while it looks for
    element_spec.json (stopped after three), and the arguments it gives orbax's
    checkpoints_iterator (which is not called)."""
    from unittest import mock

    from kauldron.evals import eval_impl

    sleeps, logged, iterator = [], [], {}

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise TimeoutError("stopped here")

    def iter_new_checkpoints(self, **kwargs):
        iterator.update(kwargs)
        return iter(())

    with (mock.patch.object(eval_impl, "time", types.SimpleNamespace(sleep=sleep)),
          mock.patch.object(eval_impl.logging, "info", lambda message, *args: logged.append(message % args))):
        try:
            eval_impl._get_element_spec(trainer)
        except TimeoutError:
            pass
    with mock.patch.object(type(trainer.checkpointer), "iter_new_checkpoints", iter_new_checkpoints):
        for _ in eval_impl._preemptable_iter_new_checkpoints(trainer=trainer, eval_names=["every"], state=None):
            pass
    return sleeps, logged, iterator


def heldout_predictions(trainer, params) -> tuple[np.ndarray, np.ndarray]:
    """The model's predictions for the 128 held-out rows with `params`, and their targets."""
    data = make_data("eval")
    return np.asarray(trainer.model.apply({"params": params}, data["x"])["y"]), data["y"]


def check_heldout_against_checkpoints(lesson: Lesson, trainer, written: dict) -> None:
    """The evaluator `heldout`, as written at each step, against numpy with that step's
    checkpoint, restored by a checkpointer on the run's workdir."""
    checkpointer = kd.ckpts.Checkpointer(workdir=trainer.workdir, save_interval_steps=1)
    for step in sorted(written["metrics/within_0.1"]):
        params = checkpointer.restore(trainer.init_state(), step=step).params
        preds, targets = heldout_predictions(trainer, params)
        lesson.check_close(float(written["losses/logcosh"][step]), float(np.mean(np.log(np.cosh(preds - targets)))),
                           f"heldout logcosh at step {step} = numpy's with ckpt_{step}", rel=1e-5)
        lesson.check_close(float(written["metrics/within_0.1"][step]), float(np.mean(np.abs(preds - targets) < 0.1)),
                           f"heldout within_0.1 at step {step} = numpy's with ckpt_{step}")
