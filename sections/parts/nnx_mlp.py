"""The regression MLP written in Flax NNX, for Kauldron's Trainer (section 17)."""

import dataclasses

from flax import nnx
from kauldron import kontext
from kauldron.contrib.modules import knnx

from sections.parts.regression import FEATURES


@dataclasses.dataclass(kw_only=True)
class NnxMLP(knnx.KdNnxModule):
    """Linear `enc` -> relu -> dropout -> Linear `out`, the regression MLP in NNX (with
    `dropout=0`, the default, exactly the Linen MLP's computation)."""

    inputs: kontext.Key = kontext.REQUIRED  # the same kontext wiring as the Linen MLP
    features: int = FEATURES
    hidden: int = 32
    dropout: float = 0.0

    def setup(self, rngs: nnx.Rngs | None = None):
        self.enc = nnx.Linear(self.features, self.hidden, rngs=rngs)
        self.drop = nnx.Dropout(self.dropout, rngs=rngs)  # active in train mode only
        self.out = nnx.Linear(self.hidden, 1, rngs=rngs)

    def __call__(self, inputs):
        h = self.enc(inputs)
        self.sow(nnx.Intermediate, "enc_out", h)  # -> interms.enc_out.value[0]
        return {"y": self.out(self.drop(nnx.relu(h)))}
