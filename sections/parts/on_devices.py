"""Trains Kauldron configs on every device this process has, and prints how each was sharded.

    JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python -m sections.parts.on_devices CONFIG.json [CONFIG.json ...]

Each CONFIG.json is a config written with `cfg.to_json()` (section 1). For each, one
after another, this resolves it, trains it, and prints the devices, how a batch is split
(put on the devices as `train()` puts it), whether a batch of 30 rows can be put there,
and, for each parameter and each array of the optimizer state, its shape, the shape of
the shard each device holds, and its partition spec; each line starts with the config
file's name. It writes the same, as JSON, to `sharding.json` in the config's workdir, with
the optimizer state as `init_state()` placed it, before training (`opt_state at init`).
XLA_FLAGS must be set before jax starts: hence a process of its own (section 11).
"""

import json
import pathlib
import sys

import jax
import numpy as np
from kauldron import kd, konfig


def shards(tree) -> dict[str, dict]:
    """For each array of a tree, by its path: its shape, one device's shard, its spec."""
    return {jax.tree_util.keystr(path): {"shape": list(x.shape), "shard": list(x.sharding.shard_shape(x.shape)),
                                         "spec": list(x.sharding.spec)}
            for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def main(config_file: str) -> None:
    cfg = konfig.ConfigDict(json.loads(pathlib.Path(config_file).read_text()))
    trainer = konfig.resolve(cfg)
    batch = kd.sharding.device_put(next(iter(trainer.train_ds)), trainer.sharding.batch)  # as train() does
    try:
        kd.sharding.device_put({"x": np.zeros((30, 16), np.float32)}, trainer.sharding.batch)
        rows_30 = "placed"
    except ValueError as error:
        rows_30 = type(error).__name__
    at_init = shards(trainer.init_state().opt_state)
    state, _ = trainer.train()
    report = {
        "devices": jax.device_count(),
        "batch": shards(batch),
        "batch of 30 rows": rows_30,
        "params": shards(state.params),
        "opt_state": shards(state.opt_state),
        "opt_state at init": at_init,
        "distributed_initialized": jax.distributed.is_initialized(),
    }
    name = pathlib.Path(config_file).stem
    print(f"{name}: devices:", report["devices"])
    print(f"{name}: a batch of 30 rows:", rows_30)
    for part in ("batch", "params", "opt_state"):
        for path, array in report[part].items():
            print(f"{name}: {part + path:34} {str(array['shape']):8} -> {str(array['shard']):8} per device,"
                  f" partition spec {array['spec']}")
    pathlib.Path(trainer.workdir, "sharding.json").write_text(json.dumps(report))


if __name__ == "__main__":
    for config_file in sys.argv[1:]:
        main(config_file)
