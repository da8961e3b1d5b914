"""Each lesson's figure, drawn from the numbers the lesson has checked: `lesson.plot`
records its panels, and the terminal, the pages and `--plots` draw them
(presenting/plots.py)."""

from __future__ import annotations

import numpy as np

from sections.lesson import Lesson, Panel


def plot_mistakes(lesson: Lesson, confusion: np.ndarray, pixels: np.ndarray, truth: np.ndarray, predicted: np.ndarray):
    lesson.plot("Section 0: handwritten digits, the test split",
                Panel("confusion matrix", "predicted", "true", matrix=confusion.tolist()),
                Panel("the test digits it gets wrong (true -> predicted)", "", "",
                      images=[(image[..., 0].tolist(), f"{t} -> {p}") for image, t, p in zip(pixels, truth, predicted)]))


def plot_schedules(lesson: Lesson, at_1000, at_200, copy) -> None:
    def curve(schedule, steps: int):
        return list(range(steps + 1)), np.asarray(schedule(np.arange(steps + 1))).tolist()

    lesson.plot("Section 2: a reference follows num_train_steps; a copy does not",
                Panel("learning rate over each run", "step", "learning rate", lines={
                    "reference, num_train_steps=1000": curve(at_1000, 1000),
                    "reference, num_train_steps=200": curve(at_200, 200),
                    "copy of 1000, run of 200": curve(copy, 200)}))


def plot_training(lesson: Lesson, logged: dict[int, dict[str, float]]) -> None:
    steps = sorted(logged)
    lesson.plot("Section 6: train() on the regression config",
                Panel("training loss", "step", "logcosh (log scale)", log_y=True,
                      lines={"logcosh": (steps, [logged[k]["losses/logcosh"] for k in steps])}),
                Panel("an inner layer, read by key path", "step", "mean row norm",
                      lines={"enc_norm ('interms.enc.__call__[0]')": (steps, [logged[k]["metrics/enc_norm"] for k in steps])}))


def plot_evaluations(lesson: Lesson, evals: dict, every: int) -> None:
    steps = sorted(evals)
    lesson.plot(f"Section 9: evaluation every {every} steps, across a resume at step 40",
                Panel("eval loss (128 rows)", "step", "logcosh (log scale)", log_y=True,
                      lines={"eval logcosh": (steps, [evals[k]["losses/logcosh"] for k in steps])}),
                Panel("eval metric (pooled over 128 rows)", "step", "within_tol",
                      lines={"eval within_tol": (steps, [evals[k]["metrics/within_tol"] for k in steps])}))


def plot_losses(lesson: Lesson, curves: dict[str, dict[int, float]]) -> None:
    names = {"finetune": "fine-tuned (pretrained encoder)", "scratch": "from scratch (random encoder)"}
    lesson.plot("Section 13: a frozen pretrained encoder against the same model from scratch",
                Panel("training loss", "step", "logcosh (log scale)", log_y=True,
                      lines={names[name]: (sorted(c), [c[s] for s in sorted(c)]) for name, c in curves.items()}))


def plot_read_back(lesson: Lesson, summaries: dict, written: dict) -> None:
    loss = {step: float(v) for step, v in summaries["losses/logcosh"].items()}
    metric = {step: float(v) for step, v in written["metrics/within_0.1"].items()}
    lesson.plot("Section 15: read back from the workdir",
                Panel("training loss (train/)", "step", "logcosh (log scale)", log_y=True,
                      lines={"train logcosh": (sorted(loss), [loss[s] for s in sorted(loss)])}),
                Panel("evaluator's metric (heldout/)", "step", "fraction within 0.1",
                      lines={"heldout within_0.1": (sorted(metric), [metric[s] for s in sorted(metric)])}))
