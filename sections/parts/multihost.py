"""What section 18's job reads, recorded: which rows of the data each process of the job
holds in its first batch, for an InMemoryPipeline and for a PyGrain data source. Each
writes `<record_dir>/<name>-process-<i>.json` once; the batches are unchanged."""

import dataclasses
import json
import pathlib

import jax
from kauldron import kd

from sections.parts import regression


def record_once(record_dir: str, name: str, rows) -> None:
    """Writes the rows to `<record_dir>/<name>-process-<this process>.json`, unless there."""
    path = pathlib.Path(record_dir, f"{name}-process-{jax.process_index()}.json")
    if not path.exists():  # a run that resumes the workdir keeps the first run's record
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([int(row) for row in rows]))


@dataclasses.dataclass(frozen=True, kw_only=True)
class InMemoryRowsRecorded(kd.data.InMemoryPipeline):
    """`kd.data.InMemoryPipeline` that records the rows of the data its first batch holds
    in this process (`train-rows`)."""

    record_dir: str

    def iter(self):
        for number, (rows, batch) in enumerate(zip(self.sampler, super().iter())):
            if number == 0:
                record_once(self.record_dir, "train-rows", rows)
            yield batch


@dataclasses.dataclass(frozen=True)
class IndexedRows(regression.RegressionRows):
    """The rows of a split as a PyGrain data source, each with its index (`index`)."""

    def __getitem__(self, index: int):
        return {**super().__getitem__(index), "index": index}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSourceRowsRecorded(kd.data.py.DataSource):
    """`kd.data.py.DataSource` over `IndexedRows` that records the indices its first batch
    holds in this process (`<record_name>`), each time it is iterated."""

    record_dir: str
    record_name: str = "eval-rows"

    def __iter__(self):
        record_once(self.record_dir, self.record_name, self[0]["index"])  # batch 0, as iteration reads it
        return super().__iter__()
