"""`cfg.ref`: change one number, and everything that refers to it follows.

A config often repeats a number: a learning-rate schedule decays over the run's length,
so it needs `num_train_steps`. Typed in twice, the two copies drift apart the first time
someone changes one of them, as a sweep over the run length does. `cfg.ref` writes a
reference instead: it is resolved when the config is, from whatever the field holds then.
"""

import numpy as np
import optax
from kauldron import konfig

from configs import regression
from sections.figures import plot_schedules
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import event_files, read_scalars

with konfig.imports():
    import optax as optax_cfg

    from sections import shared as shared_cfg

PEAK_LR, END_LR, WARMUP_STEPS = 1e-3, 1e-5, 100


@section(2, "ref", "cfg.ref: change one number, everything downstream follows", part="glue", trains=True,
         shows="a schedule that refers to num_train_steps follows an edit, a copy does not; the Trainer uses and logs it",
         reference="https://kauldron.readthedocs.io/en/latest/intro.html#config-references")
def references_follow_edits(lesson: Lesson) -> str:
    lesson.md("""
    ## A reference, not a copy

    The regression experiment gets a warmup-cosine schedule in `cfg.schedules`, twice:
    once with `decay_steps=cfg.ref.num_train_steps`, a reference, and once with the same
    number typed in. The optimizer's `learning_rate` is a reference too, to the first
    schedule. Read back, a reference gives the value it points to.
    """)
    cfg = regression.get_config()
    cfg.num_train_steps = 1000
    cfg.schedules = {
        "lr": optax_cfg.warmup_cosine_decay_schedule(
            0.0, PEAK_LR, warmup_steps=WARMUP_STEPS, decay_steps=cfg.ref.num_train_steps, end_value=END_LR),
        "lr_copy": optax_cfg.warmup_cosine_decay_schedule(
            0.0, PEAK_LR, warmup_steps=WARMUP_STEPS, decay_steps=1000, end_value=END_LR),
    }
    # adam whose state records the learning rate of each update (sections/shared.py).
    cfg.optimizer = shared_cfg.adam_recording_lr(learning_rate=cfg.ref.schedules["lr"])
    print(cfg.schedules["lr"].decay_steps, cfg.schedules["lr_copy"].decay_steps)
    at_1000 = konfig.resolve(cfg.schedules["lr"])
    lesson.check(same_schedule(at_1000, optax_schedule(1000), 1000),
                 "the referring schedule resolves to optax's 1000-step schedule")

    lesson.md("""
    ## One edit, and what refers to it follows

    Shorten the run to 200 steps. The referring schedule now decays over 200 steps; the
    copy still decays over 1000, so at 90% of the short run it is still near its peak.
    """)
    cfg.num_train_steps = 200
    at_200, copy = konfig.resolve(cfg.schedules["lr"]), konfig.resolve(cfg.schedules["lr_copy"])
    print(cfg.schedules["lr"].decay_steps, cfg.schedules["lr_copy"].decay_steps)
    print(f"lr at step 180: reference {float(at_200(180)):.6f}, copy {float(copy(180)):.6f}")
    lesson.check(same_schedule(at_200, optax_schedule(200), 200),
                 "after the edit, the referring schedule resolves to optax's 200-step schedule")
    lesson.check(float(copy(180)) > 0.9 * PEAK_LR, "at step 180 of 200 the copy is still within 10% of its peak")
    lesson.fact("lr_at_step_180", {"reference": float(at_200(180)), "copy": float(copy(180))})
    plot_schedules(lesson, at_1000, at_200, copy)

    lesson.md("""
    ## References do arithmetic

    `warmup_steps` is still the literal 100, so the 200-step run spends half its length
    warming up. A reference can be computed with: `cfg.ref.num_train_steps // 10` is a
    tenth of whatever the run length is when the config is read.
    """)
    cfg.schedules["lr"].warmup_steps = cfg.ref.num_train_steps // 10
    print(cfg.schedules["lr"].warmup_steps)
    cfg.num_train_steps = 1000
    print(cfg.schedules["lr"].warmup_steps)
    lesson.check_equal(cfg.schedules["lr"].warmup_steps, 100, "warmup_steps with num_train_steps=1000")
    cfg.num_train_steps = 200
    lesson.check_equal(cfg.schedules["lr"].warmup_steps, 20, "warmup_steps with num_train_steps=200")

    lesson.md("""
    ## The Trainer uses it, and logs it

    Resolved into a Trainer and trained, the optimizer steps with the schedule it was
    given, and `train()` logs every entry of `cfg.schedules` beside the metrics, as
    `schedules/<name>`, at each logging step.
    """)
    cfg.workdir = str(lesson.workdir)
    state, _ = konfig.resolve(cfg).train()
    logged = read_scalars(*event_files(lesson.workdir, "train"))
    used = float(state.opt_state.hyperparams["learning_rate"])  # the rate of the last update
    print({step: round(logged[step]["schedules/lr"], 6) for step in (0, 20, 100, 200)})
    print(f"learning rate of the last update: {used:.6g}")
    schedule = optax_schedule(200, warmup_steps=20)
    lesson.check(all(np.isclose(row["schedules/lr"], float(schedule(step)), rtol=1e-6) for step, row in logged.items()),
                 "schedules/lr logged at every logging step = the 200-step schedule with 20 warmup steps")
    lesson.check_close(used, float(schedule(200)), "the learning rate of the optimizer's last update (step 200),"
                       " the referring schedule's end value")
    lesson.fact("optimizer_lr_last_update", used)
    return (f"lr at step 180: {float(at_200(180)):.6f} by reference, {float(copy(180)):.6f} by copy;"
            f" the Trainer used and logged the referring schedule")


def optax_schedule(total_steps: int, warmup_steps: int = WARMUP_STEPS):
    """The same schedule built directly with optax, to compare with."""
    return optax.warmup_cosine_decay_schedule(0.0, PEAK_LR, warmup_steps, total_steps, end_value=END_LR)


def same_schedule(a, b, steps: int) -> bool:
    """Whether two schedules agree at every step of a run (optax schedules take arrays)."""
    return np.allclose(a(np.arange(steps + 1)), b(np.arange(steps + 1)), rtol=1e-6)
