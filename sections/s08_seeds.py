"""konfig's guardrails: configs hold configs, never resolved objects; and who sets the seed.

A `ConfigDict` refuses a real, already-built object (here a flax module), so a config
stays a description all the way down: serialisable to JSON and overridable by flags until
`konfig.resolve` builds it. Sub-objects follow a related rule: fields such as a
pipeline's `seed` or an evaluator's `ds` default to the root config's values, which the
Trainer fills in. Built outside a Trainer, a PyGrain (or TensorFlow) pipeline with no seed
picks a random one: it runs, but two runs see different batches, silently. Inside a
Trainer it takes the Trainer's `seed`, and the batches repeat run to run.
"""

import json

import numpy as np
from kauldron import kd, konfig

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import MLP, RegressionRows


def pygrain_rows(**options) -> kd.data.py.DataSource:
    return kd.data.py.DataSource(data_source=RegressionRows("train"), batch_size=32, shuffle=True,
                                 num_epochs=None, num_workers=0, **options)


def first_batch(pipeline) -> np.ndarray:
    return np.asarray(next(iter(pipeline))["x"])


def config_with_pygrain_data(seed: int, workdir):
    """The regression experiment with a PyGrain pipeline that names no seed of its own."""
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    cfg = regression.get_config()
    cfg.workdir = str(workdir)
    cfg.seed = seed
    cfg.train_ds = kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("train"), batch_size=32,
                                             shuffle=True, num_epochs=None, num_workers=0)
    cfg.eval_ds = kd_cfg.data.py.DataSource(data_source=shared_cfg.RegressionRows("eval"), batch_size=32,
                                            shuffle=False, num_epochs=1, num_workers=0)
    cfg.evals = {"eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(100))}  # no ds: cfg.eval_ds
    return cfg


def configs_refuse_built_objects(lesson: Lesson) -> None:
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    cfg = kd_cfg.train.Trainer()

    def assign_a_real_module():
        cfg.model = MLP(inputs="batch.x", hidden=8)

    error = lesson.check_raises(ValueError, assign_a_real_module, "assigning a built flax module to cfg.model")
    message = str(error)
    print("  cfg.model = MLP(inputs='batch.x', hidden=8)   # a real flax module")
    print("    ValueError: " + message.splitlines()[0][:160] + "...")
    lesson.check("ConfigDict only accept other configurables" in message and "konfig.imports()" in message,
                 "the error says a ConfigDict only accepts configurables, and suggests konfig.imports()")
    lesson.fact("error", message.splitlines()[0])

    cfg.model = shared_cfg.MLP(inputs="batch.x", hidden=8)  # the description is accepted
    lesson.check_equal(konfig.resolve(cfg.model), MLP(inputs="batch.x", hidden=8),
                       "resolving the description builds the module")
    as_json = json.loads(cfg.to_json())
    lesson.check_equal(as_json["model"]["__qualname__"], "sections.shared:MLP", "the model's qualname in cfg.to_json()")
    print("\n  cfg.model = shared_cfg.MLP(inputs='batch.x', hidden=8)   # its description")
    print(f"    accepted; in cfg.to_json() it is {as_json['model']}, and resolve() builds the same module")


@section(8, "guardrails", "The guardrail: configs hold configs, never resolved objects; who sets the seed",
         shows="a ConfigDict refuses built objects; a pipeline without a seed is random alone, the Trainer's seed inside one")
def guardrails_and_seeds(lesson: Lesson) -> str:
    configs_refuse_built_objects(lesson)

    alone = [pygrain_rows(), pygrain_rows()]
    batches = [first_batch(p) for p in alone]  # iterating fills in a random seed
    print(f"\n  Two standalone kd.data.py.DataSource pipelines, no seed given: seeds"
          f" {alone[0].seed} and {alone[1].seed};\n  their first batches are"
          f" {'the same' if np.array_equal(*batches) else 'different'}.")
    lesson.check(alone[0].seed != alone[1].seed, "two standalone pipelines without a seed picked different seeds")
    lesson.check(not np.array_equal(*batches), "two standalone pipelines without a seed gave different first batches")
    seeded = [first_batch(pygrain_rows(seed=0)) for _ in range(2)]
    lesson.check(np.array_equal(*seeded), "two standalone pipelines with seed=0 give the same first batch")
    print("  With seed=0 passed to both, their first batches are the same.")

    trainers = [konfig.resolve(config_with_pygrain_data(3, lesson.workdir / f"trainer-{i}")) for i in range(2)]
    in_trainer = [first_batch(t.train_ds) for t in trainers]
    lesson.check_equal([t.train_ds.seed for t in trainers], [3, 3], "the pipeline's seed inside two Trainer(seed=3)")
    lesson.check(np.array_equal(*in_trainer), "the two Trainers' pipelines give the same first batch")
    lesson.check(trainers[0].evals["eval"].ds is trainers[0].eval_ds,
                 "an Evaluator given no ds evaluates on the Trainer's eval_ds")
    print(f"\n  The same pipeline config inside the regression Trainer with cfg.seed = 3, resolved twice:"
          f"\n  train_ds.seed = {trainers[0].train_ds.seed} both times, and the same first batch; the"
          "\n  evaluator given no ds uses trainer.eval_ds.")
    lesson.fact("standalone_seeds", [p.seed for p in alone])
    return (f"ConfigDict refused a built module; unseeded standalone pipelines drew seeds {alone[0].seed} and "
            f"{alone[1].seed} and different batches; inside Trainer(seed=3) both got seed 3 and the same batch")
