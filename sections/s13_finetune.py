"""Fine-tuning: start from a trained checkpoint, and train only part of the model.

A Trainer's `init_transform` changes the state training starts from, after the model is
initialised and before the optimizer sees it. Here the regression MLP trains briefly; a
new model keeps its encoder, replaces the head, starts from that checkpoint, and trains
with the encoder frozen. Kauldron's loader that renames layers does not run from PyPI, so
the last step writes a small init transform that does.
"""

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax.errors import ScopeParamShapeError
from kauldron import konfig

from configs import regression
from sections.figures import plot_losses
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import logged, same

with konfig.imports():
    import optax as optax_cfg
    from kauldron import kd as kd_cfg

    from sections import shared as shared_cfg
    from sections.parts import finetune as finetune_cfg

STEPS = 50


@section(13, "finetune", "Fine-tuning: start from a checkpoint, freeze part of the model", part="for-real", trains=True,
         shows="SimpleCheckpointLoader loads a trained encoder by name; kd.optim freezes it; a custom InitTransform renames",
         reference="https://kauldron.readthedocs.io/en/latest/checkpoint.html#partial-loading")
def finetune_from_a_checkpoint(lesson: Lesson) -> str:
    lesson.md("""
    ## Pretrain, and keep the checkpoint

    The regression experiment trains for 50 steps with a `Checkpointer` that saves at the
    end. Its encoder, the Dense layer `enc`, is what the next model reuses.
    """)
    pretrained = lesson.workdir / "pretrain"
    cfg = experiment(pretrained, shared_cfg.MLP(inputs="batch.x"))
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=STEPS)
    konfig.resolve(cfg).train()
    checkpoint = ocp.StandardCheckpointer().restore(pretrained / "checkpoints" / f"ckpt_{STEPS}" / "default")
    print(jax.tree.map(np.shape, checkpoint["params"]))

    lesson.md("""
    ## Load the encoder into a new model, by name

    `MLPNewHead` keeps `enc` and puts new layers, `adapter` and `head`, after it.
    `kd.ckpts.SimpleCheckpointLoader(workdir=...)` restores every parameter whose name is
    in both models and leaves the new layers as they were initialised. The optimizer
    `kd.optim.partial_updates(..., mask=kd.optim.exclude("enc"))` zeroes the encoder's
    updates, so only the new layers train.
    """)
    cfg = experiment(lesson.workdir / "finetune", finetune_cfg.MLPNewHead(inputs="batch.x"))
    cfg.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(pretrained))
    cfg.optimizer = kd_cfg.optim.partial_updates(optax_cfg.adam(learning_rate=1e-2), mask=kd_cfg.optim.exclude("enc"))
    finetune = konfig.resolve(cfg)
    start, fresh = finetune.init_state(), finetune.init_state(skip_transforms=True)
    print(jax.tree.map(np.shape, start.params))
    lesson.check(same(start.params["enc"], checkpoint["params"]["enc"]), "at step 0 the encoder is the checkpoint's, bit for bit")
    lesson.check(same([start.params["adapter"], start.params["head"]], [fresh.params["adapter"], fresh.params["head"]]),
                 "at step 0 the new layers are freshly initialised")

    lesson.md("""
    ## Train the head; the encoder stays frozen

    After training, the encoder is still the checkpoint's and the head has moved. The same
    model and optimizer without the checkpoint, a frozen random encoder, ends far worse.
    """)
    state, _ = finetune.train()
    cfg.workdir, cfg.init_transform = str(lesson.workdir / "scratch"), kd_cfg.ckpts.NoopTransform()
    konfig.resolve(cfg).train()
    curves = {name: logged(lesson.workdir / name, "losses/logcosh") for name in ("finetune", "scratch")}
    print({name: round(curve[STEPS], 4) for name, curve in curves.items()})
    lesson.check(same(state.params["enc"], checkpoint["params"]["enc"]), "after training, the encoder is still the checkpoint's")
    lesson.check(not same(state.params["head"], start.params["head"]), "after training, the head's parameters have moved")
    lesson.check(curves["finetune"][STEPS] * 2 < curves["scratch"][STEPS], "the fine-tuned loss is under half the from-scratch one")
    lesson.fact("final_logcosh", {name: curve[STEPS] for name, curve in curves.items()})
    plot_losses(lesson, curves)

    lesson.md("""
    ## The loader matches names, not shapes

    A layer that keeps its name but changes shape is restored with the checkpoint's shape
    anyway: an MLP with 64 hidden units gets a 16 x 32 `enc` back, and training stops at
    its first step with Flax's `ScopeParamShapeError`. Give new layers new names.
    """)
    cfg = experiment(lesson.workdir / "wider", shared_cfg.MLP(inputs="batch.x", hidden=64))
    cfg.init_transform = kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(pretrained))
    wider = konfig.resolve(cfg)
    print(wider.init_state().params["enc"]["kernel"].shape)
    lesson.check_equal(wider.init_state().params["enc"]["kernel"].shape, (16, 32),
                       "the 64-unit MLP's enc kernel, restored by name")
    lesson.check_raises(ScopeParamShapeError, wider.train, "training it")

    lesson.md("""
    ## Renaming: a small `InitTransform` of your own

    Kauldron's loader that renames, `kd.ckpts.PartialKauldronLoader(new_to_old=...)`,
    needs a part of orbax-checkpoint that PyPI's orbax does not ship
    (`model_surgery.standard_checkpoint_handler`, google/orbax#2210). An init transform is
    one method, `transform(state)`; `LoadRenamed` (below) restores the checkpoint's
    parameters and puts `enc` where the new model calls it `encoder`.
    """)
    cfg = experiment(lesson.workdir / "renamed", finetune_cfg.MLPRenamed(inputs="batch.x"))
    cfg.init_transform = finetune_cfg.LoadRenamed(workdir=str(pretrained), new_to_old={"encoder": "enc"})
    renamed = konfig.resolve(cfg).init_state()
    print(jax.tree.map(np.shape, renamed.params))
    lesson.check(same(renamed.params["encoder"], checkpoint["params"]["enc"]), "the renamed encoder is the checkpoint's enc")
    cfg.init_transform = kd_cfg.ckpts.PartialKauldronLoader(workdir=str(pretrained), new_to_old={"params.encoder": "params.enc"})
    error = lesson.check_raises(ModuleNotFoundError, konfig.resolve(cfg).init_state,
                                "kd.ckpts.PartialKauldronLoader from PyPI (the day it works, this fails)")
    lesson.check_equal(error.name, "orbax.checkpoint.experimental.model_surgery.standard_checkpoint_handler",
                       "the module PartialKauldronLoader misses")
    return (f"encoder loaded by name, frozen: logcosh {curves['finetune'][STEPS]:.4f} vs {curves['scratch'][STEPS]:.4f}"
            " from scratch; renamed by a custom InitTransform")


def experiment(workdir, model):
    """The regression experiment with another model, for STEPS steps."""
    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps, cfg.model = str(workdir), STEPS, model
    return cfg
