"""Gradient accumulation: optax.MultiSteps in a config.

A batch too large for the device's memory can still be trained on: compute the gradients
of several smaller batches, average them, and update once. In Kauldron that is a config
entry, the optimizer wrapped in `optax.MultiSteps`. But Kauldron's training loop knows
nothing of it: for the loop every batch is a step. This lesson accumulates four batches of
8 into one update, holds it against one step on the 32 rows those batches hold, says what
counts batches and what counts updates (and what you must change for it), what a logged
step and an evaluation see, and resumes a run from a checkpoint taken halfway through an
accumulation.
"""

import itertools
import shutil

import jax
import numpy as np
from kauldron import konfig

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.logs import read_scalars

with konfig.imports():
    import optax as optax_cfg
    from kauldron import kd as kd_cfg

    from sections.parts import regression as regression_cfg

EVERY_K = 4  # batches accumulated into each update


@section(19, "grad-accum", "Gradient accumulation: optax.MultiSteps in a config", part="recipes", trains=True,
         shows="MultiSteps(every_k_schedule=4) on batches of 8 = one step on 32 rows; steps count batches, "
               "its schedule updates; a resume mid-accumulation is exact",
         reference=None)  # the lesson is optax's MultiSteps; the page names the source it relies on
def gradient_accumulation(lesson: Lesson, workdir):
    lesson.md("""
    ## Wrap the optimizer: four batches of 8, one update

    The regression experiment reads batches of 8 from a PyGrain pipeline (the resume at
    the end needs one: section 9), in order (`shuffle=False`, so that the checks can
    name the rows of each batch), and its optimizer is wrapped in
    `optax.MultiSteps(..., every_k_schedule=4)`, to update once every 4 batches from
    their gradients, accumulated (the steps below check how). The inner optimizer is
    Adam recording its learning rate (`adam_recording_lr`), on a schedule `lr` over the
    run's updates, `cfg.ref.num_train_steps // 4` of them: 1e-2 at the first, 5e-3 at
    the second, reaching 0 at a third that never comes. For the steps below, the run
    logs every batch, with `lr_per_batch`, the same decay over the run's batches, and
    two norms, of `grads` and of `updates`, and it evaluates the loss every 2 batches.
    The Trainer takes the `MultiSteps` object itself, though it is not an
    `optax.GradientTransformation`: its train step only calls the optimizer's `init`
    and `update` (`kauldron/train/train_step.py`). Its optimizer state is a
    `MultiStepsState`.
    """)
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir / "run")
    cfg.train_ds = kd_cfg.data.py.DataSource(data_source=regression_cfg.RegressionRows("train"), batch_size=8,
                                             shuffle=False, num_epochs=None, num_workers=0)
    cfg.num_train_steps = 8  # counted in batches: 2 updates of 4 batches
    cfg.log_metrics_every = 1
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=2)
    cfg.schedules = {
        "lr": optax_cfg.linear_schedule(init_value=1e-2, end_value=0.0,
                                        transition_steps=cfg.ref.num_train_steps // EVERY_K),  # in updates
        "lr_per_batch": optax_cfg.linear_schedule(init_value=1e-2, end_value=0.0,
                                                  transition_steps=cfg.ref.num_train_steps),  # in batches
    }
    cfg.optimizer = optax_cfg.MultiSteps(opt=regression_cfg.adam_recording_lr(learning_rate=cfg.ref.schedules["lr"]),
                                         every_k_schedule=EVERY_K)
    cfg.train_metrics["grad_norm"] = kd_cfg.metrics.Norm(tensor="grads.out.kernel", axis=None)
    cfg.train_metrics["update_norm"] = kd_cfg.metrics.Norm(tensor="updates.out.kernel", axis=None)
    cfg.evals = {"eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(2), metrics={}, ds=kd_cfg.data.py.DataSource(
        data_source=regression_cfg.RegressionRows("eval"), batch_size=128, shuffle=False, num_epochs=1, num_workers=0))}
    trainer = konfig.resolve(cfg)
    opt_state = trainer.init_state().opt_state
    print(type(trainer.optimizer).__name__, type(opt_state).__name__)
    print(opt_state._fields)
    with lesson.checks():
        import optax

        lesson.check(isinstance(trainer.optimizer, optax.MultiSteps)
                     and not isinstance(trainer.optimizer, optax.GradientTransformation),
                     "the resolved Trainer's optimizer is the MultiSteps object, not an optax.GradientTransformation")
        lesson.check(isinstance(opt_state, optax.MultiStepsState) and int(opt_state.mini_step) == 0
                     and all(not np.any(leaf) for leaf in jax.tree.leaves(opt_state.acc_grads))
                     and jax.tree.map(np.shape, opt_state.acc_grads) == jax.tree.map(np.shape, trainer.init_state().params),
                     "init_state()'s optimizer state: a MultiStepsState, mini_step 0, acc_grads zeros shaped like the params")
        rows = np.concatenate([batch["x"] for batch in itertools.islice(iter(trainer.train_ds), EVERY_K)])
        lesson.check(np.array_equal(rows, training_rows()["x"][:32]),
                     "with shuffle=False, the pipeline's first 4 batches of 8 are the first 32 rows, in order")

    lesson.md("""
    ## Train: every batch is a step, every fourth one an update

    `train()` runs steps 0 to `num_train_steps`, one batch each: 9 batches. `state.step`
    counts them, as it counts steps without accumulation. The optimizer state counts
    the updates: `gradient_step` in `MultiStepsState`, and the inner optimizer's own
    `count`: two. The ninth batch's gradient waits in `acc_grads`, `mini_step` 1, for
    an update that never comes.
    """)
    state, _ = trainer.train()
    print("state.step:", int(state.step))
    print("gradient_step:", int(state.opt_state.gradient_step), " mini_step:", int(state.opt_state.mini_step))
    print("the inner optimizer's count:", int(state.opt_state.inner_opt_state.count))
    with lesson.checks():
        lesson.check_equal(int(state.step), cfg.num_train_steps + 1,
                           "state.step after train() with num_train_steps=8: the batches, not the updates")
        lesson.check_equal((int(state.opt_state.gradient_step), int(state.opt_state.inner_opt_state.count)), (2, 2),
                           "MultiSteps' gradient_step and the inner optimizer's count after 9 batches")
        lesson.check(int(state.opt_state.mini_step) == 1
                     and any(np.any(leaf) for leaf in jax.tree.leaves(state.opt_state.acc_grads)),
                     "after 9 batches, mini_step 1 and acc_grads not zero: the ninth batch's gradient, unapplied")

    lesson.md("""
    ## The same as one step on the 32 rows

    The same experiment without accumulation: batches of 32, the inner optimizer alone,
    its schedule over 2 steps. Its Trainer's own step, by hand (section 6), on rows 0 to
    31 and then 32 to 63: the parameters are those of the accumulated run within float
    rounding, after one update and after two. The comparison tells rows apart: a step on
    the update's first 8 rows alone, or on its last 8, lands elsewhere. `MultiSteps` averages the batches' gradients
    (by default; `use_grad_mean=False` sums them), so this holds where the mean of 4
    batch means is the mean over the 32 rows: a loss averaged over rows with no mask,
    batches of equal size, no layer that depends on the batch (batch normalization),
    and no randomness drawn per step (dropout: each batch is a step, with its own key).
    With Adam, this comparison hardly tells a mean from a sum: Adam's step barely
    depends on the gradient's scale, and a step from the sum lands within 1e-5 too.
    `ckpt_6`, below, holds the mean.
    """)
    one_step_cfg = regression_config.get_config()
    one_step_cfg.workdir = str(workdir / "one-step")
    one_step_cfg.train_ds = kd_cfg.data.py.DataSource(data_source=regression_cfg.RegressionRows("train"), batch_size=32,
                                                      shuffle=False, num_epochs=None, num_workers=0)
    one_step_cfg.optimizer = regression_cfg.adam_recording_lr(
        learning_rate=optax_cfg.linear_schedule(init_value=1e-2, end_value=0.0, transition_steps=2))
    one_step = konfig.resolve(one_step_cfg)
    state_32 = one_step.init_state()
    for batch in itertools.islice(iter(one_step.train_ds.device_put(one_step.sharding.batch)), 2):
        state_32, _ = one_step.trainstep.step(state_32, batch)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(state.params),
                                                                 jax.tree.leaves(state_32.params)))
    print(f"max |parameter difference|, 2 updates: {difference:.1e}")
    with lesson.checks():
        lesson.check(max_difference(state.params, state_32.params) < 1e-6,
                     "after 2 updates, the accumulated run's parameters = 2 steps on batches of 32 (within 1e-6)")
        first_32 = next(iter(one_step.train_ds.device_put(one_step.sharding.batch)))
        after_one = one_step.trainstep.step(one_step.init_state(), first_32)[0].params
        reader = konfig.resolve(cfg)
        at_4 = reader.checkpointer.restore(trainer.init_state(), step=4)  # a state of the same structure
        lesson.check(int(at_4.opt_state.gradient_step) == 1 and max_difference(at_4.params, after_one) < 1e-6,
                     "after 1 update (ckpt_4), the parameters = 1 step on rows 0-31 (within 1e-6)")
        lesson.check(all(max_difference(adam_step(one_step, 1e-2, training_rows(k, k + 8)), after_one) > 1e-3
                         for k in (0, 24)),
                     "a step on rows 0-7 alone, or on rows 24-31 alone (the update's first batch, its last), ends more"
                     " than 1e-3 away from the step on rows 0-31")
        initial = jax.tree.map(np.asarray, trainer.init_state().params)
        four = [logcosh_gradient(trainer, initial, training_rows(k, k + 8)) for k in range(0, 32, 8)]
        from_sum = adam_update(initial, jax.tree.map(lambda *g: sum(g), *four), 1e-2)
        lesson.check(max_difference(from_sum, at_4.params) < 1e-5,
                     "with Adam, one step from the sum of the 4 batches' gradients also lands on ckpt_4 (within 1e-5)")
        lesson.check(max_difference(multi_steps_acc_grads(use_grad_mean=False), np.array([3.0])) == 0.0,
                     "optax.MultiSteps(use_grad_mean=False) given the gradients 1 and 2 accumulates their sum, 3")
        lesson.check(not same(*dropout_gradients(trainer, steps=(4, 5))),
                     "the step of a Trainer with dropout (section 14's DropoutMLP), from one state and batch (gradient_step"
                     " 0) but state.step 4, then 5, accumulates other gradients: its dropout key follows state.step")
        lesson.fact("max_param_difference_vs_batches_of_32", {"1": max_difference(at_4.params, after_one),
                                                              "2": max_difference(state.params, state_32.params)})

    lesson.md("""
    ## What counts batches, what counts updates, and what to change

    What Kauldron counts here counts batches: `num_train_steps`, `state.step`,
    `log_metrics_every`, the checkpoints' steps, and the step at which it evaluates
    `cfg.schedules` to log them. What the inner optimizer counts, a schedule inside
    `MultiSteps` included, counts updates: its second update used `lr` at 1, 5e-3. So,
    for `U` updates of `k` batches: set `num_train_steps = k * U` (its last batch only
    accumulates, and with a save interval that divides `k * U`, the last checkpoint,
    taken before that batch, holds the `U` updates, as `ckpt_8` does below); give the
    lengths of the optimizer's schedules in updates, `cfg.ref.num_train_steps // k`, not
    in steps as section 2 does; and read `schedules/lr` with care: logged at step 4, it
    is `lr` at 4 (0.0), the rate of a fifth update this run never makes. A copy with its
    lengths in batches, `lr_per_batch`, logs at the first batch of each update (steps 0
    and 4) the rate that update uses.
    """)
    logged = read_scalars(workdir / "run", "train")
    print("step  schedules/lr  schedules/lr_per_batch")
    for step, row in logged.items():
        print(f"{step:4}  {row['schedules/lr']:12.6f}  {row['schedules/lr_per_batch']:22.6f}")
    print("rate of the last update:", round(float(state.opt_state.inner_opt_state.hyperparams["learning_rate"]), 6))
    with lesson.checks():
        lr = konfig.resolve(cfg.schedules["lr"])
        lesson.check_equal(sorted(logged), list(range(9)), "the steps train() logged with log_metrics_every=1: batches")
        lesson.check(list(trainer.checkpointer.all_steps) == [4, 6, 8] and int(at_4.step) == 4
                     and int(at_4.opt_state.gradient_step) == 1,
                     "the checkpoints' steps count batches: ckpt_4 holds state.step 4, 1 update")
        lesson.check(all(abs(row["schedules/lr"] - float(lr(step))) < 1e-9 for step, row in logged.items()),
                     "schedules/lr logged at each step 0 to 8 = lr at that batch count")
        first_update = at_4.opt_state.inner_opt_state.hyperparams["learning_rate"]
        last_update = state.opt_state.inner_opt_state.hyperparams["learning_rate"]
        lesson.check(float(first_update) == float(lr(0)) and abs(float(last_update) - float(lr(1))) < 1e-9,
                     "the inner optimizer's updates 0 and 1 used lr at 0 and 1 (1e-2, 5e-3): it counts updates")

    lesson.md("""
    ## What a logged step and an evaluation see

    A step logs its own batch: at step 5, its losses are those of rows 40 to 47, not of
    the 16 rows the update has read so far (batches 4 and 5), nor of its 32. `grads` is
    that batch's gradient alone, not the mean accumulated so far, and `updates`, what
    the optimizer returned, is zero
    but at the fourth batch of each 4 (steps 3 and 7). An evaluator counts batches too:
    `EveryNSteps(2)` evaluates at steps 0, 2, 4, 6 and 8: at 0, 4 and 8 it scores the
    parameters after 0, 1 and 2 updates, and at 2 and 6 it scores again those it scored
    at 0 and 4, which no update has moved since.
    """)
    print("step  losses/logcosh  grad_norm  update_norm")
    for step, row in logged.items():
        print(f"{step:4}  {row['losses/logcosh']:14.4f}  {row['metrics/grad_norm']:9.4f}  {row['metrics/update_norm']:11.4f}")
    evaluated = read_scalars(workdir / "run", "eval")
    print("eval losses/logcosh", {step: round(row["losses/logcosh"], 4) for step, row in evaluated.items()})
    with lesson.checks():
        lesson.check_close(logged[5]["losses/logcosh"], mean_logcosh(trainer, at_4.params, training_rows(40, 48)),
                           "losses/logcosh logged at step 5 = the mean logcosh of rows 40-47 at ckpt_4's parameters"
                           " (by jax)", rel=1e-5)
        lesson.check(all(abs(mean_logcosh(trainer, at_4.params, training_rows(32, stop)) - logged[5]["losses/logcosh"])
                         > 1e-3 for stop in (48, 64)),
                     "and not that of rows 32-47, nor of rows 32-63 (more than 1e-3 apart)")
        batch_5 = out_kernel_norm(logcosh_gradient(trainer, at_4.params, training_rows(40, 48)))
        so_far = out_kernel_norm(mean_gradient(trainer, at_4.params, [training_rows(32, 40), training_rows(40, 48)]))
        lesson.check_close(logged[5]["metrics/grad_norm"], batch_5, "grads' norm (out.kernel) logged at step 5 = that of"
                           " the gradient of rows 40-47 alone, at ckpt_4's parameters (by jax)", rel=1e-4)
        lesson.check(abs(logged[5]["metrics/grad_norm"] - so_far) > 0.1 * so_far,
                     "and not that of the mean gradient of rows 32-47, accumulated at step 5 (more than 10% apart)")
        lesson.check(all((row["metrics/update_norm"] > 0) == (step in (3, 7)) for step, row in logged.items())
                     and all(row["metrics/update_norm"] == 0.0 for step, row in logged.items() if step not in (3, 7)),
                     "updates' norm logged: above 0 at steps 3 and 7, 0.0 exactly at every other step")
        lesson.check_equal(sorted(evaluated), [0, 2, 4, 6, 8], "the steps EveryNSteps(2) evaluated at")
        lesson.check(evaluated[2] == evaluated[0] and evaluated[6] == evaluated[4],
                     "the evaluations at steps 2 and 6 = those at steps 0 and 4, exactly")
        from sections.parts.regression import make_data

        scored = {0: trainer.init_state().params, 4: at_4.params, 8: state.params}  # after 0, 1 and 2 updates
        lesson.check(all(np.isclose(evaluated[step]["losses/logcosh"], float(mean_logcosh(trainer, params, make_data("eval"))),
                                    rtol=1e-5, atol=0) for step, params in scored.items())
                     and len({evaluated[step]["losses/logcosh"] for step in scored}) == 3,
                     "the eval losses at steps 0, 4 and 8 = the mean logcosh of the 128 eval rows (by jax) with the"
                     " parameters after 0, 1 and 2 updates (ckpt_4's, train()'s), and differ")

    lesson.md("""
    ## A checkpoint taken halfway through an accumulation

    The checkpointer saved every 2 batches and kept the last 3: `ckpt_4`, `ckpt_6` and
    `ckpt_8`. `ckpt_6` holds the state after 6 batches: one update, and in the optimizer
    state `mini_step` 2 and `acc_grads`, the mean of the gradients of batches 4 and 5,
    waiting. Its parameters are `ckpt_4`'s: they move only at an update. The last
    checkpoint still holds the state before the last step (section 6): step 8, not 9.
    But with `num_train_steps` a multiple of 4, that step only accumulates: `ckpt_8`
    holds the parameters `train()` returned, two full updates, with `mini_step` 0.
    """)
    reader = konfig.resolve(cfg)
    mid = reader.checkpointer.restore(trainer.init_state(), step=6)  # a state of the same structure
    print("checkpoints:", trainer.checkpointer.all_steps)
    print("ckpt_6: state.step", int(mid.step), " mini_step", int(mid.opt_state.mini_step),
          " gradient_step", int(mid.opt_state.gradient_step))
    print("acc_grads:", jax.tree.map(np.shape, mid.opt_state.acc_grads))
    with lesson.checks():
        lesson.check_equal((trainer.checkpointer.max_to_keep, list(trainer.checkpointer.all_steps)), (3, [4, 6, 8]),
                           "the Checkpointer's default max_to_keep, and the checkpoints kept of the 8-step run")
        lesson.check_equal((int(mid.step), int(mid.opt_state.mini_step), int(mid.opt_state.gradient_step)), (6, 2, 1),
                           "ckpt_6's state.step, mini_step and gradient_step")
        by_hand = mean_gradient(trainer, mid.params, [training_rows(32, 40), training_rows(40, 48)])
        lesson.check(max_difference(mid.opt_state.acc_grads, by_hand) < 1e-6,
                     "ckpt_6's acc_grads = the mean of the logcosh gradients of rows 32-39 and 40-47 (by jax, within 1e-6)")
        lesson.check(same(mid.params, at_4.params), "ckpt_6's parameters = ckpt_4's, bit for bit")
        at_8 = reader.checkpointer.restore(trainer.init_state(), step=8)
        lesson.check_equal(int(at_8.step), 8, "the last checkpoint's state.step (train() returned 9)")
        lesson.check(same(at_8.params, state.params) and (int(at_8.opt_state.mini_step),
                                                          int(at_8.opt_state.gradient_step)) == (0, 2),
                     "ckpt_8 holds train()'s final parameters, bit for bit, 2 updates, mini_step 0")

    lesson.md("""
    ## Resume halfway through an accumulation

    Play a preemption: the run loses `ckpt_8`, as if the job had stopped after saving
    step 6. The same config, resolved again, resumes from `ckpt_6`: its parameters, its
    accumulated gradients and the pipeline's position. It redoes batches 6 and 7,
    completes the second update, and accumulates batch 8: its own event file holds
    steps 6 to 8 only. The state it ends with is the uninterrupted run's, bit for bit:
    parameters and optimizer state.
    """)
    shutil.rmtree(workdir / "run" / "checkpoints" / "ckpt_8")  # the preemption
    resumed = konfig.resolve(cfg)
    resumed_from = resumed.checkpointer.latest_step
    print("resumes from:", resumed_from)
    state_resumed, _ = resumed.train()
    identical = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state_resumed), jax.tree.leaves(state)))
    print("state.step:", int(state_resumed.step), " the same state, bit for bit:", identical)
    with lesson.checks():
        lesson.check_equal(resumed_from, 6, "the checkpoint the resumed run starts from")
        from sections.parts.logs import event_files, scalars_in

        lesson.check_equal(sorted(scalars_in(event_files(workdir / "run", "train")[-1])), [6, 7, 8],
                           "the steps in the resumed run's event file (train/): it did not start again at step 0")
        check_saved_position(lesson, workdir / "run")
        lesson.check(same(state_resumed.params, state.params), "resumed from ckpt_6: the parameters, bit for bit")
        lesson.check(same(state_resumed.opt_state, state.opt_state) and int(state_resumed.step) == int(state.step),
                     "resumed from ckpt_6: the optimizer state (acc_grads, mini_step, Adam's moments) and"
                     " state.step, bit for bit")
        lesson.fact("resume_mid_accumulation_identical", same(state_resumed, state))
        lesson.summary = (f"4 batches of 8 = 1 step on 32 rows (max |diff| {max_difference(state.params, state_32.params):.0e});"
                          " state.step counts 9 batches, the schedule 2 updates; resumed from ckpt_6 (mini_step 2):"
                          " bit for bit")


# -- what the checks compute by hand ---------------------------------------------------

from harness.compare import max_difference, same  # noqa: E402


def training_rows(start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
    """Rows start:stop of the regression's training data."""
    from sections.parts.regression import make_data

    return {key: value[start:stop] for key, value in make_data("train").items()}


def mean_logcosh(trainer, params, rows):
    """The mean logcosh of the model's predictions for `rows`, by jax, without Kauldron's losses."""
    import jax.numpy as jnp

    preds = trainer.model.apply({"params": params}, rows["x"])["y"]
    return jnp.mean(jnp.log(jnp.cosh(preds - rows["y"])))


def logcosh_gradient(trainer, params, rows):
    """The gradient of the mean logcosh on `rows`, by jax, without Kauldron's step."""
    return jax.grad(lambda p: mean_logcosh(trainer, p, rows))(jax.tree.map(np.asarray, params))


def out_kernel_norm(grads) -> float:
    """The Frobenius norm of a gradient's out.kernel, as kd.metrics.Norm(axis=None) takes it."""
    return float(np.linalg.norm(np.asarray(grads["out"]["kernel"])))


def mean_gradient(trainer, params, batches):
    """The mean of the logcosh gradients of several batches."""
    grads = [logcosh_gradient(trainer, params, rows) for rows in batches]
    return jax.tree.map(lambda *g: sum(g) / len(g), *grads)


def adam_step(trainer, learning_rate: float, rows):
    """The parameters after one optax Adam step from the trainer's initial parameters on `rows`."""
    params = jax.tree.map(np.asarray, trainer.init_state().params)
    return adam_update(params, logcosh_gradient(trainer, params, rows), learning_rate)


def adam_update(params, grads, learning_rate: float):
    """`params` after one optax Adam step with the gradient `grads`."""
    import optax

    adam = optax.adam(learning_rate)
    updates, _ = adam.update(grads, adam.init(params), params)
    return optax.apply_updates(params, updates)


def dropout_gradients(trainer, steps) -> list:
    """The acc_grads after one train step of `trainer` with section 14's DropoutMLP as its
    model, from its initial state and first batch, with state.step set to each of `steps`."""
    import dataclasses

    from sections.parts.randomness import DropoutMLP

    dropping = dataclasses.replace(trainer, model=DropoutMLP(inputs="batch.x"), train_metrics={})
    start, batch = dropping.init_state(), next(iter(dropping.train_ds.device_put(dropping.sharding.batch)))
    return [dropping.trainstep.step(jax.tree.map(np.array, start.replace(step=np.asarray(step, start.step.dtype))),
                                    batch)[0].opt_state.acc_grads for step in steps]  # copies: the step donates its input


def multi_steps_acc_grads(**options) -> np.ndarray:
    """What optax.MultiSteps(every_k_schedule=4, **options) has accumulated after the gradients 1.0 and 2.0."""
    import optax

    multi = optax.MultiSteps(optax.sgd(1.0), every_k_schedule=4, **options)
    params = np.zeros(1, np.float32)
    opt_state = multi.init(params)
    for gradient in (1.0, 2.0):
        _, opt_state = multi.update(np.full(1, gradient, np.float32), opt_state, params)
    return np.asarray(opt_state.acc_grads)


def check_saved_position(lesson: Lesson, run) -> None:
    """The PyGrain position ckpt_6 holds (orbax's and grain's file layout)."""
    import json

    saved = json.loads(next(run.joinpath("checkpoints", "ckpt_6", "ds_iter").glob("*.json")).read_text())
    lesson.check_equal(saved.get("next_index"), 6 * 8, "the PyGrain position saved in ckpt_6: 6 batches of 8 rows",
                       internal="reads orbax's file layout")
