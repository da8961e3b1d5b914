"""A Kauldron data pipeline, with transforms as config entries.

`kd.data.py.DataSource` turns any random-access source (`len` and `[i]`) into batches
with PyGrain. Transforms run on each example before batching, and they are plain config
entries too: `kd.data.Elements` keeps, drops or renames features, `kd.data.ValueRange`
rescales one, `kd.data.Rearrange` reshapes one with an einops pattern. So the whole
pipeline is a config: any field, a transform's included, can be overridden before it is
resolved (in Python here; section 10 overrides a config from the command line).
"""


import numpy as np
from kauldron import kd, konfig

from sections.lesson import Lesson
from sections.parts.images import SyntheticImages
from sections.registry import section

def _pipeline_config(batch_size: int):
    with konfig.imports():
        from kauldron import kd as kd_cfg

        from sections.parts import images as images_cfg

    return kd_cfg.data.py.DataSource(
        data_source=images_cfg.SyntheticImages(size=64),
        transforms={
            "select": kd_cfg.data.Elements(drop=["id"], rename={"label": "target"}),
            "range": kd_cfg.data.ValueRange(key="image", vrange=(-1.0, 1.0)),  # from [0, 255]
            "flatten": kd_cfg.data.Rearrange(key="image", pattern="h w c -> (h w c)"),
        },
        batch_size=batch_size, shuffle=False, num_epochs=1, seed=0, num_workers=0,
    )


@section(12, "data", "A data pipeline with transforms, as a config",
         shows="kd.data.py.DataSource with Elements, ValueRange, Rearrange as config entries; the spec before and after",
         reference="https://kauldron.readthedocs.io/en/latest/data_py.html")
def pipeline_as_config(lesson: Lesson) -> str:
    raw = kd.data.py.DataSource(data_source=SyntheticImages(size=64), batch_size=8, shuffle=False,
                                num_epochs=1, seed=0, num_workers=0)
    before = kd.inspect.json_spec_like(raw.element_spec)
    print(f"  without transforms: {before}")
    lesson.check_equal(before, {"id": "i64[8]", "image": "ui8[8 8 8 3]", "label": "i64[8]"},
                       "the element spec without transforms")

    cfg = _pipeline_config(batch_size=8)
    print("  transforms (config entries):")
    for name, transform in cfg.transforms.items():
        print(f"    {name:8} {transform}".replace("\n", " "))
    pipeline = konfig.resolve(cfg)
    after = kd.inspect.json_spec_like(pipeline.element_spec)
    print(f"  with them:          {after}")
    lesson.check_equal(after, {"image": "f32[8 192]", "target": "i64[8]"}, "the element spec with transforms")

    batch = next(iter(pipeline))
    raw_images = np.stack([SyntheticImages(size=64)[i]["image"] for i in range(8)])
    expected = (raw_images.reshape(8, -1) / 255.0 * 2.0 - 1.0).astype(np.float32)
    low, high = float(batch["image"].min()), float(batch["image"].max())
    print(f"  a batch: image {batch['image'].shape} {batch['image'].dtype} in [{low}, {high}],"
          f" target {batch['target'].tolist()}")
    lesson.check_equal((low, high), (-1.0, 1.0), "the rescaled image range")
    lesson.check(np.allclose(batch["image"], expected, atol=1e-6), "image = flatten(raw / 255 * 2 - 1)")
    lesson.check_equal(batch["target"].tolist(), [i % 10 for i in range(8)], "the renamed labels")

    cfg.batch_size = 16  # the pipeline is a config: override, then resolve again
    cfg.transforms["range"].vrange = (0.0, 1.0)
    cfg.transforms["flatten"].pattern = "h w c -> c h w"
    changed = konfig.resolve(cfg)
    spec = kd.inspect.json_spec_like(changed.element_spec)
    batch = next(iter(changed))
    low, high = float(batch["image"].min()), float(batch["image"].max())
    print("\n  cfg.batch_size = 16; cfg.transforms['range'].vrange = (0.0, 1.0);"
          "\n  cfg.transforms['flatten'].pattern = 'h w c -> c h w'")
    print(f"  resolved again: {spec}, image in [{low}, {high}]")
    lesson.check_equal(spec, {"image": "f32[16 3 8 8]", "target": "i64[16]"}, "the spec after the overrides")
    lesson.check_equal((low, high), (0.0, 1.0), "the image range after the override")
    raw16 = np.stack([SyntheticImages(size=64)[i]["image"] for i in range(16)])
    lesson.check(np.allclose(batch["image"], raw16.transpose(0, 3, 1, 2) / 255.0, atol=1e-6),
                 "image = transpose(raw / 255)")
    lesson.fact("element_spec", {"raw": before, "transformed": after, "overridden": spec})
    return "Elements, ValueRange and Rearrange as config entries: f32[8 192] in [-1, 1]; overridden to f32[16 3 8 8] in [0, 1]"
