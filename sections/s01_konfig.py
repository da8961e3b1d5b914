"""A config is a call tree, and a call tree is a dict.

Inside `konfig.imports()`, `import optax` gives a stand-in: calling `optax.adam(...)`
does not build an optimizer, it records the call as a `ConfigDict` whose `__qualname__`
names the function. The record can be edited, serialised to JSON and read back, and
`konfig.resolve` finally makes the real calls. optax knows nothing of konfig: no base
class, no registry, no decorator.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from kauldron import konfig

from sections.registry import Lesson, section


def _updates(transform: optax.GradientTransformation, steps: int = 3) -> list[np.ndarray]:
    """The updates a transform makes over a few steps of a small least-squares problem."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)), jnp.float32)
    y = jnp.asarray(np.random.default_rng(1).normal(size=(8,)) * 10, jnp.float32)
    params = jnp.zeros(3)
    loss = lambda w: jnp.mean((x @ w - y) ** 2)  # noqa: E731
    state = transform.init(params)
    out = []
    for _ in range(steps):
        updates, state = transform.update(jax.grad(loss)(params), state, params)
        params = optax.apply_updates(params, updates)
        out.append(np.asarray(updates))
    return out


@section(1, "konfig", "A config is a call tree, and a call tree is a dict")
def lesson(lesson: Lesson) -> str:
    with konfig.imports():
        import optax as optax_cfg  # same module, but calls now build ConfigDicts

    cfg = optax_cfg.adam(learning_rate=0.003)
    print(f"  cfg            = {cfg}")
    print(f"  type(cfg)      = {type(cfg).__name__}")
    print(f"  __qualname__   = {cfg.__qualname__!r}   <- the call, stored as data")
    lesson.check(isinstance(cfg, konfig.ConfigDict), "optax_cfg.adam(...) is a ConfigDict")
    lesson.check_equal(cfg.__qualname__, "optax:adam", "the recorded call")
    lesson.fact("qualname", cfg.__qualname__)

    cfg.learning_rate = 1e-4  # a config is mutable...
    adam = konfig.resolve(cfg)  # ...until resolve() makes the call
    print(f"\n  cfg.learning_rate = 1e-4; konfig.resolve(cfg) -> {type(adam).__name__}")
    same = all(
        np.array_equal(a, b) for a, b in zip(_updates(adam), _updates(optax.adam(1e-4)))
    )
    lesson.check(same, "resolve(cfg) updates exactly like optax.adam(learning_rate=1e-4)")
    print("  its updates equal those of optax.adam(learning_rate=1e-4): the edit took effect")

    chain = optax_cfg.chain(
        optax_cfg.clip_by_global_norm(1.0),
        optax_cfg.scale_by_adam(b2=0.99),
        optax_cfg.scale_by_learning_rate(0.003),
    )
    as_dict = json.loads(chain.to_json())
    print("\n  A three-part optimizer is still nested dicts (chain.to_json()):")
    print("    " + json.dumps(as_dict, indent=2).replace("\n", "\n    "))
    lesson.check_equal(
        [as_dict["__qualname__"]] + [as_dict[str(i)]["__qualname__"] for i in range(3)],
        ["optax:chain", "optax:clip_by_global_norm", "optax:scale_by_adam",
         "optax:scale_by_learning_rate"],
        "the qualnames in chain.to_json()",
    )

    rebuilt = konfig.resolve(konfig.ConfigDict(as_dict))
    direct = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.scale_by_adam(b2=0.99),
        optax.scale_by_learning_rate(0.003),
    )
    diffs = [float(np.max(np.abs(a - b))) for a, b in zip(_updates(rebuilt), _updates(direct))]
    lesson.check(max(diffs) == 0.0, "the rebuilt chain's updates equal the directly built one's")
    lesson.fact("chain_steps_compared", len(diffs))
    lesson.fact("chain_max_update_difference", max(diffs))
    print(
        f"\n  JSON -> ConfigDict -> resolve() -> {type(rebuilt).__name__}; over {len(diffs)} steps"
        f" on real gradients its updates equal the directly built chain's (max diff {max(diffs)})."
    )
    return (
        f"{cfg.__qualname__} recorded as data; optax.chain survived JSON and updated "
        f"identically over {len(diffs)} steps"
    )
