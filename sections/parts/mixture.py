"""What configs/mixture.py names (section 20): section 0's digits as a data source held in
memory, the transform that makes the shifted copies, and a random augmentation."""

import dataclasses
import functools

import numpy as np
import scipy.ndimage
import sklearn.datasets
from kauldron import kd

TRAIN_SIZE = 1437  # section 0's split: a fixed random fifth of the 1,797 digits is the test split


@functools.cache
def _digits() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """scikit-learn's digits as section 0 stores them (8x8x1 uint8, 0 to 255), and its splits."""
    digits = sklearn.datasets.load_digits()
    images = (digits.images * 255 / 16).round().astype(np.uint8)[..., None]
    order = np.random.default_rng(0).permutation(len(images))
    return images, digits.target, {"train": order[:TRAIN_SIZE], "test": order[TRAIN_SIZE:]}


@dataclasses.dataclass(frozen=True)
class Digits:
    """A split of section 0's digits as a random-access source (`len` and `[i]`), for
    `kd.data.py.DataSource`. Record `i` is its image, its label, and `index`: `i` itself,
    so that a record can be followed through a pipeline."""

    split: str = "train"

    def __len__(self) -> int:
        return len(_digits()[2][self.split])

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        images, labels, splits = _digits()
        row = splits[self.split][index]
        return {"image": images[row], "label": np.int64(labels[row]), "index": np.int64(index)}


@dataclasses.dataclass(kw_only=True, frozen=True)
class ShiftRight(kd.data.py.ElementWiseTransform):
    """Moves an image `pixels` to the right (axis -2 of `... h w c`); what falls off the
    edge is lost, and the columns it leaves are 0."""

    pixels: int = 2

    def map_element(self, element: np.ndarray) -> np.ndarray:
        shifted = np.zeros_like(element)
        shifted[..., self.pixels:, :] = element[..., :-self.pixels, :]
        return shifted


@dataclasses.dataclass(kw_only=True, frozen=True)
class RandomRotate(kd.data.py.ElementWiseRandomTransform):
    """Rotates an image (`h w c`) by an angle drawn uniformly in [-max_degrees,
    max_degrees], about its centre, with linear interpolation. grain hands
    `random_map_element` a numpy generator of its own for each example."""

    max_degrees: float = 15.0

    def random_map_element(self, element: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        angle = rng.uniform(-self.max_degrees, self.max_degrees)
        return scipy.ndimage.rotate(element, angle, axes=(0, 1), reshape=False, order=1)
