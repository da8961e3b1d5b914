"""Past one machine: the same Trainer as one job of two JAX processes.

JAX's multi-controller runtime runs one copy of the program per host; the copies meet at a
coordinator and then see every host's devices as one mesh. Each process calls
`jax.distributed.initialize()` before anything starts jax's backend (jax's docstring: for
multi-host GPU and Cloud TPU; on TPU, Slurm or Open MPI its arguments may be left out, and
it finds them in the environment), which
`kauldron.main` does not: `sections/parts/distributed_main.py` does, then runs
`kauldron.main`. (Kauldron's own launcher, `kauldron.kxm`, is Google-internal.) Here two
processes on this machine play two hosts, 4 simulated CPU devices each, with gloo, jax's
default on CPU, for the cross-process sums.
"""

import json
import os
import random
import socket

import jaxlib

from harness import Lesson, section
from sections.parts.logs import read_scalars


@section(18, "multihost", "Past one machine: the same Trainer as one job of two JAX processes", part="for-real", trains=True,
         start_early=True,
         shows="two JAX processes of 4 devices as one job on loopback: each reads its share of every batch; one loss; one checkpoint",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/xm/README.md")
def two_processes_one_job(lesson: Lesson, workdir):
    lesson.md("""
    ## A port for the coordinator, on loopback

    The processes of a job meet at a coordinator, which process 0 runs at an address
    they all know: here 127.0.0.1 and a free port, chosen below the ports the system
    hands out to outgoing connections (from 32768 on Linux, 49152 on macOS), so that no
    connection takes it before the coordinator does. The commands read it as `$PORT`.
    """)
    with lesson.checks():
        skip_without_sockets(lesson)
    with socket.socket() as probe:
        while True:
            port = random.randint(20000, 32767)
            try:
                probe.bind(("127.0.0.1", port))
                break
            except OSError:  # taken: try another
                pass
    os.environ["PORT"] = str(port)
    with lesson.checks():
        low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        lesson.check(port < low, "the port is below this machine's range for outgoing connections",
                     internal="reads Linux's ip_local_port_range")
        import jax

        lesson.check("JAX_CPU_COLLECTIVES_IMPLEMENTATION" not in os.environ
                     and jax.config.jax_cpu_collectives_implementation == "gloo",
                     "jax's implementation of cross-process sums on CPU, none set: gloo")

    lesson.md("""
    ## One job: the same command in every process

    Each process runs `sections/parts/distributed_main.py` (below) with its own
    `--process_id`: it joins the job, then runs `kauldron.main` on
    `configs/multihost.py` (below), the regression experiment for 20 steps with a
    checkpoint at the end and an evaluator. `JAX_PLATFORMS=cpu` and `XLA_FLAGS` give
    each process 4 CPU devices, even where jax would take a TPU (one process at a time
    holds a chip) or a GPU. jax's coordinator listens on every interface (`[::]:PORT`) unless
    told otherwise, an open port, unauthenticated by default (jax 0.12 can require mutual
    TLS: `initialize(mtls_cert_file=..., mtls_key_file=..., mtls_ca_file=...)`; 0.10 cannot):
    `JAX_COORDINATOR_BIND_ADDRESS` binds it to loopback (on a cluster, bind it to the job's
    private network; gloo listens on the address the host name resolves to). The third command trains the same experiment
    meanwhile in one process on one device, for reference. The block is one bash
    script (a `%%bash` cell in a notebook): each `&` starts a process in the
    background, and `wait` waits for all three.
    """)
    job = lesson.shell("""JAX_PLATFORMS=cpu JAX_COORDINATOR_BIND_ADDRESS=127.0.0.1:$PORT XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m sections.parts.distributed_main --coordinator_address=127.0.0.1:$PORT --num_processes=2 \\
      --process_id=0 --cfg=configs/multihost.py --cfg.workdir=$WORKDIR/job &
    JAX_PLATFORMS=cpu JAX_COORDINATOR_BIND_ADDRESS=127.0.0.1:$PORT XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m sections.parts.distributed_main --coordinator_address=127.0.0.1:$PORT --num_processes=2 \\
      --process_id=1 --cfg=configs/multihost.py --cfg.workdir=$WORKDIR/job &
    JAX_PLATFORMS=cpu python -m kauldron.main --cfg=configs/multihost.py --cfg.workdir=$WORKDIR/reference &
    wait""", background=True, shows=r"^process 0 of 2")
    with lesson.checks():
        listeners = listening_while_running(job)
        lesson.check({address for address, bound in listeners if bound == port} == {"127.0.0.1"},
                     "while the job ran, its coordinator's port was bound on 127.0.0.1 only")
        host = socket.gethostbyname(socket.gethostname())
        if is_loopback(host):
            lesson.check(listeners and all(is_loopback(address) for address, _ in listeners),
                         "while the job ran, nothing it started listened on an address other than loopback")
        else:
            lesson.skip_check("nothing the job started listened beyond loopback", f"this host's name resolves to {host}")
        import inspect

        mtls = {"mtls_cert_file", "mtls_key_file", "mtls_ca_file"}
        lesson.check((mtls <= set(inspect.signature(jax.distributed.initialize).parameters)) == (jax.__version_info__ >= (0, 12)),
                     "jax.distributed.initialize takes mtls_cert_file, mtls_key_file and mtls_ca_file from jax 0.12, not"
                     " in 0.10")
        lesson.check_equal(kauldron_files_naming("distributed.initialize"), [],
                           "the files of Kauldron, kauldron/main.py among them, that call jax.distributed.initialize()",
                           internal="reads Kauldron's source")
        lesson.skip_check("a job started by Kauldron's own launcher, kauldron.kxm",
                          "kauldron.kxm, the XManager launcher, does not import from PyPI")

    lesson.md("""
    ## Each process reads its share of every batch

    `batch_size` stays the global batch: each process yields its part, and
    `kd.sharding.device_put` assembles the global array over the job's 8 devices
    (`kd.sharding.FIRST_DIM`: the batch split along its first axis). How the rows are
    shared depends on the pipeline. `InMemoryPipeline`: each process takes its half of
    the very batch one process would read. A PyGrain pipeline (`kd.data.py`, here the
    evaluator's): with `shard_by_process=True`, the default, process *i* keeps records
    *i*, *i* + 2, *i* + 4... and shuffles its share, so the global batches differ from
    one process's. Each process batches its own share and drops what does not fill a
    batch: with 127 held-out rows, process 0 would read 4 batches and process 1 only 3,
    and processes that run different numbers of steps can hang the job. A held-out set
    that is a multiple of the global batch size is safe. The config's pipelines wrote
    down the rows of their first batch.
    """)
    def rows_read(run, pipeline, process):
        return json.loads((workdir / run / f"{pipeline}-rows-process-{process}.json").read_text())

    for run, processes in (("job", [0, 1]), ("reference", [0])):
        for pipeline in ("train", "eval"):
            for i in processes:
                rows = rows_read(run, pipeline, i)
                print(f"{run}, {pipeline}, process {i}: {len(rows)} rows", rows[:8])
    with lesson.checks():
        check_devices(lesson, job.output)
        check_rows(lesson, rows_read)
        lesson.check_equal([batches_per_process(rows) for rows in (127, 128)], [[4, 3], [4, 4]],
                           "batches of 32 each process of 2 would read from 127 and 128 rows, with the evaluator's"
                           " PyGrain settings", internal="fakes jax's process index and count")
        lesson.skip_check("processes that run different numbers of eval steps can hang the job",
                          "not run: a hung job only ends at its timeout")

    lesson.md("""
    ## One loss curve, the one of one device

    The job's training loss is the single process's, up to the order of the partial
    sums, and its metric is pooled over both processes' rows. The evaluator's numbers
    are pooled over all 128 held-out rows, whichever process read which.
    """)
    curves = {run: {step: row["losses/logcosh"] for step, row in read_scalars(workdir / run, "train").items()}
              for run in ("job", "reference")}
    print({run: {step: round(value, 6) for step, value in curve.items()} for run, curve in curves.items()})
    evals = {run: read_scalars(workdir / run, "eval") for run in ("job", "reference")}
    print({run: {step: round(row["metrics/within_tol"], 6) for step, row in rows.items()} for run, rows in evals.items()})
    with lesson.checks():
        relative = check_curves(lesson, curves, evals, workdir)

    lesson.md("""
    ## One checkpoint, which one process resumes

    The job wrote one checkpoint per saved step, not one per process, in the workdir
    every process was given (on real hosts, `--cfg.workdir` must be one path on a
    filesystem they all share). Every array here is replicated, and each process wrote
    its share of them: orbax splits a replicated array into slices, one per device that
    holds a copy, along an axis that divides evenly among them (its default unless
    `JAX_PLATFORMS` contains `gpu` or `cuda`); an array with no such axis goes whole to process 0.
    A plain `kauldron.main`, one process on one device,
    resumes it and trains on to step 40. The parameters, the optimizer's state and the
    step come back from `ckpt_20`; the position in the data does not: an
    `InMemoryPipeline` is not checkpointed, so the resumed run reads its batches again
    from the first.
    """)
    resumed = lesson.shell("JAX_PLATFORMS=cpu python -m kauldron.main --cfg=configs/multihost.py --cfg.workdir=$WORKDIR/job"
                           " --cfg.num_train_steps=40", shows=r"^Starting training loop")
    print(sorted(path.name for path in (workdir / "job" / "checkpoints").iterdir()))
    print(sorted(read_scalars(workdir / "job", "train")))
    with lesson.checks():
        lesson.check_equal(sorted(path.name for path in (workdir / "job" / "checkpoints").iterdir()),
                           ["ckpt_0", "ckpt_20", "ckpt_40"], "the job's checkpoints, and the resumed run's",
                           internal="reads orbax's file layout")
        lesson.check_equal(sorted(path.name for path in (workdir / "job" / "checkpoints" / "ckpt_20" / "default")
                                  .glob("ocdbt.process_*")),
                           ["ocdbt.process_0", "ocdbt.process_1"], "both processes of the job wrote into the one ckpt_20",
                           internal="reads orbax's file layout")
        check_shares(lesson, workdir / "job" / "checkpoints" / "ckpt_20" / "default")
        lesson.check_equal(sorted(read_scalars(workdir / "job", "train")), [0, 10, 20, 30, 40],
                           "the steps logged in the job's workdir")
        check_resumed(lesson, workdir, resumed.output, curves["job"][20])
        lesson.fact("max_relative_loss_difference", relative)
        lesson.summary = f"2 processes x 4 devices on loopback, 16 rows each per batch; loss within {relative:.1g} of one device's"

    lesson.md("""
    ## Going further: jaxlib 0.12.1 hangs a job that half uses the compile cache

    With jax's persistent compilation cache on (`tutorial.py` turns it on in every
    process it runs, for every program; a notebook has it only with
    `JAX_COMPILATION_CACHE_DIR` set, and then keeps only programs that took 1 s or more
    to compile, unless `jax_persistent_cache_min_compile_time_secs` says less), jaxlib
    0.12.1 hangs a job like the one above: a cross-process sum whose program process 0
    loaded from the cache while process 1 compiled it never completes. On a CPU each
    process has cache keys of its own, and only process 0 writes the cache, so the job
    meets this as soon as a program is compiled a second time, as Kauldron's train step
    is. `distributed_main.py` turns the cache off on that version, which spares a job
    like the one above; pinning jax and jaxlib to 0.12.0.1 works too. Two processes that
    sum an array twice, forgetting their compiled programs in between, show it
    (`sections/parts/allreduce_hang.py`): on jaxlib 0.12.1 neither second sum comes; on
    older versions, as in the run below, both do.
    """)
    hang = lesson.shell("""JAX_PLATFORMS=cpu JAX_COORDINATOR_BIND_ADDRESS=127.0.0.1:$PORT XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m sections.parts.allreduce_hang --port=$PORT --process_id=0 --cache_dir=$WORKDIR/sums-cache &
    JAX_PLATFORMS=cpu JAX_COORDINATOR_BIND_ADDRESS=127.0.0.1:$PORT XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
      python -m sections.parts.allreduce_hang --port=$PORT --process_id=1 --cache_dir=$WORKDIR/sums-cache &
    wait""", check=False, shows=r"^0 ")  # process 0's lines: a notebook interleaves the two processes'
    print("jaxlib", jaxlib.__version__)
    with lesson.checks():
        lesson.check("0 persistent cache hit" in hang.output and "1 persistent cache hit" not in hang.output,
                     "the second sum's program: a cache hit in process 0, compiled afresh in process 1")
        if tuple(int(part) for part in jaxlib.__version__.split(".")[:3]) >= (0, 12, 1):
            lesson.check("HANG" in hang.output and "second sum:" not in hang.output,
                         "jaxlib 0.12.1 or newer (the day it is fixed, this fails): neither process's second sum comes")
        else:
            lesson.check(hang.returncode == 0 and hang.output.count("second sum: 8.0") == 2,
                         "jaxlib older than 0.12.1: both processes' second sum is 8.0")


# How the lesson checks itself.
import itertools  # noqa: E402
import pathlib  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402
from kauldron import kd, konfig  # noqa: E402

from configs import multihost as multihost_config  # noqa: E402
from sections.parts.network import is_loopback, listening, sockets_refused  # noqa: E402

LOSS_RTOL = 1e-5  # as in section 11: 8 partial sums added in another order


def alive(pids: list[int]) -> bool:
    try:
        return bool(pids) and all(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    except psutil.NoSuchProcess:
        return False


def skip_without_sockets(lesson: Lesson) -> None:
    """A machine that refuses TCP sockets, loopback included (a sandbox can), cannot run a
    job whose processes meet over TCP: the section is skipped there, saying so."""
    refused = sockets_refused()
    if refused:
        lesson.skip(f"this machine refuses TCP sockets, loopback included ({refused}): the processes of a"
                    " JAX job meet over TCP")


def listening_while_running(job) -> set[tuple[str, int]]:
    """Every (address, port) the job's two processes (started first) listened on, polled
    until one of them ends (each listens for seconds; a poll costs a few ms of CPU), or the
    job is past its bounds (`check_progress` then stops it and raises, in one line)."""
    found: set[tuple[str, int]] = set()
    while alive(job.pids[:2]):
        found |= listening(job.pids[:2])
        job.check_progress()
        time.sleep(0.25)
    return found


def check_devices(lesson: Lesson, output: str) -> None:
    for i in range(2):
        lesson.check(f"process {i} of 2: 4 local devices, 8 in the job" in output,
                     f"process {i} saw its 4 devices, 8 in the job")


def check_rows(lesson: Lesson, rows_read) -> None:
    train = [rows_read("job", "train", i) for i in range(2)]
    lesson.check_equal([len(rows) for rows in train], [16, 16], "rows each process read of the first training batch")
    lesson.check(train[0] + train[1] == rows_read("reference", "train", 0),
                 "InMemoryPipeline: process 0's rows, then process 1's, are one process's first batch")
    shares = [rows_read("job", "eval", i) for i in range(2)]
    lesson.check([len(rows) for rows in shares] == [16, 16] and all(row % 2 == i for i in range(2) for row in shares[i]),
                 "PyGrain, 2 processes: each first batch holds 16 rows, process i's all of index i mod 2")
    lesson.check(shares[0] != sorted(shares[0]) and [row + 1 for row in shares[0]] == shares[1],
                 "PyGrain: each process shuffled its share with the same seed (process 1's rows = process 0's + 1)")
    lesson.check(set(shares[0] + shares[1]) != set(rows_read("reference", "eval", 0)),
                 "PyGrain: the job's first global batch is not one process's first batch")


def batches_per_process(rows: int, processes: int = 2) -> list[int]:
    """How many batches a `kd.data.py.DataSource` with the evaluator's settings (global
    batch 32, shuffled, one epoch) gives each process of a job of `processes`, over
    `rows` records: run here with jax's process index and count faked."""
    from unittest import mock

    records = [{"index": np.int64(i)} for i in range(rows)]
    counts = []
    for process in range(processes):
        with (mock.patch.object(jax, "process_index", lambda: process),
              mock.patch.object(jax, "process_count", lambda: processes)):
            source = kd.data.py.DataSource(data_source=records, shuffle=True, batch_size=32, num_epochs=1,
                                           num_workers=0, seed=0)
            counts.append(sum(1 for _ in source))
    return counts


def kauldron_files_naming(text: str) -> list[str]:
    """The installed Kauldron's Python files whose text holds `text`."""
    import kauldron

    root = pathlib.Path(kauldron.__file__).parent
    return [str(path.relative_to(root)) for path in sorted(root.rglob("*.py")) if text in path.read_text()]


def check_curves(lesson: Lesson, curves: dict, evals: dict, workdir) -> float:
    job, reference = curves["job"], curves["reference"]
    relative = max(abs(job[step] - reference[step]) / abs(reference[step]) for step in reference)
    lesson.check(sorted(job) == sorted(reference) and relative <= LOSS_RTOL,
                 f"the job's loss curve = one process's on one device, within rtol {LOSS_RTOL:g}")
    lesson.check_close(read_scalars(workdir / "job", "train")[0]["metrics/within_tol"], within_tol_of_first_batch(workdir),
                       "the job's within_tol at step 0 = numpy's ratio over the whole global batch, one array"
                       " over both processes' devices")
    lesson.check(sorted(evals["job"]) == sorted(evals["reference"]) == [0, 20] and all(
        evals["job"][step]["metrics/within_tol"] == evals["reference"][step]["metrics/within_tol"]
        and abs(evals["job"][step]["losses/logcosh"] / evals["reference"][step]["losses/logcosh"] - 1) <= LOSS_RTOL
        for step in (0, 20)), "the evaluator's within_tol and loss at steps 0 and 20: the same in the job as in one process")
    return relative


def check_resumed(lesson: Lesson, workdir, output: str, job_step_20: float) -> None:
    """The job's step-20 loss and the resumed run's at steps 20 and 30 against training
    steps computed here from ckpt_20: on the pipeline's batches from its first, with
    ckpt_20's optimizer state and with a fresh one, and on the batch after the job's 20th."""
    lesson.check("Starting training loop at step 20" in output, "the resumed run started at step 20",
                 internal="reads Kauldron's log line")
    logged = {step: row["losses/logcosh"] for step, row in read_scalars(workdir / "job", "train").items()}
    computed = losses_from_ckpt_20(workdir)
    lesson.check_close(job_step_20, computed["21st batch"][20], "the job's step-20 loss = ckpt_20's parameters on the"
                       " pipeline's 21st batch", rel=LOSS_RTOL)
    lesson.check_close(logged[20], computed["from the first batch"][20], "the resumed run's step-20 loss = ckpt_20's"
                       " parameters on the pipeline's first batch: the data restarted", rel=LOSS_RTOL)
    lesson.check(abs(computed["21st batch"][20] / computed["from the first batch"][20] - 1) > 100 * LOSS_RTOL,
                 "ckpt_20's loss on the 21st batch and on the first differ by more than 100 x that rtol")
    lesson.check_close(logged[30], computed["from the first batch"][30], "the resumed run's step-30 loss = 10 steps"
                       " from ckpt_20's parameters and optimizer state, on the pipeline's first batches", rel=LOSS_RTOL)
    lesson.check(abs(logged[30] / computed["fresh optimizer"][30] - 1) > 100 * LOSS_RTOL,
                 "the resumed run's step-30 loss is not that of 10 steps from a fresh optimizer state")


def check_shares(lesson: Lesson, saved) -> None:
    """What each process wrote into a checkpoint of the job: every array's sharding,
    and the slices (zarr chunks) in each process's own OCDBT store."""
    from unittest import mock

    import tensorstore
    from orbax.checkpoint._src.serialization import jax_array_handlers

    shardings = [json.loads(value) for value in json.loads((saved / "_sharding").read_text()).values()]
    lesson.check(len(shardings) > 1 and all(sharding["partition_spec"] == [] and len(sharding["device_mesh"]["mesh"]) == 8
                                            for sharding in shardings),
                 f"each of the {len(shardings)} arrays of ckpt_20: saved as replicated over the job's 8 devices",
                 internal="reads orbax's file layout")
    stores = [tensorstore.KvStore.open({"driver": "ocdbt", "base": f"file://{saved}/ocdbt.process_{i}"}).result()
              for i in range(2)]
    keys = [[key.decode() for key in store.list().result()] for store in stores]
    shapes = {key[:-len("/.zarray")]: json.loads(stores[0].read(key).result().value)["shape"]
              for key in keys[0] if key.endswith("/.zarray")}
    slices = [{name: sorted(int(key.split("/")[1].split(".")[0]) for key in found if key.startswith(name + "/")
                            and not key.endswith(".zarray")) for name in shapes} for found in keys]
    divisible = {name for name, shape in shapes.items() if any(size % 8 == 0 for size in shape)}
    lesson.check(len(shapes) == len(shardings) and 0 < len(divisible) < len(shapes)
                 and all(slices[0][name] == [0, 1, 2, 3] and slices[1][name] == [4, 5, 6, 7] for name in divisible)
                 and all(slices[0][name] == [0] and slices[1][name] == [] for name in set(shapes) - divisible),
                 f"in ckpt_20, each of the {len(divisible)} arrays with an axis of a multiple of 8: slices 0-3 of 8 written"
                 f" by process 0, 4-7 by process 1; the {len(shapes) - len(divisible)} others"
                 f" ({', '.join(sorted(set(shapes) - divisible))}) whole by process 0",
                 internal="reads orbax's file layout")
    defaults = {}
    for platforms in ("", "cpu", "tpu", "cuda", "gpu"):
        with mock.patch.dict(os.environ):
            os.environ.pop("JAX_PLATFORMS", None)
            os.environ.update({"JAX_PLATFORMS": platforms} if platforms else {})
            defaults[platforms or "unset"] = jax_array_handlers._get_default_use_replica_parallel()
    lesson.check_equal(defaults, {"unset": True, "cpu": True, "tpu": True, "cuda": False, "gpu": False},
                       "orbax's default use_replica_parallel, by JAX_PLATFORMS", internal="a private name of orbax")


def losses_from_ckpt_20(workdir) -> dict[str, dict[int, float]]:
    """Training losses by step from the job's ckpt_20, computed here, each run on its own
    batches of the pipeline: from its first (steps 20 to 30), the same with a fresh
    optimizer state, and its 21st batch (step 20 alone, as the job's last step read it)."""
    cfg = multihost_config.get_config()
    cfg.workdir = str(workdir / "reference")  # its records are there already: nothing is written
    trainer = konfig.resolve(cfg)
    checkpointer = kd.ckpts.Checkpointer(workdir=workdir / "job", save_interval_steps=1)
    runs = {"from the first batch": (0, 11, False), "fresh optimizer": (0, 11, True), "21st batch": (20, 1, False)}
    losses = {}
    for run, (skipped, steps, fresh_optimizer) in runs.items():
        state = checkpointer.restore(trainer.init_state(), step=20)  # anew: a step donates its state
        if fresh_optimizer:
            state = state.replace(opt_state=trainer.init_state().opt_state)
        batches = itertools.islice(iter(trainer.train_ds), skipped, None)
        losses[run] = {}
        for step in range(20, 20 + steps):
            state, aux = trainer.trainstep.step(state, next(batches), return_losses=True)
            losses[run][step] = float(aux.compute().loss_values["losses/logcosh"])
    return losses


def within_tol_of_first_batch(workdir) -> float:
    """WithinTol over the reference run's first batch with the initial parameters, by numpy."""
    cfg = multihost_config.get_config()
    cfg.workdir = str(workdir / "reference")
    trainer = konfig.resolve(cfg)
    batch = next(iter(trainer.train_ds))
    preds = trainer.model.apply({"params": trainer.init_state().params}, batch["x"])["y"]
    return float(np.mean(np.abs(np.asarray(preds) - batch["y"]) < 0.25))
