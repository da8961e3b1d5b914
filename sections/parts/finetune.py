"""What section 13 fine-tunes: the regression MLP's encoder under a new head, and an
init transform that loads it under another name."""

import dataclasses

import flax.linen as nn
import jax
from kauldron import kd, kontext
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


class MLPRenamed(nn.Module):
    """The regression MLP's encoder, renamed `encoder`, then a new `head`."""

    inputs: kontext.Key = kontext.REQUIRED
    hidden: int = 32

    @nn.compact
    def __call__(self, inputs):
        return {"y": nn.Dense(1, name="head")(nn.relu(nn.Dense(self.hidden, name="encoder")(inputs)))}


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadRenamed(kd.ckpts.InitTransform):
    """Loads parameters from the latest checkpoint of `workdir` under new names:
    `new_to_old={"encoder": "enc"}` puts the checkpoint's `params["enc"]` into
    `params["encoder"]`. Shapes must match, and this transform does not check them; each
    array keeps the new state's sharding."""

    workdir: str
    new_to_old: dict[str, str]

    def transform(self, state):
        checkpointer = kd.ckpts.Checkpointer(workdir=self.workdir, save_interval_steps=1)
        old = checkpointer.restore(kd.ckpts.items.StandardCheckpointItem())["params"]  # the latest step's
        params = dict(state.params)
        for new, old_name in self.new_to_old.items():
            params[new] = jax.tree.map(lambda new_leaf, old_leaf: jax.device_put(old_leaf, new_leaf.sharding),
                                       params[new], old[old_name])
        return state.replace(params=params)
