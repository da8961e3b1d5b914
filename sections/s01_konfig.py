"""A config is a call tree, and a call tree is a dict.

Kauldron experiments are written as configs: Python code that looks like it builds the
optimizer, the model and the data, but only records the calls. The record is a
`ConfigDict`, plain nested data that can be edited, printed, saved as JSON and overridden
from the command line; `konfig.resolve` makes the real calls at the end.
"""

import json

import optax
from kauldron import konfig

from harness import Lesson, section
from harness.compare import same


@section(1, "konfig", "A config is a call tree, and a call tree is a dict", part="glue",
         shows="konfig.imports() records calls as ConfigDicts; edit, JSON round trip, resolve; mock_modules in a notebook",
         reference="https://kauldron.readthedocs.io/en/latest/konfig.html")
def config_is_a_call_tree(lesson: Lesson):
    lesson.md("""
    ## Inside `konfig.imports()`, an import is a stand-in

    A config file imports what it names inside `with konfig.imports():`. There, `import
    optax` does not give the optax module but a stand-in (a proxy) whose calls build
    nothing. Here it is named `optax_cfg`, apart from the real `optax` imported above.
    """)
    with konfig.imports():
        import optax as optax_cfg

    print(optax_cfg)
    with lesson.checks():
        lesson.check(not isinstance(optax_cfg, types.ModuleType),
                     "inside konfig.imports(), `import optax` gives a stand-in, not a module")
        lesson.check(isinstance(optax, types.ModuleType), "the optax imported outside it is still the module")

    lesson.md("""
    ## A call is recorded, not made

    Calling `optax.adam(...)` on the stand-in records the call as a `ConfigDict`: its
    `__qualname__` names the function, and the arguments are its fields.
    """)
    cfg = optax_cfg.adam(learning_rate=0.003)
    print(cfg)
    print(cfg.__qualname__)
    with lesson.checks():
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
    print(type(adam).__name__)
    with lesson.checks():
        lesson.check(same_updates(adam, optax.adam(1e-4)), "resolve(cfg) updates exactly like optax.adam(learning_rate=1e-4)")
        lesson.check(same_updates(konfig.resolve(cfg), optax.adam(0.5)),
                     "after cfg.learning_rate = 0.5, resolving again builds adam(0.5)")

    lesson.md("""
    ## A whole optimizer is nested dicts, and survives JSON

    However deep the call tree, it is nested dicts: `to_json()` writes it, and a
    `ConfigDict` read back from that JSON resolves to the same optimizer. optax knows
    nothing of konfig: no base class, no registry, no decorator.
    """)
    chain = optax_cfg.chain(
        optax_cfg.clip_by_global_norm(1.0),
        optax_cfg.scale_by_adam(b2=0.99),
        optax_cfg.scale_by_learning_rate(0.003),
    )
    as_json = chain.to_json()
    print(json.dumps(json.loads(as_json), indent=2))
    rebuilt = konfig.resolve(konfig.ConfigDict(json.loads(as_json)))
    print(type(rebuilt).__name__)
    with lesson.checks():
        direct = optax.chain(optax.clip_by_global_norm(1.0), optax.scale_by_adam(b2=0.99),
                             optax.scale_by_learning_rate(0.003))
        lesson.check(same_updates(rebuilt, direct), "the chain rebuilt from JSON updates exactly like one built with optax")

    lesson.md("""
    ## In a notebook, `konfig.mock_modules()` instead

    Kauldron's own advice ([konfig principles, Colab](https://kauldron.readthedocs.io/en/latest/konfig_philosophy.html#colab)):
    never use `konfig.imports()` on Colab, where regular imports and stand-ins are easily
    mixed up; mock the modules locally with `konfig.mock_modules()`. Inside its `with`
    block, every module the notebook imported (`konfig` aside) is a stand-in, so calls
    are recorded; after it, the same names are the real modules again. (It is also what
    Kauldron's error says when a built object is put in a config: section 8.)
    """)
    with konfig.mock_modules():
        adam_cfg = optax.adam(learning_rate=1e-5)  # a ConfigDict
    optimizer = optax.adam(learning_rate=1e-5)  # the real optax again
    print(adam_cfg)
    print(type(optimizer).__name__)
    with lesson.checks():
        lesson.check(isinstance(adam_cfg, konfig.ConfigDict) and adam_cfg.__qualname__ == "optax:adam",
                     "inside konfig.mock_modules(), optax.adam(...) records the call as a ConfigDict")
        lesson.check(isinstance(optax, types.ModuleType) and same_updates(optimizer, konfig.resolve(adam_cfg)),
                     "after the block optax is the module again, and its adam updates like the recorded one resolved")
        module_type = types.ModuleType  # `types` too is a stand-in inside the block
        with konfig.mock_modules():
            mocked = {"json": isinstance(json, module_type), "konfig": isinstance(konfig, module_type)}
        lesson.check_equal(mocked, {"json": False, "konfig": True},
                           "inside the block, which names are still modules: every module but konfig is a stand-in")
        lesson.check("interactive environments" in konfig.mock_modules.__doc__
                     and "konfig.imports()" in konfig.mock_modules.__doc__,
                     "konfig.mock_modules's docstring: meant for interactive environments, where konfig.imports()"
                     " would be inconvenient", internal="reads Kauldron's docstring")
        lesson.summary = f"{cfg.__qualname__} recorded as data; a chain survived JSON; mock_modules recorded optax.adam"


import types

import jax
import jax.numpy as jnp
import numpy as np


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
    return same(updates_over_steps(a), updates_over_steps(b))

