"""A data pipeline that records which rows each process of a job read (section 18)."""

import dataclasses
import json
import pathlib

import jax
from kauldron import kd


@dataclasses.dataclass(frozen=True, kw_only=True)
class InMemoryRowsRecorded(kd.data.InMemoryPipeline):
    """`kd.data.InMemoryPipeline` that also writes which rows of the data this process read
    in its first batch to `record_dir/rows-process-<i>.json`. The batches are the same."""

    record_dir: str

    def iter(self):
        for number, (rows, batch) in enumerate(zip(self.sampler, super().iter())):
            if number == 0:
                path = pathlib.Path(self.record_dir, f"rows-process-{jax.process_index()}.json")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(rows.tolist()))
            yield batch
