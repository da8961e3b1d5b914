"""The models section 13 fine-tunes: the regression MLP's encoder under new heads."""

import flax.linen as nn
from kauldron import kontext
from kauldron import ktyping as kt


class MLPNewHead(nn.Module):
    """The regression MLP's encoder `enc`, then a new head: `adapter` (Dense 16, relu), `head`."""

    inputs: kontext.Key = kontext.REQUIRED
    hidden: int = 32

    @kt.typechecked
    @nn.compact
    def __call__(self, inputs: kt.Float["*b f"]) -> dict[str, kt.Float["*b 1"]]:
        h = nn.relu(nn.Dense(self.hidden, name="enc")(inputs))
        h = nn.relu(nn.Dense(16, name="adapter")(h))
        return {"y": nn.Dense(1, name="head")(h)}


class MLPResizedOut(nn.Module):
    """The MLP with its head still called `out`, but with 2 outputs instead of 1."""

    inputs: kontext.Key = kontext.REQUIRED

    @nn.compact
    def __call__(self, inputs):
        return {"y": nn.Dense(2, name="out")(nn.relu(nn.Dense(32, name="enc")(inputs)))}
