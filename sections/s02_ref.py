"""`cfg.ref`: change one number, and everything that refers to it follows.

A config often repeats a number: a learning-rate schedule ends with the run, so it
needs `num_train_steps`. Typed in twice, the two copies drift apart the first time
someone changes one of them, as a sweep over the run length does. `cfg.ref` writes a
reference instead: it is resolved when the config is, from whatever the field holds then.
"""

import json

import matplotlib.pyplot as plt
import numpy as np
from kauldron import konfig

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.logs import read_scalars

with konfig.imports():
    import optax as optax_cfg

    from sections.parts import regression as regression_cfg


@section(2, "ref", "cfg.ref: change one number, everything downstream follows", part="glue", trains=True,
         shows="a schedule that refers to num_train_steps follows an edit, a copy does not; the Trainer uses and logs it",
         reference="https://kauldron.readthedocs.io/en/latest/intro.html#config-references")
def references_follow_edits(lesson: Lesson, workdir):
    lesson.md("""
    ## A reference, not a copy

    The regression experiment (`configs/regression.py`) gets a warmup-cosine schedule in
    `cfg.schedules`: 100 warmup steps to a peak of 1e-3, then a cosine decay that ends at
    step `decay_steps`, here `cfg.ref.num_train_steps`, a reference. Read back, a
    reference gives the value it points to now.
    """)
    cfg = regression_config.get_config()
    cfg.num_train_steps = 1000
    cfg.schedules = {"lr": optax_cfg.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1e-3, warmup_steps=100,
        decay_steps=cfg.ref.num_train_steps)}  # a reference, not the value 1000
    print(cfg.schedules["lr"].decay_steps)
    at_1000 = konfig.resolve(cfg.schedules["lr"])
    with lesson.checks():
        lesson.check(same_schedule(at_1000, optax_schedule(1000), 1000),
                     "the referring schedule resolves to optax's schedule with decay_steps=1000")

    lesson.md("""
    ## One edit, and the schedule follows

    Shorten the run to 200 steps and resolve the same schedule again: its decay now ends
    at step 200. Only the reference followed: `warmup_steps` is still the literal 100, half
    of the short run, so at the same fraction of each run the two schedules are at
    different points (at 10%, the short run is still warming up).
    """)
    cfg.num_train_steps = 200
    at_200 = konfig.resolve(cfg.schedules["lr"])
    print("progress  lr, 1000 steps  lr, 200 steps")
    for fraction in (0.1, 0.5, 0.9):
        print(f"{fraction:>8.0%}  {float(at_1000(int(1000 * fraction))):14.6f}  {float(at_200(int(200 * fraction))):13.6f}")
    with lesson.checks():
        lesson.check(same_schedule(at_200, optax_schedule(200), 200),
                     "after the edit, the referring schedule resolves to optax's schedule with decay_steps=200")
        lesson.check_equal((cfg.schedules["lr"].decay_steps, cfg.schedules["lr"].warmup_steps), (200, 100),
                           "decay_steps and warmup_steps read back after the edit: the reference follows, the literal stays")

    lesson.md("""
    ## A floor at the end: edit the recorded call

    The schedule decays to 0 at step 200, and a 200-step run updates at step 200 too (the
    last step shows it): its last update would have learning rate 0. optax's `end_value`
    sets a floor. The schedule is a recorded call: setting a field it
    never had adds the argument, and the reference stays a reference.
    """)
    cfg.schedules["lr"].end_value = 1e-5
    print(cfg.schedules["lr"])
    with lesson.checks():
        lesson.check_close(float(konfig.resolve(cfg.schedules["lr"])(200)), 1e-5, "with end_value=1e-5, at step 200")
        cfg.num_train_steps = 300
        lesson.check_equal(cfg.schedules["lr"].decay_steps, 300, "after the edit, decay_steps with num_train_steps=300")
        cfg.num_train_steps = 200

    lesson.md("""
    ## A copy does not follow

    Beside it, the same schedule with the number typed in: `decay_steps=1000`. At 90% of
    the 200-step run, the reference is near its end, and the copy still near its peak: its
    decay ends at step 1000, five times this run's length.
    """)
    cfg.schedules["lr_copy"] = optax_cfg.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1e-3, warmup_steps=100, decay_steps=1000, end_value=1e-5)
    reference, copy = konfig.resolve(cfg.schedules["lr"]), konfig.resolve(cfg.schedules["lr_copy"])
    print(f"lr at step 180: reference {float(reference(180)):.6f}, copy {float(copy(180)):.6f}")
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    for label, schedule, steps in [("reference, num_train_steps=1000", at_1000, 1000),
                                   ("reference, num_train_steps=200", at_200, 200),
                                   ("copy of 1000, run of 200", copy, 200)]:
        ax.plot(np.arange(steps + 1), schedule(np.arange(steps + 1)), label=label)
    ax.set(title="A reference follows num_train_steps; a copy does not", xlabel="step", ylabel="learning rate")
    ax.legend()
    plt.show()
    with lesson.checks():
        lesson.check(float(copy(180)) > 0.9 * 1e-3, "at step 180 of 200 the copy is still within 10% of its peak")
        lesson.check(float(reference(180)) < 0.11 * 1e-3, "and the reference is below 11% of it")
        lesson.fact("lr_at_step_180", {"reference": float(reference(180)), "copy": float(copy(180))})

    lesson.md("""
    ## References do arithmetic

    `warmup_steps` can follow the run length too, through a reference computed with:
    `cfg.ref.num_train_steps // 10` is a tenth of whatever the run length is when the
    config is read. Operators make references; built-ins that need a value refuse them:
    `int(cfg.ref.num_train_steps)` raises `TypeError`, and
    `max(cfg.ref.num_train_steps, 5)` raises `NotImplementedError`, as a reference
    "cannot be used for control flow".
    """)
    cfg.schedules["lr"].warmup_steps = cfg.ref.num_train_steps // 10
    print(cfg.schedules["lr"].warmup_steps)
    cfg.num_train_steps = 1000
    print(cfg.schedules["lr"].warmup_steps)
    cfg.num_train_steps = 200
    with lesson.checks():
        lesson.check_equal(cfg.schedules["lr"].warmup_steps, 20, "warmup_steps, read back with num_train_steps=200")
        cfg.num_train_steps = 1000
        lesson.check_equal(cfg.schedules["lr"].warmup_steps, 100, "warmup_steps, read back with num_train_steps=1000")
        cfg.num_train_steps = 200
        lesson.check_raises(TypeError, lambda: int(cfg.ref.num_train_steps), "int(cfg.ref.num_train_steps)")
        refused = lesson.check_raises(NotImplementedError, lambda: max(cfg.ref.num_train_steps, 5),
                                      "max(cfg.ref.num_train_steps, 5)")
        lesson.check("cannot be used for control flow" in str(refused), "its message: a reference cannot be used for control flow")

    lesson.md("""
    ## The Trainer logs every schedule, and uses the one referred to

    `train()` logs every entry of `cfg.schedules` beside the metrics, as
    `schedules/<name>`, at each logging step. Here the optimizer's `learning_rate` refers
    to `lr`, and it steps with `lr`: `lr_copy`, which nothing refers to, is logged and
    unused. `adam_recording_lr` (in `sections/parts/regression.py`)
    keeps the rate of its latest update in the optimizer's state. A run of
    `num_train_steps=200` makes 201 updates, at steps 0 to 200: `state.step` ends at 201.
    `train()` also writes the config to the workdir's `config.json` with `to_json()`:
    there, the references are plain numbers.

    On a TPU or GPU, PyPI's Kauldron (1.4.2 and 1.4.4) can fail here, rarely. `train()`
    runs its loop under `jax.transfer_guard("disallow")`, and its metric writer hands each
    schedule's value on unconverted (for optax's schedules, a jax array on the
    accelerator) to the two writers that read it: a log writer that formats it in a thread
    of its own, and the TensorBoard writer, which converts it inside the guarded loop.
    Unless the other thread has already fetched it (jax keeps the host copy of an array
    it has fetched), the guard refuses that transfer: `Disallowed device-to-host
    transfer`. Losses and metrics reach the writers as numpy. `tutorial.py` converts
    schedules' values too (`compat/kauldron_schedules.py`; its header reports it); in a
    notebook at the repository root, `import compat; compat.install_all()` does the same.
    """)
    cfg.optimizer = regression_cfg.adam_recording_lr(learning_rate=cfg.ref.schedules["lr"])
    cfg.workdir = str(workdir / "run")
    state, _ = konfig.resolve(cfg).train()
    logged = read_scalars(workdir / "run", "train")
    last_update = float(state.opt_state.hyperparams["learning_rate"])
    print(sorted(tag for tag in logged[200] if tag.startswith("schedules/")))
    print({step: round(logged[step]["schedules/lr"], 6) for step in (0, 20, 100, 200)})
    print(f"learning rate of the last update: {last_update:.6g}")
    print("state.step:", int(state.step))
    written = json.loads((workdir / "run" / "config.json").read_text())["schedules"]["lr"]
    print("config.json:", {key: written[key] for key in ("warmup_steps", "decay_steps")})
    with lesson.checks():
        lesson.check_equal(int(state.step), 201, "state.step after train() with num_train_steps=200: 201 updates")
        schedule = optax_schedule(200, warmup_steps=20, end_value=1e-5)
        lesson.check(all(abs(row["schedules/lr"] - float(schedule(step))) <= 1e-6 * float(schedule(step))
                         for step, row in logged.items()) and sorted(logged) == list(range(0, 201, 10)),
                     "schedules/lr logged every 10 steps from 0 to 200 = optax's 200-step schedule, 20 warmup steps, end 1e-5")
        lesson.check(all(abs(row["schedules/lr_copy"] - float(copy(step))) <= 1e-6 * float(copy(step))
                         for step, row in logged.items()),
                     "schedules/lr_copy, which nothing refers to, logged too at every logging step: the 1000-step copy")
        lesson.check_close(last_update, float(schedule(200)),
                           "the learning rate of the optimizer's last update: lr's end value, not lr_copy's"
                           f" ({float(copy(200)):.3g})")
        lesson.check_equal(json.loads((workdir / "run" / "config.json").read_text()), json.loads(cfg.to_json()),
                           "config.json = the config's to_json()")
        lesson.check_equal((written["warmup_steps"], written["decay_steps"]), (20, 200),
                           "lr's warmup_steps and decay_steps in config.json: the references' values, as numbers")
        check_schedule_values_handed_over(lesson, konfig.resolve(cfg.schedules["lr"]))
        lesson.fact("optimizer_lr_last_update", last_update)
        lesson.summary = (f"at step 180 of 200, lr {float(reference(180)):.6f} by reference, {float(copy(180)):.6f}"
                          f" by copy; the optimizer's last update at {last_update:.3g}; lr_copy logged, unused")


import optax  # noqa: E402 - the checks' own


def optax_schedule(decay_steps: int, warmup_steps: int = 100, end_value: float = 0.0):
    """The schedule built directly with optax, to compare with."""
    return optax.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps, decay_steps, end_value=end_value)


def check_schedule_values_handed_over(lesson: Lesson, schedule) -> None:
    """What Kauldron's metric writer hands its writers: a schedule's value unconverted, a
    metric's as numpy; and what the loop's transfer guard does with the first, here."""
    import inspect

    import jax
    from kauldron.train import auxiliaries, metric_writer

    kauldrons = inspect.unwrap(metric_writer._compute_schedule)  # Kauldron's own, under compat's fix
    handed = kauldrons(schedule, 180)
    lesson.check(isinstance(handed, jax.Array), "Kauldron's own metric_writer._compute_schedule (what compat wraps) returns"
                 " lr's value at step 180 as a jax array, unconverted", internal="a private function of Kauldron")

    class Computed:  # a metric's state whose value is a jax array
        def compute(self):
            return jax.numpy.float32(0.5)

    lesson.check(type(auxiliaries._compute_metric((), Computed())) is np.ndarray,
                 "a loss's or metric's value computed as a jax array reaches the writers as numpy",
                 internal="a private function of Kauldron, auxiliaries._compute_metric")

    def convert_under_the_guard():
        with jax.transfer_guard("disallow"):
            return np.asarray(handed)

    if jax.default_backend() == "cpu":
        lesson.check(convert_under_the_guard() == np.float32(handed),
                     "on a CPU, transfer_guard('disallow') lets that value be converted to numpy")
    else:
        try:
            convert_under_the_guard()
            refused = "nothing"
        except jax.errors.JaxRuntimeError as error:
            refused = str(error)
        lesson.check("Disallowed device-to-host transfer" in refused,
                     f"on a {jax.default_backend().upper()}, converting that value under transfer_guard('disallow')"
                     " raises JaxRuntimeError: Disallowed device-to-host transfer")


def same_schedule(a, b, steps: int) -> bool:
    """Whether two schedules agree at every step of a run (optax schedules take arrays)."""
    return np.allclose(a(np.arange(steps + 1)), b(np.arange(steps + 1)), rtol=1e-6)
