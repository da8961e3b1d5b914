"""Fine-tuning: start from a trained checkpoint, and train only part of the model.

A Trainer's `init_transform` changes the state training starts from.
`kd.ckpts.SimpleCheckpointLoader(workdir=...)` restores a finished run's parameters into
every layer of the new model that has the same name, and leaves the new layers as they
were initialised. Here the regression MLP trains briefly; a new model keeps its encoder
`enc` and replaces the head with new layers (`adapter`, `head`), starts from that
checkpoint, and trains with the encoder frozen:
`kd.optim.partial_updates(optax.adam(...), mask=kd.optim.exclude("enc"))` zeroes the
encoder's updates (its gradients are still computed). The loader matches by name only:
a layer that keeps its name but changes shape is loaded with the old shape anyway, so new
layers get new names.

Kauldron's loader that also renames, `kd.ckpts.PartialKauldronLoader(new_to_old=...)`,
does not run with the PyPI orbax-checkpoint on either pinned Kauldron: it imports
`orbax.checkpoint.experimental.model_surgery`, which orbax has not published
(google/orbax#2210). The lesson checks that it still fails, so the day it works, this
section fails and says so.
"""

import contextlib
import pathlib
import warnings

import jax
import numpy as np
import orbax.checkpoint as ocp
from kauldron import konfig

from configs import regression
from sections.lesson import Lesson, Panel
from sections.registry import section
from sections.shared import event_files, read_scalars

PRETRAIN_STEPS, FINETUNE_STEPS = 100, 100


def pretrain(workdir: pathlib.Path):
    with konfig.imports():
        from kauldron import kd as kd_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir), PRETRAIN_STEPS
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=PRETRAIN_STEPS)
    return konfig.resolve(cfg)


def finetune_config(workdir: pathlib.Path, *, init_transform=None, model=None):
    """The regression experiment with the new head and the encoder frozen."""
    with konfig.imports():
        import optax as optax_cfg
        from kauldron import kd as kd_cfg

        from sections.parts import finetune as finetune_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir), FINETUNE_STEPS
    cfg.model = model or finetune_cfg.MLPNewHead(inputs="batch.x")
    cfg.optimizer = kd_cfg.optim.partial_updates(optax_cfg.adam(learning_rate=1e-2), mask=kd_cfg.optim.exclude("enc"))
    if init_transform is not None:
        cfg.init_transform = init_transform
    return cfg


@contextlib.contextmanager
def quiet_restores():
    """Orbax warns that the loader gave it no sharding for the arrays it restores: on one
    device there is only one place to put them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sharding info not provided when restoring")
        yield


def same(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def logged_loss(workdir: pathlib.Path) -> dict[int, float]:
    return {step: v["losses/logcosh"] for step, v in read_scalars(*event_files(workdir, "train")).items()
            if "losses/logcosh" in v}


def check_partial_loader_still_fails(lesson: Lesson, pretrained: pathlib.Path) -> None:
    with konfig.imports():
        from kauldron import kd as kd_cfg

    renaming = finetune_config(lesson.workdir / "renaming", init_transform=kd_cfg.ckpts.PartialKauldronLoader(
        workdir=str(pretrained), new_to_old={"params.enc": "params.enc"}))
    error = lesson.check_raises(ModuleNotFoundError, lambda: konfig.resolve(renaming).init_state(),
                                "kd.ckpts.PartialKauldronLoader on these pins (the day it works, this fails)")
    lesson.check("orbax.checkpoint.experimental.model_surgery" in str(error),
                 "PartialKauldronLoader's error names orbax's unpublished model_surgery module")
    print(f"\n  PartialKauldronLoader(new_to_old={{'params.enc': 'params.enc'}}).init_state() ->\n"
          f"    ModuleNotFoundError: {error}")


def check_same_name_other_shape(lesson: Lesson, pretrained: pathlib.Path) -> None:
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections.parts import finetune as finetune_cfg

    resized = konfig.resolve(finetune_config(lesson.workdir / "resized", model=finetune_cfg.MLPResizedOut(inputs="batch.x"),
                                             init_transform=kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(pretrained))))
    shape = resized.init_state().params["out"]["kernel"].shape
    lesson.check_equal(shape, (32, 1), "a 2-output head still named `out`, loaded by name: its kernel's shape")
    print(f"\n  A head still named `out` but with 2 outputs comes back from the checkpoint with the old"
          f" shape {shape}:\n  the loader matches names, not shapes (training would then fail). New layers get new names.")


def plot_losses(lesson: Lesson, curves: dict[str, dict[int, float]]) -> None:
    lesson.plot("Section 13: a frozen pretrained encoder against the same model from scratch",
                Panel("training loss", "step", "logcosh (log scale)", log_y=True,
                      lines={name: (sorted(c), [c[s] for s in sorted(c)]) for name, c in curves.items()}))


@section(13, "finetune", "Fine-tuning: start from a checkpoint, freeze part of the model", trains=True,
         shows="SimpleCheckpointLoader loads a trained encoder into a new model; kd.optim freezes it; the head trains",
         reference="https://kauldron.readthedocs.io/en/latest/checkpoint.html#partial-loading")
def finetune_from_a_checkpoint(lesson: Lesson) -> str:
    with konfig.imports():
        from kauldron import kd as kd_cfg
    pretrained = lesson.workdir / "pretrain"
    pretrain(pretrained).train()
    checkpoint = ocp.StandardCheckpointer().restore(pretrained / "checkpoints" / f"ckpt_{PRETRAIN_STEPS}" / "default")
    print(f"  pretrained the regression MLP for {PRETRAIN_STEPS} steps: {pretrained.name}/checkpoints/ckpt_{PRETRAIN_STEPS}")

    with quiet_restores():
        finetune = konfig.resolve(finetune_config(
            lesson.workdir / "finetune", init_transform=kd_cfg.ckpts.SimpleCheckpointLoader(workdir=str(pretrained))))
        start = finetune.init_state()
        fresh = finetune.init_state(skip_transforms=True)  # what the new model would start from without it
        lesson.check(same(start.params["enc"], checkpoint["params"]["enc"]),
                     "at step 0 the encoder equals the checkpoint's, bit for bit")
        lesson.check(same([start.params["adapter"], start.params["head"]], [fresh.params["adapter"], fresh.params["head"]]),
                     "at step 0 the new layers are freshly initialised")
        state, _ = finetune.train()
    konfig.resolve(finetune_config(lesson.workdir / "scratch")).train()
    lesson.check(same(state.params["enc"], checkpoint["params"]["enc"]), "after training, the frozen encoder is still the checkpoint's, bit for bit")
    lesson.check(not same(state.params["head"], start.params["head"]), "after training, the head's parameters have moved")

    curves = {"fine-tuned (pretrained encoder)": logged_loss(lesson.workdir / "finetune"),
              "from scratch (random encoder)": logged_loss(lesson.workdir / "scratch")}
    tuned, scratch = (c[FINETUNE_STEPS] for c in curves.values())
    print(f"  after {FINETUNE_STEPS} steps with the encoder frozen: logcosh {tuned:.4f} fine-tuned,"
          f" {scratch:.4f} for the same Trainer without the checkpoint")
    lesson.check(tuned < scratch, "the fine-tuned model's final loss is lower than the same model's trained from scratch")
    lesson.fact("final_logcosh", {"fine-tuned": tuned, "from scratch": scratch})
    plot_losses(lesson, curves)
    with quiet_restores():
        check_same_name_other_shape(lesson, pretrained)
    check_partial_loader_still_fails(lesson, pretrained)
    return f"encoder loaded bit for bit and kept frozen; logcosh after {FINETUNE_STEPS} steps {tuned:.4f} fine-tuned vs {scratch:.4f} from scratch"
