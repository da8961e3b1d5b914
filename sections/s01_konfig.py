"""A config is a call tree, and a call tree is a dict.

Inside `konfig.imports()`, `import optax` does not give the optax module: it gives a
stand-in (a proxy). Calling `optax.adam(...)` on it builds nothing; it records the call
as a `ConfigDict` whose `__qualname__` names the function. The record can be edited,
serialised to JSON and read back. `konfig.resolve` makes the real calls and returns a
new object; the config itself stays editable, and resolving it again builds anew.
"""

import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
from kauldron import konfig

from sections.lesson import Lesson
from sections.registry import section


def updates_over_steps(transform: optax.GradientTransformation, steps: int = 3) -> list[np.ndarray]:
    """The updates a transform makes over a few steps of a small least-squares problem."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)), jnp.float32)
    y = jnp.asarray(np.random.default_rng(1).normal(size=(8,)) * 10, jnp.float32)
    params = jnp.zeros(3)
    state = transform.init(params)
    out = []
    for _ in range(steps):
        grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(params)
        updates, state = transform.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append(np.asarray(updates))
    return out


def same_updates(a: optax.GradientTransformation, b: optax.GradientTransformation) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(updates_over_steps(a), updates_over_steps(b)))


@section(1, "konfig", "A config is a call tree, and a call tree is a dict",
         shows="konfig.imports() records calls as ConfigDicts; edit, JSON round trip, konfig.resolve")
def config_is_a_call_tree(lesson: Lesson) -> str:
    with konfig.imports():
        import optax as optax_cfg  # a proxy, not the module: its calls build ConfigDicts

    print(f"  inside konfig.imports(): optax is {optax_cfg!r}, not the module")
    lesson.check(not isinstance(optax_cfg, types.ModuleType) and optax_cfg is not optax,
                 "inside konfig.imports(), `import optax` gives a stand-in, not the optax module")

    cfg = optax_cfg.adam(learning_rate=0.003)
    print(f"  cfg = optax.adam(learning_rate=0.003) -> {cfg}")
    print(f"  cfg.__qualname__ = {cfg.__qualname__!r}   <- the call, stored as data")
    lesson.check(isinstance(cfg, konfig.ConfigDict), "calling optax.adam on the stand-in gives a ConfigDict")
    lesson.check_equal(cfg.__qualname__, "optax:adam", "the recorded call's __qualname__")
    lesson.fact("qualname", cfg.__qualname__)

    cfg.learning_rate = 1e-4  # edit the record...
    adam = konfig.resolve(cfg)  # ...then make the call
    print(f"\n  cfg.learning_rate = 1e-4; konfig.resolve(cfg) -> {type(adam).__name__}, which updates"
          "\n  exactly like optax.adam(learning_rate=1e-4): the edit took effect")
    lesson.check(same_updates(adam, optax.adam(1e-4)),
                 "resolve(cfg) updates exactly like optax.adam(learning_rate=1e-4)")

    cfg.learning_rate = 0.5  # the config is still editable after resolve()...
    print("  cfg.learning_rate = 0.5 after resolving: the config is still editable; the optimizer"
          "\n  resolved before keeps 1e-4, and resolving again builds adam(0.5)")
    lesson.check(same_updates(adam, optax.adam(1e-4)), "the optimizer resolved earlier keeps learning_rate=1e-4")
    lesson.check(same_updates(konfig.resolve(cfg), optax.adam(0.5)), "resolving the edited config builds adam(0.5)")

    chain = optax_cfg.chain(
        optax_cfg.clip_by_global_norm(1.0),
        optax_cfg.scale_by_adam(b2=0.99),
        optax_cfg.scale_by_learning_rate(0.003),
    )
    as_dict = json.loads(chain.to_json())
    print("\n  A three-part optimizer is still nested dicts (chain.to_json()):")
    print("    " + json.dumps(as_dict, indent=2).replace("\n", "\n    "))
    lesson.check_equal([as_dict["__qualname__"]] + [as_dict[str(i)]["__qualname__"] for i in range(3)],
                       ["optax:chain", "optax:clip_by_global_norm", "optax:scale_by_adam",
                        "optax:scale_by_learning_rate"], "the qualnames in chain.to_json()")

    rebuilt = konfig.resolve(konfig.ConfigDict(as_dict))
    direct = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam(b2=0.99),
                         optax.scale_by_learning_rate(0.003))
    lesson.check(same_updates(rebuilt, direct),
                 "the chain rebuilt from JSON updates exactly like one built directly with optax")
    print(f"\n  JSON -> ConfigDict -> resolve() -> {type(rebuilt).__name__}; over 3 steps on real"
          " gradients\n  its updates equal those of the chain built directly with optax.")
    return f"{cfg.__qualname__} recorded as data; the chain survived JSON and updates like optax's own"
