"""The guardrail: configs hold configs, never resolved objects; parts default to the root config.

A `ConfigDict` refuses a built object the moment it is assigned: a config stays a
description all the way down. The same discipline runs the other way: the parts of a
Trainer (its data pipelines, its model's random streams, its evaluators) do not hold
their own copy of the root config's values, such as the seed, but placeholders for them,
which the Trainer fills in when it is built. Outside a Trainer nothing fills them, and
each kind of pipeline copes differently: one silently, one with an error.
"""

import functools

import numpy as np
from kauldron import kd, konfig

from configs import regression as regression_config
from harness import Lesson, section
from harness.compare import same
from sections.parts.regression import MLP, RegressionRows, make_loader

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import regression as regression_cfg


@section(8, "guardrails", "The guardrail: configs hold configs, never resolved objects", part="training",
         shows="configs refuse built objects; parts take the Trainer's seed; alone PyGrain draws one, a shuffling InMemoryPipeline fails",
         reference="https://kauldron.readthedocs.io/en/latest/eval.html#determinism")
def configs_hold_configs(lesson: Lesson, workdir):
    lesson.md("""
    ## A config holds configs, never built objects

    Assigning a real, already-built object, such as a Flax module, to a field of a
    `ConfigDict` fails on the spot. Until it is resolved, a config stays data that can be
    written as JSON, compared, and overridden from the command line; konfig refuses a
    half-resolved one rather than fail later. The error says what to do: name the model
    through `konfig.imports()` (as `configs/regression.py` does), or, in a notebook,
    assign it inside `konfig.mock_modules()` (section 1), calling it through its module
    (`regression.MLP(...)`), not a name imported from it, as `MLP` is here. The whole
    message:
    """)
    cfg = kd_cfg.train.Trainer()
    try:
        cfg.model = MLP(inputs="batch.x", hidden=8)  # a built Flax module
    except ValueError as error:
        print("ValueError:", error)
    cfg.model = regression_cfg.MLP(inputs="batch.x", hidden=8)  # its description
    print(cfg.model)
    with lesson.checks():
        import json

        error = lesson.check_raises(ValueError, lambda: setattr(kd_cfg.train.Trainer(), "model", MLP(inputs="batch.x")),
                                    "assigning a built Flax module to a ConfigDict field")
        lesson.check("ConfigDict only accept other configurables" in str(error) and "konfig.imports()" in str(error)
                     and "mock_modules()" in str(error),
                     "the error says a ConfigDict only accepts configurables, and hints at konfig.imports() and mock_modules()")
        lesson.check_equal(json.loads(cfg.to_json())["model"], {"__qualname__": "sections.parts.regression:MLP",
                                                                "inputs": "batch.x", "hidden": 8},
                           "the model's description, as JSON")
        lesson.check(konfig.resolve(cfg.model) == MLP(inputs="batch.x", hidden=8),
                     "the description resolves to the module MLP(inputs='batch.x', hidden=8)")
        from sections.parts import regression

        with konfig.mock_modules():
            through_module = regression.MLP(inputs="batch.x", hidden=8)
            imported_name = MLP(inputs="batch.x", hidden=8)
        lesson.check(isinstance(through_module, konfig.ConfigDict) and through_module == cfg.model,
                     "inside konfig.mock_modules(), regression.MLP(...) records the call: the same description")
        lesson.check_raises(ValueError, lambda: setattr(kd_cfg.train.Trainer(), "model", imported_name),
                            "inside konfig.mock_modules(), MLP(...) imported by name built the module: assigning it")
        lesson.fact("error", str(error).splitlines()[0])

    lesson.md("""
    ## Parts default to the root config

    Built on their own, a pipeline's `seed`, the model's random streams' `seed`
    (`kd.train.RngStreams`) and an `Evaluator`'s `ds` are placeholders for fields of the
    root config, `cfg`: the Trainer. An `Evaluator` has no seed at all: it evaluates with
    the Trainer's random streams, which by default give an evaluation none (`params`,
    `dropout` and `default` at init, `dropout` and `default` in training; section 14
    gives an evaluator one).
    """)
    print(kd.data.py.DataSource(data_source=RegressionRows("train"), batch_size=32, shuffle=True).seed)
    print(kd.train.RngStreams().seed)
    print(kd.evals.Evaluator(run=kd.evals.EveryNSteps(100)).ds)
    print(kd.train.RngStreams(seed=0).eval_rngs(0))
    with lesson.checks():
        placeholders = [kd.data.py.DataSource(data_source=RegressionRows("train"), batch_size=32, shuffle=True).seed,
                        kd.data.InMemoryPipeline(loader=make_loader("train")).seed, kd.train.RngStreams().seed,
                        kd.evals.Evaluator(run=kd.evals.EveryNSteps(100)).ds]
        lesson.check_equal([repr(value) for value in placeholders], ["_FakeRootCfg('cfg.seed')"] * 3 + ["_FakeRootCfg('cfg.eval_ds')"],
                           "the defaults of a DataSource's and an InMemoryPipeline's seed, RngStreams' seed and an"
                           " Evaluator's ds", internal="a private name (_FakeRootCfg)")
        lesson.check_raises(TypeError, lambda: kd.evals.Evaluator(run=kd.evals.EveryNSteps(100), seed=0),
                            "kd.evals.Evaluator(..., seed=0): an evaluator has no seed field, so this")
        streams = kd.train.RngStreams(seed=0)
        lesson.check_equal([sorted(rngs) for rngs in (streams.init_rngs(), streams.train_rngs(0), streams.eval_rngs(0))],
                           [["default", "dropout", "params"], ["default", "dropout"], []],
                           "the default streams at init, in training and in evaluation")
        lesson.skip_check("an Evaluator evaluates with the Trainer's random streams (rng_streams.eval_rngs)",
                          "section 14 checks it by behaviour: a stream with eval=True reaches the evaluator")

    lesson.md("""
    ## Alone, a PyGrain pipeline without a seed draws one at random

    Nothing fills the placeholder of a `kd.data.py.DataSource` built outside a Trainer:
    when it is first read, it draws a random seed (from Python's `random`, which a
    program rarely seeds). It runs, but two runs shuffle differently, and nothing says
    so. Give it a seed and the batches repeat. (A PyGrain
    pipeline is random access: `pipeline[0]` is its first batch.)
    """)
    rows = functools.partial(kd.data.py.DataSource, data_source=RegressionRows("train"), batch_size=32, shuffle=True,
                             num_epochs=None, num_workers=0)
    alone, seeded = [rows(), rows()], [rows(seed=0), rows(seed=0)]
    print("same first batch:", np.array_equal(alone[0][0]["x"], alone[1][0]["x"]))  # [0]: batch 0
    print("seeds differ:", alone[0].seed != alone[1].seed)
    print("with seed=0, same first batch:", np.array_equal(seeded[0][0]["x"], seeded[1][0]["x"]))
    with lesson.checks():
        lesson.check(alone[0].seed != alone[1].seed, "two standalone DataSources without a seed drew different seeds")
        unread = rows()
        placeholder = repr(unread.seed)
        said = said_while(lambda: unread[0])
        lesson.check(placeholder == "_FakeRootCfg('cfg.seed')" and isinstance(unread.seed, int),
                     "a standalone DataSource's seed is the placeholder until it is first read, an int after",
                     internal="a private name (_FakeRootCfg)")
        firsts = [next(iter(pipeline))["x"] for pipeline in alone + seeded]
        lesson.check(all(np.array_equal(first, pipeline[0]["x"]) for first, pipeline in zip(firsts, alone + seeded)),
                     "a PyGrain pipeline's [0] is the first batch its iteration yields")
        lesson.check(not np.array_equal(firsts[0], firsts[1]), "the two unseeded pipelines' first batches differ")
        lesson.check_equal(said, {"warnings": [], "logged": [], "printed": ""},
                           "what a standalone DataSource's first read, which drew its seed, warned, logged (WARNING and"
                           " up) and printed")
        lesson.check(np.array_equal(firsts[2], firsts[3]), "two standalone DataSources with seed=0 give the same first batch")
        lesson.fact("standalone_seeds", [pipeline.seed for pipeline in alone])

    lesson.md("""
    ## Alone, an `InMemoryPipeline` that shuffles needs a seed

    `kd.data.InMemoryPipeline` never draws a seed: outside a Trainer, with
    `shuffle=True` and no seed, iterating it fails, and the error does not mention the
    seed (the placeholder reaches numpy). Without shuffling it never uses the seed;
    with `seed=` it shuffles.
    """)
    in_memory = functools.partial(kd.data.InMemoryPipeline, loader=make_loader("train"), batch_size=32, num_epochs=None)
    try:
        next(iter(in_memory(shuffle=True)))
    except TypeError as error:
        print("TypeError:", error)
    print(kd.inspect.json_spec_like(in_memory(shuffle=False).element_spec))
    print(kd.inspect.json_spec_like(in_memory(shuffle=True, seed=0).element_spec))
    with lesson.checks():
        unseeded = lesson.check_raises(TypeError, lambda: next(iter(in_memory(shuffle=True))),
                                       "iterating a standalone shuffling InMemoryPipeline without a seed")
        lesson.check("seed" not in str(unseeded).lower(), f"the error does not say seed: {unseeded}")
        for options in ({"shuffle": False}, {"shuffle": True, "seed": 0}):
            lesson.check_equal(kd.inspect.json_spec_like(in_memory(**options).element_spec),
                               {"x": "f32[32 16]", "y": "f32[32 1]"}, f"a standalone InMemoryPipeline with {options}: its batches")
        in_order = next(iter(in_memory(shuffle=False)))["x"]
        lesson.check(np.array_equal(in_order, make_loader("train")()["x"][:32])
                     and not np.array_equal(next(iter(in_memory(shuffle=True, seed=0)))["x"], in_order),
                     "with shuffle=True, seed=0 the first batch is not the first 32 rows, which shuffle=False gives")

    lesson.md("""
    ## Inside a Trainer, the Trainer's seed reaches every part

    Put the unseeded PyGrain pipelines in the regression experiment with `cfg.seed = 3`
    and resolve it: the pipelines' seeds and the model's random streams' are 3, and the
    `Evaluator` given no `ds` evaluates on the Trainer's `eval_ds`. Kauldron's docs
    ([determinism](https://kauldron.readthedocs.io/en/latest/eval.html#determinism)) say
    one global seed is "split into the various sub-components": each part gets the seed
    itself, 3, and a seed set on a part is kept. Set it in the config, not on the
    resolved Trainer: where the part's seed was the placeholder,
    `dataclasses.replace(trainer, train_ds=dataclasses.replace(trainer.train_ds, seed=100))`
    gives a Trainer whose `train_ds.seed` is 3 again, the Trainer's.
    """)
    cfg = regression_config.get_config()
    cfg.seed, cfg.workdir = 3, str(workdir / "run")  # a Trainer config resolves only with a workdir
    cfg.train_ds = kd_cfg.data.py.DataSource(data_source=regression_cfg.RegressionRows("train"), batch_size=32,
                                             shuffle=True, num_epochs=None, num_workers=0)
    cfg.eval_ds = kd_cfg.data.py.DataSource(data_source=regression_cfg.RegressionRows("eval"), batch_size=32,
                                            shuffle=False, num_epochs=1, num_workers=0)
    cfg.evals = {"eval": kd_cfg.evals.Evaluator(run=kd_cfg.evals.EveryNSteps(100))}  # no ds, no seed
    trainer = konfig.resolve(cfg)
    print({"train_ds": trainer.train_ds.seed, "eval_ds": trainer.eval_ds.seed, "rng_streams": trainer.rng_streams.seed})
    print("the evaluator's ds is eval_ds:", trainer.evals["eval"].ds is trainer.eval_ds)
    with lesson.checks():
        lesson.check_equal((trainer.train_ds.seed, trainer.eval_ds.seed, trainer.rng_streams.seed), (3, 3, 3),
                           "with cfg.seed = 3: the seeds of train_ds, eval_ds and the random streams")
        lesson.check(trainer.evals["eval"].ds is trainer.eval_ds, "the evaluator given no ds: its ds is the Trainer's eval_ds")
        again = konfig.resolve(cfg)
        lesson.check(np.array_equal(next(iter(trainer.train_ds))["x"], next(iter(again.train_ds))["x"]),
                     "two Trainers of this config give the same first batch")
        lesson.check(same(trainer.init_state().params, again.init_state().params),
                     "and the same initial parameters: the model's random streams take the Trainer's seed")
        cfg.seed = 4
        other = konfig.resolve(cfg)
        lesson.check(not same(trainer.init_state().params, other.init_state().params)
                     and not np.array_equal(next(iter(trainer.train_ds))["x"], next(iter(other.train_ds))["x"]),
                     "with cfg.seed = 4, other initial parameters and another first batch")
        cfg.seed = 3
        import dataclasses

        reseeded = dataclasses.replace(trainer, train_ds=dataclasses.replace(trainer.train_ds, seed=100))
        lesson.check_equal((dataclasses.replace(trainer.train_ds, seed=100).seed, reseeded.train_ds.seed), (100, 3),
                           "a resolved train_ds whose seed was the placeholder, replaced with seed=100: its seed alone,"
                           " and once put back into the Trainer with dataclasses.replace")
        lesson.check(trainer.evals["eval"].base_cfg is trainer and trainer.rng_streams.eval_rngs(0) == {},
                     "the evaluator's root config is the Trainer, whose streams give an evaluation no RNG by default")

    lesson.md("""
    ## A seed set on a part is kept

    A seed given to a part in the config wins over the Trainer's, and a Trainer rebuilt
    with `dataclasses.replace` keeps the seed given to that part.
    """)
    cfg.train_ds.seed = 7  # set on the part: kept
    trainer = konfig.resolve(cfg)
    print({"train_ds": trainer.train_ds.seed, "rng_streams": trainer.rng_streams.seed})
    with lesson.checks():
        lesson.check_equal((trainer.train_ds.seed, trainer.eval_ds.seed, trainer.rng_streams.seed), (7, 3, 3),
                           "with cfg.train_ds.seed = 7: the seeds of train_ds, eval_ds and the random streams")
        lesson.check_equal(dataclasses.replace(trainer, train_ds=dataclasses.replace(trainer.train_ds, seed=100))
                           .train_ds.seed, 100, "with cfg.train_ds.seed = 7, the same replace: seed=100 is kept")
        lesson.summary = ("a built module refused, with its hints; alone, PyGrain drew random seeds and a shuffling"
                          " InMemoryPipeline failed; in a Trainer with seed=3: seed 3 everywhere, the same batches and"
                          " parameters")


def said_while(fn) -> dict:
    """What fn() warned, logged at WARNING or above (any logger, absl's included) and
    printed to stdout or stderr."""
    import contextlib
    import io
    import logging
    import warnings

    logged = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.WARNING) or logging.WARNING)  # lets WARNING records through
    try:
        with (warnings.catch_warnings(record=True) as warned, contextlib.redirect_stdout(io.StringIO()) as out,
              contextlib.redirect_stderr(io.StringIO()) as err):
            warnings.simplefilter("always")
            fn()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return {"warnings": [str(w.message) for w in warned], "logged": logged, "printed": out.getvalue() + err.getvalue()}
