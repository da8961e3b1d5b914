"""Resuming, played and compared (section 9): a run resumed from a checkpoint against
one never interrupted, and what a checkpoint saved of its data pipeline's position."""

from __future__ import annotations

import json
import pathlib
import shutil

from kauldron import konfig

from sections.lesson import Lesson
from sections.recompute import max_difference
from sections.shared import BATCH_SIZE

with konfig.imports():
    from kauldron import kd as kd_cfg


def difference_after_resume(cfg, workdir: pathlib.Path, every: int, *, resumed=None) -> float:
    """Max |param difference| at step 60 between a run of `cfg` resumed from step 40's
    checkpoint and one never interrupted, in `workdir`, checkpointing every `every` steps.
    `resumed`: a resumed run's state, if there is one already. Else the preemption is
    played: a run of 60 steps loses its last checkpoint, as if the job had stopped after
    saving step 40, and trains again."""
    cfg.workdir, cfg.num_train_steps = str(workdir), 60
    cfg.checkpointer = (kd_cfg.ckpts.Checkpointer(save_interval_steps=every) if resumed is None
                        else kd_cfg.ckpts.NoopCheckpointer())  # the uninterrupted run saves nothing
    uninterrupted, _ = konfig.resolve(cfg).train()
    if resumed is None:
        shutil.rmtree(workdir / "checkpoints" / "ckpt_60")
        resumed, _ = konfig.resolve(cfg).train()
    return max_difference(resumed.params, uninterrupted.params)


def check_saved_positions(lesson: Lesson, pygrain_run: pathlib.Path, in_memory_run: str) -> None:
    """What ckpt_40 holds of its data iterator in a PyGrain run and an InMemoryPipeline run
    (Orbax's and grain's file layout)."""
    ds_iter = pathlib.Path("checkpoints", "ckpt_40", "ds_iter")
    pygrain = json.loads(next((pygrain_run / ds_iter).glob("*.json")).read_text())
    in_memory = sorted(p.name for p in (pathlib.Path(in_memory_run) / ds_iter).iterdir())
    lesson.check_equal(pygrain.get("next_index"), 40 * BATCH_SIZE,
                       "the PyGrain position saved in ckpt_40: 40 batches of 32", internal=True)
    lesson.check(not any(name.endswith(".json") for name in in_memory),
                 "InMemoryPipeline's ckpt_40 holds no iterator position", internal=True)
