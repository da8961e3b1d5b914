"""Evaluation and checkpointing, and picking up where you left off.

A real run is evaluated as it trains and saved as it goes, so that a crash, a preemption
or a longer schedule does not start it over. Both are config entries: a
`kd.evals.Evaluator` evaluates the model on its own data every N steps, and a
`kd.ckpts.Checkpointer` saves the training state every N steps into the workdir. Build
the same Trainer again on the same workdir, and `train()` goes on from the latest
checkpoint.
"""

import importlib

from kauldron import konfig

from configs import preemptible, regression
from sections.kept_checkpoints import start_fresh
from sections.figures import plot_evaluations
from sections.lesson import Lesson
from sections.recompute import check_evaluations_at_step_0
from sections.registry import section
from sections.resume import check_saved_positions, difference_after_resume
from sections.shared import event_files, read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections import shared as shared_cfg

EVERY = 20


@section(9, "checkpoint", "Evaluation and checkpointing, and picking up where you left off", part="training", trains=True,
         shows="evaluators pool their batches; checkpoints and resume; a checkpointable pipeline resumes bit for bit",
         reference="https://kauldron.readthedocs.io/en/latest/checkpoint.html")
def evaluate_checkpoint_resume(lesson: Lesson) -> str:
    lesson.md("""
    ## An evaluator and a checkpointer are config entries

    The regression experiment gets a `Checkpointer` that saves every 20 steps and an
    `Evaluator` that evaluates every 20 steps on the 128 held-out rows, in batches of 48.
    An evaluator given no losses or metrics reuses the training ones. `train()`
    evaluates and saves *before* each update, so a run of 40 steps saves at 0, 20 and 40.
    """)
    start_fresh(lesson)  # a kept workdir may hold an earlier run of this lesson
    cfg = regression.get_config()
    cfg.workdir = str(lesson.workdir / "run")  # absolute: Orbax refuses relative paths
    cfg.num_train_steps, cfg.log_metrics_every = 40, EVERY
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=EVERY)
    cfg.evals = {
        "eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY), ds=eval_rows(batch_drop_remainder=False)),
        "eval_default": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY), ds=eval_rows()),
    }
    first = konfig.resolve(cfg)
    state, _ = first.train()
    print("checkpoints:", first.checkpointer.all_steps, " state.step:", int(state.step))
    lesson.check_equal(list(first.checkpointer.all_steps), [0, 20, 40], "the checkpoint steps of a 40-step run")
    lesson.check(first.evals["eval"].losses == first.train_losses and first.evals["eval"].metrics == first.train_metrics,
                 "an Evaluator given no losses or metrics uses the training ones")

    lesson.md("""
    ## An evaluator pools its batches

    The evaluator merges its batches' states before computing (section 5), so its metric
    is the ratio over every row it saw, not the mean of the batches' ratios. Which rows it
    sees depends on the pipeline: `kd.data.py.DataSource` drops a last, smaller batch by
    default (`batch_drop_remainder=True`). The evaluator `eval` opts out and sees all 128
    rows; `eval_default` sees 96. Their metrics are read back from the workdir.
    """)
    evals = read_scalars(*event_files(cfg.workdir, "eval"))
    default = read_scalars(*event_files(cfg.workdir, "eval_default"))
    print("step  logcosh  within_tol (128 rows)  within_tol (96 rows)")
    for step in sorted(evals):
        print(f"{step:>4}  {evals[step]['losses/logcosh']:7.4f}  {evals[step]['metrics/within_tol']:21.4f}"
              f"  {default[step]['metrics/within_tol']:20.4f}")
    check_evaluations_at_step_0(lesson, first, evals, default)
    lesson.fact("eval_within_tol_at_0", {"all_rows": evals[0]["metrics/within_tol"],
                                         "remainder_dropped": default[0]["metrics/within_tol"]})

    lesson.md("""
    ## Train longer on the same workdir, and `train()` resumes

    The same config with `num_train_steps=60`, resolved again: the new Trainer finds the
    checkpoint of step 40 and goes on from there. By default a `Checkpointer` keeps the
    3 latest checkpoints.
    """)
    cfg.num_train_steps = 60
    second = konfig.resolve(cfg)
    resumed_from = second.checkpointer.latest_step
    state, _ = second.train()
    evaluated = [sorted(read_scalars(path)) for path in event_files(cfg.workdir, "eval")]
    print("resumed from:", resumed_from, " checkpoints:", second.checkpointer.all_steps, " evaluations:", evaluated)
    lesson.check_equal(resumed_from, 40, "the checkpoint the second Trainer resumes from")
    lesson.check_equal(int(state.step), 61, "state.step after resuming to num_train_steps=60")
    lesson.check_equal(list(second.checkpointer.all_steps), [20, 40, 60], "the checkpoints kept after resuming")
    lesson.check_equal(evaluated, [[0, 20, 40], [40, 60]], "the eval steps each train() call wrote")
    all_evals = read_scalars(*event_files(cfg.workdir, "eval"))
    lesson.check(all_evals[60]["losses/logcosh"] * 10 < all_evals[0]["losses/logcosh"],
                 "the eval loss fell at least 10x from step 0 to step 60")
    plot_evaluations(lesson, all_evals, EVERY)

    lesson.md("""
    ## Does the resumed run match one never interrupted?

    Only if the data pipeline's position is checkpointed too. A checkpointable pipeline
    saves it with the training state: `kd.data.py` (PyGrain) pipelines do, and so do
    `kd.data.tf` pipelines with symbolic checkpointing, but `kd.data.tf` does not import
    from PyPI (it needs the unpublished `grain.tensorflow`), so PyGrain is the one that
    works here. `kd.data.InMemoryPipeline` does not save its position: a resumed run
    starts its data over from the first batch, and ends somewhere else. For preemptible
    jobs, use a PyGrain pipeline, as `configs/preemptible.py` (below) does. Its run here
    plays a preemption: a run of 60 steps loses its last checkpoint, as if the job had
    stopped after saving step 40, and trains again from there.
    """)
    in_memory_run, pygrain_run = lesson.workdir / "in-memory-uninterrupted", lesson.workdir / "pygrain"
    differences = {"InMemoryPipeline": difference_after_resume(regression.get_config(), in_memory_run, EVERY, resumed=state),
                   "kd.data.py.DataSource": difference_after_resume(preemptible.get_config(), pygrain_run, EVERY)}
    for name, difference in differences.items():
        print(f"{name:22} max |param difference|, resumed vs uninterrupted: {difference:.3g}")
    lesson.check(differences["InMemoryPipeline"] > 1e-3, "InMemoryPipeline: the resumed run's parameters differ")
    lesson.check_equal(differences["kd.data.py.DataSource"], 0.0, "PyGrain DataSource: the max |param difference|")
    missing = lesson.check_raises(ModuleNotFoundError, lambda: importlib.import_module("kauldron.data.tf"),
                                  "kd.data.tf does not import from PyPI: importing it")
    lesson.check_equal(missing.name, "grain.tensorflow", "the module kd.data.tf misses")
    check_saved_positions(lesson, pygrain_run, cfg.workdir)
    lesson.fact("max_param_difference_after_resume", differences)
    return (f"resumed at step 40 -> 61; eval logcosh {all_evals[0]['losses/logcosh']:.3f} -> "
            f"{all_evals[60]['losses/logcosh']:.4f}; resume exact with PyGrain, not with InMemoryPipeline")


def eval_rows(**batching):
    """The 128 held-out rows as a PyGrain pipeline, in batches of 48 (48, 48, then 32)."""
    return kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("eval"), batch_size=48, shuffle=False,
                                     num_epochs=1, num_workers=0, **batching)
