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
         start_early=True,
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
    On a machine with one TPU, a command started from a kernel that has run jax cannot
    open the chip the kernel holds (section 0), and the page compares the kernel's numbers
    with the commands': there, set `JAX_PLATFORMS=cpu` before the kernel imports jax
    (`%env JAX_PLATFORMS=cpu` as the first cell; its commands inherit it), as this
    tutorial does for this page.
    """)
    lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run",
                 shows=r"Starting training loop|collection=heldout losses")
    print(sorted(path.name for path in (workdir / "run").iterdir()))
    print(sorted(path.name for path in (workdir / "run" / "checkpoints").iterdir()))
    with lesson.checks():
        accelerator.check_one_chip(lesson)
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
    the last checkpoint the job restored. It looks again 10 s after it found the last
    one (at once, if evaluating it took longer), for up to 10 s, and stops when none came
    and `train_complete.txt`, which `train()` writes at its end, exists: even on a
    finished run it takes about 20 s.
    Nothing deletes that file: on the workdir of a run that finished once, an eval job
    stops at its first 10 s without a new checkpoint, even while a resumed run trains.
    Before all that, it waits for the `element_spec.json` that `train()` writes as a run
    starts. It never gives up by itself: on a mistyped workdir it logs `Waiting for
    element_spec` every 10 s, on a run that crashed `Sleeping for 1 seconds.` every
    second, for ever.

    The config resolved here, on the same workdir, is for reading the run back: it
    names each evaluator by its key in `cfg.evals`. `heldout/` holds what that
    evaluator wrote along training: its loss and metric at steps 0, 20 and 40, each
    pooled over all 128 rows, 4 batches of 32 (an `InMemoryPipeline` drops the rows past
    the last full batch, and refuses `drop_remainder=False`). Restoring each step's
    checkpoint and computing them with numpy gives the same numbers.

    What the eval job wrote is read in this page's last step, "The eval job's result".
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
        other = check_waits(lesson, trainer, workdir)
        lesson.skip_check("on a cluster, Kauldron's launcher runs the eval job beside the training job",
                          "kauldron.kxm, the XManager launcher, does not import from PyPI")
        check_heldout_against_checkpoints(lesson, trainer, written)
        in_48s = kd.data.InMemoryPipeline(loader=lambda: make_data("eval"), batch_size=48, num_epochs=1)
        lesson.check_equal([len(batch["x"]) for batch in in_48s], [48, 48],
                           "the batches of the 128 held-out rows in an InMemoryPipeline of batch_size=48")
        keep_last = kd.data.InMemoryPipeline(loader=lambda: make_data("eval"), batch_size=48, num_epochs=1,
                                             drop_remainder=False)
        lesson.check_raises(NotImplementedError, lambda: next(iter(keep_last)),
                            "iterating an InMemoryPipeline with drop_remainder=False")

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
    the run logged at step 40, bit for bit, and writes it as the job would: `heldout/`
    now holds step 40 twice.
    """)
    checkpointer = kd.ckpts.Checkpointer(workdir=workdir / "run", save_interval_steps=1)
    restored = checkpointer.restore(trainer.init_state(), step=40)
    by_hand = trainer.evals["heldout"].evaluate(restored, 40).compute()
    print({tag: float(value) for tag, value in {**by_hand.loss_values, **by_hand.metric_values}.items()})
    with lesson.checks():
        lesson.check_equal([float(by_hand.loss_values["losses/logcosh"]), float(by_hand.metric_values["metrics/within_0.1"])],
                           [float(written["losses/logcosh"][40]), float(written["metrics/within_0.1"][40])],
                           "evaluate(ckpt_40's state, 40) = what the run logged at step 40")
        lesson.check_equal(logged_steps(workdir / "run", "heldout", "losses/logcosh"), [0, 20, 40, 40],
                           "the steps of heldout's logcosh in heldout/'s event files: the run's, then the by-hand 40")

    lesson.md("""
    ## From PyPI, an eval job without the optimizer state fails

    An evaluator with `discard_opt=True` drops the optimizer state. When all the
    evaluators of an eval job do, not just one, the job builds its state without one and
    restores each checkpoint through `kd.ckpts.PartialKauldronLoader`, which needs a
    part of orbax that is not published: this job, whose only evaluator sets it, fails.
    """)
    params_only = lesson.shell("python -m kauldron.main --cfg=configs/heldout.py --cfg.workdir=$WORKDIR/run"
                               " --eval_names=final --cfg.evals.final.discard_opt=True",
                               check=False, shows=r"Found new checkpoint step|^ModuleNotFoundError")
    with lesson.checks():
        lesson.check(skips_optimizer(other, ["final"]) and not skips_optimizer(other, ["every", "final"]),
                     "with discard_opt=True on final alone, an eval job of final builds its state without the"
                     " optimizer's, one of every and final with it", internal="runs Kauldron's eval job, stopped there")
        lesson.check(params_only.returncode != 0 and "No module named 'orbax.checkpoint.experimental.model_surgery"
                     in params_only.output,
                     "an eval job whose evaluators all set discard_opt=True fails from PyPI, in PartialKauldronLoader's"
                     " orbax import")

    lesson.md("""
    ## From PyPI, `kd.train.Trainer.eval_only()` does not resolve either

    Kauldron's ready-made eval-only config, `kd.train.Trainer.eval_only()`, finds the
    run to evaluate by its XManager experiment id (`cfg.aux.xid`, `cfg.aux.wid`): the
    model from that run's config, the weights through `PartialKauldronLoader`. It does
    not resolve from PyPI: its placeholder `train_ds`, a `kd.data.tf.ElementSpecDataset`
    (the run's element spec, no data), needs `kd.data.tf`, which needs the unpublished
    `grain.tensorflow`. From PyPI, evaluate a run as above:
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
        lesson.check_equal((eval_cfg.train_ds.__qualname__, eval_cfg.train_ds.spec.__qualname__),
                           ("kauldron.kd:data.tf.ElementSpecDataset", "kauldron.kd:from_xid.get_element_spec"),
                           "eval_only()'s train_ds: an ElementSpecDataset of the run's element spec")
        lesson.check("In 'train_ds'" in str(error) and "has no attribute 'tf'" in str(error),
                     "kd.train.Trainer.eval_only() fails on its train_ds's kd.data.tf")
        import importlib

        error = lesson.check_raises(ModuleNotFoundError, lambda: importlib.import_module("kauldron.data.tf"),
                                    "importing kauldron.data.tf")
        lesson.check_equal(error.name, "grain.tensorflow", "the module kauldron.data.tf needs and PyPI lacks")


    lesson.md("""
    ## The eval job's result

    The job found one checkpoint, the newest: `every/` holds step 40 only, although
    `ckpt_0` and `ckpt_20` are there too. Once its waits were over, `final` evaluated
    the same checkpoint. Neither names losses, metrics or summaries, so both use the
    training ones, summaries included.
    The job also made a folder of its own in the run's workdir, named after its
    evaluators: `_eval_every:final/`. Its `checkpoints/` stays empty: the job copies there
    the state it is evaluating, to resume after a preemption, only with
    `cfg.setup.preemptable_eval = True` (off by default).
    """)
    for name in ("every", "final"):
        print(name, {tag: {step: round(float(value), 6) for step, value in values.items()}
                     for tag, values in read_tensors(workdir / "run", name).items() if tag.startswith(("losses", "metrics"))})
    with lesson.checks():
        check_eval_job_times(lesson, eval_job.output)
        every, final = read_tensors(workdir / "run", "every"), read_tensors(workdir / "run", "final")
        lesson.check_equal(sorted(every["losses/logcosh"]), [40],
                           "the steps every/ evaluated on a finished run: the newest checkpoint's only")
        lesson.check_equal(sorted(final["losses/logcosh"]), [40], "the step final/ evaluated: the last checkpoint's")
        own = workdir / "run" / "_eval_every:final"
        lesson.check(own.is_dir() and not any((own / "checkpoints").iterdir()),
                     "the eval job's own folder in the run's workdir, _eval_every:final, its checkpoints/ empty"
                     " once the job has ended",
                     internal="reads Kauldron's file layout")
        check_preemptable_eval(lesson, trainer)
        lesson.check({"summaries/preds", "summaries/enc"} <= set(every) and {"summaries/preds", "summaries/enc"} <= set(final),
                     "every/ and final/ hold the training summaries too: the histogram and the image")
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
import pathlib  # noqa: E402 - the checks' own, not the page's
import shutil  # noqa: E402
import types  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402

from sections.parts.regression import make_data  # noqa: E402
from sections.parts import accelerator  # noqa: E402


STOP_AFTER = 1000  # sleeps before the checks stop a wait that would go on: 100 times its timeout and more


def check_waits(lesson: Lesson, trainer, workdir):
    """What an eval job waits for, run here with its sleeps stopped: on the finished run;
    on a workdir that holds nothing of a run, as a mistyped one would; on the same with
    element_spec.json and no checkpoint, as a run that crashed leaves it; and with
    train_complete.txt too. Returns the Trainer on that workdir."""
    lesson.check((workdir / "run" / "element_spec.json").is_file(), "train() wrote element_spec.json to the workdir",
                 internal="reads Kauldron's file layout")
    lesson.check_equal(element_spec_waits(trainer)[0], [], "seconds slept waiting for element_spec.json on the finished run",
                       internal="runs Kauldron's private eval functions")
    cfg = heldout_config.get_config()
    cfg.workdir = str(workdir / "other")
    cfg.evals.final.discard_opt = True  # for the discard_opt step; the waits do not read it
    other = konfig.resolve(cfg)
    sleeps, logged = element_spec_waits(other)
    lesson.check(sleeps == [10] * STOP_AFTER and len(logged) == STOP_AFTER
                 and all(line.startswith("Waiting for element_spec") for line in logged),
                 f"on a workdir without element_spec.json: a 10-s sleep and a 'Waiting for element_spec' line,"
                 f" {STOP_AFTER} times (stopped here)", internal="runs Kauldron's private eval functions")
    (workdir / "other").mkdir(exist_ok=True)
    shutil.copy(workdir / "run" / "element_spec.json", workdir / "other")
    sleeps, logged = checkpoint_waits(other)
    lesson.check(sleeps == [1] * STOP_AFTER and logged.count("Sleeping for 1 seconds.") == STOP_AFTER
                 and not any(line.startswith("Timed out") for line in logged),
                 f"with element_spec.json, no checkpoint and no train_complete.txt, as a run that crashed early leaves"
                 f" it: a 1-s sleep and a 'Sleeping for 1 seconds.' line, {STOP_AFTER} times (stopped here), no time-out",
                 internal="runs Kauldron's eval loop with orbax's clock faked")
    (workdir / "other" / "train_complete.txt").touch()
    sleeps, logged = checkpoint_waits(other)
    lesson.check(sleeps == [1] * 10 and sum(line.startswith("Timed out waiting for new checkpoint") for line in logged) == 1,
                 "the same with train_complete.txt: after 10 one-second sleeps of the faked clock (a real one, which"
                 " also counts the time between them, times out a sleep earlier), one 'Timed out waiting for new"
                 " checkpoint' line, and the job stops by itself", internal="runs Kauldron's eval loop with orbax's clock faked")
    lesson.check_equal(train_complete_uses(), {"evals/eval_impl.py": ["defined", "exists"], "train/train_loop.py": ["touch"]},
                       "every use of train_complete.txt in Kauldron: defined, tested for, touched; never deleted",
                       internal="reads Kauldron's source")
    return other


def element_spec_waits(trainer) -> tuple[list, list]:
    """The seconds slept and the lines logged while an eval job on `trainer`'s workdir
    waits for element_spec.json, from Kauldron's eval code run here with its sleeps
    stopped (after STOP_AFTER)."""
    from kauldron.evals import eval_impl

    sleeps, logged = [], []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == STOP_AFTER:
            raise TimeoutError("stopped here")

    with (mock.patch.object(eval_impl, "time", types.SimpleNamespace(sleep=sleep)),
          mock.patch.object(eval_impl.logging, "info", lambda message, *args: logged.append(message % args))):
        try:
            eval_impl._get_element_spec(trainer)
        except TimeoutError:
            pass
    return sleeps, logged


def checkpoint_waits(trainer) -> tuple[list, list]:
    """The seconds slept and the lines logged while an eval job on `trainer`'s workdir
    looks for checkpoints: Kauldron's loop over them, run here with orbax's clock faked
    (a sleep moves it on at once) and stopped after STOP_AFTER sleeps."""
    from kauldron.evals import eval_impl
    from orbax.checkpoint import checkpoint_utils

    clock, sleeps, logged = [0.0], [], []

    def sleep(seconds):
        sleeps.append(seconds)
        clock[0] += seconds
        if len(sleeps) == STOP_AFTER:
            raise TimeoutError("stopped here")

    with (mock.patch.object(checkpoint_utils, "time", types.SimpleNamespace(time=lambda: clock[0], sleep=sleep)),
          mock.patch.object(checkpoint_utils.logging, "info", lambda message, *args: logged.append(message % args))):
        try:
            for _ in eval_impl._preemptable_iter_new_checkpoints(trainer=trainer, eval_names=["every"], state=None):
                raise AssertionError("no checkpoint to find")
        except TimeoutError:
            pass
    return sleeps, logged


def train_complete_uses() -> dict[str, list[str]]:
    """What each line of Kauldron's code that names train_complete.txt (or the constant
    that holds its name) does with it, by file."""
    import kauldron

    root = pathlib.Path(kauldron.__file__).parent
    uses: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if "TRAIN_COMPLETE_FILENAME" in line or "train_complete" in line:
                statement = " ".join(lines[number:number + 3])
                use = next((word for word in ("unlink", "remove", "rmtree", "touch", "exists") if word in statement),
                           "defined" if " = " in line else "other")
                uses.setdefault(str(path.relative_to(root)), []).append(use)
    return uses


class Stopped(Exception):
    """Raised where a check stops Kauldron's code."""


def skips_optimizer(trainer, eval_names: list[str]) -> bool:
    """Whether an eval job of `eval_names` on `trainer` builds its state without the
    optimizer's: Kauldron's continuous_eval, run here until it calls init_state."""
    from kauldron.evals import eval_impl

    asked = {}

    def init_state(self, **kwargs):
        asked.update(kwargs)
        raise Stopped

    with mock.patch.object(type(trainer), "init_state", init_state):
        try:
            eval_impl.continuous_eval(trainer, eval_names)
        except Stopped:
            pass
    return asked["skip_optimizer"]


def logged_steps(workdir, collection: str, tag: str) -> list[int]:
    """The steps of every value of `tag` in a collection's event files, in the order written."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from sections.parts.logs import event_files

    return [int(event.step) for path in event_files(workdir, collection) for event in EventFileLoader(str(path)).Load()
            for value in event.summary.value if value.tag == tag]


def check_preemptable_eval(lesson: Lesson, trainer) -> None:
    """Only with setup.preemptable_eval does an eval job copy the state it evaluates to its
    own checkpoints/ (Kauldron's source), and it is off by default."""
    import inspect

    from kauldron.evals import eval_impl

    lesson.check(trainer.setup.preemptable_eval is False
                 and "if trainer.setup.preemptable_eval:\n        eval_ckpt.save(state, step=step)"
                 in inspect.getsource(eval_impl),
                 "the job saves the state it evaluates there only with setup.preemptable_eval, False by default",
                 internal="reads Kauldron's source")


def check_eval_job_times(lesson: Lesson, output: str) -> None:
    """The eval job's waits on the finished run, from the times absl wrote on its lines."""
    found = log_time(output, "Found new checkpoint step: 40")
    evaluated, looked, timed_out = ((log_time(output, message) - found) % 86400 for message in (  # s after `found`
        "Releasing snapshot for step: 40 after releasing control",  # every/ is done
        "Waiting until step 41 is reached", "Timed out waiting for new checkpoint"))
    lesson.check(looked >= 9.9 and looked - evaluated < 10,
                 "the job looked for a newer checkpoint 10 s after it found ckpt_40, less than 10 s after evaluating it",
                 internal="reads orbax's log lines")
    lesson.check(9 <= timed_out - looked <= 11 and timed_out >= 18,
                 "it looked for up to 10 s, then timed out: at least 18 s after finding ckpt_40",
                 internal="reads orbax's log lines")


def log_time(output: str, message: str) -> float:
    """The time, in seconds since the start of its day, of the first absl line holding `message`."""
    import re

    for line in output.splitlines():
        if (match := re.match(r"[IWEF]\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*?\] (.*)", line)) and message in match[4]:
            return int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3])
    raise AssertionError(f"no line with {message!r}")


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
