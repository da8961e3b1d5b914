"""Trains Kauldron configs on every device this process has, and says how each was sharded.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python -m sections.on_devices REPORT.json NAME=CONFIG.json [NAME=CONFIG.json ...]

Each CONFIG.json is a config written with `cfg.to_json()` (section 1). For each, this
resolves it, puts its first batch on the devices as `train()` does, trains, and writes to
REPORT.json, under NAME: the devices, the batch's shards, and each parameter's shape,
partition spec and shard shape. Section 11 runs it with 8 simulated CPU devices, which
must be set before jax starts: hence a process of its own.
"""

import json
import pathlib
import sys

import jax
from kauldron import kd, konfig


def train(config_json: pathlib.Path) -> dict:
    trainer = konfig.resolve(konfig.ConfigDict(json.loads(config_json.read_text())))
    batch = kd.sharding.device_put(next(iter(trainer.train_ds)), trainer.sharding.batch)  # as train() does
    state, _ = trainer.train()
    return {
        "devices": jax.device_count(),
        "batch_spec": list(batch["x"].sharding.spec),
        "batch_shards": [list(shard.data.shape) for shard in batch["x"].addressable_shards],
        "params": {jax.tree_util.keystr(path): {"shape": list(x.shape), "spec": list(x.sharding.spec),
                                                 "shard": list(x.sharding.shard_shape(x.shape)),
                                                 "replicated": x.sharding.is_fully_replicated}
                   for path, x in jax.tree_util.tree_flatten_with_path(state.params)[0]},
        "distributed_initialized": jax.distributed.is_initialized(),
    }


if __name__ == "__main__":
    report, *runs = sys.argv[1:]
    found = {name: train(pathlib.Path(path)) for name, path in (run.split("=", 1) for run in runs)}
    pathlib.Path(report).write_text(json.dumps(found))
