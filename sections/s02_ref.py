"""`cfg.ref`: change one number, and everything that refers to it follows.

A schedule's `decay_steps` set to `cfg.ref.num_train_steps` is a reference, not a copy
of the number: edit `cfg.num_train_steps` and the schedule resolves to the new length.
A literal `1000` in the same place stays 1000, so a sweep over the run length would
silently keep the old decay curve. The optimizer uses the schedule only if it is given
it: here its `learning_rate` is `cfg.ref.schedules["lr"]`, a reference to the schedule
in `cfg.schedules`, and after real updates the optimizer's own state holds the
schedule's value.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from kauldron import konfig

from sections.lesson import Lesson, Panel
from sections.registry import section

PEAK_LR, WARMUP_STEPS = 1e-3, 100
PROGRESS = (10, 50, 90)  # percent of the run at which the schedules are compared


def schedule_config(decay_steps):
    """The warmup-cosine schedule, as a config."""
    with konfig.imports():
        import optax as optax_cfg

    return optax_cfg.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=PEAK_LR, warmup_steps=WARMUP_STEPS, decay_steps=decay_steps)


def optax_schedule(total_steps: int):
    """The same schedule built directly with optax, for comparison."""
    return optax.warmup_cosine_decay_schedule(0.0, PEAK_LR, WARMUP_STEPS, total_steps)


def curve(schedule, steps: int) -> tuple[list[int], list[float]]:
    """A schedule at every step of a run, in one call (optax schedules take arrays)."""
    return list(range(steps + 1)), np.asarray(schedule(np.arange(steps + 1))).tolist()


def optimizer_state_after(optimizer: optax.GradientTransformation, updates: int):
    """The optimizer's state after `updates` real updates of a small least-squares problem."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)), jnp.float32)
    y = jnp.asarray(np.random.default_rng(1).normal(size=(8,)), jnp.float32)

    @jax.jit
    def step(params, state):
        grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(params)
        changes, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, changes), state

    params = jnp.zeros(3)
    state = optimizer.init(params)
    for _ in range(updates):
        params, state = step(params, state)
    return state


def print_table(rows: dict[int, dict[str, float]]) -> None:
    print(f"  {'progress':>9}  {'lr @ 1000 steps':>15}  {'lr @ 200 steps':>14}  {'literal 1000, @ 200':>19}")
    for pct, row in rows.items():
        print(f"  {pct:>8}%  {row['1000_steps']:>15.6f}  {row['200_steps']:>14.6f}"
              f"  {row['literal_at_200_steps']:>19.6f}")


def schedules_follow_the_edit(lesson: Lesson, cfg) -> dict[int, dict[str, float]]:
    """Resolves the schedules at 1000 steps, edits num_train_steps to 200, resolves again."""
    at_1000 = konfig.resolve(cfg.schedules["lr"])
    cfg.num_train_steps = 200  # one edit...
    at_200 = konfig.resolve(cfg.schedules["lr"])  # ...and the referring schedule follows
    literal = konfig.resolve(cfg.schedules["lr_literal"])

    rows = {}
    for pct in PROGRESS:
        s1000, s200 = 1000 * pct // 100, 200 * pct // 100
        rows[pct] = {"1000_steps": float(at_1000(s1000)), "200_steps": float(at_200(s200)),
                     "literal_at_200_steps": float(literal(s200))}
        lesson.check_close(rows[pct]["1000_steps"], float(optax_schedule(1000)(s1000)),
                           f"the referring schedule at step {s1000} of 1000, against optax's own")
        lesson.check_close(rows[pct]["200_steps"], float(optax_schedule(200)(s200)),
                           f"after the edit, the referring schedule at step {s200} of 200, against optax's own")
        lesson.check_close(rows[pct]["literal_at_200_steps"], float(optax_schedule(1000)(s200)),
                           f"the literal copy at step {s200}: still a 1000-step schedule")
    print_table(rows)
    lesson.check(rows[90]["literal_at_200_steps"] > 0.9 * PEAK_LR,
                 "at 90% of the 200-step run the literal copy is still within 10% of its peak")
    lesson.fact("lr_at_90pct", {k: rows[90][k] for k in ("1000_steps", "200_steps")})
    lesson.fact("literal_lr_at_90pct_of_200", rows[90]["literal_at_200_steps"])
    lesson.plot("Section 2: cfg.ref follows num_train_steps; a literal copy does not",
                Panel("learning rate over each run", "step", "learning rate", lines={
                    "ref, num_train_steps=1000": curve(at_1000, 1000),
                    "ref, num_train_steps=200": curve(at_200, 200),
                    "literal 1000, run of 200": curve(literal, 200)}))
    print("\n  The literal copy ignored the edit: at 90% of a 200-step run it is still near its"
          "\n  peak, because it thinks the run is 1000 steps long.")
    return rows


def the_optimizer_uses_it(lesson: Lesson, cfg) -> float:
    """Resolves cfg.optimizer, makes real updates, and reads the rate from its state."""
    updates = 180  # 90% of the 200-step run
    state = optimizer_state_after(konfig.resolve(cfg.optimizer), updates)
    used = float(state.hyperparams["learning_rate"])  # the rate of the latest update
    print(f"\n  cfg.optimizer = adam_recording_lr(learning_rate=cfg.ref.schedules['lr']); after"
          f" {updates} real\n  updates its state says the latest used learning_rate {used:.6g}"
          f" = the schedule at step {updates - 1}")
    lesson.check_equal(int(state.count), updates, "the optimizer's update count after 180 updates")
    lesson.check_close(used, float(optax_schedule(200)(updates - 1)),
                       "the learning rate in the optimizer's state = a 200-step schedule at step 179")
    lesson.fact("optimizer_lr_after_180_updates", used)
    return used


@section(2, "ref", "cfg.ref: change one number, everything downstream follows",
         shows="a schedule that refers to num_train_steps follows an edit, a literal copy does not; the optimizer uses it")
def references_follow_edits(lesson: Lesson) -> str:
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections import shared as shared_cfg

    cfg = kd_cfg.train.Trainer()
    cfg.num_train_steps = 1000
    cfg.schedules = {
        "lr": schedule_config(decay_steps=cfg.ref.num_train_steps),  # a reference
        "lr_literal": schedule_config(decay_steps=1000),  # the same number, typed in
    }
    cfg.optimizer = shared_cfg.adam_recording_lr(learning_rate=cfg.ref.schedules["lr"])
    rows = schedules_follow_the_edit(lesson, cfg)
    used = the_optimizer_uses_it(lesson, cfg)

    # warmup_steps is still the literal 100: a 200-step run warms up for half its length.
    cfg.schedules["lr"].warmup_steps = cfg.ref.num_train_steps // 10  # references do arithmetic
    warmup_at_200 = cfg.schedules["lr"].warmup_steps
    cfg.num_train_steps = 1000
    warmup_at_1000 = cfg.schedules["lr"].warmup_steps
    lesson.check_equal((warmup_at_200, warmup_at_1000), (20, 100),
                       "warmup_steps = cfg.ref.num_train_steps // 10 at 200 and at 1000 steps")
    print(f"\n  warmup_steps stayed the literal {WARMUP_STEPS}, so the 200-step run spent half its"
          f"\n  steps warming up. References do arithmetic: with warmup_steps ="
          f"\n  cfg.ref.num_train_steps // 10 it is {warmup_at_200} at 200 steps and {warmup_at_1000} at 1000.")
    return (f"lr at 90%: {rows[90]['1000_steps']:.6f} (1000 steps) vs {rows[90]['200_steps']:.6f} (200 steps);"
            f" the literal copy stayed at {rows[90]['literal_at_200_steps']:.6f}; the optimizer used {used:.6g}")
