"""A Flax NNX model, trained by the same Trainer.

Flax's current API is NNX: a module is a Python object that owns its parameters. Kauldron
trains one through `kauldron.contrib.modules.knnx.KdNnxModule`, with the same config,
losses and metrics as the Linen MLP. Its dataclass fields are its config; Kauldron builds
the layers by calling its `setup(rngs)`, with an `nnx.Rngs` made from the Trainer's RNG
streams, so the seed still comes from the Trainer (a `setup` without an `rngs` argument
is called without one, with a warning). An NNX module you already have is wrapped by
`knnx.LinenModuleFromNnxDef`.
"""

import functools

import jax
import numpy as np
from flax import nnx
from kauldron import konfig
from kauldron.contrib.modules import knnx

from configs import regression as regression_config
from harness import Lesson, section
from harness.compare import same
from sections.parts.logs import read_scalars
from sections.parts.regression import FEATURES, MLP, make_data

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import nnx_mlp as nnx_cfg


@section(17, "nnx", "A Flax NNX model, trained by the same Trainer", part="for-real", trains=True,
         shows="the MLP written in NNX (knnx): same Trainer and losses, its mode, a sown value read by a metric; an NNX module wrapped",
         reference="https://kauldron.readthedocs.io/en/latest/nnx.html")
def an_nnx_model(lesson: Lesson, workdir):
    lesson.md("""
    ## The MLP in NNX, under the same Trainer

    `NnxMLP` (below) makes its layers in `setup`, and takes its input by a `kontext.Key`
    field like the Linen MLP. `KdNnxModule.init` never sees a batch, so the width of the
    input is a field too, `features`, not read from the data. NNX captures nothing by
    itself the way Linen's `interms.enc.__call__[0]` does: what a module `sow`s is what
    a metric can read, here `self.sow(nnx.Intermediate, "enc_out", h)` at
    `interms.enc_out.value[0]`. Kauldron calls the module outside `nnx.capture()`, where
    flax 0.12 (0.12.8 and 0.12.12 here) warns that `sow` is deprecated; flax 0.12.12's
    flag `nnx_sow_capture_noop` (off by default) makes such a `sow` do nothing: the
    metric's key path then leads nowhere, a `KeyError`. (The checks compare with numpy,
    within 1e-5; on a TPU, where jax's default precision rounds each float32 factor of a
    product to bfloat16, numpy is given the factors so rounded.)
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "run"), 100
    cfg.model = nnx_cfg.NnxMLP(inputs="batch.x")
    cfg.train_metrics["enc_norm"] = kd_cfg.metrics.Norm(tensor="interms.enc_out.value[0]")  # the sown value
    trainer = konfig.resolve(cfg)
    state, _ = trainer.train()
    logged = read_scalars(workdir / "run", "train")
    print({step: (round(row["losses/logcosh"], 4), round(row["metrics/enc_norm"], 3)) for step, row in logged.items()
           if step % 50 == 0})
    with lesson.checks():
        import warnings

        import flax

        lesson.check(logged[100]["losses/logcosh"] * 10 <= logged[0]["losses/logcosh"],
                     "the training loss fell at least 10x over 100 steps")
        first_h = enc_outputs(trainer.init_state().params, next(iter(trainer.train_ds))["x"])
        lesson.check_close(logged[0]["metrics/enc_norm"], float(np.linalg.norm(first_h, axis=-1).mean()),
                           "kd.metrics.Norm of interms.enc_out.value[0] at step 0 = numpy's mean norm of the first"
                           " batch's rows of x @ kernel + bias, enc's initial parameters", rel=1e-5)
        x_eval = make_data("eval")["x"]
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            captured = trainer.model.apply({"params": state.params, **state.collections}, x_eval,
                                           mutable=True, capture_intermediates=True, is_training_property=False)[1]
        lesson.check(sorted(captured["intermediates"]) == ["enc_out"]
                     and np.allclose(captured["intermediates"]["enc_out"].get_value()[0], enc_outputs(state.params, x_eval),
                                     rtol=1e-5, atol=1e-6),
                     "what the NNX model's forward captures, asked to capture intermediates: the sown value only,"
                     " x @ kernel + bias of enc's trained parameters")
        lesson.check(any(issubclass(w.category, DeprecationWarning) and "outside of 'nnx.capture()' is deprecated"
                         in str(w.message) for w in warned),
                     f"flax {flax.__version__}: KdNnxModule.apply runs the module's sow outside nnx.capture(), which"
                     " warns a DeprecationWarning", internal="reads flax's warning message")
        if hasattr(flax.config, "nnx_sow_capture_noop"):
            quiet = captured_with_sow_noop(trainer.model, {"params": state.params, **state.collections}, x_eval)
            lesson.check_equal(dict(quiet["intermediates"]), {}, f"flax {flax.__version__}, nnx_sow_capture_noop on:"
                               " what the forward captures, asked to capture intermediates")
            lesson.check_raises(KeyError, lambda: kontext.resolve_from_keyed_obj(
                kd.train.Context(step=0, batch={}, interms=dict(quiet["intermediates"])), trainer.train_metrics["enc_norm"]),
                "the enc_norm metric's keys resolved, as the train step resolves them, in a context of what it captured")
            lesson.check(not flax.config.nnx_sow_capture_noop, "flax's nnx_sow_capture_noop is off by default")
        else:
            lesson.skip_check("flax 0.12.12's nnx_sow_capture_noop makes such a sow a no-op",
                              f"flax {flax.__version__} has no such flag")
        narrow = trainer.model.init(trainer.rng_streams.init_rngs(), make_data("eval")["x"][:, :8])
        lesson.check_equal(narrow["params"]["enc"]["kernel"].shape, (FEATURES, 32),
                           "enc's kernel, init given rows of 8 features: its width from features, not from the rows")

    lesson.md("""
    ## The parameters, and what travels with them

    `state.params` nests like Linen's, each leaf an `nnx.Param`. To rebuild the module for
    each step, Kauldron also keeps `state.collections["nnx"]`: the module's structure
    (`graphdef`), its RNG state (`rng_vars`, here the dropout layer's key and counter)
    and the rest of its state (`attributes`: other nnx Variables, a BatchNorm's
    statistics for example, or array attributes: jax and numpy arrays count as data
    unmarked, `nnx.data` marks others; none here). The module's fields are part of
    `graphdef`. The module in the config never gets layers; the initial values come from
    the Trainer's seed.
    """)
    print(jax.tree.map(lambda v: (type(v).__name__, v.shape), state.params, is_leaf=lambda v: isinstance(v, nnx.Variable)))
    print(sorted(state.collections["nnx"]))
    with lesson.checks():
        lesson.check_equal(sorted(state.collections["nnx"]), ["attributes", "graphdef", "rng_vars"], "state.collections['nnx']")
        lesson.check(all(isinstance(v, nnx.Param) for v in jax.tree.leaves(state.params, is_leaf=is_variable)),
                     "every leaf of state.params is an nnx.Param")
        lesson.check_equal(jax.tree.map(lambda v: type(v).__name__, state.collections["nnx"]["rng_vars"], is_leaf=is_variable),
                           {"drop": {"rngs": {"count": "RngCount", "key": "RngKey"}}},
                           "rng_vars: the dropout layer's key and counter")
        lesson.check_equal(state.collections["nnx"]["attributes"], {}, "NnxMLP's attributes")
        normed = WithBatchNorm().init({"params": jax.random.key(0)})["nnx"]["attributes"]
        lesson.check_equal(jax.tree.map(lambda v: type(v).__name__, normed, is_leaf=is_variable),
                           {"norm": {"mean": "BatchStat", "var": "BatchStat"}}, "a KdNnxModule with an nnx.BatchNorm: its attributes")
        from sections.parts.nnx_mlp import NnxMLP

        x_made, x_again, z_made = (NnxMLP(inputs=key).init(trainer.rng_streams.init_rngs())
                                   for key in ("batch.x", "batch.x", "batch.z"))
        lesson.check(same(plain(x_made["params"]), plain(z_made["params"])) and x_made["nnx"]["attributes"]
                     == z_made["nnx"]["attributes"] == {} and x_made["nnx"]["graphdef"] != z_made["nnx"]["graphdef"]
                     and x_made["nnx"]["graphdef"] == x_again["nnx"]["graphdef"],
                     "two NnxMLPs whose field inputs differs, initialised alike: the same params and attributes,"
                     " other graphdefs (two with the same inputs: equal graphdefs)")
        lesson.check(not hasattr(trainer.model, "enc"), "the module in the config has no layers after training")
        initial = [plain(trainer.init_state().params)] + [  # the lesson's Trainer has seed 0
            plain(konfig.resolve(experiment(workdir / f"seed-{i}", seed)).init_state().params) for i, seed in ((1, 0), (2, 1))]
        lesson.check(same(initial[0], initial[1]) and not same(initial[0], initial[2]),
                     "the initial values come from the Trainer's seed: seed 0 twice the same, seed 1 not")
        warned, made = init_without_rngs()
        lesson.check(any("rngs are not used in setup method" in str(w.message) for w in warned) and same(*made),
                     "a setup without an rngs argument: init warns, and two seeds make the same values")

    lesson.md("""
    ## Train and eval mode

    Kauldron tells the module its mode with the same flag as a Linen module's
    (`is_training_property`), and `KdNnxModule` turns it into NNX's own
    `module.train()` or `module.eval()`, which switch `nnx.Dropout` on or off. Called
    without the flag, `KdNnxModule.apply` runs in train mode (`is_training_property=True`
    by default), whereas a Linen module that reads `kd.nn.train_property` raises without
    it (section 14): pass it when you predict. An evaluator reseeds only the RNG streams with `eval=True` (none by default), from
    each batch's index (with `per_step=True`, the default). Otherwise a module that
    draws randomness in eval mode draws it from the key and counter its state holds:
    the same numbers for every batch.
    """)
    cfg.workdir, cfg.model.dropout = str(workdir / "dropout"), 0.5
    dropout = konfig.resolve(cfg)
    start, x = dropout.init_state(), make_data("eval")["x"]
    variables, keys = {"params": start.params, **start.collections}, jax.random.split(jax.random.key(0))
    train_1, train_2 = (dropout.model.apply(variables, x, is_training_property=True, rngs={"dropout": k})["y"] for k in keys)
    evaluated = dropout.model.apply(variables, x, is_training_property=False)["y"]
    print(np.asarray(train_1[:3, 0]), np.asarray(train_2[:3, 0]), np.asarray(evaluated[:3, 0]))
    print("streams an evaluator passes:", dropout.rng_streams.eval_rngs(0))
    with lesson.checks():
        lesson.check(not np.array_equal(train_1, train_2), "in train mode, two dropout keys give different outputs")
        lesson.check(np.array_equal(dropout.model.apply(variables, x, rngs={"dropout": keys[0]})["y"], train_1),
                     "KdNnxModule.apply without is_training_property, given the first key: train mode's outputs")
        lesson.check(np.array_equal(evaluated, MLP(inputs="batch.x").apply({"params": plain(start.params)}, x)["y"]),
                     "in eval mode, dropout is off: the outputs are the Linen MLP's with the same values")
        lesson.check_equal(dropout.rng_streams.eval_rngs(0), {}, "the RNG streams an evaluator passes, none with eval=True")
        noisy = NoisyInEval(inputs="batch.x")
        first, second = (as_an_evaluator(noisy, dropout.rng_streams, step, x) for step in (0, 1))
        lesson.check((first == 0).any() and np.array_equal(first, second)
                     and not np.array_equal(first, as_an_evaluator(noisy, dropout.rng_streams, 0, x, dropout_key=2)),
                     "a module that draws dropout in eval mode, run as Evaluator._step runs it (kd.train.forward,"
                     " jitted, rngs=rng_streams.eval_rngs(batch index)) for batches 0 and 1: the same draws; set up"
                     " with another dropout key, other draws: they come from the key its state holds")
        reseeded = dataclasses.replace(dropout.rng_streams, stream_overwrites=[kd.train.RngStream("dropout", eval=True)])
        lesson.check(not np.array_equal(as_an_evaluator(noisy, reseeded, 0, x), as_an_evaluator(noisy, reseeded, 1, x)),
                     "with a dropout stream of eval=True, batches 0 and 1: other draws (reseeded from the batch's index)")
        fixed = dataclasses.replace(dropout.rng_streams,
                                    stream_overwrites=[kd.train.RngStream("dropout", eval=True, per_step=False)])
        lesson.check(np.array_equal(as_an_evaluator(noisy, fixed, 0, x), as_an_evaluator(noisy, fixed, 1, x))
                     and not np.array_equal(as_an_evaluator(noisy, fixed, 0, x), first),
                     "with a dropout stream of eval=True and per_step=False, batches 0 and 1: the same draws,"
                     " from a key of the stream's (not the draws without it)")
        lesson.check(kd.train.RngStream("dropout").per_step, "an RngStream's per_step is True by default")

    lesson.md("""
    ## The same numbers as the Linen MLP

    Given the NNX model's trained values, the Linen MLP of the other lessons computes the
    same outputs, bit for bit: the two are one model written two ways.
    """)
    values = jax.tree.map(lambda v: v.get_value(), state.params, is_leaf=lambda v: isinstance(v, nnx.Variable))
    nnx_out = trainer.model.apply({"params": state.params, **state.collections}, x, is_training_property=False)["y"]
    linen_out = MLP(inputs="batch.x").apply({"params": values}, x)["y"]
    print(float(np.max(np.abs(np.asarray(nnx_out) - np.asarray(linen_out)))))
    with lesson.checks():
        lesson.check(np.array_equal(nnx_out, linen_out),
                     "the Linen MLP with the NNX model's values: the same outputs, bit for bit")

    lesson.md("""
    ## An NNX module you already have: `knnx.LinenModuleFromNnxDef`

    To train an existing NNX module without writing a `KdNnxModule`, wrap it:
    `LinenModuleFromNnxDef(nnx_init=...)` takes a function that returns the module (a
    class, or a `functools.partial` of one). Its `setup` calls `nnx_init(rngs=rngs)` (or
    `nnx_init()` if that raises a `TypeError`, any, one from your constructor's own code
    too) and keeps the result as `module`, so the parameters sit under `module`; calling
    it calls the module with the same arguments. It has no `kontext.Key` field: Kauldron
    calls a model without one with the whole batch. To feed the module a key path
    instead, subclass it with a `kontext.Key` field named as the module's argument
    (`inputs` for `nnx.Linear`): Kauldron passes the value under the field's name, and a
    field `x` fails only when the model is called.
    """)
    linear = knnx.LinenModuleFromNnxDef(nnx_init=functools.partial(nnx.Linear, FEATURES, 1))
    wrapped = linear.init({"params": jax.random.key(0)})
    print(jax.tree.map(lambda v: (type(v).__name__, v.shape), wrapped["params"], is_leaf=lambda v: isinstance(v, nnx.Variable)))
    direct = nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(params=jax.random.key(0)))
    print("the same outputs:", np.array_equal(linear.apply(wrapped, x, is_training_property=False), direct(x)))
    with lesson.checks():
        lesson.check(np.array_equal(linear.apply(wrapped, x, is_training_property=False), direct(x)),
                     "the wrapped nnx.Linear, set up from a key, computes what nnx.Linear made with that key does")
        lesson.check(same(plain(wrapped["params"]["module"]), plain(nnx.state(direct, nnx.Param).to_pure_dict())),
                     "its parameters, under 'module', are those nnx.Linear makes from the same key")
        no_rngs = knnx.LinenModuleFromNnxDef(nnx_init=lambda: nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(5)))
        lesson.check(same(plain(no_rngs.init({"params": jax.random.key(0)})["params"]["module"]),
                          plain(nnx.state(nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(5)), nnx.Param).to_pure_dict())),
                     "an nnx_init that takes no rngs is called without them (it makes its own)")
        lesson.check(same(plain(knnx.LinenModuleFromNnxDef(nnx_init=raises_type_error_given_rngs).init(
                              {"params": jax.random.key(0)})["params"]["module"]),
                          plain(nnx.state(nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(5)), nnx.Param).to_pure_dict())),
                     "an nnx_init whose own code raises TypeError when given rngs: called again without them, the"
                     " error unseen")
        batch = {"x": x}
        args, kwargs = model_inputs(linear, batch)
        lesson.check(len(args) == 1 and args[0] is batch and kwargs == {},
                     "a model without kontext keys is given the whole batch, as its one positional argument",
                     internal="a private name")
        keyed = keyed_wrapper("inputs")
        args, kwargs = model_inputs(keyed, batch)
        lesson.check(args == () and list(kwargs) == ["inputs"] and kwargs["inputs"] is x
                     and np.array_equal(keyed.apply(keyed.init({"params": jax.random.key(0)}), **kwargs,
                                                    is_training_property=False), direct(x)),
                     "a subclass with inputs: kontext.Key = 'batch.x' is given batch['x'] as inputs=, and computes"
                     " nnx.Linear's outputs", internal="a private name")
        misnamed = keyed_wrapper("x")
        args, kwargs = model_inputs(misnamed, batch)
        error = lesson.check_raises(TypeError, lambda: misnamed.apply(wrapped, *args, **kwargs, is_training_property=False),
                                    "applying a subclass whose field is x: kontext.Key = 'batch.x', given x=batch['x'],")
        lesson.check("unexpected keyword argument 'x'" in str(error), "nnx.Linear refuses the keyword x",
                     internal="reads Python's error message")

    lesson.md("""
    ## Going further: outside `jit`, `apply` advances the state's RNG counter

    Given no `rngs`, `KdNnxModule.apply` reseeds nothing and draws from the key and
    counter in the variables it is given. Called outside `jit`, it advances that counter
    in those very variables: two calls draw different numbers, and the state has changed.
    Under `jit`, as in Kauldron's steps, the variables given are left as they were.
    """)
    counter = start.collections["nnx"]["rng_vars"]["drop"]["rngs"]["count"]
    before = int(counter.get_value())
    once = dropout.model.apply(variables, x, is_training_property=True)["y"]
    twice = dropout.model.apply(variables, x, is_training_property=True)["y"]
    print(before, int(counter.get_value()), np.array_equal(once, twice))
    with lesson.checks():
        lesson.check(int(counter.get_value()) == before + 2 and not np.array_equal(once, twice),
                     "two calls outside jit without rngs: the state's counter advanced by 2, other draws")
        jitted = jax.jit(lambda variables: dropout.model.apply(variables, x, is_training_property=True)["y"])
        lesson.check(np.array_equal(jitted(variables), jitted(variables)) and int(counter.get_value()) == before + 2,
                     "two calls under jit: the same draws, the state's counter unchanged")
        lesson.fact("logcosh", {"0": logged[0]["losses/logcosh"], "100": logged[100]["losses/logcosh"]})
        lesson.summary = (f"NNX MLP: logcosh {logged[0]['losses/logcosh']:.4f} -> {logged[100]['losses/logcosh']:.4f};"
                          " its mode; Linen's outputs; an nnx.Linear wrapped")


# How the lesson checks itself.
import dataclasses  # noqa: E402 - the checks' own, not the page's

from kauldron import kd, kontext  # noqa: E402

from sections.parts import accelerator  # noqa: E402


@dataclasses.dataclass(kw_only=True)
class NoisyInEval(knnx.KdNnxModule):
    """An NNX module that draws randomness in every mode: dropout kept on in eval mode."""

    inputs: kontext.Key = kontext.REQUIRED

    def setup(self, rngs: nnx.Rngs | None = None):
        self.drop = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, inputs):
        return {"y": self.drop(inputs, deterministic=False)}


@dataclasses.dataclass(kw_only=True)
class WithBatchNorm(knnx.KdNnxModule):
    """A KdNnxModule that holds an nnx.BatchNorm over 4 features."""

    def setup(self, rngs: nnx.Rngs | None = None):
        self.norm = nnx.BatchNorm(4, rngs=rngs)

    def __call__(self, inputs):
        return self.norm(inputs)


def as_an_evaluator(model, streams, batch_index: int, x, dropout_key: int = 1) -> np.ndarray:
    """The model's eval-mode output for rows of ones shaped as `x`, initialised from fixed
    keys (its dropout stream's from `dropout_key`), computed as `kd.evals.Evaluator._step` (kauldron/evals/evaluators.py) computes it
    for its batch `batch_index`: `kd.train.forward`, jitted, with `is_training=False` and
    `rngs=streams.eval_rngs(batch_index)`."""
    variables = model.init({"params": jax.random.key(0), "dropout": jax.random.key(dropout_key)})
    context = kd.train.Context(step=0, batch={"x": np.ones_like(x)})

    @jax.jit
    def step_fn(params, collections):
        ctx = context.replace(params=params, collections=collections)
        return kd.train.forward(context=ctx, model=model, rngs=streams.eval_rngs(batch_index), is_training=False).preds["y"]

    return np.asarray(step_fn(variables["params"], {"nnx": variables["nnx"]}))


def experiment(workdir, seed: int):
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps, cfg.seed = str(workdir), 100, seed
    cfg.model = nnx_cfg.NnxMLP(inputs="batch.x")
    return cfg


def is_variable(value) -> bool:
    return isinstance(value, nnx.Variable)


def enc_outputs(params, x) -> np.ndarray:
    """x @ kernel + bias of the layer `enc` in `params` (nnx.Param leaves), by numpy, with
    x and kernel as the device multiplies them (on a TPU, rounded to bfloat16)."""
    kernel, bias = params["enc"]["kernel"].get_value(), np.asarray(params["enc"]["bias"].get_value())
    return accelerator.as_the_chip_multiplies(x) @ accelerator.as_the_chip_multiplies(kernel) + bias


def captured_with_sow_noop(model, variables, x):
    """The collections `model.apply` returns, asked to capture intermediates, with flax's
    flag nnx_sow_capture_noop on (then as it was)."""
    import flax

    before = flax.config.nnx_sow_capture_noop
    flax.config.update("nnx_sow_capture_noop", True)
    try:
        return model.apply(variables, x, mutable=True, capture_intermediates=True, is_training_property=False)[1]
    finally:
        flax.config.update("nnx_sow_capture_noop", before)


def plain(params):
    """nnx.Param leaves -> their arrays, in the same nesting."""
    return jax.tree.map(lambda v: v.get_value() if is_variable(v) else v, params, is_leaf=is_variable)


def keyed_wrapper(field: str):
    """LinenModuleFromNnxDef with a key path for its input: an nnx.Linear fed `batch.x`
    through a `kontext.Key` field named `field`."""
    keyed_linear = dataclasses.make_dataclass("KeyedLinear", [(field, kontext.Key, kontext.REQUIRED)],
                                              bases=(knnx.LinenModuleFromNnxDef,), kw_only=True)
    return keyed_linear(nnx_init=functools.partial(nnx.Linear, FEATURES, 1), **{field: "batch.x"})


@dataclasses.dataclass(kw_only=True)
class NoRngsInSetup(knnx.KdNnxModule):
    """A KdNnxModule whose setup takes no rngs: it seeds its layer itself."""

    def setup(self):
        self.out = nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(5))

    def __call__(self, inputs):
        return self.out(inputs)


def raises_type_error_given_rngs(rngs=None):
    """An nnx_init with a bug that shows only when it is given rngs: a TypeError of its own."""
    if rngs is not None:
        raise TypeError("a bug in the constructor")
    return nnx.Linear(FEATURES, 1, rngs=nnx.Rngs(5))


def init_without_rngs() -> tuple[list, list]:
    """The warnings `NoRngsInSetup().init` gives, and its values for two seeds."""
    import warnings

    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        made = [plain(NoRngsInSetup().init({"params": jax.random.key(seed)})["params"]) for seed in (0, 1)]
    return warned, made


def model_inputs(model, batch):
    """The (args, kwargs) Kauldron calls a top-level model with, for a batch."""
    from kauldron.data import utils as data_utils
    from kauldron.train import context as context_lib

    return data_utils.get_model_inputs(model, context_lib.Context(step=0, batch=batch))
