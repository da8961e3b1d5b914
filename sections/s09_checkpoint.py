"""Evaluation and checkpointing, and picking up where you left off.

A real run is evaluated as it trains and saved as it goes, so that a crash, a preemption
or a longer schedule does not start it over. Both are config entries: a
`kd.evals.Evaluator` evaluates the model on its own data every N steps, and a
`kd.ckpts.Checkpointer` saves the training state every N steps into the workdir. Build
the same Trainer again on the same workdir, and `train()` goes on from the latest
checkpoint.
"""

import jax
import matplotlib.pyplot as plt
import numpy as np
from kauldron import konfig

from configs import preemptible as preemptible_config
from configs import regression as regression_config
from harness import Lesson, section
from harness.compare import max_difference
from sections.parts.logs import read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import regression as regression_cfg

EVERY = 20  # steps between evaluations, and between checkpoints


@section(9, "checkpoint", "Evaluation and checkpointing, and picking up where you left off", part="training", trains=True,
         shows="evaluators pool their batches; checkpoints and resume; a checkpointable pipeline resumes bit for bit",
         reference="https://kauldron.readthedocs.io/en/latest/checkpoint.html")
def evaluate_checkpoint_resume(lesson: Lesson, workdir):
    lesson.md("""
    ## An evaluator and a checkpointer are config entries

    The regression experiment gets a `Checkpointer` that saves every 20 steps and an
    `Evaluator` that evaluates every 20 steps on the 128 held-out rows, in batches of 48
    (a second Evaluator, `eval_default`, differs only in what it does with the last,
    smaller batch: it is for the next step). An evaluator given no losses or metrics
    reuses the training ones. `num_train_steps=40` makes 41 updates, at steps 0 to 40
    (section 6), and at each step, *before* that step's update, `train()` evaluates and
    saves when they are due: it saves at 0, 20 and 40, and its last checkpoint holds the
    state before the last update. The state `train()` returns, at step 41, is saved
    nowhere. A Trainer built again from the config reads the latest checkpoint back with
    `checkpointer.restore(fresh)`, `fresh` being a train state of the same structure; it
    deletes that state's arrays by default to free their memory (`donate=False` keeps
    them), so give it a fresh one. The Trainer that trained cannot do this: its
    checkpointer set itself up for the first state it saved or restored, here the train
    state with its timer and data iterator, and refuses a lone train state with a
    `ValueError`.
    """)
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir / "run")
    cfg.num_train_steps, cfg.log_metrics_every = 40, EVERY
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=EVERY)
    # num_workers=0 reads in this process; in a script, the default starts 16 worker processes (section 12).
    rows = dict(data_source=regression_cfg.RegressionRows("eval"), batch_size=48, shuffle=False, num_epochs=1, num_workers=0)
    cfg.evals = {
        "eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY),
                                       ds=kd_cfg.data.py.DataSource(**rows, batch_drop_remainder=False)),
        "eval_default": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY), ds=kd_cfg.data.py.DataSource(**rows)),
    }
    first = konfig.resolve(cfg)
    state, _ = first.train()
    print("checkpoints:", first.checkpointer.all_steps, " state.step:", int(state.step))
    fresh = first.init_state()
    again = konfig.resolve(cfg)
    saved = again.checkpointer.restore(fresh)
    print("the latest checkpoint's state.step:", int(saved.step))
    with lesson.checks():
        lesson.check_equal(list(first.checkpointer.all_steps), [0, 20, 40], "the checkpoint steps of a 40-step run")
        import pathlib

        written_at_0 = {name: (pathlib.Path(cfg.workdir) / name).stat().st_mtime_ns  # for the resume's check
                        for name in ("config.json", "element_spec.json")}
        lesson.check_equal(int(state.step), 41, "the state.step of the state train() returns after 40 steps")
        given = [leaf for leaf in jax.tree.leaves(fresh) if isinstance(leaf, jax.Array)]
        lesson.check(given and all(leaf.is_deleted() for leaf in given),
                     "checkpointer.restore(state) deleted the arrays of the state it was given")
        refused = lesson.check_raises(ValueError, lambda: first.checkpointer.restore(first.init_state()),
                                      "restoring a lone state with the checkpointer of the Trainer that trained")
        lesson.check("`Composite`" in str(refused) and "multiple checkpointable objects" in str(refused),
                     "its message asks for a Composite of the items it saved")
        kept = first.init_state()
        again.checkpointer.restore(kept, donate=False)
        kept_arrays = [leaf for leaf in jax.tree.leaves(kept) if isinstance(leaf, jax.Array)]
        lesson.check(kept_arrays and not any(leaf.is_deleted() for leaf in kept_arrays),
                     "checkpointer.restore(state, donate=False) left the arrays of the state it was given")
        lesson.check(first.evals["eval"].losses == first.train_losses and first.evals["eval"].metrics == first.train_metrics,
                     "an Evaluator given no losses or metrics uses the training ones")
        lesson.check_equal(int(saved.step), 40, "the latest checkpoint's state.step: 40 updates, not 41")
        lesson.check(max_difference(saved.params, state.params) > 1e-3,
                     "the latest checkpoint's parameters are not those of the state train() returned")
        one_more = trained_on(first, saved, batches=range(40, 41))
        lesson.check(max_difference(one_more.params, state.params) < 1e-5,
                     "the latest checkpoint plus one update, on the run's batch 40, is the state train() returned"
                     " (within 1e-5)")

    lesson.md("""
    ## An evaluator pools its batches

    The evaluator merges its batches' states before computing (section 5), so its metric
    is the ratio over every row it saw, not the mean of the batches' ratios. Which rows it
    sees depends on the pipeline: `kd.data.py.DataSource` drops a last, smaller batch by
    default (`batch_drop_remainder=True`). The evaluator `eval` opts out and sees all 128
    rows; `eval_default` sees 96. Their metrics are read back from the workdir, one
    directory per evaluator.
    """)
    evals, default = read_scalars(cfg.workdir, "eval"), read_scalars(cfg.workdir, "eval_default")
    print("step  logcosh  within_tol (128 rows)  within_tol (96 rows)")
    for step in sorted(evals):
        print(f"{step:>4}  {evals[step]['losses/logcosh']:7.4f}  {evals[step]['metrics/within_tol']:21.4f}"
              f"  {default[step]['metrics/within_tol']:20.4f}")
    with lesson.checks():
        preds, targets = heldout_predictions(first, first.init_state().params)
        hits = np.abs(preds - targets) < within_tol_tolerance()
        lesson.check_close(evals[0]["metrics/within_tol"], float(hits.mean()),
                           "eval within_tol at step 0 = the pooled ratio over all 128 rows")
        lesson.check_close(default[0]["metrics/within_tol"], float(hits[:96].mean()),
                           "eval_default within_tol at step 0 = the ratio over the first 96 rows (remainder dropped)")
        lesson.check_close(evals[0]["losses/logcosh"], float(np.mean(np.log(np.cosh(preds - targets)))),
                           "eval logcosh at step 0 = numpy's over the 128 rows", rel=1e-5)
        lesson.fact("eval_within_tol_at_0", {"all_rows": evals[0]["metrics/within_tol"],
                                             "remainder_dropped": default[0]["metrics/within_tol"]})

    lesson.md("""
    ## Train longer on the same workdir, and `train()` resumes

    The same config with `num_train_steps=60`, resolved again: the new Trainer finds the
    checkpoint of step 40 and goes on from there, redoing update 40, whose result the
    first run never saved. By default a `Checkpointer` keeps the 3 latest checkpoints.
    Each Trainer that trains (each `train()` after a new `konfig.resolve`) writes its own
    event files, so the evaluation at step 40 is logged twice, the second time by the
    resumed run (`read_scalars`, reading them back, keeps one value a step). Only a run
    that starts at step 0 writes `config.json` and `element_spec.json`: the resumed run
    leaves them, and `config.json` still says 40 steps.
    """)
    cfg.num_train_steps = 60
    second = konfig.resolve(cfg)
    resumed_from = second.checkpointer.latest_step
    state, _ = second.train()
    all_evals = read_scalars(cfg.workdir, "eval")
    print("resumed from:", resumed_from, " checkpoints:", second.checkpointer.all_steps,
          " evaluated at:", sorted(all_evals))
    fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    steps = sorted(all_evals)
    loss_ax.semilogy(steps, [all_evals[step]["losses/logcosh"] for step in steps], marker="o")
    loss_ax.set(title="eval loss (128 rows)", xlabel="step", ylabel="logcosh (log scale)")
    metric_ax.plot(steps, [all_evals[step]["metrics/within_tol"] for step in steps], marker="o")
    metric_ax.set(title="eval metric (pooled over 128 rows)", xlabel="step", ylabel="within_tol")
    fig.suptitle(f"Evaluation every {EVERY} steps, across a resume at step 40")
    plt.show()
    with lesson.checks():
        lesson.check_equal(resumed_from, 40, "the checkpoint the second Trainer resumes from")
        lesson.check_equal(int(state.step), 61, "state.step after resuming to num_train_steps=60")
        lesson.check_equal((second.checkpointer.max_to_keep, list(second.checkpointer.all_steps)), (3, [20, 40, 60]),
                           "a Checkpointer's default max_to_keep, and the checkpoints kept after resuming")
        lesson.check_equal(steps_per_event_file(cfg.workdir, "eval"), [[0, 20, 40], [40, 60]],
                           "the eval steps in each event file: one file per Trainer that trained (the one resolved"
                           " above only to restore a checkpoint wrote none)")
        lesson.check(all_evals[60]["losses/logcosh"] * 10 < all_evals[0]["losses/logcosh"],
                     "the eval loss fell at least 10x from step 0 to step 60")
        import json
        import pathlib

        run = pathlib.Path(cfg.workdir)
        lesson.check(json.loads((run / "config.json").read_text())["num_train_steps"] == 40
                     and {name: (run / name).stat().st_mtime_ns for name in written_at_0} == written_at_0,
                     "after the resumed run, config.json still says num_train_steps=40, and neither it nor"
                     " element_spec.json was written again")

    lesson.md("""
    ## Does the resumed run match one never interrupted?

    Only if the data pipeline's position is checkpointed too. A checkpointable pipeline
    saves it with the training state: `kd.data.py` (PyGrain) pipelines do, and so do
    `kd.data.tf` pipelines with symbolic checkpointing, but `kd.data.tf` does not import
    from PyPI (it needs `grain.tensorflow`, which the grain installed from PyPI lacks), so
    PyGrain is the one that works here. `kd.data.InMemoryPipeline` does not save its
    position: a resumed run starts its data over from the first batch, and ends somewhere
    else. For preemptible jobs, use a PyGrain pipeline, as `configs/preemptible.py`
    (below) does. Its run here plays a preemption: `train()` saves on its Checkpointer's
    schedule, not when it ends, so a run of 60 steps that saves every 40 keeps step 40's
    checkpoint as its last, as a job stopped after saving step 40 would, and trains
    again from there. The two runs of 60 steps write no logs (`writer = None`): only
    their parameters are compared. The PyGrain run's restart gets the default writer
    back (`del` the field): the steps it logs show where it began.
    """)
    # InMemoryPipeline: the run resumed above, against a run of 60 steps never interrupted.
    in_memory = regression_config.get_config()
    in_memory.workdir, in_memory.num_train_steps = str(workdir / "in-memory-uninterrupted"), 60
    in_memory.writer = None
    uninterrupted, _ = konfig.resolve(in_memory).train()
    # PyGrain: a run of 60 steps, then again from its checkpoint of step 40.
    pygrain = preemptible_config.get_config()
    pygrain.workdir, pygrain.num_train_steps = str(workdir / "pygrain"), 60
    pygrain.checkpointer.save_interval_steps = 40
    pygrain.writer = None
    pygrain_uninterrupted, _ = konfig.resolve(pygrain).train()
    del pygrain.writer  # the restart logs, with the Trainer's default writer
    pygrain_again = konfig.resolve(pygrain)
    pygrain_resumed_from = pygrain_again.checkpointer.latest_step
    pygrain_resumed, _ = pygrain_again.train()
    runs = {"InMemoryPipeline": (state, uninterrupted),
            "kd.data.py.DataSource": (pygrain_resumed, pygrain_uninterrupted)}
    for name, (resumed, never_stopped) in runs.items():
        differences = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), resumed.params, never_stopped.params)
        print(f"{name:22} max |param difference|, resumed vs uninterrupted: {max(jax.tree.leaves(differences)):.3g}")
    with lesson.checks():
        differences = {name: max_difference(resumed.params, never_stopped.params)
                       for name, (resumed, never_stopped) in runs.items()}
        lesson.check(differences["InMemoryPipeline"] > 1e-3, "InMemoryPipeline: the resumed run's parameters differ")
        replayed = trained_on(second, saved, batches=range(0, 21))
        lesson.check(max_difference(replayed.params, state.params) < 1e-5,
                     "InMemoryPipeline: the resumed run is ckpt_40's state trained on the pipeline's batches 0 to 20"
                     " (within 1e-5): its data started over")
        lesson.check_equal(pygrain_resumed_from, 40, "the checkpoint the PyGrain run resumes from")
        lesson.check_equal(sorted(read_scalars(workdir / "pygrain", "train")), [40, 50, 60],
                           "the steps the PyGrain restart logged (every 10): it began at step 40, not 0")
        lesson.check_equal(differences["kd.data.py.DataSource"], 0.0, "PyGrain DataSource: the max |param difference|")
        lesson.check_equal([path.name for path in (workdir / "in-memory-uninterrupted").rglob("events.out.tfevents.*")],
                           [], "the event files of the InMemoryPipeline run given writer = None (the PyGrain one's: no"
                           " step before 40 above)")
        import importlib

        missing = lesson.check_raises(ModuleNotFoundError, lambda: importlib.import_module("kauldron.data.tf"),
                                      "kd.data.tf does not import from PyPI: importing it")
        lesson.check_equal(missing.name, "grain.tensorflow", "the module kd.data.tf misses")
        lesson.check("pipelines are checkpointed if they supports symbolic checkpointing"
                     in library_text("kauldron", "data/tf/base.py"),
                     "kd.data.tf pipelines are checkpointed when they support symbolic checkpointing (its docstring)",
                     internal="reads Kauldron's source")
        check_saved_positions(lesson, workdir / "pygrain", workdir / "run")
        lesson.fact("max_param_difference_after_resume", differences)
        lesson.summary = (f"resumed at step 40 -> 61; eval logcosh {all_evals[0]['losses/logcosh']:.3f} -> "
                          f"{all_evals[60]['losses/logcosh']:.4f}; ckpt_40 is the state before the last update;"
                          " resume exact with PyGrain, not with InMemoryPipeline")


# -- what the checks compute by hand ---------------------------------------------------


def trained_on(trainer, state, batches: range):
    """`state` after a train step on each of the trainer's batches `batches` (counted from
    the pipeline's start: an InMemoryPipeline yields the same batches on every iteration)."""
    import itertools

    updated = jax.tree.map(np.array, state)  # a copy: the step donates the state it is given
    for batch in itertools.islice(iter(trainer.train_ds), batches.start, batches.stop):
        updated, _ = trainer.trainstep.step(updated, batch)
    return updated


def within_tol_tolerance() -> float:
    from sections.parts.regression import WithinTol

    return WithinTol(preds="", targets="").tol


def heldout_predictions(trainer, params) -> tuple[np.ndarray, np.ndarray]:
    """The model's predictions for the 128 held-out rows with `params`, and their targets."""
    from sections.parts.regression import make_data

    data = make_data("eval")
    return np.asarray(trainer.model.apply({"params": params}, data["x"])["y"]), data["y"]


def steps_per_event_file(workdir, collection: str) -> list[list[int]]:
    """The steps each event file of a collection holds scalars for, file by file."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from sections.parts.logs import event_files

    return [sorted({int(event.step) for event in EventFileLoader(str(path)).Load() if event.summary.value})
            for path in event_files(workdir, collection)]


def check_saved_positions(lesson: Lesson, pygrain_run, in_memory_run) -> None:
    """What ckpt_40 holds of its data iterator in a PyGrain run and an InMemoryPipeline run
    (orbax's and grain's file layout)."""
    import json

    from sections.parts.regression import BATCH_SIZE

    ds_iter = ("checkpoints", "ckpt_40", "ds_iter")
    pygrain = json.loads(next(pygrain_run.joinpath(*ds_iter).glob("*.json")).read_text())
    in_memory = sorted(p.name for p in in_memory_run.joinpath(*ds_iter).iterdir())
    lesson.check_equal(pygrain.get("next_index"), 40 * BATCH_SIZE,
                       "the PyGrain position saved in ckpt_40: 40 batches of 32", internal="reads orbax's file layout")
    lesson.check_equal(in_memory, ["commit_success.txt"],
                       "InMemoryPipeline's ckpt_40 holds no iterator position: its ds_iter/ only orbax's commit marker",
                       internal="reads orbax's file layout")


def library_text(package: str, path: str) -> str:
    """The text of a file of an installed package, read without importing it."""
    import importlib.util
    import pathlib

    return (pathlib.Path(importlib.util.find_spec(package).origin).parent / path).read_text()
