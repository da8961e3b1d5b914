"""Data parallelism: the same Trainer on 8 devices, and its parameters sharded too.

A Trainer shards by default (`kd.sharding.ShardingStrategy()`): each batch is split
along its first axis over every device, the parameters are copied to each, and XLA adds
the cross-device sums. The config does not change. One config line shards the parameters
too. Here 8 CPU devices are simulated, which must be set before jax starts, so the
8-device runs happen in a process of their own (`sections/parts/on_devices.py`).

On a machine with one TPU, start the notebook with `%env JAX_PLATFORMS=cpu`, before
anything imports jax: the kernel's own run ("The same numbers as on one device") is
compared with the 8-device runs to 1e-5, which a TPU's rounding would not meet, and a
kernel holding the chip stops the commands of "Past one host", which do not set
`JAX_PLATFORMS`, from opening it (section 0).
This tutorial runs this page on the CPU there.
"""

import json

import jax
from kauldron import konfig

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.logs import read_scalars

with konfig.imports():
    from kauldron import kd as kd_cfg

@section(11, "sharding", "Data parallelism: the same Trainer on 8 devices", part="for-real", trains=True,
         shows="8 simulated CPU devices: the batch split 8 ways, FSDP parameter shards, the loss within 1e-5 of one device's",
         reference="https://kauldron.readthedocs.io/en/latest/sharding.html")
def data_parallel_training(lesson: Lesson, workdir):
    lesson.md("""
    ## Two configs: the default strategy, and sharded parameters

    The first config is the regression experiment as it is, for 20 steps. The second adds
    one line: `kd.sharding.FSDPSharding` for the parameters, which splits each one along
    its largest axis that the device count divides. Its `min_size_to_shard_mb` (4 MiB by
    default) leaves arrays up to that size whole, which here would be all of them, so it is set
    to 0. Each config is written as JSON (section 1), for the process that trains them
    on 8 devices.
    """)
    cfg = regression_config.get_config()
    cfg.num_train_steps, cfg.workdir = 20, str(workdir / "replicated")  # named for its parameters: its batch is split
    (workdir / "replicated.json").write_text(cfg.to_json())
    cfg.workdir = str(workdir / "fsdp")
    cfg.sharding = kd_cfg.sharding.ShardingStrategy(params=kd_cfg.sharding.FSDPSharding(min_size_to_shard_mb=0))
    (workdir / "fsdp.json").write_text(cfg.to_json())
    print(cfg.sharding)
    with lesson.checks():
        import numpy as np
        from kauldron import kd

        shapes = {"enc": {"kernel": (16, 32), "bias": (32,)}, "out": {"kernel": (32, 1), "bias": (1,)}}  # section 6's
        arrays = jax.tree.map(lambda shape: np.zeros(shape, np.float32), shapes, is_leaf=lambda x: isinstance(x, tuple))
        lesson.check(kd.sharding.FSDPSharding().min_size_to_shard_mb == 4
                     and all(leaf.spec == jax.sharding.PartitionSpec()
                             for leaf in jax.tree.leaves(kd.sharding.FSDPSharding()(arrays))),
                     "FSDPSharding's min_size_to_shard_mb is 4 by default, and then leaves every array of the"
                     " regression's parameter shapes whole")

    lesson.md("""
    ## On 8 devices, by default: the batch is split, the parameters are copied

    `XLA_FLAGS=--xla_force_host_platform_device_count=8` makes jax see 8 CPU devices, and
    `JAX_PLATFORMS=cpu` makes it use them where it would take a TPU or GPU (on a TPU
    machine, set it for the kernel too: see the top of this page).
    `sections/parts/on_devices.py` (below) trains each config it is given on all 8 CPU
    devices, one after the other, and prints how each array was placed; shown here, the
    default strategy's lines (the FSDP config's are read under "With FSDP" below). Each batch of
    32 rows is split along its first axis, the mesh axis `devices`: 8 shards of 4 rows.
    So the batch size must be divisible by the device count, an evaluator's too (it
    places its batches with the same `trainer.sharding.batch`): a batch of 30 rows
    cannot be placed. The parameters, and the optimizer state, are whole on every device
    (an empty partition spec; the `opt_state` lines, cut here, read the same).
    """)
    lesson.shell("JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=8"
                 " python -m sections.parts.on_devices $WORKDIR/replicated.json $WORKDIR/fsdp.json",
                 shows=r"^replicated: (devices:|a batch of 30|batch\[|params\[)")
    with lesson.checks():
        replicated = json.loads((workdir / "replicated" / "sharding.json").read_text())
        lesson.check_equal(replicated["devices"], DEVICES, "the devices of the child")
        lesson.check_equal({path: (array["spec"], array["shard"]) for path, array in replicated["batch"].items()},
                           {"['x']": (["devices"], [4, 16]), "['y']": (["devices"], [4, 1])},
                           "the batch's partition spec and shard shapes",
                           internal="a batch the child placed as train() places one, with"
                           " kd.sharding.device_put(batch, trainer.sharding.batch): kauldron/train/train_loop.py:145")
        lesson.check_equal(replicated["batch of 30 rows"], "IndivisibleError",
                           "placing a batch of 30 rows with the Trainer's batch sharding on 8 devices: jax's error")
        from configs import heldout as heldout_config  # the regression with evaluators (section 15)

        def eval_batch_specs(sharding=None) -> set:
            """The partition specs of an evaluator's first batch, where each array's sharding is
            the Trainer's batch sharding (else None)."""
            evaluated = heldout_config.get_config()
            evaluated.workdir = str(workdir / "evaluated")
            if sharding is not None:
                evaluated.sharding = sharding
            evaluating = konfig.resolve(evaluated)
            return {array.sharding.spec if array.sharding == evaluating.sharding.batch else None
                    for array in jax.tree.leaves(next(iter(evaluating.evals["heldout"].ds_iter)))}

        lesson.check(eval_batch_specs() == {jax.P("devices")}
                     and eval_batch_specs(kd_cfg.sharding.ShardingStrategy(batch=kd_cfg.sharding.REPLICATED)) == {jax.P()},
                     "an evaluator places its batches with the Trainer's batch sharding: split by default,"
                     " whole when the Trainer's is REPLICATED")
        lesson.check(all(array["spec"] == [] and array["shard"] == array["shape"]
                         for part in ("params", "opt_state") for array in replicated[part].values()),
                     "with the default strategy every parameter and optimizer-state array is whole on each device")

    lesson.md("""
    ## The same numbers as on one device

    The same experiment trains here, in this process, on its one device. The loss curve
    on 8 devices is the one-device curve, up to the order in which the 8 partial sums are
    added, and the metric is computed over the whole batch of 32, not over one shard (a
    check below compares it with numpy's).
    """)
    cfg = regression_config.get_config()
    cfg.num_train_steps, cfg.workdir = 20, str(workdir / "one-device")
    one_device = konfig.resolve(cfg)
    one_device.train()
    print("devices here:", jax.device_count())
    losses = {name: [round(row["losses/logcosh"], 6) for _, row in sorted(read_scalars(workdir / name, "train").items())]
              for name in ("replicated", "one-device")}
    print(losses)
    with lesson.checks():
        curves = {name: logged(workdir / name, "losses/logcosh") for name in ("replicated", "one-device")}
        relative = largest_relative_difference(curves["replicated"], curves["one-device"])
        lesson.check(relative <= LOSS_RTOL, f"the 8-device loss curve matches one device's within rtol {LOSS_RTOL:g}")
        lesson.check_close(logged(workdir / "replicated", "metrics/within_tol")[0], within_tol_of_first_batch(one_device),
                           "within_tol at step 0 on 8 devices = numpy's ratio pooled over the whole batch")

    lesson.md("""
    ## With FSDP, each parameter is split across the devices, and its optimizer state too

    Under `FSDPSharding`, `enc.kernel` (16 x 32) is split along its 32 columns, so each
    device holds 16 x 4; a vector of 1 cannot be split 8 ways and stays whole. Adam's
    moments `mu` and `nu` end up split the same way as the parameter they follow, but
    not from the start: the `opt_state` of a `ShardingStrategy` is `None` by default, no
    constraint, so `init_state()` leaves them whole on every device, and training splits
    them like the parameters (the state `train()` returns). At the start, each device
    holds the whole optimizer state: empty partition specs, as printed below. Training
    sees the same numbers. The command under
    "On 8 devices, by default" trained `fsdp.json` too, after `replicated.json`; here is
    what it wrote to the FSDP run's `sharding.json`.
    """)
    fsdp = json.loads((workdir / "fsdp" / "sharding.json").read_text())
    for part, arrays in (("params", fsdp["params"]), ("opt_state", fsdp["opt_state"])):
        for path, array in arrays.items():
            if part == "params" or path.startswith(("[0].mu", "[0].nu")):  # Adam's moments, not its count
                print(f"{part + path:34} {str(array['shape']):8} -> {str(array['shard']):8} per device,"
                      f" partition spec {array['spec']}")
    print("mu from init_state(), before training:",
          {path: fsdp["opt_state at init"][path]["spec"] for path in fsdp["opt_state at init"] if path.startswith("[0].mu")})
    print([round(row["losses/logcosh"], 6) for _, row in sorted(read_scalars(workdir / "fsdp", "train").items())])
    with lesson.checks():
        shards = {path: array["shard"] for path, array in fsdp["params"].items()}
        lesson.check_equal(shards, {"['enc']['bias']": [4], "['enc']['kernel']": [16, 4], "['out']['bias']": [1],
                                    "['out']['kernel']": [4, 1]}, "each parameter's shard shape under FSDP on 8 devices")
        lesson.check(all(fsdp["opt_state"][f"[0].{moment}{path}"] == array
                         for moment in ("mu", "nu") for path, array in fsdp["params"].items()),
                     "after training, Adam's mu and nu have each parameter's shape, shard shape and partition spec")
        lesson.check(all(fsdp["opt_state at init"][f"[0].{moment}{path}"]["shard"] == array["shape"]
                         for moment in ("mu", "nu") for path, array in fsdp["params"].items()),
                     "from init_state(), before training, Adam's mu and nu are whole on every device")
        from kauldron import kd

        lesson.check(kd.sharding.ShardingStrategy().opt_state is None,
                     "a ShardingStrategy leaves the optimizer state's sharding to XLA by default (opt_state=None)")
        fsdp_relative = largest_relative_difference(logged(workdir / "fsdp", "losses/logcosh"), curves["replicated"])
        lesson.check(fsdp_relative <= LOSS_RTOL, f"the FSDP loss curve matches the replicated one within rtol {LOSS_RTOL:g}")
        lesson.fact("fsdp_shards", shards)
        lesson.fact("max_relative_loss_difference", relative)

    lesson.md("""
    ## Past one host, `jax.distributed.initialize()` comes first

    On GPU and CPU clusters every process of a job calls `jax.distributed.initialize()`
    before anything starts jax's backend: jax refuses it after. Not only a computation
    starts the backend: `jax.devices()` does, and so does importing `kauldron.main` in
    Kauldron 1.4.4, which calls `jax.devices()` (1.4.2's does not). No file of Kauldron
    calls `initialize()`, neither the Trainer nor `python -m kauldron.main`, so a wrapper
    calls it before it imports `kauldron.main` (section 18).
    `sections/parts/initialize_after.py` (below) tries it in fresh processes, for a job of
    one process on loopback: after importing `json` alone (a control), after
    `jax.devices()`, after importing `kauldron.main`:
    """)
    tried = lesson.shell("python -m sections.parts.initialize_after json\n"
                         "python -m sections.parts.initialize_after jax.devices\n"
                         "python -m sections.parts.initialize_after kauldron.main", shows=r"^after ", check=False)
    with lesson.checks():
        import importlib.metadata

        refused = network.sockets_refused()
        claims = ["in a fresh process, initialize() after importing json alone is accepted (the control)",
                  "in a fresh process, initialize() after jax.devices() is refused",
                  "in a fresh process, initialize() after importing kauldron.main: refused from Kauldron 1.4.4,"
                  " accepted in 1.4.2"]
        if refused:
            for claim in claims:
                lesson.skip_check(claim, f"this machine refuses TCP sockets ({refused}): initialize() starts a"
                                  " coordinator on loopback")
        else:
            lesson.check("after json: initialize() accepted" in tried.output, claims[0])
            lesson.check("after jax.devices: initialize() refused: jax.distributed.initialize() must be called before"
                         " any JAX calls" in tried.output, claims[1])
            kauldron_version = tuple(int(part) for part in importlib.metadata.version("kauldron").split(".")[:3])
            refused_after_main = "after kauldron.main: initialize() refused" in tried.output
            lesson.check(refused_after_main == (kauldron_version >= (1, 4, 4))
                         and (refused_after_main or "after kauldron.main: initialize() accepted" in tried.output),
                         claims[2])
        lesson.check(not (replicated["distributed_initialized"] or fsdp["distributed_initialized"]),
                     "after training on 8 devices in one process, jax.distributed was not initialised")
        lesson.check_equal(files_naming(r"jax\.distributed|distributed\.initialize|import distributed"), [],
                           "the files of the kauldron package that name jax.distributed or distributed.initialize",
                           internal="reads Kauldron's source")
        lesson.summary = (f"batch split {DEVICES} ways; FSDP shards enc.kernel to 16x4, Adam's moments alike from the"
                          f" first update; loss curves agree to {relative:.1g} relative")


from sections.parts import network  # noqa: E402 - the checks' own, not the page's

DEVICES = 8
LOSS_RTOL = 1e-5  # 8 partial sums add floats in another order; measured up to 3.6e-6 relative


def logged(run, tag: str) -> dict[int, float]:
    """{step: value} of one scalar a run logged in train/."""
    return {step: row[tag] for step, row in read_scalars(run, "train").items() if tag in row}


def largest_relative_difference(a: dict[int, float], b: dict[int, float]) -> float:
    """Between two curves logged at the same steps (an AssertionError if they were not)."""
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    return max(abs(a[step] - b[step]) / abs(b[step]) for step in b)


def within_tol_of_first_batch(trainer) -> float:
    """WithinTol over the Trainer's first batch with its initial parameters, by numpy."""
    import numpy as np

    from sections.parts.regression import WithinTol

    batch = next(iter(trainer.train_ds))
    preds = trainer.model.apply({"params": trainer.init_state().params}, batch["x"])["y"]
    return float(np.mean(np.abs(np.asarray(preds) - batch["y"]) < WithinTol(preds="", targets="").tol))


def files_naming(pattern: str) -> list[str]:
    """The installed kauldron package's .py files whose text matches the regex `pattern`."""
    import importlib.util
    import pathlib
    import re

    root = pathlib.Path(importlib.util.find_spec("kauldron").origin).parent
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.py") if re.search(pattern, path.read_text()))
