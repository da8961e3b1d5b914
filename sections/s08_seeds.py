"""Seeds: who sets them, and what happens when nobody does.

A Kauldron config names one seed, the Trainer's `seed`. The parts that need randomness
(data pipelines shuffling, evaluators) default to the root config's values, which the
Trainer fills in when it is built. Outside a Trainer there is no root config, and each
kind of pipeline copes differently: one of them silently, one with an error.
"""

import numpy as np
from kauldron import kd, konfig

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import RegressionRows, make_loader

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections import shared as shared_cfg


@section(8, "seeds", "Seeds: who sets them, and what happens when nobody does", part="training",
         shows="pipelines take the Trainer's seed; alone, PyGrain draws a random one and InMemoryPipeline fails",
         reference="https://kauldron.readthedocs.io/en/latest/konfig_philosophy.html")
def who_sets_the_seed(lesson: Lesson) -> str:
    lesson.md("""
    ## Alone, a PyGrain pipeline without a seed draws one at random

    Built outside a Trainer with no `seed`, `kd.data.py.DataSource` picks a random seed
    when it is first iterated. It runs, but two runs shuffle differently, and nothing
    says so. Give it a seed and the batches repeat.
    """)
    alone = [pygrain_rows(), pygrain_rows()]
    batches = [first_batch(pipeline) for pipeline in alone]
    print("seeds drawn:", [pipeline.seed for pipeline in alone])
    print("same first batch:", np.array_equal(*batches))
    seeded = [first_batch(pygrain_rows(seed=0)) for _ in range(2)]
    lesson.check(alone[0].seed != alone[1].seed, "two standalone DataSources without a seed drew different seeds")
    lesson.check(not np.array_equal(*batches), "their first batches differ")
    lesson.check(np.array_equal(*seeded), "two standalone DataSources with seed=0 give the same first batch")
    lesson.fact("standalone_seeds", [pipeline.seed for pipeline in alone])

    lesson.md("""
    ## Alone, an `InMemoryPipeline` that shuffles needs a seed

    `kd.data.InMemoryPipeline` draws no seed of its own: outside a Trainer, with
    `shuffle=True` and no seed, iterating it fails, and the error does not mention the
    seed (the placeholder for the root config's seed reaches numpy). Pass `seed=` when
    using it on its own.
    """)
    unseeded = kd.data.InMemoryPipeline(loader=make_loader("train"), batch_size=32, shuffle=True, num_epochs=None)
    error = lesson.check_raises(TypeError, lambda: next(iter(unseeded)),
                                "iterating a standalone shuffling InMemoryPipeline without a seed")
    print("TypeError:", error)
    seeded = kd.data.InMemoryPipeline(loader=make_loader("train"), batch_size=32, shuffle=True, num_epochs=None, seed=0)
    print(kd.inspect.json_spec_like(seeded.element_spec))
    lesson.check_equal(kd.inspect.json_spec_like(seeded.element_spec), {"x": "f32[32 16]", "y": "f32[32 1]"},
                       "the same pipeline with seed=0: its element spec")

    lesson.md("""
    ## Inside a Trainer, the Trainer's seed is used

    Put the unseeded PyGrain pipeline in the regression experiment with `cfg.seed = 3`,
    and resolve it twice: both times the pipeline's seed is 3 and the first batch is the
    same. Other fields default to the root config the same way: an `Evaluator` given no
    `ds` evaluates on the Trainer's `eval_ds`.
    """)
    cfg = regression.get_config()
    cfg.seed, cfg.workdir = 3, str(lesson.workdir)  # an evaluator needs a workdir to write to
    cfg.train_ds = kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("train"), batch_size=32,
                                             shuffle=True, num_epochs=None, num_workers=0)
    cfg.eval_ds = kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("eval"), batch_size=32,
                                            shuffle=False, num_epochs=1, num_workers=0)
    cfg.evals = {"eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(100))}  # no ds
    trainers = [konfig.resolve(cfg) for _ in range(2)]
    print("seeds:", [trainer.train_ds.seed for trainer in trainers])
    lesson.check_equal([trainer.train_ds.seed for trainer in trainers], [3, 3], "the pipeline's seed in both Trainers")
    lesson.check(np.array_equal(first_batch(trainers[0].train_ds), first_batch(trainers[1].train_ds)),
                 "the two Trainers' pipelines give the same first batch")
    lesson.check(trainers[0].evals["eval"].ds is trainers[0].eval_ds, "an Evaluator given no ds uses the Trainer's eval_ds")
    return (f"alone: PyGrain drew seeds {alone[0].seed} and {alone[1].seed}, InMemoryPipeline failed;"
            " in a Trainer with seed=3: seed 3 and the same batches")


def pygrain_rows(**options) -> kd.data.py.DataSource:
    """A PyGrain pipeline over the regression rows, built directly (not from a config)."""
    return kd.data.py.DataSource(data_source=RegressionRows("train"), batch_size=32, shuffle=True,
                                 num_epochs=None, num_workers=0, **options)


def first_batch(pipeline) -> np.ndarray:
    return np.asarray(next(iter(pipeline))["x"])
