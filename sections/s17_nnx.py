"""A Flax NNX model, trained by the same Trainer.

Flax's current API is NNX: a module is a Python object that owns its parameters. Kauldron
trains one through `kauldron.contrib.modules.knnx.KdNnxModule`, with the same config,
losses and metrics as the Linen MLP. What a Linen user must know:

- Where the layers are made: the module's dataclass fields are its config, and Kauldron
  builds the layers by calling `setup(rngs)` on a copy of it, not `__init__`.
- How RNGs arrive: `rngs` is an `nnx.Rngs` made from the Trainer's RNG streams (`params`,
  `dropout`, `default`), so the seed still comes from the Trainer.
- How intermediates are captured: only what the module `sow`s. `self.sow(nnx.Intermediate,
  "enc_out", h)` lands at the key path `interms.enc_out.value[0]`; nothing is captured by
  itself the way Linen's `interms.enc.__call__[0]` is.
- What the parameters look like: `state.params` nests like Linen's (`enc.kernel`, ...),
  each leaf wrapped in an `nnx.Param`.
"""


import jax
import numpy as np
from flax import nnx
from kauldron import kontext, konfig

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import FEATURES, MLP, event_files, make_data, read_scalars

STEPS = 300
ENC_OUT = "interms.enc_out.value[0]"


def experiment(workdir, seed: int = 0):
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections.parts import nnx_mlp as nnx_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps, cfg.seed = str(workdir), STEPS, seed
    cfg.model = nnx_cfg.NnxMLP(inputs="batch.x")
    cfg.train_metrics["enc_norm"] = kd_cfg.metrics.Norm(tensor=ENC_OUT)  # the sown value, by key path
    return konfig.resolve(cfg)


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def plain(params):
    """nnx.Param leaves -> their arrays, in the same nesting."""
    return jax.tree.map(lambda v: v.get_value() if isinstance(v, nnx.Variable) else v, params,
                        is_leaf=lambda v: isinstance(v, nnx.Variable))


def check_against_linen(lesson: Lesson, trainer, state) -> float:
    x = make_data("eval")["x"]
    params = plain(state.params)
    nnx_out, captured = trainer.model.apply({"params": state.params, **state.collections}, x,
                                            mutable=True, capture_intermediates=True, is_training_property=False)
    linen_out = MLP(inputs="batch.x").apply({"params": params}, x)
    difference = float(np.max(np.abs(np.asarray(nnx_out["y"]) - np.asarray(linen_out["y"]))))
    print(f"\n  the Linen MLP given the NNX model's trained values: max |output difference| = {difference}"
          f" over {len(x)} rows")
    lesson.check(np.array_equal(nnx_out["y"], linen_out["y"]),
                 "the Linen MLP with the NNX model's parameter values computes the same outputs, bit for bit")
    enc_out = kontext.get_by_path({"interms": captured["intermediates"]}, ENC_OUT)
    lesson.check_equal(tuple(enc_out.shape), (len(x), 32), f"the sown value at {ENC_OUT}, applied outside the Trainer")
    return difference


@section(17, "nnx", "A Flax NNX model, trained by the same Trainer", trains=True,
         shows="the MLP written in NNX (kauldron.contrib knnx): same Trainer and losses, a sown value read by a metric",
         reference="https://kauldron.readthedocs.io/en/latest/nnx.html")
def an_nnx_model(lesson: Lesson) -> str:
    workdir = lesson.workdir / "run"
    trainer = experiment(workdir)
    state, _ = trainer.train()
    shapes = jax.tree.map(lambda v: (type(v).__name__, tuple(v.shape)), state.params,
                          is_leaf=lambda v: isinstance(v, nnx.Variable))
    print(f"  state.params: {shapes}")
    lesson.check_equal(shapes, {"enc": {"bias": ("Param", (32,)), "kernel": ("Param", (FEATURES, 32))},
                                "out": {"bias": ("Param", (1,)), "kernel": ("Param", (32, 1))}},
                       "the NNX model's parameters: Linen's nesting and shapes, each an nnx.Param")

    lesson.check(not hasattr(trainer.model, "enc"), "the module in the config has no layers: Kauldron set up a copy")
    initial = [plain(experiment(lesson.workdir / f"seed-{seed}", seed).init_state().params) for seed in (0, 0, 1)]
    lesson.check(same(initial[0], initial[1]) and not same(initial[0], initial[2]),
                 "the NNX layers' initial values come from the Trainer's seed: seed 0 twice the same, seed 1 not")

    logged = read_scalars(*event_files(workdir, "train"))
    first, last = logged[0]["losses/logcosh"], logged[STEPS]["losses/logcosh"]
    norms = [logged[step]["metrics/enc_norm"] for step in sorted(logged)]
    print(f"  logcosh {first:.4f} -> {last:.4f} over {STEPS} steps ({first / last:.0f}x);"
          f" enc_norm read from {ENC_OUT}: {norms[0]:.3f} -> {norms[-1]:.3f}")
    lesson.check(last * 10 <= first, f"the training loss fell at least 10x over {STEPS} steps")
    lesson.check(all(np.isfinite(norms)) and norms[0] > 0,
                 f"kd.metrics.Norm read the sown value at {ENC_OUT} at every logged step")
    difference = check_against_linen(lesson, trainer, state)
    lesson.fact("logcosh", {"0": first, str(STEPS): last})
    lesson.fact("linen_max_difference", difference)
    return f"NNX MLP: logcosh {first:.4f} -> {last:.4f}; sown enc_out read by a metric; same outputs as the Linen MLP"
