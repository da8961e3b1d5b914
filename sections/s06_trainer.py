"""A Trainer, end to end.

`kd.train.Trainer` is a frozen dataclass that names every part of an experiment: the data,
the model, the losses and metrics, the optimizer, and where it writes. This lesson builds
one from the experiment's config file, looks at its data and parameters before training,
trains it with `train()`, and then runs the core of `train()` by hand to see one step up
close.
"""

import dataclasses
import inspect

import jax
import numpy as np
from kauldron import kd, konfig

from configs import regression
from sections.figures import plot_training
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import check_batch_stats, enc_norm_by_hand, max_difference
from sections.shared import MLP, event_files, read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg  # builds config entries, as a config file does


@section(6, "trainer", "A Trainer, end to end", part="training", trains=True,
         shows="configs/regression.py resolved into a kd.train.Trainer: kd.inspect, train(), and its step by hand",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#training")
def trainer_end_to_end(lesson: Lesson) -> str:
    lesson.md("""
    ## The experiment is a config file

    `configs/regression.py` describes the data, model, losses, metrics and optimizer as a
    `ConfigDict` (section 1): nothing is built yet, so anything can still be changed. Here
    the lesson points the run at its workdir, shortens it, and adds one metric that reads
    an *inner* layer: `kd.metrics.Norm` on `interms.enc.__call__[0]`, the output of the
    Dense layer named `enc`, which Flax captures without any change to the model.
    `konfig.resolve` then builds the `kd.train.Trainer` the config describes. The model's
    field `inputs` names its argument; its value, `"batch.x"`, is the key path it is fed.
    """)
    cfg = regression.get_config()
    cfg.workdir = str(lesson.workdir)  # where train() writes; absolute
    cfg.num_train_steps = 50
    cfg.train_metrics["enc_norm"] = kd_cfg.metrics.Norm(tensor="interms.enc.__call__[0]")
    trainer = konfig.resolve(cfg)
    print(trainer.model)
    lesson.check_equal((type(trainer.model), trainer.model.inputs), (MLP, "batch.x"),
                       "the resolved model's class, and the key path its `inputs` field holds")
    lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer, "num_train_steps", 5),
                        "changing a field of the resolved Trainer")

    lesson.md("""
    ## Look before you train

    `kd.inspect` describes the data without training anything, and `trainer.init_state()`
    builds the parameters from the data's element spec alone: their shapes are the first
    thing to check when a model misbehaves.
    """)
    spec = kd.inspect.json_spec_like(trainer.train_ds.element_spec)
    print("element spec:", spec)
    stats = kd.inspect.get_batch_stats(next(iter(trainer.train_ds)))
    print(stats.to_string(index=False))
    state = trainer.init_state()
    print("params:", jax.tree.map(np.shape, state.params))
    lesson.check_equal(spec, {"x": "f32[32 16]", "y": "f32[32 1]"}, "the pipeline's element spec")
    check_batch_stats(lesson, stats, next(iter(trainer.train_ds)))
    lesson.check_equal(jax.tree.map(np.shape, state.params),
                       {"enc": {"bias": (32,), "kernel": (16, 32)}, "out": {"bias": (1,), "kernel": (32, 1)}},
                       "the parameter shapes init_state() built from the element spec")

    lesson.md("""
    ## Train it

    `train()` runs the loop. It is more than a loop: it restores the latest checkpoint and
    saves new ones (section 9), runs the evaluators (sections 9 and 15), writes the config
    and every logged metric to the workdir, places each batch on the devices with the
    Trainer's sharding (section 11), and runs under `jax.transfer_guard("disallow")`, so a
    host-device copy that nobody asked for fails loudly. It runs steps 0 to
    `num_train_steps` inclusive: `num_train_steps + 1` updates.
    """)
    state, aux = trainer.train()
    print("state.step:", int(state.step))
    print("last step:", {k: round(float(v), 4) for k, v in aux.compute().metric_values.items()})
    logged = read_scalars(*event_files(trainer.workdir, "train"))
    print("logcosh logged:", {step: round(row["losses/logcosh"], 4) for step, row in logged.items()})
    lesson.check_equal(int(state.step), cfg.num_train_steps + 1, "state.step after train() with num_train_steps=50")
    lesson.check(logged[50]["losses/logcosh"] * 10 <= logged[0]["losses/logcosh"],
                 "the logged training loss fell at least 10x from step 0 to step 50")
    lesson.check({"config.json", "element_spec.json", "train"} <= {p.name for p in lesson.workdir.iterdir()},
                 "train() wrote config.json, element_spec.json and the train/ metrics to the workdir")
    lesson.check("transfer_guard" in inspect.getsource(kd.train.train_loop.train_impl),
                 "the training loop runs under a jax transfer guard", internal=True)
    plot_training(lesson, logged)

    lesson.md("""
    ## The core of `train()`, by hand

    Strip away checkpoints, evaluators and logging and what is left is the Trainer's own
    train step, called on one batch after another. Called by hand from the same initial
    state, it lands on the same parameters as `train()`. Asked for them, it also returns the
    step's loss and metric states. The step *donates* the state it is given: XLA may reuse
    its buffers for the new state, and jax deletes the old arrays, so a donated state must
    never be used again. The batch is not donated.
    """)
    state_by_hand, batches = trainer.init_state(), iter(trainer.train_ds)
    for step in range(cfg.num_train_steps + 1):
        given, batch = state_by_hand, jax.device_put(next(batches))
        params_in = jax.tree.map(np.array, given.params)  # a copy: the step deletes `given`
        state_by_hand, aux = trainer.trainstep.step(given, batch, return_losses=True, return_metrics=True)
    values = {name: float(s.compute()) for name, s in {**aux.loss_states, **aux.metric_states}.items()}
    print("last step by hand:", {name: round(value, 4) for name, value in values.items()})
    lesson.check(max_difference(state_by_hand.params, state.params) < 1e-5,
                 "51 steps by hand from init_state() reach train()'s parameters (within 1e-5)")
    lesson.check(all(p.is_deleted() for p in jax.tree.leaves(given.params)),
                 "the step deleted the state it was given (donated)")
    lesson.check(not batch["x"].is_deleted(), "the step did not donate the batch: it is still there")
    lesson.check_close(values["enc_norm"], enc_norm_by_hand(params_in, batch["x"]),
                       "enc_norm at the last step = the mean row norm of enc's output, by hand", rel=1e-5)
    lesson.fact("logcosh", {str(step): logged[step]["losses/logcosh"] for step in (0, 50)})
    lesson.fact("enc_norm_last_step", values["enc_norm"])
    return (f"logcosh {logged[0]['losses/logcosh']:.4f} -> {logged[50]['losses/logcosh']:.4f} in 51 updates;"
            " by hand: the same parameters")
