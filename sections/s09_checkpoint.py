"""Evaluation, checkpointing, and picking up where you left off.

A `kd.ckpts.Checkpointer` saves the training state every N steps into the workdir, and
a `kd.evals.Evaluator` evaluates the model on its own data every N steps, writing its
metrics there too. Build the same Trainer again on the same workdir with more steps, and
`train()` restores the latest checkpoint and goes on from there.

An evaluator pools its batches: its metric is the ratio over every row it saw. Which
rows it sees depends on the pipeline: `kd.data.py.DataSource` drops a last, smaller batch
by default (`batch_drop_remainder=True`); the evaluator below opts out to see all 128.

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
from kauldron import konfig

from configs import regression
from sections.lesson import Lesson, LessonFailed, Panel
from sections.registry import section
from sections.children import run_child
from sections.shared import BATCH_SIZE, WithinTol, event_files, make_data, read_scalars

EVERY, FIRST_STEPS, SECOND_STEPS = 100, 200, 300
EVAL_BATCH = 48  # 128 eval rows -> batches of 48, 48 and 32 (the last one dropped by default)


def experiment(workdir: pathlib.Path, num_train_steps: int, *, pygrain: bool = False,
               evaluate: bool = True, checkpoint: bool = True):
    """The regression config with this lesson's overrides, resolved into a Trainer."""
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    def eval_rows(**batching):
        return kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("eval"), batch_size=EVAL_BATCH,
                                         shuffle=False, num_epochs=1, num_workers=0, **batching)

    cfg = regression.get_config()
    cfg.workdir = str(workdir)  # absolute: Orbax refuses relative checkpoint paths
    cfg.num_train_steps = num_train_steps
    cfg.log_metrics_every = EVERY
    if pygrain:
        cfg.train_ds = kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("train"),
                                                 batch_size=BATCH_SIZE, shuffle=True, num_epochs=None, num_workers=0)
    cfg.checkpointer = (kd_cfg.ckpts.Checkpointer(save_interval_steps=EVERY) if checkpoint
                        else kd_cfg.ckpts.NoopCheckpointer())
    if evaluate:
        cfg.evals = {
            "eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY),
                                           ds=eval_rows(batch_drop_remainder=False)),  # all 128 rows
            "eval_default": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(EVERY), ds=eval_rows()),
        }
    return konfig.resolve(cfg)


# Reads each checkpoint given on the command line; prints {path: problem or None}.
READ_CHECKPOINTS = """
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


def start_fresh(workdir: pathlib.Path) -> list[str]:
    """Clears an earlier run of this lesson from a kept workdir, so the lesson starts at
    step 0. Its checkpoints must be readable first: Kauldron would resume from them, and
    it does not fall back to an older one when the newest is damaged. They are read in a
    child process: when one read fails, Orbax leaves the other reads' coroutines behind,
    and Python prints each one's traceback whenever they are collected."""
    committed = sorted(p for p in workdir.glob("*/checkpoints/ckpt_*") if re.fullmatch(r"ckpt_\d+", p.name))
    if committed:
        proc = run_child([sys.executable, "-c", READ_CHECKPOINTS, *map(str, committed)], "reading the kept checkpoints")
        for checkpoint, problem in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            if problem:
                raise LessonFailed(f"checkpoint {checkpoint} cannot be restored ({problem}); to start "
                                   f"fresh, delete {workdir} or run with a new --workdir")
    leftovers = sorted(p.name for p in workdir.iterdir())
    for path in workdir.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return leftovers


def max_param_difference(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)))


def train_and_resume(lesson: Lesson, workdir: pathlib.Path):
    first = experiment(workdir, FIRST_STEPS)
    state, _ = first.train()
    saved = first.checkpointer.all_steps
    print(f"  train() with num_train_steps={FIRST_STEPS}: state.step = {int(state.step)},"
          f" checkpoints at steps {saved}")
    lesson.check_equal(list(saved), [0, 100, 200], "the checkpoint steps after the first run")
    lesson.check_equal(int(state.step), FIRST_STEPS + 1, "state.step after the first run")
    print(f"  The loop runs steps 0..{FIRST_STEPS} inclusive, evaluating and saving before each update:"
          f"\n  {FIRST_STEPS + 1} updates, and the state after the last one (step {int(state.step)}) is never saved.")

    second = experiment(workdir, SECOND_STEPS)
    resume_from = second.checkpointer.latest_step
    state2, _ = second.train()
    saved2 = second.checkpointer.all_steps
    evals_per_call = [sorted(read_scalars(path)) for path in event_files(workdir, "eval")]
    print(f"\n  The same Trainer with num_train_steps={SECOND_STEPS} on the same workdir: latest"
          f" checkpoint {resume_from},\n  state.step = {int(state2.step)}, checkpoints now {saved2}"
          f" (max_to_keep=3); evaluations per train() call: {evals_per_call}")
    lesson.check_equal(resume_from, FIRST_STEPS, "the checkpoint the second run resumes from")
    lesson.check_equal((list(saved2), second.checkpointer.max_to_keep), ([100, 200, 300], 3),
                       "the checkpoint steps after resuming, and the Checkpointer's default max_to_keep")
    lesson.check_equal(int(state2.step), SECOND_STEPS + 1, "state.step after resuming")
    lesson.check_equal(evals_per_call, [[0, 100, 200], [200, 300]],
                       "the eval steps written by each train() call (the second starts at 200)")
    lesson.fact("checkpoints", {"first_run": list(saved), "after_resume": list(saved2)})
    return first, state2


def check_evaluations(lesson: Lesson, workdir: pathlib.Path, first) -> dict:
    evals = read_scalars(*event_files(workdir, "eval"))
    default = read_scalars(*event_files(workdir, "eval_default"))
    print(f"\n  The evaluator's metrics, read back from {workdir.name}/eval/ (TensorBoard event files):")
    print(f"  {'step':>6} {'eval logcosh':>13} {'eval within_tol':>16}")
    for step, values in sorted(evals.items()):
        print(f"  {step:>6} {values['losses/logcosh']:>13.4f} {values['metrics/within_tol']:>16.4f}")
    lesson.check(evals[SECOND_STEPS]["losses/logcosh"] * 10 < evals[0]["losses/logcosh"],
                 "the eval loss fell at least 10x from step 0 to step 300")

    # Step 0 used the initial parameters: recompute both evaluators' numbers by hand.
    data = make_data("eval")
    preds = np.asarray(first.model.apply({"params": first.init_state().params}, data["x"])["y"])
    hits = np.abs(preds - data["y"]) < WithinTol(preds="", targets="").tol
    kept = 2 * EVAL_BATCH  # the default drops the last batch of 32
    lesson.check_close(evals[0]["metrics/within_tol"], float(hits.mean()),
                       "eval within_tol at step 0 = the pooled ratio over all 128 rows (remainder kept)")
    lesson.check_close(default[0]["metrics/within_tol"], float(hits[:kept].mean()),
                       f"eval_default within_tol at step 0 = the pooled ratio over the first {kept} rows (remainder dropped)")
    lesson.check_close(evals[0]["losses/logcosh"], float(np.mean(np.log(np.cosh(preds - data["y"])))),
                       "eval logcosh at step 0 = numpy's over 128 rows", rel=1e-5)
    per_batch = [hits[i:i + EVAL_BATCH].mean() for i in range(0, len(hits), EVAL_BATCH)]
    print(f"  At step 0 within_tol is {evals[0]['metrics/within_tol']:.4f}, the pooled ratio over all 128 rows"
          f" ({int(hits.sum())}/128;\n  averaging the three batches' rates would give {np.mean(per_batch):.4f})."
          f" With the default batching\n  the last batch is dropped: {default[0]['metrics/within_tol']:.4f}"
          f" = {int(hits[:kept].sum())}/{kept}.")
    lesson.fact("eval", {str(step): {"logcosh": v["losses/logcosh"], "within_tol": v["metrics/within_tol"]}
                         for step, v in sorted(evals.items())})
    return evals


def compare_resumes(lesson: Lesson, state2) -> dict[str, float]:
    """Max |param difference| between a resumed and an uninterrupted 300-step run."""
    root = lesson.workdir

    def resumed_pygrain():
        experiment(root / "pygrain-interrupted", FIRST_STEPS, pygrain=True, evaluate=False).train()
        return experiment(root / "pygrain-interrupted", SECOND_STEPS, pygrain=True, evaluate=False).train()[0]

    def uninterrupted(name: str, pygrain: bool):  # nothing to resume from: no checkpoints
        return experiment(root / name, SECOND_STEPS, pygrain=pygrain, evaluate=False, checkpoint=False).train()[0]

    # The evaluators only read the parameters, so the run above serves as InMemoryPipeline's resumed one.
    return {"InMemoryPipeline": max_param_difference(state2, uninterrupted("in-memory-uninterrupted", False)),
            "kd.data.py.DataSource": max_param_difference(resumed_pygrain(), uninterrupted("pygrain-uninterrupted", True))}


def plot_evaluations(lesson: Lesson, evals: dict) -> None:
    steps = sorted(evals)
    lesson.plot(f"Section 9: evaluation every {EVERY} steps, across a resume at step {FIRST_STEPS}",
                Panel("eval loss (128 rows)", "step", "logcosh (log scale)", log_y=True,
                      lines={"eval logcosh": (steps, [evals[k]["losses/logcosh"] for k in steps])}),
                Panel("eval metric (pooled over 128 rows)", "step", "within_tol",
                      lines={"eval within_tol": (steps, [evals[k]["metrics/within_tol"] for k in steps])}))


@section(9, "checkpoint", "Evaluation and checkpointing, and picking up where you left off", trains=True,
         shows="evaluators pool their batches; checkpoints and resume; only a PyGrain pipeline resumes bit for bit")
def evaluate_checkpoint_resume(lesson: Lesson) -> str:
    leftovers = start_fresh(lesson.workdir)
    if leftovers:
        print(f"  (this kept workdir held an earlier run, {leftovers}, with readable checkpoints:"
              " cleared, starting over)\n")
    workdir = lesson.workdir / "run"
    first, state2 = train_and_resume(lesson, workdir)
    evals = check_evaluations(lesson, workdir, first)
    plot_evaluations(lesson, evals)

    print("\n  Is the resumed run the same as one that was never interrupted?")
    differences = compare_resumes(lesson, state2)
    for name, difference in differences.items():
        print(f"    {name:22} max |param difference| after 300 steps = {difference:.6g}")
    lesson.check(differences["InMemoryPipeline"] > 1e-3,
                 "InMemoryPipeline: the resumed run's parameters differ from the uninterrupted run's")
    lesson.check_equal(differences["kd.data.py.DataSource"], 0.0,
                       "PyGrain DataSource: the max |param difference| between resumed and uninterrupted")
    lesson.fact("max_param_difference_after_resume", differences)

    ds_iter = pathlib.Path("checkpoints", "ckpt_200", "ds_iter")
    position = json.loads(next((lesson.workdir / "pygrain-interrupted" / ds_iter).glob("*.json")).read_text())
    in_memory_items = sorted(p.name for p in (workdir / ds_iter).iterdir())
    lesson.check_equal(position.get("next_index"), FIRST_STEPS * BATCH_SIZE,
                       "the PyGrain iterator position saved in ckpt_200 (200 batches of 32)")
    lesson.check(not any(name.endswith(".json") for name in in_memory_items),
                 "InMemoryPipeline's ckpt_200/ds_iter holds no iterator position")
    print(f"  Why: ckpt_200/ds_iter/ holds {position} for PyGrain (200 batches of 32),"
          f"\n  and only {in_memory_items} for InMemoryPipeline, whose resumed run restarts at batch 0."
          "\n  For preemptible jobs, use kd.data.py (PyGrain) pipelines: a restart is then exact.")
    return (f"resumed at step {FIRST_STEPS} -> {int(state2.step)}; eval logcosh {evals[0]['losses/logcosh']:.3f} -> "
            f"{evals[SECOND_STEPS]['losses/logcosh']:.4f}; resume exact with PyGrain (diff 0), not with "
            f"InMemoryPipeline (diff {differences['InMemoryPipeline']:.3g})")
