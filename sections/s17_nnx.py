"""A Flax NNX model, trained by the same Trainer.

Flax's current API is NNX: a module is a Python object that owns its parameters. Kauldron
trains one through `kauldron.contrib.modules.knnx.KdNnxModule`, with the same config,
losses and metrics as the Linen MLP. Its dataclass fields are its config; Kauldron builds
the layers by calling its `setup(rngs)`, with an `nnx.Rngs` made from the Trainer's RNG
streams, so the seed still comes from the Trainer.
"""

import jax
import numpy as np
from flax import nnx
from kauldron import konfig

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import same
from sections.shared import MLP, event_files, make_data, read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import nnx_mlp as nnx_cfg

STEPS = 100
ENC_OUT = "interms.enc_out.value[0]"


@section(17, "nnx", "A Flax NNX model, trained by the same Trainer", part="for-real", trains=True,
         shows="the MLP written in NNX (kauldron.contrib knnx): same Trainer and losses, its mode, a sown value read by a metric",
         reference="https://kauldron.readthedocs.io/en/latest/nnx.html")
def an_nnx_model(lesson: Lesson) -> str:
    lesson.md("""
    ## The MLP in NNX, under the same Trainer

    `NnxMLP` (below) makes its layers in `setup`. NNX captures nothing by itself the way
    Linen's `interms.enc.__call__[0]` does: what a module `sow`s is what a metric can
    read, here `self.sow(nnx.Intermediate, "enc_out", h)` at `interms.enc_out.value[0]`.
    """)
    trainer = konfig.resolve(experiment(lesson.workdir / "run", seed=0))
    state, _ = trainer.train()
    logged = read_scalars(*event_files(lesson.workdir / "run", "train"))
    print({step: (round(row["losses/logcosh"], 4), round(row["metrics/enc_norm"], 3)) for step, row in logged.items()
           if step % 50 == 0})
    lesson.check(logged[STEPS]["losses/logcosh"] * 10 <= logged[0]["losses/logcosh"],
                 f"the training loss fell at least 10x over {STEPS} steps")
    lesson.check(all(np.isfinite(row["metrics/enc_norm"]) and row["metrics/enc_norm"] > 0 for row in logged.values()),
                 f"kd.metrics.Norm read the sown value at {ENC_OUT} at every logged step")

    lesson.md("""
    ## The parameters, and what travels with them

    `state.params` nests like Linen's, each leaf an `nnx.Param`. To rebuild the module for
    each step, Kauldron also keeps `state.collections["nnx"]`: the module's structure
    (`graphdef`), its RNG state (`rng_vars`, here the dropout layer's key and counter)
    and its other attributes. The module in the config never gets layers; the initial
    values come from the Trainer's seed.
    """)
    print(jax.tree.map(lambda v: (type(v).__name__, v.shape), state.params, is_leaf=lambda v: isinstance(v, nnx.Variable)))
    print(sorted(state.collections["nnx"]))
    lesson.check_equal(sorted(state.collections["nnx"]), ["attributes", "graphdef", "rng_vars"], "state.collections['nnx']")
    lesson.check(all(isinstance(v, nnx.Param) for v in jax.tree.leaves(state.params, is_leaf=is_variable)),
                 "every leaf of state.params is an nnx.Param")
    lesson.check(not hasattr(trainer.model, "enc"), "the module in the config has no layers after training")
    initial = [plain(konfig.resolve(experiment(lesson.workdir / f"seed-{i}", seed)).init_state().params)
               for i, seed in enumerate((0, 0, 1))]
    lesson.check(same(initial[0], initial[1]) and not same(initial[0], initial[2]),
                 "the initial values come from the Trainer's seed: seed 0 twice the same, seed 1 not")

    lesson.md("""
    ## Train and eval mode

    Kauldron tells the module its mode with the same flag as a Linen module's
    (`is_training_property`), and `KdNnxModule` turns it into NNX's own
    `module.train()` or `module.eval()`, which switch `nnx.Dropout` on or off. In
    evaluation no RNG is reseeded (unless a stream has `eval=True`): the module runs on
    the key and counter its state holds, so evaluating twice gives the same outputs.
    """)
    cfg = experiment(lesson.workdir / "dropout", seed=0)
    cfg.model.dropout = 0.5
    dropout = konfig.resolve(cfg)
    start, x = dropout.init_state(), make_data("eval")["x"]
    variables, keys = {"params": start.params, **start.collections}, jax.random.split(jax.random.key(0))
    train_1, train_2 = (dropout.model.apply(variables, x, is_training_property=True, rngs={"dropout": k})["y"] for k in keys)
    evaluated = dropout.model.apply(variables, x, is_training_property=False)["y"]
    print(np.asarray(train_1[:3, 0]), np.asarray(train_2[:3, 0]), np.asarray(evaluated[:3, 0]))
    print("streams an evaluator passes:", dropout.rng_streams.eval_rngs(0))
    lesson.check(not np.array_equal(train_1, train_2), "in train mode, two dropout keys give different outputs")
    lesson.check(np.array_equal(evaluated, MLP(inputs="batch.x").apply({"params": plain(start.params)}, x)["y"]),
                 "in eval mode, dropout is off: the outputs are the Linen MLP's with the same values")
    lesson.check_equal(dropout.rng_streams.eval_rngs(0), {}, "the RNG streams an evaluator passes, none with eval=True")

    lesson.md("""
    ## The same numbers as the Linen MLP

    Given the NNX model's trained values, the Linen MLP of the other lessons computes the
    same outputs, bit for bit: the two are one model written two ways.
    """)
    nnx_out = trainer.model.apply({"params": state.params, **state.collections}, make_data("eval")["x"],
                                  is_training_property=False)["y"]
    linen_out = MLP(inputs="batch.x").apply({"params": plain(state.params)}, make_data("eval")["x"])["y"]
    print(float(np.max(np.abs(np.asarray(nnx_out) - np.asarray(linen_out)))))
    lesson.check(np.array_equal(nnx_out, linen_out), "the Linen MLP with the NNX model's values: the same outputs, bit for bit")
    lesson.fact("logcosh", {"0": logged[0]["losses/logcosh"], str(STEPS): logged[STEPS]["losses/logcosh"]})
    return f"NNX MLP: logcosh {logged[0]['losses/logcosh']:.4f} -> {logged[STEPS]['losses/logcosh']:.4f}; its mode; Linen's outputs"


def experiment(workdir, seed: int):
    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps, cfg.seed = str(workdir), STEPS, seed
    cfg.model = nnx_cfg.NnxMLP(inputs="batch.x")
    cfg.train_metrics["enc_norm"] = kd_cfg.metrics.Norm(tensor=ENC_OUT)  # the sown value, by key path
    return cfg


def is_variable(value) -> bool:
    return isinstance(value, nnx.Variable)


def plain(params):
    """nnx.Param leaves -> their arrays, in the same nesting."""
    return jax.tree.map(lambda v: v.get_value() if is_variable(v) else v, params, is_leaf=is_variable)
