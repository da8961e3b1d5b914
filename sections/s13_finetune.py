"""Fine-tuning: start from a trained checkpoint, and train only part of the model.

A Trainer's `init_transform` changes the state training starts from, once the model is
initialised. Here the regression MLP trains briefly; a new model keeps its encoder,
replaces the head, starts from that checkpoint, and trains with the encoder frozen.
Kauldron's loader that renames layers does not run from PyPI, so the last step writes a
small init transform that does.
"""

import jax
import matplotlib.pyplot as plt
import numpy as np
from flax.errors import ScopeParamShapeError
from kauldron import kd, konfig

from configs import regression as regression_config
from harness import Lesson, section
from harness.compare import same
from sections.parts.logs import read_scalars

with konfig.imports():
    import optax as optax_cfg
    from kauldron import kd as kd_cfg

    from sections.parts import finetune as finetune_cfg
    from sections.parts import regression as regression_cfg


@section(13, "finetune", "Fine-tuning: start from a checkpoint, freeze part of the model", part="for-real", trains=True,
         shows="SimpleCheckpointLoader loads a trained encoder by name; kd.optim freezes it; a custom InitTransform renames",
         reference="https://kauldron.readthedocs.io/en/latest/checkpoint.html#partial-loading")
def finetune_from_a_checkpoint(lesson: Lesson, workdir):
    lesson.md("""
    ## Pretrain, and keep the checkpoint

    The regression experiment, cut here to `num_train_steps=50`, makes 51 updates (steps 0
    to 50), with a `Checkpointer` that saves every 50 steps, step 0 included, each before
    that step's update: the latest checkpoint holds the state after 50 updates, and the
    51st is in none. Its encoder, the Dense layer `enc`, is what the next model reuses. A
    `kd.ckpts.Checkpointer` on that workdir reads its latest checkpoint back; given
    `kd.ckpts.items.StandardCheckpointItem()`, as nested dicts of arrays.
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "pretrain"), 50
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=50)
    last, _ = konfig.resolve(cfg).train()
    # save_interval_steps has no default, though this Checkpointer only reads.
    checkpointer = kd.ckpts.Checkpointer(workdir=str(workdir / "pretrain"), save_interval_steps=1)
    pretrained = checkpointer.restore(kd.ckpts.items.StandardCheckpointItem())
    print("checkpoints:", checkpointer.all_steps, "restored step:", int(pretrained["step"]), "final step:", int(last.step))
    print(jax.tree.map(np.shape, pretrained["params"]))
    with lesson.checks():
        lesson.check_equal((list(checkpointer.all_steps), int(pretrained["step"])), ([0, 50], 50),
                           "the pretraining run's checkpoints, and the step restore() reads by default: the latest")
        lesson.check_equal(int(last.step), 51, "the state.step train() returns after num_train_steps=50")
        lesson.check(not same(last.params, pretrained["params"]),
                     "the final parameters are not the latest checkpoint's: the 51st update is in no checkpoint")

    lesson.md("""
    ## Load the encoder into a new model, by name

    `MLPNewHead` keeps `enc` and puts new layers, `adapter` and `head`, after it.
    `kd.ckpts.SimpleCheckpointLoader(workdir=...)` restores every parameter whose name is
    in both models, and likewise, by name, the model's other collections (such as
    BatchNorm's `batch_stats`), not the optimizer's state unless `load_opt_state=True`,
    and leaves the new layers as they were initialised. The optimizer
    `kd.optim.partial_updates(..., mask=kd.optim.exclude("enc"))` zeroes the encoder's
    updates, so only the new layers train. The pattern matches a whole key anywhere in a
    parameter's path: it would freeze a `head.enc` too, and not a layer named `encoder`.
    This run saves a checkpoint too.
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "finetune"), 50
    cfg.model = finetune_cfg.MLPNewHead(inputs="batch.x")
    cfg.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(workdir / "pretrain"))
    cfg.optimizer = kd_cfg.optim.partial_updates(optax_cfg.adam(learning_rate=1e-2), mask=kd_cfg.optim.exclude("enc"))
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=50)
    finetune = konfig.resolve(cfg)
    start = finetune.init_state()
    print(jax.tree.map(np.shape, start.params))
    with lesson.checks():
        fresh = finetune.init_state(skip_transforms=True)
        lesson.check(same(start.params["enc"], pretrained["params"]["enc"]), "at step 0 the encoder is the checkpoint's, bit for bit")
        lesson.check(same([start.params["adapter"], start.params["head"]], [fresh.params["adapter"], fresh.params["head"]]),
                     "at step 0 the new layers are freshly initialised")
        same_model = regression_config.get_config()  # the pretraining model and optimizer: every state fits
        same_model.workdir = str(workdir / "same-model")
        same_model.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(workdir / "pretrain"))
        loaded = konfig.resolve(same_model).init_state()
        lesson.check(same(loaded.params, pretrained["params"]) and not any(np.any(leaf) for leaf in jax.tree.leaves(loaded.opt_state)),
                     "into the pretraining model itself, the loader restores the parameters and leaves adam's state"
                     " (count, moments) at zero, not the checkpoint's")
        import inspect

        lesson.check("return self._partial_restore(state, ('params', 'collections'))"
                     in inspect.getsource(kd.ckpts.SimpleCheckpointLoader),
                     "SimpleCheckpointLoader restores params and collections", internal="reads Kauldron's source")
        lesson.check_equal(kd.optim.exclude("enc")({"enc": {"kernel": 0}, "encoder": {"kernel": 0}, "head": {"enc": 0}}),
                           {"enc": {"kernel": False}, "encoder": {"kernel": True}, "head": {"enc": False}},
                           "kd.optim.exclude('enc')'s mask (True: updated) on enc, encoder and head.enc")

    lesson.md("""
    ## Train the head; the encoder stays frozen

    After training, the encoder is still the checkpoint's and the head has moved. The same
    model and optimizer without the checkpoint (`kd.ckpts.NoopTransform()`), a frozen
    random encoder, ends far worse.
    """)
    state, _ = finetune.train()
    cfg.workdir, cfg.init_transform = str(workdir / "scratch"), kd_cfg.ckpts.NoopTransform()
    konfig.resolve(cfg).train()
    logged = {name: read_scalars(workdir / name, "train") for name in ("finetune", "scratch")}
    final = {name: rows[50]["losses/logcosh"] for name, rows in logged.items()}
    print({name: round(loss, 4) for name, loss in final.items()})
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    for name, rows in logged.items():
        steps = sorted(rows)
        ax.semilogy(steps, [rows[step]["losses/logcosh"] for step in steps], marker="o", label=name)
    ax.set(title="A frozen pretrained encoder against the same model from scratch", xlabel="step",
           ylabel="training logcosh (log scale)")
    ax.legend()
    plt.show()
    with lesson.checks():
        lesson.check(same(state.params["enc"], pretrained["params"]["enc"]), "after training, the encoder is still the checkpoint's")
        lesson.check(not same(state.params["head"], start.params["head"]), "after training, the head's parameters have moved")
        lesson.check(final["finetune"] * 2 < final["scratch"], "the fine-tuned loss is under half the from-scratch one")
        lesson.fact("final_logcosh", final)

    lesson.md("""
    ## A restart resumes the fine-tune: the init transform is skipped

    `train()` with a `Checkpointer`, on a workdir that already holds a checkpoint, is a
    restart: it restores the latest one (parameters, optimizer state and step) and skips
    the init transform. So a preempted fine-tune never reloads the pretrained weights
    over its progress, and no longer needs them. This pipeline's position is not in the
    checkpoint (an `InMemoryPipeline`'s never is; a `kd.data.py` pipeline's is: section
    9): it starts again from its first batch. To see it, the loader now points at a run
    with no checkpoint: on the fine-tune's workdir, whose latest checkpoint is `ckpt_50`,
    `num_train_steps=60` runs steps 50 to 60, 11 updates, to `state.step` 61; on a fresh
    workdir, the same config stops at the loader.
    """)
    cfg.workdir, cfg.num_train_steps = str(workdir / "finetune"), 60
    cfg.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(workdir / "no-checkpoint-here"))
    restart = konfig.resolve(cfg)
    resumed, _ = restart.train()
    print("logged steps (both train() calls):", sorted(read_scalars(workdir / "finetune", "train")), "state.step:", int(resumed.step))
    cfg.workdir = str(workdir / "fresh")
    try:
        konfig.resolve(cfg).train()
    except FileNotFoundError as error:
        print("on a fresh workdir:", type(error).__name__, str(error).split(". ")[0])
    with lesson.checks():
        lesson.check_equal(steps_of_the_last_train_call(workdir / "finetune"), [50, 60],
                           "the steps the restart logged (its own event file): it began at the checkpoint's step")
        lesson.check_equal(int(resumed.step), 61, "the restart's final state.step")
        replayed = replay(restart, workdir / "finetune", from_step=50)
        lesson.check(isinstance(iter(restart.train_ds), kd.data.iters.NonCheckpointableIterator),
                     "an InMemoryPipeline's iterator is a kd.data.iters.NonCheckpointableIterator")
        lesson.check(same([resumed.params, resumed.opt_state], [replayed.params, replayed.opt_state]),
                     "the restart's parameters and optimizer state, bit for bit, are those of ckpt_50's state (params,"
                     " optimizer state, step) trained on the pipeline's first 11 batches")
        error = lesson.check_raises(FileNotFoundError, konfig.resolve(cfg).init_state,
                                    "the same loader applied on a fresh start (init_state)")
        lesson.check("No checkpoint found" in str(error) and "no-checkpoint-here" in str(error),
                     "the error names the loader's workdir, which has no checkpoint")

    lesson.md("""
    ## The loader matches names, not shapes

    A layer that keeps its name but changes shape is restored with the checkpoint's shape
    anyway: an MLP with 64 hidden units gets a 16 x 32 `enc` back, and `train()` fails
    in its first step, before logging any loss or metric, with Flax's
    `ScopeParamShapeError`. Give new layers new names.
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "wider"), 50
    cfg.model = regression_cfg.MLP(inputs="batch.x", hidden=64)
    cfg.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(workdir / "pretrain"))
    wider = konfig.resolve(cfg)
    print("enc kernel:", wider.init_state().params["enc"]["kernel"].shape)
    try:
        wider.train()
    except ScopeParamShapeError as error:
        print(type(error).__name__, str(error).split(" (https")[0])
    with lesson.checks():
        lesson.check_equal(wider.init_state().params["enc"]["kernel"].shape, (16, 32),
                           "the 64-unit MLP's enc kernel, restored by name")
        lesson.check((workdir / "wider" / "element_spec.json").is_file(),
                     "train() got past its setup: it wrote element_spec.json, as it does before its loop",
                     internal="reads Kauldron's file layout")
        lesson.check_equal(sorted({tag for row in read_scalars(workdir / "wider", "train").values() for tag in row
                                   if tag.startswith(("losses/", "metrics/"))}), [],
                           "the losses and metrics train() logged before it failed")
        failed = lesson.check_raises(ScopeParamShapeError, wider.train, "training it")
        import traceback

        lesson.check(any(frame.name == "step" and frame.filename.endswith("train_step.py")
                         for frame in traceback.extract_tb(failed.__traceback__)),
                     "it fails in the train step (TrainStep.step in its traceback), not in the setup before the loop",
                     internal="reads the traceback's frames")

    lesson.md("""
    ## Renaming: a small `InitTransform` of your own

    Kauldron's loader that renames, `kd.ckpts.PartialKauldronLoader(new_to_old=...)`,
    needs a part of orbax-checkpoint that PyPI's orbax does not ship
    (`model_surgery.standard_checkpoint_handler`, google/orbax#2210). An init transform
    must define one method, `transform(state)` (a second, `transform_after_optimizer`,
    is optional); `LoadRenamed` (below) reads the checkpoint's parameters and loads only
    the names in `new_to_old`: `enc`, where the new model calls it `encoder`. Every other
    layer, here the new `head`, keeps its initial values.
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "renamed"), 50
    cfg.model = finetune_cfg.MLPRenamed(inputs="batch.x")
    cfg.init_transform = finetune_cfg.LoadRenamed(workdir=str(workdir / "pretrain"), new_to_old={"encoder": "enc"})
    renaming = konfig.resolve(cfg)
    renamed = renaming.init_state()
    print(jax.tree.map(np.shape, renamed.params))
    cfg.init_transform = kd_cfg.ckpts.PartialKauldronLoader(workdir=str(workdir / "pretrain"),
                                                            new_to_old={"params.encoder": "params.enc"})
    partial = konfig.resolve(cfg)
    try:
        partial.init_state()
    except ModuleNotFoundError as error:
        print("PartialKauldronLoader:", type(error).__name__, error.name)
    with lesson.checks():
        class OnlyTransform(kd.ckpts.InitTransform):
            def transform(self, state):
                return state

        untouched = object()
        lesson.check(sorted(kd.ckpts.InitTransform.__abstractmethods__) == ["transform"]
                     and OnlyTransform().transform_after_optimizer(untouched) is untouched,
                     "an InitTransform must define transform(); transform_after_optimizer() returns the state as given")
        lesson.check(same(renamed.params["encoder"], pretrained["params"]["enc"]), "the renamed encoder is the checkpoint's enc")
        initial = renaming.init_state(skip_transforms=True).params  # the same seed, no init transform
        lesson.check(same(renamed.params["head"], initial["head"]) and not same(renamed.params["encoder"], initial["encoder"]),
                     "the head keeps its initial values (init_state(skip_transforms=True)'s), the encoder does not")
        error = lesson.check_raises(ModuleNotFoundError, partial.init_state,
                                    "kd.ckpts.PartialKauldronLoader from PyPI (the day it works, this fails)")
        lesson.check_equal(error.name, "orbax.checkpoint.experimental.model_surgery.standard_checkpoint_handler",
                           "the module PartialKauldronLoader misses")
        lesson.summary = (f"encoder loaded by name, frozen: logcosh {final['finetune']:.4f} vs {final['scratch']:.4f}"
                          " from scratch; a resume skips the loader; renamed by a custom InitTransform")


def steps_of_the_last_train_call(run) -> list[int]:
    """The steps at which the latest `train()` on a workdir logged its loss: its own event file's."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from sections.parts.logs import event_files

    return sorted({int(event.step) for event in EventFileLoader(str(event_files(run, "train")[-1])).Load()
                   if any(value.tag == "losses/logcosh" for value in event.summary.value)})


def replay(trainer, run, from_step: int):
    """The state `trainer.train()` would end with if it restored `run`'s checkpoint at
    `from_step` (parameters, optimizer state, step) and read the pipeline from its first
    batch: the train loop's steps, with its flags, by hand."""
    state = kd.ckpts.Checkpointer(workdir=str(run), save_interval_steps=1).restore(
        trainer.init_state(skip_transforms=True), step=from_step)
    for i, batch in zip(range(from_step, trainer.num_train_steps + 1), trainer.train_ds):
        log_summaries, log_metrics = i % trainer.log_summaries_every == 0, i % trainer.log_metrics_every == 0
        state, _ = trainer.trainstep.step(state, jax.device_put(batch, trainer.sharding.batch),
                                          return_losses=log_summaries or log_metrics, return_metrics=log_metrics,
                                          return_summaries=log_summaries,
                                          checkify_error_categories=trainer.checkify_error_categories)
    return state
