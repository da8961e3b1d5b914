"""Data parallelism: the same Trainer on 8 devices, and its parameters sharded too.

A Trainer shards by default (`kd.sharding.ShardingStrategy()`): each batch is split
along its first axis over every device, the parameters are copied to each, and XLA adds
the cross-device sums. The config does not change. One config line shards the parameters
too. Here 8 CPU devices are simulated, which must be set before jax starts, so the
8-device runs happen in a process of their own (`sections/on_devices.py`).
"""

import json

import jax
from kauldron import konfig

from configs import regression
from sections.children import python_m, run_child
from sections.lesson import Lesson
from sections.registry import section
from sections.recompute import largest_relative_difference, library_source, logged, within_tol_of_first_batch
from sections.shared import BATCH_SIZE, FEATURES

with konfig.imports():
    from kauldron import kd as kd_cfg

DEVICES, STEPS = 8, 20
LOSS_RTOL = 1e-5  # 8 partial sums add floats in another order; measured up to 3.6e-6 relative


@section(11, "sharding", "Data parallelism: the same Trainer on 8 devices", part="for-real", trains=True,
         starts_processes=True,
         shows="8 simulated CPU devices: the batch split 8 ways, FSDP parameter shards, the loss within 1e-5 of one device's",
         reference="https://kauldron.readthedocs.io/en/latest/sharding.html")
def data_parallel_training(lesson: Lesson) -> str:
    lesson.md("""
    ## Two configs: the default strategy, and sharded parameters

    The first config is the regression experiment as it is. The second adds one line:
    `kd.sharding.FSDPSharding` for the parameters, which splits each one along an axis the
    device count divides. Its `min_size_to_shard_mb` (4 MB by default) leaves smaller
    arrays whole, which here would be all of them, so it is set to 0.
    """)
    cfg = regression.get_config()
    cfg.num_train_steps = STEPS
    fsdp = regression.get_config()
    fsdp.num_train_steps = STEPS
    fsdp.sharding = kd_cfg.sharding.ShardingStrategy(params=kd_cfg.sharding.FSDPSharding(min_size_to_shard_mb=0))
    print(fsdp.sharding)

    lesson.md("""
    ## Run both on 8 devices

    `XLA_FLAGS=--xla_force_host_platform_device_count=8` makes jax see 8 CPU devices. The
    configs travel as JSON (section 1), and the process trains each and reports what it
    saw. The same experiment also trains here, in this process, on one device.
    """)
    runs = {"replicated": (cfg, lesson.workdir / "replicated"), "fsdp": (fsdp, lesson.workdir / "fsdp")}
    config_files = write_configs(lesson, runs)
    run_child(python_m("sections.on_devices", str(lesson.workdir / "report.json"), *config_files),
              "the 8-device process", XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}")
    report = json.loads((lesson.workdir / "report.json").read_text())
    cfg.workdir = str(lesson.workdir / "one-device")
    one_device = konfig.resolve(cfg)
    one_device.train()
    print({name: run["devices"] for name, run in report.items()}, "here:", jax.device_count())
    lesson.check_equal([run["devices"] for run in report.values()], [DEVICES, DEVICES], "the devices of the child")

    lesson.md("""
    ## By default, the batch is split and the parameters are copied

    Each batch of 32 rows is split along its first axis, the mesh axis `devices`: 8
    shards of 4 rows. The parameters are whole on every device. The loss curve is the
    one-device curve, up to the order in which the 8 partial sums are added, and the metric
    is pooled over the whole batch.
    """)
    replicated = report["replicated"]
    print("batch:", replicated["batch_spec"], replicated["batch_shards"][0], "x", len(replicated["batch_shards"]))
    losses = {name: logged(wd, "losses/logcosh") for name, (_, wd) in runs.items()} | {
        "one device": logged(lesson.workdir / "one-device", "losses/logcosh")}
    print({name: [round(loss[step], 6) for step in sorted(loss)] for name, loss in losses.items()})
    lesson.check_equal((replicated["batch_spec"], replicated["batch_shards"]),
                       (["devices"], [[BATCH_SIZE // DEVICES, FEATURES]] * DEVICES), "the batch's partition spec and shards")
    lesson.check(all(p["replicated"] for p in replicated["params"].values()),
                 "with the default strategy every parameter is replicated")
    relative = largest_relative_difference(losses["replicated"], losses["one device"])
    lesson.check(relative <= LOSS_RTOL, f"the 8-device loss curve matches one device's within rtol {LOSS_RTOL:g}")
    lesson.check_close(logged(lesson.workdir / "replicated", "metrics/within_tol")[0], within_tol_of_first_batch(one_device),
                       "within_tol at step 0 on 8 devices = numpy's ratio pooled over the whole batch")

    lesson.md("""
    ## With FSDP, each parameter is split across the devices

    Under `FSDPSharding`, `enc.kernel` (16 x 32) is split along its 32 columns, so each
    device holds 16 x 4; a vector of 1 cannot be split 8 ways and stays whole. The
    optimizer state follows the parameters. Training sees the same numbers.
    """)
    for path, param in report["fsdp"]["params"].items():
        print(f"{path:18} {param['shape']} -> {param['shard']} per device, partition spec {param['spec']}")
    lesson.check_equal({path: param["shard"] for path, param in report["fsdp"]["params"].items()},
                       {"['enc']['bias']": [4], "['enc']['kernel']": [16, 4], "['out']['bias']": [1],
                        "['out']['kernel']": [4, 1]}, "each parameter's shard shape under FSDP on 8 devices")
    lesson.check(largest_relative_difference(losses["fsdp"], losses["replicated"]) <= LOSS_RTOL,
                 f"the FSDP loss curve matches the replicated one within rtol {LOSS_RTOL:g}")

    lesson.md("""
    ## Past one host, `jax.distributed.initialize()` comes first

    On GPU and CPU clusters every process of a job calls `jax.distributed.initialize()`
    before anything starts jax's backend (on TPU it is optional). Kauldron never calls it:
    neither the Trainer nor `python -m kauldron.main`, so a wrapper calls it first
    (section 18). Called once this process has computed, it is refused.
    """)
    error = lesson.check_raises(
        RuntimeError, lambda: jax.distributed.initialize(coordinator_address="127.0.0.1:1", num_processes=1, process_id=0),
        "jax.distributed.initialize() after this process has computed")
    print(str(error).split(". ")[0])
    lesson.check("must be called before any JAX calls" in str(error), "the error says it must be called before any JAX call")
    lesson.check(not replicated["distributed_initialized"], "after training, the Trainer had not initialised jax.distributed")
    lesson.check("distributed.initialize" not in library_source("kauldron.main"), "kauldron/main.py never calls it", internal=True)
    lesson.fact("max_relative_loss_difference", relative)
    lesson.fact("fsdp_shards", {path: param["shard"] for path, param in report["fsdp"]["params"].items()})
    return f"batch split {DEVICES} ways; FSDP shards enc.kernel to 16x4; loss curves agree to {relative:.1g} relative"


def write_configs(lesson: Lesson, runs: dict) -> list[str]:
    """Each config as JSON in the workdir, with its own workdir: NAME=PATH arguments."""
    found = []
    for name, (cfg, workdir) in runs.items():
        cfg.workdir = str(workdir)
        path = lesson.workdir / f"{name}.json"
        path.write_text(cfg.to_json())
        found.append(f"{name}={path}")
    return found
