"""A Trainer, end to end.

`kd.train.Trainer` is a frozen dataclass that names every part of an experiment: the data,
the model, the losses and metrics, the optimizer, and where it writes. This lesson builds
one from the experiment's config file, looks at its data and parameters before training,
trains it with `train()`, and then runs the core of `train()` by hand to see one step up
close, and what `train()` adds around it.
"""

import itertools

import jax
import matplotlib.pyplot as plt
import numpy as np
from kauldron import kd, konfig

from configs import regression as regression_config
from harness import Lesson, section
from harness.compare import max_difference
from sections.parts.logs import read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg  # builds config entries, as a config file does


@section(6, "trainer", "A Trainer, end to end", part="training", trains=True,
         shows="configs/regression.py resolved into a kd.train.Trainer: kd.inspect, train(), and its step by hand",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#training")
def trainer_end_to_end(lesson: Lesson, workdir):
    lesson.md("""
    ## The experiment is a config file

    `configs/regression.py` (below) describes the data, model, losses, metrics and
    optimizer as a `ConfigDict` (section 1): nothing is built yet, so anything can still
    be changed. Here the run is pointed at the workdir, shortened to 50 steps, saves a
    checkpoint every 25 steps, and gets one more metric, which reads an *inner* layer:
    `kd.metrics.Norm` on `interms.enc.__call__[0]`, the output of the Dense layer named
    `enc`, which Flax captures without any change to the model: Kauldron applies it with
    `capture_intermediates=True` and keeps what Flax captured as `interms` (`[0]`: Flax
    keeps each output in a tuple). `konfig.resolve` then builds the `kd.train.Trainer`
    the config describes: frozen, as are its data pipeline and its losses. The model's
    field `inputs` names its argument; its value, `"batch.x"`, is the key path it is
    fed.
    """)
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir)  # where train() writes; absolute
    cfg.num_train_steps = 50
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=25)
    cfg.train_metrics["enc_norm"] = kd_cfg.metrics.Norm(tensor="interms.enc.__call__[0]")
    trainer = konfig.resolve(cfg)
    print(trainer.model)
    with lesson.checks():
        lesson.check_equal((type(trainer.model), trainer.model.inputs), (MLP, "batch.x"),
                           "the resolved model's class, and the key path its `inputs` field holds")
        lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer, "num_train_steps", 5),
                            "changing a field of the resolved Trainer")
        lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer.train_ds, "batch_size", 5),
                            "changing a field of its data pipeline")
        lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer.train_losses["logcosh"], "weight", 5),
                            "changing a field of its loss")

    lesson.md("""
    ## Look before you train

    `kd.inspect` describes the data without training anything, and `trainer.init_state()`
    builds the parameters from the data's element spec alone: their shapes are the first
    thing to check when a model misbehaves.
    """)
    print("element spec:", kd.inspect.json_spec_like(trainer.train_ds.element_spec))
    stats = kd.inspect.get_batch_stats(next(iter(trainer.train_ds)))
    print(stats.to_string(index=False))
    print("params:", jax.tree.map(np.shape, trainer.init_state().params))
    with lesson.checks():
        lesson.check_equal(kd.inspect.json_spec_like(trainer.train_ds.element_spec),
                           {"x": "f32[32 16]", "y": "f32[32 1]"}, "the pipeline's element spec")
        first_batch = next(iter(trainer.train_ds))
        for row in stats.to_dict("records"):
            values = np.asarray(first_batch[row["Name"].removeprefix("batch.")])
            lesson.check_close(row["Mean"], float(values.mean()), f"get_batch_stats' mean of {row['Name']}", rel=1e-5)
            lesson.check_equal((row["Min"], row["Max"]), (float(values.min()), float(values.max())),
                               f"get_batch_stats' min and max of {row['Name']}")
        lesson.check_equal(jax.tree.map(np.shape, trainer.init_state().params),
                           {"enc": {"bias": (32,), "kernel": (16, 32)}, "out": {"bias": (1,), "kernel": (32, 1)}},
                           "the parameter shapes init_state() built from the element spec")

    lesson.md("""
    ## Train it

    `train()` runs the loop. It is more than a loop: it restores the latest checkpoint
    and saves new ones (section 9), runs the evaluators (sections 9 and 15), and writes
    the config and every logged metric to the workdir. It runs steps 0 to
    `num_train_steps` inclusive: `num_train_steps + 1` updates. The `aux` it returns is
    the last step's, and holds losses and metrics only if that step logs them (step 50
    does: this config logs every `log_metrics_every=10` steps). At each step it
    evaluates and saves *before* the update: the last checkpoint, `ckpt_50`, holds the
    state after 50 updates, and the state `train()` returns, after 51, is saved nowhere.
    Keep it yourself if you need it: a run resumed from `ckpt_50` redoes update 50, and
    this config's `InMemoryPipeline` saves no position, so it does it on the first batch
    again (section 9). And `train()` run again on this workdir restores its latest
    checkpoint: to start over, give it a new workdir. A `Checkpointer` keeps the latest
    3 (`max_to_keep=3`): in this short run, all of them. `checkpointer.restore(state)`
    reads the latest checkpoint back into a state of the right structure, and deletes
    the arrays of the state you pass unless `donate=False`. Ask a Trainer built again
    from the config: the one that saved refuses to restore the `TrainState` alone, as
    its checkpoint manager was made for the whole checkpoint `train()` saves, of several
    items.
    """)
    state, aux = trainer.train()
    print("state.step:", int(state.step), " checkpoints:", trainer.checkpointer.all_steps)
    print("last step:", {k: round(float(v), 4) for k, v in aux.compute().metric_values.items()})
    logged = read_scalars(workdir, "train")
    print("logcosh logged:", {step: round(row["losses/logcosh"], 4) for step, row in logged.items()})
    fig, (loss_ax, enc_ax) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    steps = sorted(logged)
    loss_ax.semilogy(steps, [logged[step]["losses/logcosh"] for step in steps], marker="o")
    loss_ax.set(title="training loss", xlabel="step", ylabel="logcosh (log scale)")
    enc_ax.plot(steps, [logged[step]["metrics/enc_norm"] for step in steps], marker="o")
    enc_ax.set(title="an inner layer, read by key path", xlabel="step", ylabel="mean row norm")
    fig.suptitle("train() on the regression config: what it logged")
    plt.show()
    # The latest checkpoint, read back by a Trainer built again from the config:
    saved = konfig.resolve(cfg).checkpointer.restore(trainer.init_state())
    print("the latest checkpoint's state.step:", int(saved.step))
    with lesson.checks():
        lesson.check_equal(int(state.step), cfg.num_train_steps + 1, "state.step after train() with num_train_steps=50")
        lesson.check_equal(list(trainer.checkpointer.all_steps), [0, 25, 50], "the checkpoints of a 50-step run")
        lesson.check_equal(kd.ckpts.Checkpointer(save_interval_steps=25).max_to_keep, 3,
                           "a Checkpointer's default max_to_keep")
        restorer, given, kept = konfig.resolve(cfg).checkpointer, trainer.init_state(), trainer.init_state()
        restorer.restore(given)
        restorer.restore(kept, donate=False)
        lesson.check(all(x.is_deleted() for x in jax.tree.leaves(given))
                     and not any(x.is_deleted() for x in jax.tree.leaves(kept)),
                     "restore(state) deleted every array of the state it was given; restore(state, donate=False) none")
        lesson.check((int(saved.step), int(saved.opt_state[0].count)) == (50, 50)
                     and max_difference(saved.params, state.params) > 1e-3,
                     "the latest checkpoint holds the state before the last update (step 50, 50 Adam updates),"
                     " not the state train() returned")
        refusal = lesson.check_raises(ValueError, lambda: trainer.checkpointer.restore(trainer.init_state()),
                                      "the Trainer that saved, restoring the TrainState alone")
        lesson.check("Composite" in str(refusal), f"it wants the whole checkpoint: {str(refusal).splitlines()[0]}")
        resumed, _ = konfig.resolve(cfg).train()  # from ckpt_50: update 50 again
        redone, _ = trainer.trainstep.step(jax.tree.map(np.array, saved), next(iter(trainer.train_ds)))
        lesson.check(max_difference(resumed.params, redone.params) < 1e-6
                     and max_difference(resumed.params, state.params) > 1e-3,
                     "a run resumed from ckpt_50 redoes update 50 on the pipeline's first batch, not on batch 50")
        lesson.check(logged[50]["losses/logcosh"] * 10 <= logged[0]["losses/logcosh"],
                     "the logged training loss fell at least 10x from step 0 to step 50")
        lesson.check({"config.json", "element_spec.json", "train"} <= {p.name for p in workdir.iterdir()},
                     "train() wrote config.json, element_spec.json and the train/ metrics to the workdir")
        lesson.check(set(aux.metric_states) == {"within_tol", "enc_norm"}
                     and abs(float(aux.loss_states["logcosh"].compute()) - logged[50]["losses/logcosh"]) < 1e-6,
                     "train()'s aux is the last step's, with its metrics: its logcosh is the one logged at step 50")
        probe = GuardProbe()  # a 1-step run (steps 0 and 1): step 1 logs nothing; the last step checks the probe
        _, short_aux = dataclasses.replace(trainer, workdir=workdir / "guard-probe", num_train_steps=1,
                                           checkpointer=None, writer=None, profiler=probe).train()
        lesson.check((short_aux.loss_states, short_aux.metric_states) == (None, None),
                     "a run whose last step (1) does not log (log_metrics_every=10): its aux holds no losses or metrics")

    lesson.md("""
    ## The core of `train()`, by hand

    Strip away checkpoints, evaluators and logging and what is left is the Trainer's own
    train step, called on one batch after another ([Kauldron's
    docs](https://kauldron.readthedocs.io/en/latest/eval.html#training) call it the
    mid-level API). `state = trainer.init_state()`, then `state, aux =
    trainer.trainstep.step(state, batch)` for each batch of
    `trainer.train_ds.device_put(trainer.sharding.batch)`, which places each batch on the
    devices with the Trainer's batch sharding, as `train()` does (section 11); the older
    name, `trainer.sharding.ds`, now raises a `DeprecationWarning`. The pipeline never
    ends (`num_epochs=None`), so the loop takes the first 50 batches. From the same initial state and the same batches, it reaches
    the state of the latest checkpoint: the state before `train()`'s last update.
    """)
    state_by_hand = trainer.init_state()
    batches = iter(trainer.train_ds.device_put(trainer.sharding.batch))
    for batch in itertools.islice(batches, cfg.num_train_steps):  # steps 0 to 49
        state_by_hand, aux = trainer.trainstep.step(state_by_hand, batch)
    print("state.step by hand:", int(state_by_hand.step))
    with lesson.checks():
        lesson.skip_check("Kauldron's docs call this loop the mid-level API",
                          "a citation of a section title of the docs, not a claim about the installed library")
        lesson.check_raises(DeprecationWarning, lambda: trainer.sharding.ds, "reading trainer.sharding.ds, the older name")
        lesson.check_equal(batch["x"].sharding, trainer.sharding.batch,
                           "a batch device_put placed: its sharding is the Trainer's batch sharding")
        lesson.check_equal(next(iter(trainer.train_ds.device_put(kd.sharding.REPLICATED)))["x"].sharding.spec, jax.P(),
                           "a batch of train_ds.device_put(kd.sharding.REPLICATED): its partition spec (whole on each"
                           " device): device_put uses the sharding it is given")
        lesson.check(max_difference(state_by_hand.params, saved.params) < 1e-5,
                     "50 steps by hand from init_state() reach the latest checkpoint's parameters (within 1e-5)")
        params_at_50 = jax.tree.map(np.array, state_by_hand.params)  # a copy: the next step deletes them

    lesson.md("""
    ## One step more reaches `train()`'s parameters; the old state is gone

    Step 50 by hand, the update `train()` made after its last checkpoint, asked also for
    the step's loss and metric states, reaches the parameters `train()` returned. The
    step *donates* the state it is given: XLA may reuse its buffers for the new state,
    and jax deletes the old arrays, so a donated state must never be used again. The
    batch is not donated.
    """)
    batch = next(batches)  # batch 50, placed by device_put
    final_by_hand, aux = trainer.trainstep.step(state_by_hand, batch, return_losses=True, return_metrics=True)
    values = {name: float(s.compute()) for name, s in {**aux.loss_states, **aux.metric_states}.items()}
    print("step 50 by hand:", {name: round(value, 4) for name, value in values.items()})
    print("the given state deleted:", state_by_hand.params["enc"]["kernel"].is_deleted())
    with lesson.checks():
        lesson.check(max_difference(final_by_hand.params, state.params) < 1e-5,
                     "51 steps by hand from init_state() reach train()'s parameters (within 1e-5)")
        lesson.check(all(p.is_deleted() for p in jax.tree.leaves(state_by_hand.params)),
                     "the step deleted the state it was given (donated)")
        args, _ = type(trainer.trainstep).step.lower(trainer.trainstep, final_by_hand, batch).args_info
        lesson.check_equal([{leaf.donated for leaf in jax.tree.leaves(arg)} for arg in args], [{True}, {False}],
                           "which of the step's arguments it donates, leaf by leaf: the state's all, the batch's none",
                           internal="reads the jit declaration of TrainStep.step (jax's lowering of it)")
        lesson.check_close(values["enc_norm"], enc_norm_by_hand(params_at_50, batch["x"]),
                           "enc_norm at step 50 = the mean row norm of enc's output, by Flax", rel=1e-5)

    lesson.md("""
    ## Going further: the transfer guard `train()` sets

    `train()` runs its loop under `jax.transfer_guard("disallow")` (unless
    `jax_disable_jit` or `jax_debug_nans` is on), so a copy from host to device that
    nobody asked for fails loudly. The pipeline yields numpy arrays: given one, the step
    has jax copy it to the device implicitly, which the guard refuses. A batch placed
    with `device_put`, as the loop above places them, passes.
    """)
    with jax.transfer_guard("disallow"):
        try:
            trainer.trainstep.step(trainer.init_state(), next(iter(trainer.train_ds)))
        except jax.errors.JaxRuntimeError as e:
            print("a numpy batch:", str(e).split(", dst_sharding")[0])
        guarded, _ = trainer.trainstep.step(trainer.init_state(), batch)  # placed by device_put
    print("a placed batch: state.step", int(guarded.step))
    with lesson.checks():
        refused = lesson.check_raises(
            jax.errors.JaxRuntimeError,
            lambda: guarded_call(lambda: trainer.trainstep.step(trainer.init_state(), next(iter(trainer.train_ds)))),
            "under jax.transfer_guard('disallow'), a step given a numpy batch")
        lesson.check("Disallowed host-to-device transfer" in str(refused), "the error says: a host-to-device transfer")
        lesson.check(all(isinstance(x, np.ndarray) for x in next(iter(trainer.train_ds)).values()),
                     "the pipeline (InMemoryPipeline) yields numpy arrays")
        lesson.check(int(guarded.step) == 1, "under the guard, a step given a placed batch ran")
        # probe: the 1-step run of the "Train it" step's checks, which a GuardProbe watched
        lesson.check(probe.refused == [True, True] and implicit_transfer_refused() is False,
                     "train() runs its steps under the guard: a profiler hook (called after each step) finds an"
                     " implicit host-to-device copy refused at both steps of a 1-step run, and allowed outside")
        from kauldron.train import train_loop

        guards = {}
        for name, flag in {"plain": contextlib.nullcontext(), "jax_debug_nans": jax.debug_nans(True),
                           "jax_disable_jit": jax.disable_jit()}.items():
            with flag, train_loop._transfer_guard():
                guards[name] = jax.config.jax_transfer_guard_host_to_device
        lesson.check_equal(guards, {"plain": "disallow", "jax_debug_nans": None, "jax_disable_jit": None},
                           "the host-to-device guard train()'s loop sets: as is, with jax_debug_nans on, with"
                           " jax_disable_jit on", internal="a private name (kauldron.train.train_loop._transfer_guard)")
        lesson.fact("logcosh", {str(step): logged[step]["losses/logcosh"] for step in (0, 50)})
        lesson.fact("enc_norm_last_step", values["enc_norm"])
        lesson.summary = (f"logcosh {logged[0]['losses/logcosh']:.4f} -> {logged[50]['losses/logcosh']:.4f}"
                          " in 51 updates; ckpt_50 is the state before the last; by hand: the same parameters")


import contextlib  # noqa: E402 - what the checks use, apart from the page's imports
import dataclasses  # noqa: E402

from sections.parts.regression import MLP  # noqa: E402


def guarded_call(fn):
    """fn() under the transfer guard train() sets."""
    with jax.transfer_guard("disallow"):
        return fn()


def implicit_transfer_refused() -> bool:
    """Whether jax refuses, here and now, to copy a numpy array to the device implicitly
    (by passing it to a jitted function)."""
    try:
        jax.jit(lambda x: x + 1)(np.ones(2, np.float32))
    except jax.errors.JaxRuntimeError as e:
        if "Disallowed host-to-device transfer" in str(e):
            return True
        raise
    return False


@dataclasses.dataclass(frozen=True, kw_only=True)
class GuardProbe(kd.inspect.Profiler):
    """A profiler hook that records, at each step train() calls it, whether an implicit
    host-to-device copy is refused there."""

    refused: list = dataclasses.field(default_factory=list)

    def __call__(self, step: int):
        self.refused.append(implicit_transfer_refused())


def enc_norm_by_hand(params, x) -> float:
    """The mean L2 norm of the `enc` layer's output rows, computed with Flax directly."""
    _, captured = MLP(inputs="batch.x").apply({"params": params}, x, capture_intermediates=True,
                                              mutable=["intermediates"])
    return float(np.mean(np.linalg.norm(np.asarray(captured["intermediates"]["enc"]["__call__"][0]), axis=-1)))
