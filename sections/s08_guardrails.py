"""konfig's guardrails: configs hold configs, never resolved objects.

A `ConfigDict` refuses a real, already-built object (here a flax module), so a config
stays a description all the way down: serialisable to JSON and overridable by flags until
`konfig.resolve` builds it. Sub-objects follow a related rule: fields such as a
pipeline's `seed` or an evaluator's `ds` default to references to the root config, which
the Trainer fills in. Built on its own, outside a Trainer, nothing fills them.
"""

import json

import optax
from kauldron import kd, konfig

from sections.registry import Lesson, section
from sections.shared import MLP, LogCosh, make_loader


@section(8, "guardrails", "The guardrail: configs hold configs, never resolved objects")
def lesson(lesson: Lesson) -> str:
    with konfig.imports():
        from kauldron import kd as kd_cfg
        from sections import shared as shared_cfg

    cfg = kd_cfg.train.Trainer()

    def assign_a_real_module():
        cfg.model = MLP(inputs="batch.x", hidden=8)

    error = lesson.check_raises(ValueError, assign_a_real_module, "assigning a flax module to cfg.model")
    message = str(error)
    print("  cfg.model = MLP(inputs='batch.x', hidden=8)   # a real flax module")
    print("    ValueError: " + message.splitlines()[0][:160] + "...")
    lesson.check("ConfigDict only accept other configurables" in message,
                 "the error says ConfigDict only accepts configurables")
    lesson.check("konfig.imports()" in message, "the error suggests wrapping the import in konfig.imports()")
    lesson.fact("error", message.splitlines()[0])

    cfg.model = shared_cfg.MLP(inputs="batch.x", hidden=8)  # the description is accepted
    lesson.check_equal(konfig.resolve(cfg.model), MLP(inputs="batch.x", hidden=8),
                       "the resolved description")
    as_json = json.loads(cfg.to_json())
    lesson.check_equal(as_json["model"]["__qualname__"], "sections.shared:MLP", "the model in cfg.to_json()")
    print("\n  cfg.model = shared_cfg.MLP(inputs='batch.x', hidden=8)   # its description")
    print(f"    accepted; in cfg.to_json() it is {as_json['model']}, and resolve() builds the same module")

    pipeline = kd.data.InMemoryPipeline(loader=make_loader("train"), batch_size=32, shuffle=True)
    evaluator = kd.evals.Evaluator(run=kd.evals.EveryNSteps(100), num_batches=4)
    defaults = {"InMemoryPipeline(...).seed": pipeline.seed, "Evaluator(...).ds": evaluator.ds}
    print("\n  Fields that default to the root config, read from the objects themselves:")
    for name, value in defaults.items():
        print(f"    {name:28} -> {value!r}")
    lesson.check_equal([repr(v) for v in defaults.values()],
                       ["_FakeRootCfg('cfg.seed')", "_FakeRootCfg('cfg.eval_ds')"],
                       "the root-config defaults")
    lesson.fact("root_defaults", {name: repr(value) for name, value in defaults.items()})

    eval_ds = kd.data.InMemoryPipeline(loader=make_loader("eval"), batch_size=32, num_epochs=1)
    trainer = kd.train.Trainer(
        seed=3, workdir=str(lesson.workdir), train_ds=pipeline, eval_ds=eval_ds,
        model=MLP(inputs="batch.x"), num_train_steps=1,
        train_losses={"logcosh": LogCosh(preds="preds.y", targets="batch.y")},
        optimizer=optax.adam(1e-2), evals={"eval": evaluator},
    )
    lesson.check_equal(trainer.train_ds.seed, 3, "the pipeline's seed inside a Trainer(seed=3)")
    lesson.check(trainer.evals["eval"].ds is trainer.eval_ds, "the evaluator's ds is the Trainer's eval_ds")
    print(f"\n  Inside Trainer(seed=3, eval_ds=...): train_ds.seed = {trainer.train_ds.seed},"
          " and the evaluator's ds is trainer.eval_ds.")

    error = lesson.check_raises(TypeError, lambda: next(iter(pipeline)),
                                "iterating a standalone shuffled pipeline with no seed")
    lesson.check("_FakeRootCfg" in str(error), "the error mentions the unfilled _FakeRootCfg")
    print(f"  Standalone, the same shuffled pipeline fails when iterated:\n    TypeError: {error}")
    seeded = kd.data.InMemoryPipeline(loader=make_loader("train"), batch_size=32, shuffle=True, seed=0)
    shape = next(iter(seeded))["x"].shape
    lesson.check_equal(shape, (32, 16), "a batch from the pipeline built with seed=0")
    print(f"  With seed=0 passed explicitly it yields batches of {shape}: that is why standalone"
          "\n  pipelines in these lessons pass seed=.")
    return "ConfigDict refused a built module; root defaults cfg.seed / cfg.eval_ds filled by the Trainer; unseeded standalone pipeline fails"
