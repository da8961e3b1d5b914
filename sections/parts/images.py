"""Synthetic images: a random-access data source for `kd.data.py.DataSource` (section 12)."""

import dataclasses

import numpy as np

IMAGE_SHAPE = (8, 8, 3)


@dataclasses.dataclass(frozen=True)
class SyntheticImages:
    """Small random uint8 images with a label and an id. Each image holds a 0 and a 255,
    so a rescaled image reaches both ends of its new range exactly."""

    size: int = 64

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        image = np.random.default_rng([0, index]).integers(0, 256, size=IMAGE_SHAPE, dtype=np.uint8)
        image[0, 0, :2] = 0, 255
        return {"image": image, "label": np.int64(index % 10), "id": np.int64(index)}
