"""`cfg.ref`: change one number, and everything that refers to it follows.

A schedule's `decay_steps` set to `cfg.ref.num_train_steps` is a reference, not a copy
of the number: edit `cfg.num_train_steps` and the schedule resolves to the new length.
A literal `1000` in the same place stays 1000, so a sweep over the run length would
silently keep the old decay curve.
"""

import numpy as np
import optax
from kauldron import konfig

from sections.registry import Lesson, Panel, section

PEAK_LR, WARMUP_STEPS = 1e-3, 100


def curve(schedule, steps: int) -> tuple[list[int], list[float]]:
    """A schedule at every step of a run, in one call (optax schedules take arrays)."""
    return list(range(steps + 1)), np.asarray(schedule(np.arange(steps + 1))).tolist()


@section(2, "ref", "cfg.ref: change one number, everything downstream follows")
def lesson(lesson: Lesson) -> str:
    with konfig.imports():
        import optax as optax_cfg
        from kauldron import kd as kd_cfg

    cfg = kd_cfg.train.Trainer()
    cfg.num_train_steps = 1000
    cfg.schedules = {
        "lr": optax_cfg.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=PEAK_LR, warmup_steps=WARMUP_STEPS,
            decay_steps=cfg.ref.num_train_steps,  # a reference, not the value 1000
        ),
        "lr_literal": optax_cfg.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=PEAK_LR, warmup_steps=WARMUP_STEPS,
            decay_steps=1000,  # the same number, typed in
        ),
    }
    at_1000 = konfig.resolve(cfg.schedules["lr"])
    cfg.num_train_steps = 200  # one edit...
    at_200 = konfig.resolve(cfg.schedules["lr"])  # ...and the referring schedule follows
    literal = konfig.resolve(cfg.schedules["lr_literal"])

    def optax_schedule(total_steps):
        return optax.warmup_cosine_decay_schedule(0.0, PEAK_LR, WARMUP_STEPS, total_steps)

    print(f"  {'progress':>9}  {'lr @ 1000 steps':>15}  {'lr @ 200 steps':>14}  {'literal 1000, @ 200':>19}")
    table = {}
    for pct in (10, 50, 90):
        s1000, s200 = 1000 * pct // 100, 200 * pct // 100
        row = {
            "1000_steps": float(at_1000(s1000)),
            "200_steps": float(at_200(s200)),
            "literal_at_200_steps": float(literal(s200)),
        }
        lesson.check_close(row["1000_steps"], float(optax_schedule(1000)(s1000)),
                           f"ref schedule at step {s1000} equals a 1000-step schedule")
        lesson.check_close(row["200_steps"], float(optax_schedule(200)(s200)),
                           f"after the edit, ref schedule at step {s200} equals a 200-step schedule")
        lesson.check_close(row["literal_at_200_steps"], float(optax_schedule(1000)(s200)),
                           f"the literal copy at step {s200} still decays over 1000 steps")
        table[f"lr_at_{pct}pct"] = row
        print(f"  {pct:>8}%  {row['1000_steps']:>15.6f}  {row['200_steps']:>14.6f}"
              f"  {row['literal_at_200_steps']:>19.6f}")
    lesson.check(table["lr_at_90pct"]["200_steps"] != table["lr_at_90pct"]["literal_at_200_steps"],
                 "the referring schedule and the literal one differ after the edit")
    for name, row in table.items():
        lesson.fact(name, {"1000_steps": row["1000_steps"], "200_steps": row["200_steps"]})
    lesson.fact("literal_lr_at_90pct_of_200", table["lr_at_90pct"]["literal_at_200_steps"])
    lesson.check(table["lr_at_90pct"]["literal_at_200_steps"] > 0.9 * PEAK_LR,
                 "the literal copy is within 10% of its peak at 90% of the 200-step run")
    lesson.plot("Section 2: cfg.ref follows num_train_steps; a literal copy does not",
                Panel("learning rate over each run", "step", "learning rate", lines={
                    "ref, num_train_steps=1000": curve(at_1000, 1000),
                    "ref, num_train_steps=200": curve(at_200, 200),
                    "literal 1000, run of 200": curve(literal, 200),
                }))
    print("\n  The literal copy ignored the edit: at 90% of a 200-step run it is still near its"
          "\n  peak, because it thinks the run is 1000 steps long.")

    # warmup_steps is still the literal 100: a 200-step run now warms up for half its length.
    # References support arithmetic, so the warmup can follow the run length as well.
    cfg.schedules["lr"].warmup_steps = cfg.ref.num_train_steps // 10
    warmup_at_200 = cfg.schedules["lr"].warmup_steps
    cfg.num_train_steps = 1000
    warmup_at_1000 = cfg.schedules["lr"].warmup_steps
    lesson.check_equal((warmup_at_200, warmup_at_1000), (20, 100),
                       "warmup_steps = cfg.ref.num_train_steps // 10 at 200 and 1000 steps")
    print(f"\n  warmup_steps stayed the literal {WARMUP_STEPS}, so the 200-step run spent half its"
          f"\n  steps warming up. References do arithmetic: with warmup_steps ="
          f"\n  cfg.ref.num_train_steps // 10 it is {warmup_at_200} at 200 steps and"
          f" {warmup_at_1000} at 1000.")
    return (
        f"lr at 90%: {table['lr_at_90pct']['1000_steps']:.6f} (1000 steps) vs "
        f"{table['lr_at_90pct']['200_steps']:.6f} (200 steps); the literal copy stayed at "
        f"{table['lr_at_90pct']['literal_at_200_steps']:.6f}"
    )
