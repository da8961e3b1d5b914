"""While workers run, one line on a terminal says which sections are running and for how
long, so that a run of minutes never looks hung. Drawn with tqdm, on stderr, and only when
stderr is a terminal: never in a log or a pipe (tqdm then draws nothing)."""

from __future__ import annotations

import shutil
import sys
import time


class Status:
    def __init__(self, total: int):
        self.total, self.started, self.bar = total, {}, None
        if sys.stderr.isatty():
            from tqdm import tqdm

            # The terminal's size, or 80x24 where it reports none (tqdm would then draw nothing).
            size = shutil.get_terminal_size()
            self.bar = tqdm(total=total, bar_format="{desc}", file=sys.stderr, leave=False, ncols=size.columns,
                            nrows=size.lines)

    def show(self, running: list[str], done: int) -> None:
        """`running`: the slugs running now (a worker has them); `done`: how many are printed."""
        if self.bar is None:
            return
        now = time.monotonic()
        for slug in running:
            self.started.setdefault(slug, now)
        what = ", ".join(f"{slug} {now - self.started[slug]:.0f} s" for slug in running) or "-"
        self.bar.set_description_str(f"[{done}/{self.total} done] running: {what}")

    def clear(self) -> None:
        """Before printing: the line goes, and comes back with the next `show`."""
        if self.bar is not None:
            self.bar.clear()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
