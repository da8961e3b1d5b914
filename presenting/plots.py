"""Draws a lesson's figure (`Lesson.plot`) as a PNG with matplotlib, imported only here:
plotting is optional, and `--plots` is the only way in."""

from __future__ import annotations

import pathlib

from sections.lesson import Panel

SPARSE = 30  # a curve of at most this many points is drawn with a marker at each


def draw(title: str, panels: list[Panel], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display here
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.5, 5.5 * len(panels)), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for label, (xs, ys) in panel.lines.items():
            # A curve of a few points shows where they are: the line between them is a guess.
            ax.plot(xs, ys, label=label, marker="o" if len(xs) <= SPARSE else None, markersize=4)
        if panel.bars:
            labels = list(panel.bars)
            ax.barh(range(len(labels)), list(panel.bars.values()), color="tab:blue")
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            ax.invert_yaxis()  # first entry on top, as listed in the lesson
        if panel.log_y:
            ax.set_yscale("log")
        ax.set(title=panel.title, xlabel=panel.xlabel, ylabel=panel.ylabel)
        ax.grid(alpha=0.3)
        if panel.lines and len(panel.lines) > 1:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
