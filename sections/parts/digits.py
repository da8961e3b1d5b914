"""The digits classifier (section 0): what configs/digits.py names, kept out of the config
file by konfig's rule that configs only import what they name."""

import flax.linen as nn
from kauldron import kontext
from kauldron import ktyping as kt

NUM_CLASSES = 10


class DigitsMLP(nn.Module):
    """An image classifier: the pixels flattened, a hidden layer, and one logit per class.
    `image` is the key path the Trainer feeds `__call__` from (`"batch.image"`)."""

    image: kontext.Key = kontext.REQUIRED
    hidden: int = 128

    @kt.typechecked
    @nn.compact
    def __call__(self, image: kt.Float["*b h w c"]) -> dict[str, kt.Float["*b n"]]:
        x = image.reshape(*image.shape[:-3], -1)
        x = nn.relu(nn.Dense(self.hidden, name="hidden")(x))
        return {"logits": nn.Dense(NUM_CLASSES, name="logits")(x)}
