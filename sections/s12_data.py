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

    `SyntheticImages` (below) returns one example per index: a small uint8 image, a label
    and an id. `kd.data.py.DataSource` batches it; `kd.inspect.json_spec_like` describes
    a batch (dtype and shape of each feature) without anyone writing its shapes down.
    """)
    raw = kd.data.py.DataSource(data_source=SyntheticImages(size=64), batch_size=8, shuffle=False,
                                num_epochs=1, seed=0, num_workers=0)
    print(kd.inspect.json_spec_like(raw.element_spec))
    with lesson.checks():
        before = kd.inspect.json_spec_like(raw.element_spec)
        lesson.check_equal(before, {"id": "i64[8]", "image": "ui8[8 8 8 3]", "label": "i64[8]"},
                           "the element spec without transforms")

    lesson.md("""
    ## Transforms are config entries

    `kd.data.Elements` keeps, drops or renames features, `kd.data.ValueRange` rescales
    one (here from [0, 255] to [-1, 1]), `kd.data.Rearrange` reshapes one with an einops
    pattern. Named in a dict, they run in order on every example. The pipeline is written
    as a config (`kd_cfg`, imported under `konfig.imports()`), and resolved to use it.
    """)
    cfg = kd_cfg.data.py.DataSource(
        data_source=images_cfg.SyntheticImages(size=64),
        transforms={
            "select": kd_cfg.data.Elements(drop=["id"], rename={"label": "target"}),
            "range": kd_cfg.data.ValueRange(key="image", vrange=(-1.0, 1.0)),
            "flatten": kd_cfg.data.Rearrange(key="image", pattern="h w c -> (h w c)"),
        },
        batch_size=8, shuffle=False, num_epochs=1, seed=0, num_workers=0,
    )
    pipeline = konfig.resolve(cfg)
    batch = next(iter(pipeline))
    print(kd.inspect.json_spec_like(pipeline.element_spec))
    print("image in", [float(batch["image"].min()), float(batch["image"].max())], "target", batch["target"])
    with lesson.checks():
        after = kd.inspect.json_spec_like(pipeline.element_spec)
        lesson.check_equal(after, {"image": "f32[8 192]", "target": "i64[8]"}, "the element spec with the transforms")
        lesson.check(max_difference(batch["image"], raw_images(8).reshape(8, -1) / 255.0 * 2.0 - 1.0) <= 1e-6,
                     "image = flatten(raw / 255 * 2 - 1), within 1e-6")
        lesson.check_equal(batch["target"].tolist(), [i % 10 for i in range(8)], "the labels, renamed target")

    lesson.md("""
    ## The pipeline is a config: override anything, then resolve

    Because the pipeline is still a config, a batch size, a transform's range or its
    pattern can be changed, in Python as here or with `--cfg...` flags from the command
    line (section 10). Resolved again, it is a different pipeline.
    """)
    cfg.batch_size = 16
    cfg.transforms["range"].vrange = (0.0, 1.0)
    cfg.transforms["flatten"].pattern = "h w c -> c h w"
    changed = konfig.resolve(cfg)
    batch = next(iter(changed))
    print(kd.inspect.json_spec_like(changed.element_spec))
    print("image in", [float(batch["image"].min()), float(batch["image"].max())])
    with lesson.checks():
        spec = kd.inspect.json_spec_like(changed.element_spec)
        lesson.check_equal(spec, {"image": "f32[16 3 8 8]", "target": "i64[16]"}, "the element spec after the overrides")
        lesson.check(max_difference(batch["image"], raw_images(16).transpose(0, 3, 1, 2) / 255.0) <= 1e-6,
                     "image = transpose(raw / 255), in [0, 1], within 1e-6")
        lesson.check_equal((pipeline.batch_size, changed.batch_size), (8, 16),
                           "the batch sizes of the pipeline resolved before the overrides, and after")
        lesson.fact("element_spec", {"raw": before, "transformed": after, "overridden": spec})
        lesson.summary = ("Elements, ValueRange and Rearrange as config entries: f32[8 192] in [-1, 1];"
                          " overridden to f32[16 3 8 8]")


def raw_images(count: int):
    """The first `count` images of the source, untransformed, as one numpy array."""
    import numpy as np

    return np.stack([SyntheticImages(size=64)[i]["image"] for i in range(count)])
