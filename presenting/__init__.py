"""Ways to present the tutorial and a run's results, apart from the lessons themselves: the
notebook export (notebook.py), and the results as pages to read, a static HTML site or
Markdown (site.py), which read a section file through harness/lesson_format.py. The lessons never
import this package."""

from __future__ import annotations

import pathlib

# What installs the optional packages the ways to present need.
EXTRAS_INSTALL_COMMAND = ".venv/bin/pip install -r requirements-extras.txt"


class Unavailable(Exception):
    """A way to present cannot be used here; the message says why, and how to fix it."""


def plotting_to(target: pathlib.Path | None) -> tuple[pathlib.Path | None, str | None]:
    """Where --plots writes the pages' figures (None: nowhere), and the header line that
    says so. The figures are the lessons' own matplotlib code: --plots only keeps them."""
    if target is None:
        return None, None
    return target, f"plots: {target} (a PNG for each selected section that has a figure)"


def check_site_requirements() -> None:
    """--html and --markdown render with Jinja2, Markdown and Pygments."""
    try:
        import jinja2  # noqa: F401
        import markdown  # noqa: F401
        import pygments  # noqa: F401
    except ImportError as e:
        raise Unavailable(f"--html and --markdown need {e.name}, which is not installed; install it with: "
                          f"{EXTRAS_INSTALL_COMMAND}") from None


def export_notebook(path: str, chosen: list) -> None:
    """Writes the notebook of `chosen` to `path` and says where."""
    target = pathlib.Path(path)
    if target.is_dir():
        raise Unavailable(f"--notebook {path}: is a directory")
    if not target.parent.is_dir():
        raise Unavailable(f"--notebook {path}: no directory {target.parent}")
    try:
        from presenting import notebook
    except ImportError as e:
        raise Unavailable(f"--notebook needs {e.name}, which is not installed; install it with: "
                          f"{EXTRAS_INSTALL_COMMAND}") from None
    try:
        notebook.export(chosen, target)
    except OSError as e:
        raise Unavailable(f"--notebook {path}: cannot write it ({e.strerror})") from None
    sections = f"{len(chosen)} section" + ("s" if len(chosen) != 1 else "")
    print(f"notebook: {target} ({sections}). Open it with `jupyter lab {target}` (README.md: Notebook).")
