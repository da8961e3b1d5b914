"""A metric writer of your own: Kauldron's default writer, plus a JSON-lines file.

`JsonlWriter` is `kd.train.KDMetricWriter` (TensorBoard's event files) that also appends
every scalar it is given to `<workdir>/<collection>/metrics.jsonl`, one line per scalar:

    {"step": 5, "tag": "losses/logcosh", "value": 1.27}

A config names it (`cfg.writer = JsonlWriter()`); the Trainer fills in `workdir` and
`collection` (`train`, or an evaluator's name). It appends: a run resumed from a
checkpoint writes the rows of the step it redoes again, and the last row of a
(step, tag) is the one to read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from etils import epath
from kauldron import kd


@dataclasses.dataclass(frozen=True, eq=True, kw_only=True)
class JsonlWriter(kd.train.KDMetricWriter):
    """KDMetricWriter that also writes every scalar to a JSON-lines file."""

    filename: str = "metrics.jsonl"

    @property
    def path(self) -> epath.Path:
        return epath.Path(self.workdir) / self.collection / self.filename

    def write_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        super().write_scalars(step, scalars)  # TensorBoard, as before
        self._append(step, scalars)

    def write_summaries(self, step: int, values: Mapping[str, Any],
                        metadata: Mapping[str, Any] | None = None) -> None:
        super().write_summaries(step, values, metadata)
        self._append(step, {tag: value for tag, value in values.items() if _is_number(value)})

    def _append(self, step: int, scalars: Mapping[str, Any]) -> None:
        if not scalars or jax.process_index() != 0:  # every process calls write_param_overview: the first writes
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as file:
            for tag, value in scalars.items():
                # .item(): a Python int or float, exactly the value given (float32 included)
                file.write(json.dumps({"step": int(step), "tag": tag, "value": np.asarray(value).item()}) + "\n")


def _is_number(value: Any) -> bool:
    """A single number (not an array of them, not a text)."""
    return np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biuf"
