"""What section 14 trains: the regression MLP with dropout, one that draws noise from an
RNG stream of its own, and a metric that averages any value."""

import dataclasses

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
from kauldron import kd, kontext


class DropoutMLP(nn.Module):
    """The regression MLP with dropout after its encoder. It records the mode it ran in
    as an intermediate, `interms.is_training[0]`, so that a metric can read it."""

    inputs: kontext.Key = kontext.REQUIRED
    hidden: int = 32
    rate: float = 0.5
    is_training = kd.nn.train_property()  # a property (no annotation), set by whoever applies the model

    @nn.compact
    def __call__(self, inputs):
        h = nn.relu(nn.Dense(self.hidden, name="enc")(inputs))
        h = kd.nn.Dropout(self.rate)(h)  # active only while training
        self.sow("intermediates", "is_training", jnp.asarray(self.is_training, jnp.float32))
        return {"y": nn.Dense(1, name="out")(h)}


@dataclasses.dataclass(eq=True, frozen=True, kw_only=True)
class Average(kd.metrics.Metric):
    """The average of the values at a key path, over every batch seen."""

    values: kontext.Key = kontext.REQUIRED

    @flax.struct.dataclass
    class State(kd.metrics.AverageState):
        pass

    def get_state(self, values) -> "Average.State":
        return self.State.from_values(jnp.asarray(values, jnp.float32))


class NoisyMLP(nn.Module):
    """The regression MLP with Gaussian noise on its hidden layer, drawn from the RNG
    stream `noise`; it records the noise's mean as `interms.noise_mean[0]`."""

    inputs: kontext.Key = kontext.REQUIRED
    hidden: int = 32

    @nn.compact
    def __call__(self, inputs):
        h = nn.relu(nn.Dense(self.hidden, name="enc")(inputs))
        noise = jax.random.normal(self.make_rng("noise"), h.shape)
        self.sow("intermediates", "noise_mean", noise.mean())
        return {"y": nn.Dense(1, name="out")(h + 0.1 * noise)}
