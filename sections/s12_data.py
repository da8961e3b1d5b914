"""A Kauldron data pipeline, with transforms as config entries.

`kd.data.py.DataSource` turns any random-access source into batches with PyGrain.
Transforms run on each example before batching, and they are config entries like
everything else: so the whole pipeline is a config, and any field of it, a transform's
included, can be overridden before it is resolved.
"""

from kauldron import kd, konfig

from harness import Lesson, section
from harness.compare import max_difference
from sections.parts.images import SyntheticImages

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import images as images_cfg


@section(12, "data", "A data pipeline with transforms, as a config", part="for-real",
         shows="kd.data.py.DataSource with Elements, ValueRange, Rearrange as config entries; the spec before and after",
         reference="https://kauldron.readthedocs.io/en/latest/data_py.html")
def pipeline_as_config(lesson: Lesson):
    lesson.md("""
    ## A data source is anything with `len` and `[i]`

    `SyntheticImages` (below) returns one example per index: a small uint8 image, a
    label and an id. `kd.data.py.DataSource` batches it; `kd.inspect.json_spec_like`
    describes a batch (dtype and shape of each feature) without anyone writing its
    shapes down: the pipeline's `element_spec` reads a first batch to learn them.
    `num_workers=0` reads in this process, as Kauldron does by itself in a notebook (or
    where `TEST_TMPDIR` is set, which it takes for a test); a script left at the
    default, 16, reads in worker processes. `num_epochs=1` reads the source once: left
    at its default, `None`, the pipeline repeats forever and `len()` raises `TypeError`.
    A last batch smaller than `batch_size` is dropped (`batch_drop_remainder=True` by
    default; 64 examples in batches of 8 leave none): for eval data, `False` keeps it,
    `"pad"` fills it up with zeros, and no mask: a loss or metric given the batch counts
    the padded rows unless masked.
    """)
    raw = kd.data.py.DataSource(data_source=SyntheticImages(size=64), batch_size=8, shuffle=False,
                                num_epochs=1, seed=0, num_workers=0)
    print(kd.inspect.json_spec_like(raw.element_spec))
    with lesson.checks():
        before = kd.inspect.json_spec_like(raw.element_spec)
        lesson.check_equal(before, {"id": "i64[8]", "image": "ui8[8 8 8 3]", "label": "i64[8]"},
                           "the element spec without transforms")
        lesson.check_equal(indices_read_for_the_element_spec(), list(range(8)),
                           "the source's examples a DataSource's element_spec reads: a first batch")
        lesson.check_equal(kd.data.py.DataSource(data_source=SyntheticImages(size=64), batch_size=8,
                                                 shuffle=False).num_workers, 16, "DataSource's num_workers by default")
        import contextlib
        import io
        import itertools
        import os
        from unittest import mock

        from kauldron.data.py import base

        with mock.patch.dict(os.environ):
            os.environ.pop("TEST_TMPDIR", None)
            in_a_script = base._get_num_workers(16)
            with contextlib.redirect_stdout(io.StringIO()):
                with mock.patch("etils.epy.is_notebook", return_value=True):
                    in_a_notebook = base._get_num_workers(16)
                os.environ["TEST_TMPDIR"] = str(os.getcwd())
                in_a_test = base._get_num_workers(16)
        lesson.check_equal((in_a_script, in_a_notebook, in_a_test), (16, 0, 0),
                           "the workers a DataSource asked for 16 uses: in a script, a notebook, with TEST_TMPDIR set",
                           internal="a private name")
        lesson.check_equal((len(raw), sum(1 for _ in raw)), (8, 8),
                           "len() and the batches iterated with num_epochs=1 (64 examples, 8 a batch)")
        forever = kd.data.py.DataSource(data_source=SyntheticImages(size=64), batch_size=8, shuffle=False,
                                        seed=0, num_workers=0)
        lesson.check(forever.num_epochs is None, "DataSource's num_epochs by default is None")
        nine = list(itertools.islice(forever, 9))
        lesson.check(len(nine) == 9 and nine[8]["id"].tolist() == list(range(8)),
                     "batches from the default num_epochs: a 9th follows one pass's 8, ids 0-7 again")
        lesson.check_raises(TypeError, lambda: len(forever), "len() of a DataSource with the default num_epochs")
        lesson.check_equal((last_batch_ids(), last_batch_ids(batch_drop_remainder=False),
                            last_batch_ids(batch_drop_remainder="pad")),
                           (list(range(48, 56)), [56, 57, 58, 59], [56, 57, 58, 59, 0, 0, 0, 0]),
                           "the ids in the last batch of 60 examples in batches of 8, num_epochs=1:"
                           " by default, with batch_drop_remainder=False, with 'pad'")
        import numpy as np

        padded = last_batch(batch_drop_remainder="pad")
        lesson.check_equal(sorted(padded), ["id", "image", "label"], "the features of the padded last batch: no mask added")
        lesson.check(not padded["image"][4:].any() and SyntheticImages(size=64)[0]["image"].any(),
                     "the padded rows' images are zeros, not copies of example 0 (whose id and label are 0 too)")
        labels = padded["label"].astype(np.float32)  # 6, 7, 8, 9, then the padding's 0s
        l2 = kd.losses.L2(preds="p", targets="t").get_state(preds=labels, targets=np.zeros(8, np.float32))
        lesson.check_close(float(l2.compute()), float(np.mean(labels**2)),
                           "kd.losses.L2 given the padded labels and 0s: the mean over all 8 rows, padding included")
        norm = kd.metrics.Norm(tensor="t").get_state(tensor=labels[:, None])
        lesson.check_close(float(norm.compute()), float(np.mean(labels)),
                           "kd.metrics.Norm given the padded labels: the mean over all 8 rows, padding included")

    lesson.md("""
    ## Transforms are config entries

    `kd.data.Elements` drops or renames features, `kd.data.ValueRange` rescales
    one (here to [-1, 1], from its default input range [0, 255], clipping by default),
    `kd.data.Rearrange` reshapes one with an einops pattern. Named in a dict, they run in
    order on every example: the last two read `pixels`, the name the first gives the
    image. The pipeline is written as a config (`kd_cfg`, imported under
    `konfig.imports()`), and resolved to use it.
    """)
    cfg = kd_cfg.data.py.DataSource(
        data_source=images_cfg.SyntheticImages(size=64),
        transforms={
            "select": kd_cfg.data.Elements(drop=["id"], rename={"image": "pixels", "label": "target"}),
            "range": kd_cfg.data.ValueRange(key="pixels", vrange=(-1.0, 1.0)),
            "flatten": kd_cfg.data.Rearrange(key="pixels", pattern="h w c -> (h w c)"),
        },
        batch_size=8, shuffle=False, num_epochs=1, seed=0, num_workers=0,
    )
    pipeline = konfig.resolve(cfg)
    batch = next(iter(pipeline))
    print(kd.inspect.json_spec_like(pipeline.element_spec))
    print("pixels in", [float(batch["pixels"].min()), float(batch["pixels"].max())], "target", batch["target"])
    with lesson.checks():
        import numpy as np

        after = kd.inspect.json_spec_like(pipeline.element_spec)
        lesson.check_equal(after, {"pixels": "f32[8 192]", "target": "i64[8]"}, "the element spec with the transforms")
        lesson.check(max_difference(batch["pixels"], raw_images(8).reshape(8, -1) / 255.0 * 2.0 - 1.0) <= 1e-6,
                     "pixels = flatten(raw image / 255 * 2 - 1), within 1e-6")
        lesson.check_equal(batch["target"].tolist(), [i % 10 for i in range(8)], "the labels, renamed target")
        rescaled = kd.data.ValueRange(key="x", vrange=(-1.0, 1.0)).map_element(np.array([0.0, 127.5, 255.0, 510.0]))
        lesson.check_equal(rescaled.tolist(), [-1.0, 0.0, 1.0, 1.0],
                           "ValueRange(vrange=(-1, 1)) of 0, 127.5, 255 and 510: from [0, 255], clipped")
        reordered = kd.data.py.DataSource(data_source=SyntheticImages(size=64),
                                          transforms=dict(reversed(list(pipeline.transforms.items()))),
                                          batch_size=8, shuffle=False, num_epochs=1, seed=0, num_workers=0)
        error = lesson.check_raises(KeyError, lambda: reordered.element_spec, "the same transforms, in reverse order")
        lesson.check("['pixels'] did not match any keys" in str(error), "the error: no feature is named pixels yet")

    lesson.md("""
    ## The pipeline is a config: override anything, then resolve

    Because the pipeline is still a config, a batch size, a transform's range or its
    pattern can be changed before it is resolved, here in Python (section 10 sets config
    fields from the command line). Resolved again, it is a different pipeline.
    """)
    cfg.batch_size = 16
    cfg.transforms["range"].vrange = (0.0, 1.0)
    cfg.transforms["flatten"].pattern = "h w c -> c h w"
    changed = konfig.resolve(cfg)
    batch = next(iter(changed))
    print(kd.inspect.json_spec_like(changed.element_spec))
    print("pixels in", [float(batch["pixels"].min()), float(batch["pixels"].max())])
    with lesson.checks():
        spec = kd.inspect.json_spec_like(changed.element_spec)
        lesson.check_equal(spec, {"pixels": "f32[16 3 8 8]", "target": "i64[16]"}, "the element spec after the overrides")
        lesson.check(max_difference(batch["pixels"], raw_images(16).transpose(0, 3, 1, 2) / 255.0) <= 1e-6,
                     "pixels = transpose(raw image / 255), in [0, 1], within 1e-6")
        lesson.check_equal((pipeline.batch_size, changed.batch_size), (8, 16),
                           "the batch sizes of the pipeline resolved before the overrides, and after")
        lesson.fact("element_spec", {"raw": before, "transformed": after, "overridden": spec})
        lesson.summary = ("Elements, ValueRange and Rearrange as config entries: f32[8 192] in [-1, 1];"
                          " overridden to f32[16 3 8 8]")


def indices_read_for_the_element_spec() -> list[int]:
    """The indices a DataSource (batches of 8, in order) reads from its source to give its element_spec."""
    read = []

    class Recorded(SyntheticImages):
        def __getitem__(self, index):
            read.append(int(index))
            return super().__getitem__(index)

    kd.data.py.DataSource(data_source=Recorded(size=64), batch_size=8, shuffle=False, num_epochs=1, seed=0,
                          num_workers=0).element_spec
    return read


def last_batch(**options) -> dict:
    """The last batch of one pass over 60 examples in batches of 8, with `options`."""
    batches = kd.data.py.DataSource(data_source=SyntheticImages(size=60), batch_size=8, shuffle=False, num_epochs=1,
                                    seed=0, num_workers=0, **options)
    return list(batches)[-1]


def last_batch_ids(**options) -> list[int]:
    """The ids in the last batch of one pass over 60 examples in batches of 8, with `options`."""
    return last_batch(**options)["id"].tolist()


def raw_images(count: int):
    """The first `count` images of the source, untransformed, as one numpy array."""
    import numpy as np

    return np.stack([SyntheticImages(size=64)[i]["image"] for i in range(count)])
