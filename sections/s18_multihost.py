"""Past one machine: the same Trainer as one job of two JAX processes.

JAX's multi-controller runtime runs one copy of the program per host; the copies meet at a
coordinator and then see every host's devices as one mesh. Kauldron's own launcher
(`kauldron.kxm`, `--xp.platform=...`, Google-internal) starts `kauldron/main.py` on each
host of a TPU slice and lets the platform join them. On GPU and CPU clusters, and under
Slurm, each process calls `jax.distributed.initialize()` before anything starts jax's
backend, which `kauldron.main` does not: `sections/distributed_main.py` (below) does,
then runs `kauldron.main`. Here two processes on this machine play two hosts, 4
simulated CPU devices each, with gloo for the cross-process sums.
"""

import inspect
import json
import socket

from kauldron import kd, konfig

from configs import multihost
from sections.children import is_loopback
from sections.lesson import Lesson
from sections.multihost_job import digest, run_job
from sections.registry import section
from sections.recompute import within_tol_of_first_batch
from sections.shared import BATCH_SIZE, event_files, read_scalars

PROCESSES, DEVICES_PER_PROCESS, STEPS = 2, 4, 20
LOSS_RTOL = 1e-5  # as in section 11: 8 partial sums added in another order


@section(18, "multihost", "Past one machine: the same Trainer as one job of two JAX processes", part="for-real", trains=True,
         starts_processes=True, start_early=True,
         shows="two JAX processes of 4 devices as one job on loopback: each reads its share of every batch; one loss; one checkpoint",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/xm/README.md")
def two_processes_one_job(lesson: Lesson) -> str:
    lesson.md("""
    ## One job: the same command in every process

    Every process runs the same command with its own `--process_id` and the coordinator's
    address, here 127.0.0.1 and a free port; the config is `configs/multihost.py` (below),
    the regression experiment with a checkpoint at the end. The logs keep the lines that
    teach; the rest stays in the workdir.
    """)
    job = lesson.workdir / "job"
    commands, listeners = run_job(job, PROCESSES, DEVICES_PER_PROCESS)
    print(commands["process-1"])
    for name in commands:
        kept, dropped = digest(lesson.workdir / f"{name}.log")
        print("\n".join(kept), f"\n({dropped})")
    for i in range(PROCESSES):
        lesson.check(f"process {i} of {PROCESSES}: {DEVICES_PER_PROCESS} local devices, {PROCESSES * DEVICES_PER_PROCESS} in the"
                     f" job" in (lesson.workdir / f"process-{i}.log").read_text(), f"process {i} saw its 4 devices, 8 in the job")

    lesson.md("""
    ## On one machine, bind the coordinator to loopback

    jax's coordinator listens on every interface (`[::]:PORT`) unless told otherwise, an
    open, unauthenticated port. On one machine, bind it to loopback:
    `JAX_COORDINATOR_BIND_ADDRESS=127.0.0.1:PORT`, or `coordinator_bind_address=` in
    `jax.distributed.initialize()`. On a cluster the other hosts must reach it: bind it to
    the job's private network only. gloo listens on the address the host name resolves to.
    """)
    print(sorted(listeners))
    port = int(commands["process-0"].split("--coordinator_address=127.0.0.1:")[1].split()[0])
    lesson.check({address for address, bound in listeners if bound == port} == {"127.0.0.1"},
                 "while the job ran, its coordinator's port was bound on 127.0.0.1 only")
    host = socket.gethostbyname(socket.gethostname())
    if is_loopback(host):
        lesson.check(listeners and all(is_loopback(address) for address, _ in listeners),
                     "while the job ran, nothing it started listened on an address other than loopback")
    else:
        lesson.skip_check("nothing the job started listened beyond loopback", f"this host's name resolves to {host}")

    lesson.md("""
    ## Each process reads its share of every batch

    `batch_size` stays the global batch; each process loads its part and
    `kd.sharding.device_put` assembles the global array. For `InMemoryPipeline`, each
    process takes its half of the very batch one process would read. A PyGrain
    `DataSource` instead gives each process every other record first and shuffles its
    share, so the global batches differ from one process's (not shown here). The reference
    is the same experiment trained here, in one process, on one device.
    """)
    reference = train_reference(lesson.workdir / "reference")
    rows = [json.loads((job / f"rows-process-{i}.json").read_text()) for i in range(PROCESSES)]
    whole = json.loads((reference.workdir / "rows-process-0.json").read_text())
    print(rows[0][:8], rows[1][:8], whole[:8])
    lesson.check_equal([len(r) for r in rows], [BATCH_SIZE // PROCESSES] * PROCESSES, "rows each process read of batch 1")
    lesson.check(rows[0] + rows[1] == whole, "process 0's rows, then process 1's, are one process's first batch")
    lesson.check("jax.process_index() :: jax.process_count()" in inspect.getsource(kd.data.py.DataSource.__mro__[1]),
                 "a PyGrain DataSource keeps every process_count-th record, from process_index", internal=True)

    lesson.md("""
    ## One loss curve, the one of one device

    The job's loss is the single process's, up to the order of the partial sums, and its
    metric is pooled over both processes' rows.
    """)
    losses = {name: {step: row["losses/logcosh"] for step, row in read_scalars(*event_files(wd, "train")).items()}
              for name, wd in (("job", job), ("reference", reference.workdir))}
    print({name: {step: round(value, 6) for step, value in curve.items()} for name, curve in losses.items()})
    relative = max(abs(losses["job"][s] - losses["reference"][s]) / abs(losses["reference"][s]) for s in losses["reference"])
    lesson.check(sorted(losses["job"]) == sorted(losses["reference"]) and relative <= LOSS_RTOL,
                 f"the job's loss curve = one process's on one device, within rtol {LOSS_RTOL:g}")
    lesson.check_close(read_scalars(*event_files(job, "train"))[0]["metrics/within_tol"], within_tol_of_first_batch(reference),
                       "the job's within_tol at step 0 = numpy's ratio over the whole global batch")

    lesson.md("""
    ## One checkpoint, which one process can resume

    The job writes one checkpoint per step, not one per process (each process writes its
    own arrays into it). A plain single-process run on one device restores it and trains on.
    """)
    checkpoints = sorted(p.name for p in (job / "checkpoints").iterdir())
    cfg = multihost.get_config()
    cfg.workdir, cfg.num_train_steps = str(job), STEPS + 10
    resumed = konfig.resolve(cfg)
    latest, (state, _) = resumed.checkpointer.latest_step, resumed.train()
    print(checkpoints, latest, int(state.step))
    lesson.check_equal(checkpoints, ["ckpt_0", f"ckpt_{STEPS}"], "the job's checkpoints")
    lesson.check_equal(sorted(p.name for p in (job / "checkpoints" / f"ckpt_{STEPS}" / "default").glob("ocdbt.process_*")),
                       ["ocdbt.process_0", "ocdbt.process_1"], "both processes wrote into the checkpoint", internal=True)
    lesson.check_equal((latest, int(state.step)), (STEPS, STEPS + 11), "one process resumed the job's checkpoint")
    lesson.fact("max_relative_loss_difference", relative)
    return f"2 processes x 4 devices on loopback, 16 rows each per batch; loss within {relative:.1g} of one device's"


def train_reference(workdir):
    """The same experiment in this process, on its one device."""
    cfg = multihost.get_config()
    cfg.workdir = str(workdir)
    trainer = konfig.resolve(cfg)
    trainer.train()
    return trainer
