"""Evaluation, checkpointing, and picking up where you left off.

A `kd.ckpts.Checkpointer` saves the training state every N steps into the workdir, and
a `kd.evals.Evaluator` evaluates the model on its own data every N steps, writing its
metrics there too. Build the same Trainer again on the same workdir with more steps, and
`train()` restores the latest checkpoint and goes on from there.

Whether the resumed run is *the same* as one never interrupted depends on the data
pipeline: the checkpoint holds the data iterator's position only if the iterator can
be checkpointed. `kd.data.InMemoryPipeline`'s cannot, so a resumed run starts its data
again from the first batch; `kd.data.py.DataSource` (PyGrain) saves its position, and
the resumed run is bit for bit the uninterrupted one.
"""

import json
import pathlib
import re
import shutil
import sys

import jax
import numpy as np
import optax
from kauldron import kd

from sections.registry import Lesson, LessonFailed, Panel, section
from sections.shared import (BATCH_SIZE, MLP, LogCosh, RegressionRows, WithinTol, event_files,
                             make_data, make_loader, read_scalars, run_child)

EVERY, FIRST_STEPS, SECOND_STEPS = 100, 200, 300
EVAL_BATCH = 48  # 128 eval rows -> batches of 48, 48 and 32: pooling must weigh them right


def in_memory_pipeline():
    return kd.data.InMemoryPipeline(
        loader=make_loader("train"), batch_size=BATCH_SIZE, shuffle=True, num_epochs=None, seed=0)


def pygrain_pipeline():
    return kd.data.py.DataSource(
        data_source=RegressionRows("train"), batch_size=BATCH_SIZE, shuffle=True, num_epochs=None,
        seed=0, num_workers=0)


def build(workdir: pathlib.Path, num_train_steps: int, train_ds, *, evaluate: bool = True,
          checkpoint: bool = True):
    evals = {}
    if evaluate:
        evals["eval"] = kd.evals.Evaluator(
            run=kd.evals.EveryNSteps(EVERY),
            # PyGrain keeps the last, smaller batch (InMemoryPipeline only drops it).
            ds=kd.data.py.DataSource(data_source=RegressionRows("eval"), batch_size=EVAL_BATCH,
                                     shuffle=False, num_epochs=1, batch_drop_remainder=False,
                                     seed=0, num_workers=0),
        )
    return kd.train.Trainer(
        seed=0,
        workdir=str(workdir),  # absolute: Orbax refuses relative checkpoint paths
        train_ds=train_ds,
        model=MLP(inputs="batch.x"),
        num_train_steps=num_train_steps,
        log_metrics_every=EVERY,
        train_losses={"logcosh": LogCosh(preds="preds.y", targets="batch.y")},
        train_metrics={"within_tol": WithinTol(preds="preds.y", targets="batch.y")},
        optimizer=optax.adam(learning_rate=1e-2),
        checkpointer=(kd.ckpts.Checkpointer(save_interval_steps=EVERY) if checkpoint
                      else kd.ckpts.NoopCheckpointer()),
        evals=evals,
        profiler=None,  # the default profiler cannot run twice in one process
    )


# Reads each checkpoint given on the command line; prints {path: problem or None}.
_READ_CHECKPOINTS = """
import json, sys
import orbax.checkpoint as ocp
problems = {}
for path in sys.argv[1:]:
    try:
        ocp.StandardCheckpointer().restore(path + "/default")
        problems[path] = None
    except Exception as e:  # whatever stops the read is the answer
        first_line = str(e).strip().splitlines()[0].split(". See full")[0]
        problems[path] = f"{type(e).__name__}: {first_line[:160]}"
print(json.dumps(problems))
"""


def unreadable(checkpoints: list[pathlib.Path]) -> dict[str, str]:
    """The checkpoints Orbax cannot read back, with why. Read in a child process: when one
    read fails, Orbax leaves the other reads' coroutines behind, and Python prints each
    one's traceback ("Exception ignored in ...") to stderr whenever they are collected."""
    proc = run_child([sys.executable, "-c", _READ_CHECKPOINTS, *map(str, checkpoints)],
                     "reading the kept checkpoints")
    return {path: problem for path, problem in json.loads(proc.stdout.strip().splitlines()[-1]).items()
            if problem}


def start_fresh(workdir: pathlib.Path) -> list[str]:
    """Clears an earlier run of this lesson from a kept workdir, so the lesson starts at
    step 0. Its checkpoints must be readable first: Kauldron would resume from them, and
    it does not fall back to an older one when the newest is damaged."""
    committed = sorted(p for p in workdir.glob("*/checkpoints/ckpt_*") if re.fullmatch(r"ckpt_\d+", p.name))
    for checkpoint, problem in (unreadable(committed) if committed else {}).items():
        raise LessonFailed(f"checkpoint {checkpoint} cannot be restored ({problem}); to start "
                           f"fresh, delete {workdir} or run with a new --workdir")
    leftovers = sorted(p.name for p in workdir.iterdir())
    for path in workdir.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return leftovers


def max_param_difference(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)))


def train_interrupted(workdir: pathlib.Path, pipeline):
    """Trains to 200 steps, then builds the Trainer again and resumes to 300."""
    build(workdir, FIRST_STEPS, pipeline(), evaluate=False).train()
    return build(workdir, SECOND_STEPS, pipeline(), evaluate=False).train()[0]


def train_uninterrupted(workdir: pathlib.Path, pipeline):
    # Nothing to resume from, so nothing to save: checkpoints cost about 0.1 s each here.
    return build(workdir, SECOND_STEPS, pipeline(), evaluate=False, checkpoint=False).train()[0]


@section(9, "checkpoint", "Evaluation and checkpointing, and picking up where you left off", trains=True)
def lesson(lesson: Lesson) -> str:
    leftovers = start_fresh(lesson.workdir)
    if leftovers:
        print(f"  (this kept workdir held an earlier run, {leftovers}, with readable checkpoints:"
              " cleared, starting over)\n")
    workdir = lesson.workdir / "run"
    first = build(workdir, FIRST_STEPS, in_memory_pipeline())
    state, _ = first.train()
    saved = first.checkpointer.all_steps
    print(f"  train() with num_train_steps={FIRST_STEPS}: state.step = {int(state.step)},"
          f" checkpoints at steps {saved}")
    lesson.check_equal(list(saved), [0, 100, 200], "checkpoint steps after the first run")
    lesson.check_equal(int(state.step), FIRST_STEPS + 1, "state.step after the first run")
    print(f"  The loop runs steps 0..{FIRST_STEPS} inclusive, evaluating and saving before each update:"
          f"\n  {FIRST_STEPS + 1} updates, and the state after the last one (step {int(state.step)}) is never saved.")

    second = build(workdir, SECOND_STEPS, in_memory_pipeline())
    resume_from = second.checkpointer.latest_step
    state2, _ = second.train()
    saved2 = second.checkpointer.all_steps
    evals_per_call = [sorted(read_scalars(path)) for path in event_files(workdir, "eval")]
    print(f"\n  The same Trainer with num_train_steps={SECOND_STEPS} on the same workdir: latest"
          f" checkpoint {resume_from},\n  state.step = {int(state2.step)}, checkpoints now {saved2}"
          f" (max_to_keep=3); evaluations per train() call: {evals_per_call}")
    lesson.check_equal(resume_from, FIRST_STEPS, "the checkpoint the second run resumes from")
    lesson.check_equal(list(saved2), [100, 200, 300], "checkpoint steps after resuming")
    lesson.check_equal(int(state2.step), SECOND_STEPS + 1, "state.step after resuming")
    lesson.check_equal(evals_per_call, [[0, 100, 200], [200, 300]],
                       "eval steps written by each train() call (the second starts at 200)")
    lesson.fact("checkpoints", {"first_run": list(saved), "after_resume": list(saved2)})

    evals = read_scalars(*event_files(workdir, "eval"))
    print(f"\n  The evaluator's metrics, read back from {workdir.name}/eval/ (TensorBoard event files):")
    print(f"  {'step':>6} {'eval logcosh':>13} {'eval within_tol':>16}")
    for step, values in sorted(evals.items()):
        print(f"  {step:>6} {values['losses/logcosh']:>13.4f} {values['metrics/within_tol']:>16.4f}")
    lesson.fact("eval", {str(step): {"logcosh": v["losses/logcosh"], "within_tol": v["metrics/within_tol"]}
                         for step, v in sorted(evals.items())})
    lesson.check(evals[SECOND_STEPS]["losses/logcosh"] * 10 < evals[0]["losses/logcosh"],
                 "the eval loss fell at least 10x from step 0 to step 300")
    steps = sorted(evals)
    lesson.plot(f"Section 9: evaluation every {EVERY} steps, across a resume at step {FIRST_STEPS}",
                Panel("eval loss (128 rows)", "step", "logcosh (log scale)", log_y=True,
                      lines={"eval logcosh": (steps, [evals[k]["losses/logcosh"] for k in steps])}),
                Panel("eval metric (pooled over 128 rows)", "step", "within_tol",
                      lines={"eval within_tol": (steps, [evals[k]["metrics/within_tol"] for k in steps])}))

    # The step-0 evaluation used the initial parameters: recompute it over all 128 rows.
    data = make_data("eval")
    preds = np.asarray(first.model.apply({"params": first.init_state().params}, data["x"])["y"])
    hits = np.abs(preds - data["y"]) < WithinTol(preds="", targets="").tol
    per_batch = [hits[i:i + EVAL_BATCH].mean() for i in range(0, len(hits), EVAL_BATCH)]
    lesson.check_close(evals[0]["metrics/within_tol"], float(hits.mean()),
                       "eval within_tol at step 0 against the pooled ratio over 128 rows", rel=1e-6)
    lesson.check_close(evals[0]["losses/logcosh"], float(np.mean(np.log(np.cosh(preds - data["y"])))),
                       "eval logcosh at step 0 against numpy over 128 rows", rel=1e-5)
    print(f"  At step 0 the evaluator's within_tol {evals[0]['metrics/within_tol']:.4f} is the pooled ratio over"
          f"\n  all 128 rows ({int(hits.sum())}/128); averaging its three batches' rates would give"
          f" {np.mean(per_batch):.4f}.")

    print("\n  Is the resumed run the same as one that was never interrupted?")
    # The evaluator only reads the parameters, so the run above serves as the interrupted one.
    differences = {
        "InMemoryPipeline": max_param_difference(
            state2, train_uninterrupted(lesson.workdir / "in-memory-uninterrupted", in_memory_pipeline)),
        "kd.data.py.DataSource": max_param_difference(
            train_interrupted(lesson.workdir / "pygrain-interrupted", pygrain_pipeline),
            train_uninterrupted(lesson.workdir / "pygrain-uninterrupted", pygrain_pipeline)),
    }
    for name, difference in differences.items():
        print(f"    {name:22} max |param difference| after 300 steps = {difference:.6g}")
    lesson.check(differences["InMemoryPipeline"] > 1e-3,
                 "InMemoryPipeline: the resumed run differs from the uninterrupted one")
    lesson.check_equal(differences["kd.data.py.DataSource"], 0.0,
                       "PyGrain DataSource: max |param difference| between resumed and uninterrupted")
    lesson.fact("max_param_difference_after_resume", differences)

    ds_iter = pathlib.Path("checkpoints", "ckpt_200", "ds_iter")
    position = json.loads(next((lesson.workdir / "pygrain-interrupted" / ds_iter).glob("*.json")).read_text())
    in_memory_items = sorted(p.name for p in (workdir / ds_iter).iterdir())
    lesson.check_equal(position.get("next_index"), FIRST_STEPS * BATCH_SIZE,
                       "the PyGrain iterator position saved in ckpt_200")
    lesson.check(not any(name.endswith(".json") for name in in_memory_items),
                 "InMemoryPipeline's ckpt_200/ds_iter holds no iterator position")
    print(f"  Why: ckpt_200/ds_iter/ holds {position} for PyGrain (200 batches of 32),"
          f"\n  and only {in_memory_items} for InMemoryPipeline, whose resumed run restarts at batch 0."
          "\n  For preemptible jobs, use kd.data.py (PyGrain) pipelines: a restart is then exact.")
    return (f"resumed at step {resume_from} -> {int(state2.step)}; eval logcosh "
            f"{evals[0]['losses/logcosh']:.3f} -> {evals[SECOND_STEPS]['losses/logcosh']:.4f}; resume exact with "
            f"PyGrain (diff 0), not with InMemoryPipeline (diff {differences['InMemoryPipeline']:.3g})")
