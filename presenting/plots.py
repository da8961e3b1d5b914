"""Draws a lesson's figure (`Lesson.plot`) as a PNG with matplotlib, imported only here:
plotting is optional, and `--plots` is the only way in."""

from __future__ import annotations

import pathlib

from harness.lesson import Panel

SPARSE = 30  # a curve of at most this many points is drawn with a marker at each


def draw(title: str, panels: list[Panel], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display here
    from matplotlib import pyplot as plt

    fig = plt.figure(figsize=(max(7.5, 5.5 * len(panels)), 4), layout="constrained")
    grid = fig.add_gridspec(1, len(panels))
    for place, panel in zip(grid, panels):
        if panel.images:
            draw_images(fig, place, panel)
            continue
        ax = fig.add_subplot(place)
        for label, (xs, ys) in panel.lines.items():
            # A curve of a few points shows where they are: the line between them is a guess.
            ax.plot(xs, ys, label=label, marker="o" if len(xs) <= SPARSE else None, markersize=4)
        if panel.bars:
            labels = list(panel.bars)
            ax.barh(range(len(labels)), list(panel.bars.values()), color="tab:blue")
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            ax.invert_yaxis()  # first entry on top, as listed in the lesson
        if panel.matrix:
            draw_matrix(ax, panel.matrix)
        if panel.log_y:
            ax.set_yscale("log")
        ax.set(title=panel.title, xlabel=panel.xlabel, ylabel=panel.ylabel)
        if panel.lines or panel.bars:
            ax.grid(alpha=0.3)
        if panel.lines and len(panel.lines) > 1:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_matrix(ax, matrix: list[list[float]]) -> None:
    """Counts as a heat map, each written in its cell; rows and columns numbered from 0."""
    ax.imshow(matrix, cmap="Blues")
    top = max(max(row) for row in matrix)
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            if count:
                ax.text(j, i, f"{count:g}", ha="center", va="center", fontsize=7,
                        color="white" if count > top / 2 else "black")
    ax.set_xticks(range(len(matrix[0])))
    ax.set_yticks(range(len(matrix)))


def draw_images(fig, place, panel: Panel) -> None:
    """Small grey images in a grid of their own within the panel's place, each captioned."""
    columns = min(len(panel.images), 6)
    rows = -(-len(panel.images) // columns)
    panel_figure = fig.add_subfigure(place)
    panel_figure.suptitle(panel.title, fontsize="medium")
    for ax, (pixels, caption) in zip(panel_figure.subplots(rows, columns, squeeze=False).flat, panel.images):
        ax.imshow(pixels, cmap="gray_r")
        ax.set_title(caption, fontsize=8)
    for ax in panel_figure.axes:
        ax.axis("off")
