"""Reading back what a Kauldron run logged: TensorBoard's event files, with TensorBoard's
own reader. A run writes one directory per collection in its workdir: `train/`, and one
per evaluator (`test/`, `eval/`), each holding an event file per writer that logged to it: a
Trainer's `train()`, an evaluator's `evaluate()`, an eval job (each Trainer, and each
evaluator, has a writer of its own); two `train()` calls on one Trainer write one."""

import pathlib

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util


def read_scalars(workdir, collection: str) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} of the scalars a run logged for a collection; when a step was
    logged twice (a resumed run), the later value (TensorBoard's own reader keeps both)."""
    scalars: dict[int, dict[str, float]] = {}
    for path in event_files(workdir, collection):
        for step, row in scalars_in(path).items():
            scalars.setdefault(step, {}).update(row)
    return scalars


def scalars_in(event_file) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} of the scalars in one event file: what one writer logged."""
    scalars: dict[int, dict[str, float]] = {}
    for event in EventFileLoader(str(event_file)).Load():
        for value in event.summary.value:
            array = tensor_util.make_ndarray(value.tensor) if value.HasField("tensor") else None
            if array is not None and array.ndim == 0 and array.dtype.kind in "fiu":  # texts are strings
                scalars.setdefault(int(event.step), {})[value.tag] = float(array)
    return scalars


def event_files(workdir, collection: str) -> list[pathlib.Path]:
    """A collection's event files in the order they were opened: by the time in their
    name (`events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2`), then their counter `n`."""
    paths = pathlib.Path(workdir, collection).glob("events.out.tfevents.*")
    return sorted(paths, key=lambda path: (int(path.name.split(".")[3]), int(path.name.split(".")[-2])))


def read_tensors(workdir, collection: str) -> dict[str, dict[int, np.ndarray]]:
    """{tag: {step: value}} of everything a run logged for a collection, summaries included
    (a histogram is a [buckets, 3] array of left edge, right edge and count; an image is
    [width, height, PNG bytes]). `TENSORS: 0` keeps every event: by default TensorBoard's
    accumulator keeps 10 per tag."""
    events = event_accumulator.EventAccumulator(str(pathlib.Path(workdir, collection)),
                                                size_guidance={event_accumulator.TENSORS: 0})
    events.Reload()
    return {tag: {e.step: tensor_util.make_ndarray(e.tensor_proto) for e in events.Tensors(tag)}
            for tag in events.Tags()["tensors"]}
