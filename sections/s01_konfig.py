"""A config is a call tree, and a call tree is a dict.

Kauldron experiments are written as configs: Python code that looks like it builds the
optimizer, the model and the data, but only records the calls. The record is a
`ConfigDict`, plain nested data that can be edited, printed, saved as JSON and overridden
from the command line; `konfig.resolve` makes the real calls at the end.
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
from sections.shared import MLP


@section(1, "konfig", "A config is a call tree, and a call tree is a dict", part="glue",
         shows="konfig.imports() records calls as ConfigDicts; edit, JSON round trip, resolve; built objects refused",
         reference="https://kauldron.readthedocs.io/en/latest/konfig.html")
def config_is_a_call_tree(lesson: Lesson) -> str:
    lesson.md("""
    ## Inside `konfig.imports()`, an import is a stand-in

    A config file imports what it names inside `with konfig.imports():`. There, `import
    optax` does not give the optax module but a stand-in (a proxy) whose calls build
    nothing.
    """)
    with konfig.imports():
        import optax as optax_cfg  # named apart from the real optax, used below to compare

    print(optax_cfg)
    lesson.check(not isinstance(optax_cfg, types.ModuleType),
                 "inside konfig.imports(), `import optax` gives a stand-in, not a module")

    lesson.md("""
    ## A call is recorded, not made

    Calling `optax.adam(...)` on the stand-in records the call as a `ConfigDict`: its
    `__qualname__` names the function, and the arguments are its fields.
    """)
    cfg = optax_cfg.adam(learning_rate=0.003)
    print(cfg)
    print(cfg.__qualname__)
    lesson.check(isinstance(cfg, konfig.ConfigDict), "calling optax.adam on the stand-in gives a ConfigDict")
    lesson.check_equal(cfg.__qualname__, "optax:adam", "the recorded call's __qualname__")
    lesson.fact("qualname", cfg.__qualname__)

    lesson.md("""
    ## Edit it, then resolve it

    Until it is resolved, a config is data: set a field and the call changes.
    `konfig.resolve` makes the call and returns a new object; the config stays editable,
    and resolving it again builds anew.
    """)
    cfg.learning_rate = 1e-4
    adam = konfig.resolve(cfg)
    cfg.learning_rate = 0.5
    print(cfg)
    lesson.check(same_updates(adam, optax.adam(1e-4)), "resolve(cfg) updates exactly like optax.adam(learning_rate=1e-4)")
    lesson.check(same_updates(konfig.resolve(cfg), optax.adam(0.5)),
                 "after cfg.learning_rate = 0.5, resolving again builds adam(0.5)")

    lesson.md("""
    ## A whole optimizer is nested dicts, and survives JSON

    However deep the call tree, it is nested dicts: `to_json()` writes it, and a
    `ConfigDict` read back from that JSON resolves to the same optimizer.
    """)
    chain = optax_cfg.chain(
        optax_cfg.clip_by_global_norm(1.0),
        optax_cfg.scale_by_adam(b2=0.99),
        optax_cfg.scale_by_learning_rate(0.003),
    )
    as_json = chain.to_json()
    print(json.dumps(json.loads(as_json), indent=2))
    rebuilt = konfig.resolve(konfig.ConfigDict(json.loads(as_json)))
    direct = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam(b2=0.99),
                         optax.scale_by_learning_rate(0.003))
    lesson.check(same_updates(rebuilt, direct), "the chain rebuilt from JSON updates exactly like one built with optax")

    lesson.md("""
    ## A config holds configs, never built objects

    A `ConfigDict` refuses a real, already-built object such as a Flax module: a config
    must stay a description all the way down, so that it can be written as JSON and
    overridden by flags until it is resolved. Name the model through `konfig.imports()`
    instead, as `configs/regression.py` does.
    """)
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    trainer_cfg = kd_cfg.train.Trainer()
    error = lesson.check_raises(ValueError, lambda: setattr(trainer_cfg, "model", MLP(inputs="batch.x")),
                                "assigning a built Flax module to a ConfigDict field")
    print("ValueError:", str(error).split(" Got:")[0])
    trainer_cfg.model = shared_cfg.MLP(inputs="batch.x", hidden=8)
    print(trainer_cfg.model)
    lesson.check("ConfigDict only accept other configurables" in str(error) and "konfig.imports()" in str(error),
                 "the error says a ConfigDict only accepts configurables, and points to konfig.imports()")
    lesson.check(konfig.resolve(trainer_cfg.model) == MLP(inputs="batch.x", hidden=8),
                 "the model's description resolves to the module MLP(inputs='batch.x', hidden=8)")
    lesson.fact("error", str(error).splitlines()[0])
    return f"{cfg.__qualname__} recorded as data; a chain survived JSON; a built module refused"


def updates_over_steps(transform: optax.GradientTransformation, steps: int = 3) -> list[np.ndarray]:
    """The updates a transform makes over a few steps of a small least-squares problem."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)), jnp.float32)
    y = jnp.asarray(np.random.default_rng(1).normal(size=(8,)) * 10, jnp.float32)
    params, state, found = jnp.zeros(3), transform.init(jnp.zeros(3)), []
    for _ in range(steps):
        grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(params)
        updates, state = transform.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        found.append(np.asarray(updates))
    return found


def same_updates(a: optax.GradientTransformation, b: optax.GradientTransformation) -> bool:
    """Whether two optimizers make exactly the same updates over a few steps."""
    return all(np.array_equal(x, y) for x, y in zip(updates_over_steps(a), updates_over_steps(b)))
