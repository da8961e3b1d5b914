"""Data parallelism: the same Trainer on 8 devices.

A Trainer shards by default (`kd.sharding.ShardingStrategy()`): the batch is split along
its first axis over every device (`FIRST_DIM`), parameters are copied to each
(`REPLICATED`), and XLA inserts the cross-device sums. The config does not change. Here
8 CPU devices are simulated with `XLA_FLAGS=--xla_force_host_platform_device_count=8`,
which must be set before jax starts, so that run happens in a child process; this
process, with its single device, trains the same config for comparison.

`trainer.train()` puts each batch on the devices with
`kd.sharding.device_put(batch, trainer.sharding.batch)`; the child does it once by hand
to show the split.

Beyond one host, every host runs the same program, and the program must call
`jax.distributed.initialize()` before anything starts jax's backend (a computation,
`jax.devices()`): after that, jax refuses it (checked below). A Trainer does not call it
(checked), nor does `python -m kauldron.main` (its source never does), so such a job starts
`kauldron.main` through a wrapper that calls it first: `sections/distributed_main.py`,
which section 18 uses to run this experiment as two processes.
"""

import importlib.util
import json
import os
import pathlib
import sys

import jax
import numpy as np
from kauldron import kd, konfig

import compat
from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.children import run_child
from sections.shared import BATCH_SIZE, FEATURES, WithinTol, event_files, read_scalars

DEVICES, STEPS = 8, 100
# Summing a batch in 8 parts reorders float32 additions; measured up to 3.6e-6 relative.
LOSS_RTOL = 1e-5


def experiment(workdir: str):
    cfg = regression.get_config()
    cfg.workdir = workdir
    cfg.num_train_steps = STEPS  # log_metrics_every stays 10
    return konfig.resolve(cfg)  # no sharding= : the default strategy


def train_here(workdir: str) -> dict:
    """Trains on every device this process has; returns what it observed of the sharding."""
    trainer = experiment(workdir)
    batch = kd.sharding.device_put(next(iter(trainer.train_ds)), trainer.sharding.batch)  # as train() does
    state, _ = trainer.train()
    return {
        "devices": jax.device_count(),
        "default_strategy": trainer.sharding == kd.sharding.ShardingStrategy(),
        "batch_sharding": list(batch["x"].sharding.spec),  # the mesh axis of each array axis
        "batch_shards": [list(s.data.shape) for s in batch["x"].addressable_shards],
        "shard_devices": len({s.device for s in batch["x"].addressable_shards}),
        "params_replicated": all(p.sharding.is_fully_replicated for p in jax.tree.leaves(state.params)),
        "distributed_initialized": jax.distributed.is_initialized(),
    }


def logged(workdir: pathlib.Path, tag: str) -> dict[int, float]:
    return {step: values[tag] for step, values in read_scalars(*event_files(workdir, "train")).items() if tag in values}


def pooled_hits_at_step_0(trainer) -> int:
    """WithinTol's hits on the first batch with the initial parameters, counted by numpy."""
    batch = next(iter(trainer.train_ds))
    preds = trainer.model.apply({"params": trainer.init_state().params}, batch["x"])["y"]
    return int((np.abs(np.asarray(preds) - batch["y"]) < WithinTol(preds="", targets="").tol).sum())


def check_initialize_comes_first(lesson: Lesson, eight: dict) -> None:
    lesson.check(not eight["distributed_initialized"],
                 "after a Trainer trained, jax.distributed.is_initialized() is False: the Trainer does not call it")
    main_source = pathlib.Path(importlib.util.find_spec("kauldron.main").origin).read_text()
    lesson.check("distributed.initialize" not in main_source,
                 "kauldron/main.py never calls jax.distributed.initialize", internal=True)
    error = lesson.check_raises(
        RuntimeError, lambda: jax.distributed.initialize(coordinator_address="127.0.0.1:1", num_processes=1, process_id=0),
        "jax.distributed.initialize() once this process has computed")
    print(f"\n  jax.distributed.initialize() now, after training: RuntimeError: {str(error)[:90]}...")


@section(11, "sharding", "Data parallelism: the same Trainer on 8 devices", trains=True,
         shows="8 simulated CPU devices: the batch split 8 ways, the loss curve within 1e-5 of one device's, the metric pooled",
         reference="https://kauldron.readthedocs.io/en/latest/sharding.html")
def data_parallel_training(lesson: Lesson) -> str:
    out = lesson.workdir / "eight-devices.json"
    xla_flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={DEVICES}".strip()
    # A new process does not have the compat fixes this one applied: compat.run adds them.
    command = [sys.executable, *compat.python_m(), "sections.s11_sharding", str(lesson.workdir / "eight"), str(out)]
    run_child(command, f"the {DEVICES}-device child process", XLA_FLAGS=xla_flags)
    eight = json.loads(out.read_text())
    one = train_here(str(lesson.workdir / "one"))

    print(f"  child process: {eight['devices']} devices; this process: {one['devices']} device")
    print(f"  batch['x'] is split along its first axis over the mesh axis {eight['batch_sharding'][0]!r}:"
          f" {eight['shard_devices']} shards of shapes {sorted(set(map(tuple, eight['batch_shards'])))}")
    lesson.check_equal((eight["devices"], one["devices"]), (DEVICES, 1), "the devices in the child and here")
    lesson.check(eight["default_strategy"], "the Trainer used the default kd.sharding.ShardingStrategy()")
    lesson.check_equal(eight["batch_sharding"], ["devices"], "the batch's partition spec")
    lesson.check_equal((eight["shard_devices"], eight["batch_shards"]),
                       (DEVICES, [[BATCH_SIZE // DEVICES, FEATURES]] * DEVICES), "the batch's shards, one per device")
    lesson.check(eight["params_replicated"], "the parameters are replicated on every device")

    loss_8, loss_1 = logged(lesson.workdir / "eight", "losses/logcosh"), logged(lesson.workdir / "one", "losses/logcosh")
    lesson.check_equal(sorted(loss_8), sorted(loss_1), "the steps with a logged loss, 8 devices and 1")
    relative = max(abs(loss_8[s] - loss_1[s]) / abs(loss_1[s]) for s in loss_1)
    print(f"\n  logged loss over {STEPS} steps: {loss_1[0]:.6f} -> {loss_1[STEPS]:.6f} on 1 device,"
          f" {loss_8[0]:.6f} -> {loss_8[STEPS]:.6f} on {DEVICES}")
    print(f"  largest relative difference at a logged step: {relative:.2g} (tolerance {LOSS_RTOL:g}: the"
          f"\n  8 partial sums add in another order, so equality to the last bit is not expected)")
    lesson.check(relative <= LOSS_RTOL, f"the 8-device loss curve matches 1 device's within rtol {LOSS_RTOL:g}")

    metric_8 = logged(lesson.workdir / "eight", "metrics/within_tol")[0]
    hits = pooled_hits_at_step_0(experiment(str(lesson.workdir / "one")))
    print(f"\n  within_tol logged at step 0 on 8 devices: {metric_8:.4f}; numpy on the whole first batch:"
          f" {hits} / {BATCH_SIZE} = {hits / BATCH_SIZE:.4f}")
    lesson.check_close(metric_8, hits / BATCH_SIZE, "within_tol at step 0 on 8 devices = the pooled ratio over the batch")
    check_initialize_comes_first(lesson, eight)
    lesson.fact("batch_shards", {"devices": eight["shard_devices"], "shapes": eight["batch_shards"]})
    lesson.fact("max_relative_loss_difference", relative)
    lesson.fact("within_tol_step_0", {"8_devices": metric_8, "pooled": hits / BATCH_SIZE})
    return f"batch split {DEVICES} ways ({BATCH_SIZE // DEVICES} rows each); loss curves agree to {relative:.1g} relative; metric pooled"


if __name__ == "__main__":  # the child: python -m sections.s11_sharding WORKDIR OUT.json
    pathlib.Path(sys.argv[2]).write_text(json.dumps(train_here(sys.argv[1])))
