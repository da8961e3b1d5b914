"""A config is a call tree, and a call tree is a dict.

Kauldron experiments are written as configs: Python code that looks like it builds the
optimizer, the model and the data, but only records the calls. The record is a
`ConfigDict`, plain nested data that can be edited, printed, saved as JSON and overridden
from the command line; `konfig.resolve` makes the real calls at the end.
"""

import json

import optax
from kauldron import konfig
from optax import sgd

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
    After the block, an import gives the real module again.
    """)
    with konfig.imports():
        import optax as optax_cfg

    print(optax_cfg)
    with lesson.checks():
        lesson.check(not isinstance(optax_cfg, types.ModuleType),
                     "inside konfig.imports(), `import optax` gives a stand-in, not a module")
        import optax as again

        lesson.check(isinstance(again, types.ModuleType) and not isinstance(again.adam(1e-3), konfig.ConfigDict),
                     "after the block, `import optax` gives the module, whose adam builds an optimizer: no stand-in left")

    lesson.md("""
    ## A call is recorded, not made

    Calling `optax.adam(...)` on the stand-in records the call as a `ConfigDict`: its
    `__qualname__` names the function, and the arguments are its fields. An attribute of
    a stand-in is a stand-in, and recorded calls nest (`f(g())`, below), but arithmetic
    does not record: with `numpy` imported in the block, `np.pi * 2` raises `TypeError`.
    """)
    cfg = optax_cfg.adam(learning_rate=0.003)
    print(cfg)
    print(cfg.__qualname__)
    with lesson.checks():
        lesson.check(isinstance(cfg, konfig.ConfigDict), "calling optax.adam on the stand-in gives a ConfigDict")
        lesson.check_equal(cfg.__qualname__, "optax:adam", "the recorded call's __qualname__")
        lesson.check_equal(dict(cfg), {"__qualname__": "optax:adam", "learning_rate": 0.003},
                           "the ConfigDict's fields: the function, and the keyword argument as a field")
        lesson.check(type(optax_cfg.adam) is type(optax_cfg) and type(optax_cfg.schedules.join_schedules) is type(optax_cfg),
                     "optax_cfg.adam and optax_cfg.schedules.join_schedules are stand-ins, of the module's stand-in's type")
        with konfig.imports():
            import numpy as np_cfg

        lesson.check_raises(TypeError, lambda: np_cfg.pi * 2, "np.pi * 2 with numpy imported inside konfig.imports()")
        lesson.fact("qualname", cfg.__qualname__)

    lesson.md("""
    ## Edit it, then resolve it

    Until it is resolved, a config is data: set a field and the call changes. A field
    keeps the type it was given, though: `learning_rate`, given a float, refuses a
    schedule's config with `TypeError`; set it to `None` first, then to the schedule.
    `konfig.resolve` makes the call and returns a new object; the config stays editable,
    and resolving it again builds anew. By default it also freezes the config's
    containers: a list becomes a tuple, a dict an immutable one (`freeze=False` keeps
    them).
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
        import operator

        nested = konfig.ConfigDict({"sizes": [1, 2], "options": {"a": 1}})
        frozen, kept = konfig.resolve(nested), konfig.resolve(nested, freeze=False)
        lesson.check_equal(type(frozen["sizes"]), tuple, "a list in a config, resolved: a tuple")
        lesson.check_raises(TypeError, lambda: operator.setitem(frozen["options"], "a", 2),
                            "setting a key of a dict in a config, resolved")
        lesson.check_equal((type(kept["sizes"]), type(kept["options"])), (list, dict),
                           "resolved with freeze=False: a plain list and a plain dict")
        typed = optax_cfg.adam(learning_rate=0.003)
        refused = lesson.check_raises(TypeError, lambda: setattr(typed, "learning_rate", optax_cfg.linear_schedule(
            0.1, 0.0, 10)), "setting a config's float field to a schedule's config")
        lesson.check("cannot be casted to type <class 'float'>" in str(refused), "the error: it cannot be cast to a float")
        typed.learning_rate = None
        typed.learning_rate = optax_cfg.linear_schedule(0.1, 0.0, 10)
        lesson.check(same_updates(konfig.resolve(typed), optax.adam(optax.linear_schedule(0.1, 0.0, 10)))
                     and not same_updates(konfig.resolve(typed), optax.adam(0.1)),
                     "set to None first, the field takes the schedule: it resolves to adam(linear_schedule(0.1, 0, 10)),"
                     " not adam(0.1)")

    lesson.md("""
    ## A whole optimizer is nested dicts, and JSON holds it

    However deep the call tree, it is nested dicts: `to_json()` writes it, as long as
    every value is one JSON has (a tuple comes back a list; a slice is refused with
    `TypeError`), and a `ConfigDict` read back from that JSON resolves to the same
    optimizer. optax itself
    knows nothing of konfig.
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
        lesson.check_equal(json.loads(konfig.ConfigDict({"pair": (1, 2)}).to_json()), {"pair": [1, 2]},
                           "a tuple, written by to_json() and read back")
        lesson.check_raises(TypeError, konfig.ConfigDict({"rows": slice(1, 2)}).to_json, "to_json() of a slice")
        lesson.check_equal(files_naming(optax, ("konfig", "kauldron")), [], "the files of the optax package that name"
                           " konfig or kauldron", internal="reads optax's source")

    lesson.md("""
    ## JSON writes a reference as its value

    A field can refer to another with `cfg.ref` (section 2). `to_json()` writes the
    reference as the value it points to then: read back, the field is a plain number, and
    an edit to the field it referred to no longer reaches it. A run's `config.json` is
    written by the same `to_json()` (sections 2 and 10 read one).
    """)
    run = konfig.ConfigDict({"num_train_steps": 1000})
    run.schedule = optax_cfg.cosine_decay_schedule(init_value=0.003, decay_steps=run.ref.num_train_steps)
    read_back = konfig.ConfigDict(json.loads(run.to_json()))
    run.num_train_steps = read_back.num_train_steps = 200
    print(run.schedule.decay_steps, read_back.schedule.decay_steps)
    with lesson.checks():
        lesson.check_equal(json.loads(run.to_json())["schedule"]["decay_steps"], 200,
                           "decay_steps in to_json() after the edit: the reference written as its value then")
        lesson.check_equal((run.schedule.decay_steps, read_back.schedule.decay_steps), (200, 1000),
                           "decay_steps after num_train_steps = 200: the reference follows, the JSON's copy keeps 1000")
        lesson.check("config_path.write_text(config.to_json())" in kauldron_source("train/metric_writer.py"),
                     "Kauldron's writer writes config.json with config.to_json()", internal="reads Kauldron's source")

    lesson.md("""
    ## In a notebook, `konfig.mock_modules()` instead

    Kauldron's own advice ([konfig principles, Colab](https://kauldron.readthedocs.io/en/latest/konfig_philosophy.html#colab)):
    never use `konfig.imports()` on Colab, where regular imports and stand-ins are easily
    mixed up; mock the modules locally with `konfig.mock_modules()`. These pages are
    notebook programs and still use `konfig.imports()`: at the top, with stand-ins
    under names of their own (`optax_cfg`). The mix-up is a stand-in under a module's own
    name: `import optax` inside the block makes `optax` a stand-in for every later cell.
    A second hazard is Kauldron's own (1.4.2 and 1.4.4): the block replaces the import
    function of the whole process, every thread's, and puts back what it found at its
    end. A Jupyter kernel imports on a thread of its own while a cell runs (ipykernel 7
    handles messages there, and pyzmq imports on socket events): that thread gets a
    stand-in, and can leave the replacement in place for good; the kernel then hangs, at
    full CPU (seen once in the tests of these pages). `tutorial.py`, and the warm kernels
    its tests run these pages in, confine the block to its own thread
    (`compat/konfig_imports.py`; the header reports it). A kernel you start yourself does
    not: in it, run `import compat; compat.install_all()` at the repository root first,
    or use `konfig.mock_modules()`, which replaces no import function.

    Inside `mock_modules()`'s `with` block, every name of the notebook (the caller's
    globals and locals) bound to a module is a stand-in, except the names `konfig` and
    `ecolab` (`konfig` imported as `kf` is swapped). Calls through them are recorded, not
    run: `np.zeros(2)` too, and those a function defined in the notebook makes. After the
    block, the same names are the real modules again. A name bound to a function or a
    class (`from optax import sgd`) stays real, and a function imported from another file
    keeps its real modules. (It is also what Kauldron's error says when a built object is
    put in a config: section 8.)
    """)
    with konfig.mock_modules():
        adam_cfg = optax.adam(learning_rate=1e-5)  # a ConfigDict
        sgd_built = sgd(learning_rate=1e-5)  # a function's name: not swapped
    optimizer = optax.adam(learning_rate=1e-5)  # the real optax again
    print(adam_cfg)
    print(type(sgd_built).__name__, type(optimizer).__name__)
    with lesson.checks():
        namespace = {}
        exec("import optax\nfrom kauldron import konfig\nwith konfig.imports():\n    import optax\n", namespace)
        lesson.check(not isinstance(namespace["optax"], types.ModuleType),
                     "after `import optax` inside konfig.imports(), the name optax is a stand-in")
        lesson.check(not isinstance(sgd_built, konfig.ConfigDict) and same_updates(sgd_built, optax.sgd(1e-5)),
                     "inside konfig.mock_modules(), sgd imported by name builds the real optax.sgd(1e-5)")
        lesson.check(isinstance(adam_cfg, konfig.ConfigDict) and adam_cfg.__qualname__ == "optax:adam",
                     "inside konfig.mock_modules(), optax.adam(...) records the call as a ConfigDict")
        lesson.check(isinstance(optax, types.ModuleType) and same_updates(optimizer, konfig.resolve(adam_cfg)),
                     "after the block optax is the module again, and its adam updates like the recorded one resolved")
        from kauldron import konfig as kf

        ecolab = json  # a module under the name ecolab
        module_type, config_dict = types.ModuleType, konfig.ConfigDict  # `types` too is a stand-in in the block
        arrays = np.arange(3.0)

        def ones_in_notebook():  # defined here: it reads the names mock_modules swaps
            return np.ones(3)

        with konfig.mock_modules():
            mocked = {name: isinstance(module, module_type)
                      for name, module in {"json": json, "konfig": konfig, "kf": kf, "ecolab": ecolab}.items()}
            recorded = [np.zeros(2), ones_in_notebook()]
            elsewhere = same(arrays, arrays)  # harness.compare.same: np.array_equal in another file
        lesson.check_equal(mocked, {"json": False, "konfig": True, "kf": False, "ecolab": True},
                           "inside the block, which names are still modules: by name, konfig and ecolab (json under"
                           " that name); not konfig as kf")
        lesson.check(all(isinstance(value, config_dict) for value in recorded),
                     "inside the block, np.zeros(2) and a function defined here calling np.ones(3) give ConfigDicts")
        lesson.check(elsewhere is True, "inside the block, a function imported from another file runs with its real np")
        check_imports_of_other_threads(lesson)
        lesson.summary = (f"{cfg.__qualname__} recorded as data; a chain rebuilt from JSON; a reference written"
                          " as its value; mock_modules recorded optax.adam")


import pathlib
import types

import jax.numpy as jnp
import numpy as np


def check_imports_of_other_threads(lesson: Lesson) -> None:
    """What an import on another thread gets while Kauldron's own konfig.imports() block
    runs (its import function, given one that records who calls it and imports for real)."""
    import builtins
    import contextlib
    import inspect
    import threading

    from kauldron.konfig import fake_import_utils

    kauldrons = contextlib.contextmanager(inspect.unwrap(fake_import_utils._fake_imports))  # under compat's fix
    real, callers, inside = builtins.__import__, set(), threading.Event()

    def recording(*args, **kwargs):
        callers.add(threading.get_ident())
        return real(*args, **kwargs)

    def elsewhere():
        if inside.wait(10):
            __import__("json")  # as `import json` does

    thread = threading.Thread(target=elsewhere)
    thread.start()
    with kauldrons(new_import=recording):
        inside.set()
        thread.join(10)
    lesson.check(thread.ident in callers and builtins.__import__ is real,
                 "while Kauldron's own konfig.imports() block runs on one thread, an import on another goes through"
                 " the block's import function (the day Kauldron confines it to its thread, this fails)",
                 internal="a private function of Kauldron, fake_import_utils._fake_imports")


def updates_over_steps(transform: optax.GradientTransformation, steps: int = 3) -> list[np.ndarray]:
    """The updates a transform makes over a few steps of a small least-squares problem."""
    x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    y = (np.random.default_rng(1).normal(size=(8,)) * 10).astype(np.float32)
    params, state, found = jnp.zeros(3), transform.init(jnp.zeros(3)), []
    for _ in range(steps):
        grads = jnp.asarray(x.T @ (x @ np.asarray(params) - y) / 4)  # of mean((x @ w - y) ** 2), by hand
        updates, state = transform.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        found.append(np.asarray(updates))
    return found


def same_updates(a: optax.GradientTransformation, b: optax.GradientTransformation) -> bool:
    """Whether two optimizers make exactly the same updates over a few steps."""
    return same(updates_over_steps(a), updates_over_steps(b))


def files_naming(package: types.ModuleType, words: tuple[str, ...]) -> list[str]:
    """The Python files of a package whose text names any of `words`."""
    root = pathlib.Path(package.__file__).parent
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                  if any(word in path.read_text(errors="replace") for word in words))


def kauldron_source(relative: str) -> str:
    """The text of a file of the installed kauldron package."""
    return (pathlib.Path(konfig.__file__).parent.parent / relative).read_text()

