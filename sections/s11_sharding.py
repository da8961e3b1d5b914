"""Data parallelism: the same Trainer on 8 devices.

A Trainer shards by default (`kd.sharding.ShardingStrategy()`): the batch is split along
its first axis over every device (`FIRST_DIM`), parameters are copied to each
(`REPLICATED`), and XLA inserts the cross-device sums. The config does not change. Here
8 CPU devices are simulated with `XLA_FLAGS=--xla_force_host_platform_device_count=8`,
which must be set before jax starts, so that run happens in a child process; this
process, with its single device, trains the same model for comparison.

`trainer.train()` puts each batch on the devices itself; a hand-written loop does it with
`kd.sharding.device_put(batch, trainer.sharding.batch)`, as below.
"""

import inspect
import json
import os
import pathlib
import sys

import jax
import numpy as np
import optax
from kauldron import kd

import compat
from sections.registry import Lesson, section
from sections.shared import BATCH_SIZE, MLP, LogCosh, WithinTol, make_loader, run_child

DEVICES, STEPS = 8, 100
# Summing a batch in 8 parts reorders float32 additions; measured up to 3.6e-6 relative.
LOSS_RTOL = 1e-5


def train_and_measure(workdir: str) -> dict:
    """Trains STEPS steps on every device this process has; returns what was observed."""
    trainer = kd.train.Trainer(
        seed=0, workdir=workdir,
        train_ds=kd.data.InMemoryPipeline(loader=make_loader("train"), batch_size=BATCH_SIZE,
                                          shuffle=True, num_epochs=None, seed=0),
        model=MLP(inputs="batch.x"), num_train_steps=STEPS,
        train_losses={"logcosh": LogCosh(preds="preds.y", targets="batch.y")},
        train_metrics={"within_tol": WithinTol(preds="preds.y", targets="batch.y")},
        optimizer=optax.adam(learning_rate=1e-2),
    )  # no sharding= : the default strategy
    state = trainer.trainstep.init(trainer.train_ds.element_spec)
    batches, losses, seen = iter(trainer.train_ds), [], {}
    for step in range(1, STEPS + 1):
        host_batch = next(batches)
        batch = kd.sharding.device_put(host_batch, trainer.sharding.batch)  # as train() does
        if step == 1:
            params_before = jax.tree.map(np.asarray, state.params)  # the step donates `state`
            seen["batch_sharding"] = list(batch["x"].sharding.spec)  # mesh axis per array axis
            seen["batch_shards"] = [list(s.data.shape) for s in batch["x"].addressable_shards]
            seen["shard_devices"] = len({s.device for s in batch["x"].addressable_shards})
        state, aux = trainer.trainstep.step(state, batch, return_losses=True, return_metrics=True)
        losses.append(float(aux.loss_states["logcosh"].compute()))
        if step == 1:
            preds = MLP(inputs="batch.x").apply({"params": params_before}, host_batch["x"])["y"]
            within = aux.metric_states["within_tol"]
            seen["metric_hits"] = float(within.n_hit)
            seen["metric_rows"] = float(within.n_total)
            seen["pooled_hits"] = int((np.abs(np.asarray(preds) - host_batch["y"]) < within.parent.tol).sum())
    return {
        "devices": jax.device_count(),
        "processes": jax.process_count(),
        "host_batch_size": trainer.train_ds.host_batch_size,
        "default_strategy": trainer.sharding == kd.sharding.ShardingStrategy(),
        "params_replicated": all(p.sharding.is_fully_replicated for p in jax.tree.leaves(state.params)),
        "losses": losses,
        **seen,
    }


def kauldron_calls_jax_distributed_initialize() -> bool:
    package = pathlib.Path(kd.__file__).parent
    return any("distributed.initialize(" in path.read_text(errors="replace") for path in package.rglob("*.py"))


@section(11, "sharding", "Data parallelism: the same Trainer on 8 devices", trains=True)
def lesson(lesson: Lesson) -> str:
    out = lesson.workdir / "eight-devices.json"
    xla_flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={DEVICES}".strip()
    # A new process does not have the compat fixes this one applied: compat.run adds them.
    command = [sys.executable, *compat.python_m(), "sections.s11_sharding", str(lesson.workdir / "child"), str(out)]
    run_child(command, f"the {DEVICES}-device child process", XLA_FLAGS=xla_flags)
    eight = json.loads(out.read_text())
    one = train_and_measure(str(lesson.workdir / "one-device"))

    print(f"  child process: {eight['devices']} devices; this process: {one['devices']} device")
    print(f"  batch['x'] is split along its first axis over the mesh axis {eight['batch_sharding'][0]!r}:"
          f" {eight['shard_devices']} shards of shapes"
          f" {sorted(set(map(tuple, eight['batch_shards'])))}")
    lesson.check_equal((eight["devices"], one["devices"]), (DEVICES, 1), "devices in the child and here")
    lesson.check(eight["default_strategy"], "the Trainer used the default ShardingStrategy")
    lesson.check_equal(eight["batch_sharding"], ["devices"], "the batch's partition spec")
    lesson.check_equal((eight["shard_devices"], eight["batch_shards"]),
                       (DEVICES, [[BATCH_SIZE // DEVICES, 16]] * DEVICES), "the batch's shards")
    lesson.check(eight["params_replicated"], "the parameters are replicated on every device")

    losses_8, losses_1 = np.asarray(eight["losses"]), np.asarray(one["losses"])
    relative = float(np.max(np.abs(losses_8 - losses_1) / np.abs(losses_1)))
    print(f"\n  loss over {STEPS} steps: {losses_1[0]:.6f} -> {losses_1[-1]:.6f} on 1 device,"
          f" {losses_8[0]:.6f} -> {losses_8[-1]:.6f} on {DEVICES}")
    print(f"  largest relative difference at any step: {relative:.2g} (tolerance {LOSS_RTOL:g}: the"
          f"\n  8 partial sums add in another order, so equality to the last bit is not expected)")
    lesson.check(relative <= LOSS_RTOL, f"the 8-device loss curve matches 1 device within rtol {LOSS_RTOL:g}")

    print(f"\n  WithinTol at step 1 on the sharded batch: {eight['metric_hits']:.0f} / {eight['metric_rows']:.0f};"
          f" numpy on the whole batch: {eight['pooled_hits']} / {BATCH_SIZE}")
    lesson.check_equal((eight["metric_hits"], eight["metric_rows"]), (float(eight["pooled_hits"]), float(BATCH_SIZE)),
                       "the metric over the sharded batch against the pooled count")
    lesson.fact("batch_shards", {"devices": eight["shard_devices"], "shapes": eight["batch_shards"]})
    lesson.fact("within_tol_step_1", {"sharded": eight["metric_hits"], "pooled": eight["pooled_hits"]})
    lesson.fact("max_relative_loss_difference", relative)
    lesson.fact("final_loss", {"1_device": float(losses_1[-1]), "8_devices": float(losses_8[-1])})

    calls_it = kauldron_calls_jax_distributed_initialize()
    lesson.check(not calls_it, "Kauldron itself never calls jax.distributed.initialize")
    lesson.check(all(p.default is not inspect.Parameter.empty
                     for p in inspect.signature(jax.distributed.initialize).parameters.values()),
                 "jax.distributed.initialize() can be called without arguments")
    # Which clusters jax reads those arguments from: a private registry, so a canary for
    # the sentence below rather than an API to build on.
    from jax._src import clusters

    detected = {cluster.__name__ for cluster in clusters.ClusterEnv._cluster_types}
    lesson.check({"SlurmCluster", "OmpiCluster"} <= detected and any("Tpu" in name for name in detected),
                 f"jax detects TPU, Slurm and Open MPI clusters by itself (it knows {sorted(detected)})")
    lesson.check_equal(eight["host_batch_size"], BATCH_SIZE // eight["processes"],
                       "the pipeline's per-process batch size")
    print(f"\n  Across hosts (not run here): start the same command on every host, calling"
          f"\n  jax.distributed.initialize() first (Kauldron does not; on TPU, Slurm or Open MPI it"
          f"\n  needs no arguments). The mesh then spans every host's devices; batch_size stays the"
          f"\n  global batch, each host loads batch_size / process_count rows (here"
          f" {eight['host_batch_size']} = {BATCH_SIZE} / {eight['processes']}),"
          f"\n  and kd.sharding.device_put assembles the global array. The config does not change.")
    return f"batch split {DEVICES} ways ({BATCH_SIZE // DEVICES} rows each); loss curves agree to {relative:.1g} relative; metric pooled"


if __name__ == "__main__":  # the child: python -m sections.s11_sharding WORKDIR OUT.json
    result = train_and_measure(sys.argv[1])
    pathlib.Path(sys.argv[2]).write_text(json.dumps(result))
