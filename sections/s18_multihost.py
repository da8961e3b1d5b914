r"""Past one machine: the same Trainer as one job of two JAX processes.

JAX's multi-controller runtime runs one copy of the program per host; the copies meet
at a coordinator (`jax.distributed.initialize()`) and then see every host's devices as one
mesh. Here two processes on this machine play two hosts, 4 simulated CPU devices each,
with a coordinator on a free port of 127.0.0.1 and gloo for the cross-process sums (jax's
default on CPU). Each is started as a user starts one process of a real job:

    python -m sections.distributed_main --coordinator_address=127.0.0.1:PORT \
        --num_processes=2 --process_id=I --cfg=configs/multihost.py --cfg.workdir=...

`sections/distributed_main.py` calls `jax.distributed.initialize()` and then runs
`kauldron.main`: Kauldron does not initialise the job itself, and it must happen before
anything starts jax's backend. `configs/multihost.py` is the regression experiment of
section 11 (100 steps, a checkpoint at the end). Kauldron shares out the data by process:
`batch_size` stays the global batch, each process loads its own half of every batch, and
`kd.sharding.device_put` assembles the global array. Only process 0 writes the logs.
The reference is the same experiment trained here, in the lesson's own process, on one
device: section 11 shows that one device and eight give the same curve.

On a real cluster the command is the same on every host. On TPU pods, Slurm and Open MPI,
leave out the coordinator, process count and id: `initialize()` reads them from the
environment (not checked here). The workdir must be one path every host can write:
Orbax writes each checkpoint once, with every process writing its own arrays.
"""

import json
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
from kauldron import kd, konfig

import compat
from configs import multihost
from sections.children import children
from sections.lesson import Lesson, LessonFailed
from sections.registry import section
from sections.shared import BATCH_SIZE, WithinTol, event_files, read_scalars

PROCESSES, DEVICES_PER_PROCESS, STEPS = 2, 4, 100
LOSS_RTOL = 1e-5  # as in section 11: 8 partial sums added in another order
JOIN_TIMEOUT = 60  # seconds a process waits for the others to join before it gives up
JOB_TIMEOUT = 600  # seconds before the lesson stops a job that has not finished
ATTEMPTS = 3  # another run may take the free port between our choosing it and the coordinator binding it
# The lines of a child's log worth showing: who it is, where training started, the last losses.
TEACHES = re.compile(rf"^process \d+ of \d+: |Starting training loop at step \d+|\] \[{STEPS}\] collection=train losses")
GLOO = re.compile(r"^\[Gloo\]", re.MULTILINE)
# What the coordinator (process 0) prints, before it crashes, when its port is taken.
PORT_TAKEN = re.compile(r"Failed to add port to server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_all(procs: dict[str, subprocess.Popen], logdir: pathlib.Path) -> None:
    """Waits until every child has exited 0; the first failure or the timeout stops all."""
    deadline = time.monotonic() + JOB_TIMEOUT
    # A list, not any(): every child must be polled, or a dead one goes unnoticed.
    while [proc.poll() for proc in procs.values()].count(None):
        check_none_failed(procs, logdir)
        if time.monotonic() > deadline:
            raise LessonFailed(f"the job did not finish in {JOB_TIMEOUT} s: stopped")
        time.sleep(0.2)
    check_none_failed(procs, logdir)


def check_none_failed(procs: dict[str, subprocess.Popen], logdir: pathlib.Path) -> None:
    for name, proc in procs.items():
        if proc.returncode not in (None, 0):
            code = proc.returncode
            signal_name = f" ({signal.Signals(-code).name})" if code < 0 else ""
            raise LessonFailed(f"{name} exited {code}{signal_name}: {last_line(logdir / f'{name}.log')}")


def last_line(log: pathlib.Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def commands(job: pathlib.Path, port: int) -> dict:
    python_m = [sys.executable, *compat.python_m()]  # compat.run when this process needed a fix
    config = ["--cfg=configs/multihost.py"]
    devices = "--xla_force_host_platform_device_count"
    job_env = {"XLA_FLAGS": f"{devices}={DEVICES_PER_PROCESS}",
               "JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}  # jax listens on every interface otherwise
    return {f"process-{i}": ([*python_m, "sections.distributed_main", f"--coordinator_address=127.0.0.1:{port}",
                               f"--num_processes={PROCESSES}", f"--process_id={i}",
                               f"--initialization_timeout={JOIN_TIMEOUT}", *config, f"--cfg.workdir={job}"], job_env)
            for i in range(PROCESSES)}


def run_job(lesson: Lesson, job: pathlib.Path) -> None:
    """The two-process job, to its end."""
    for attempt in range(1, ATTEMPTS + 1):
        port = free_port()
        with children(commands(job, port), lesson.workdir) as procs:
            try:
                wait_for_all(procs, lesson.workdir)
                return
            except LessonFailed:
                coordinator_log = (lesson.workdir / "process-0.log").read_text(errors="replace")
                if attempt == ATTEMPTS or not PORT_TAKEN.search(coordinator_log):
                    raise
        print(f"  (port {port} was taken before the coordinator could bind it: trying another)")


def digest(lesson: Lesson, name: str) -> str:
    """What a child printed that teaches; says how much else was dropped."""
    lines = (lesson.workdir / f"{name}.log").read_text(errors="replace").splitlines()
    kept = [line for line in lines if TEACHES.search(line)]
    gloo = sum(bool(GLOO.search(line)) for line in lines)
    print(f"  {name}.log: {len(lines)} lines; kept {len(kept)}, dropped {gloo} gloo connection lines and"
          f" {len(lines) - len(kept) - gloo} absl start-up and INFO lines (the whole log stays in the workdir with --keep or --workdir)")
    for line in kept:
        print(f"    {line.split('] ', 1)[-1][:120]}")
    return "\n".join(lines)


def train_reference(workdir: pathlib.Path) -> kd.train.Trainer:
    """The same experiment in this process, on this process's one device."""
    cfg = multihost.get_config()
    cfg.workdir = str(workdir)
    trainer = konfig.resolve(cfg)
    trainer.train()
    return trainer


def check_processes_and_rows(lesson: Lesson, job: pathlib.Path, reference: pathlib.Path) -> None:
    logs = {name: digest(lesson, name) for name in ("process-0", "process-1")}
    for i in range(PROCESSES):
        lesson.check(f"process {i} of {PROCESSES}: {DEVICES_PER_PROCESS} local devices, "
                     f"{PROCESSES * DEVICES_PER_PROCESS} in the job" in logs[f"process-{i}"],
                     f"process {i} of {PROCESSES} saw {DEVICES_PER_PROCESS} local devices and "
                     f"{PROCESSES * DEVICES_PER_PROCESS} in the job")
    lesson.check_equal(jax.config.jax_cpu_collectives_implementation, "gloo", "jax's cross-process sums on CPU by default")
    lesson.check(all(GLOO.search(log) for log in logs.values()), "both processes' logs show gloo connecting them")
    rows = [json.loads((job / f"rows-process-{i}.json").read_text()) for i in range(PROCESSES)]
    whole = json.loads((reference / "rows-process-0.json").read_text())
    print(f"\n  first batch, rows of the data each process read: process 0 {rows[0][:5]}..., process 1"
          f" {rows[1][:5]}...\n  ({len(rows[0])} each); this process read {len(whole)}: {whole[:5]}...")
    lesson.check_equal([len(r) for r in rows], [BATCH_SIZE // PROCESSES] * PROCESSES,
                       "rows each process read for the first batch (half the global batch of 32)")
    lesson.check(not set(rows[0]) & set(rows[1]), "the two processes read different rows")
    lesson.check_equal(rows[0] + rows[1], whole, "process 0's rows then process 1's = one process's first batch")


def check_training(lesson: Lesson, job: pathlib.Path, reference: kd.train.Trainer) -> float:
    logged = {name: read_scalars(*event_files(wd, "train")) for name, wd in (("job", job), ("reference", reference.workdir))}
    losses = {name: {s: v["losses/logcosh"] for s, v in log.items() if "losses/logcosh" in v} for name, log in logged.items()}
    lesson.check_equal(sorted(losses["job"]), sorted(losses["reference"]), "the steps with a logged loss, job and reference")
    relative = max(abs(losses["job"][s] - losses["reference"][s]) / abs(losses["reference"][s]) for s in losses["job"])
    print(f"\n  logged loss: {losses['job'][0]:.6f} -> {losses['job'][STEPS]:.6f} for the two-process job,"
          f" {losses['reference'][0]:.6f} -> {losses['reference'][STEPS]:.6f}\n  for this process, on one device;"
          f" largest relative difference {relative:.2g} (tolerance {LOSS_RTOL:g})")
    lesson.check(relative <= LOSS_RTOL, f"the two-process loss curve matches one process's on one device within rtol {LOSS_RTOL:g}")
    lesson.check_equal(len(event_files(job, "train")), 1, "the job's TensorBoard event files in train/ (process 0 writes them)")

    batch = next(iter(reference.train_ds))
    preds = reference.model.apply({"params": reference.init_state().params}, batch["x"])["y"]
    pooled = float(np.mean(np.abs(np.asarray(preds) - batch["y"]) < WithinTol(preds="", targets="").tol))
    metric = logged["job"][0]["metrics/within_tol"]
    print(f"  within_tol logged at step 0: {metric:.4f}; numpy on the whole global batch: {pooled:.4f}")
    lesson.check_close(metric, pooled, "the job's within_tol at step 0 = the ratio pooled over both processes' rows")
    return relative


def check_checkpoint(lesson: Lesson, job: pathlib.Path) -> None:
    checkpoints = sorted(p.name for p in (job / "checkpoints").iterdir())
    writers = sorted(p.name for p in (job / "checkpoints" / f"ckpt_{STEPS}" / "default").glob("ocdbt.process_*"))
    print(f"\n  {job.name}/checkpoints: {checkpoints}; ckpt_{STEPS}/default holds {writers}")
    lesson.check_equal(checkpoints, ["ckpt_0", f"ckpt_{STEPS}"], "the job's checkpoints: one per step, not one per process")
    lesson.check_equal(writers, ["ocdbt.process_0", "ocdbt.process_1"], f"the processes that wrote ckpt_{STEPS}'s arrays")
    cfg = multihost.get_config()
    cfg.workdir, cfg.num_train_steps = str(job), STEPS + 10
    resumed = konfig.resolve(cfg)
    latest = resumed.checkpointer.latest_step
    state, _ = resumed.train()
    print(f"  one process with one device, same workdir, num_train_steps={STEPS + 10}: resumed from step {latest},"
          f" state.step = {int(state.step)}\n  (the loop runs steps 0 to num_train_steps inclusive, as in section 9)")
    lesson.check_equal((latest, int(state.step)), (STEPS, STEPS + 11),
                       "a plain single-process run restores the job's checkpoint and trains on from it")


@section(18, "multihost", "Past one machine: the same Trainer as one job of two JAX processes", trains=True, start_early=True,
         shows="two JAX processes of 4 devices as one job: each reads half of every batch; one process's loss; one checkpoint",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/xm/README.md")
def two_processes_one_job(lesson: Lesson) -> str:
    job, reference_dir = lesson.workdir / "job", lesson.workdir / "reference"
    print(f"  starting 2 processes of one job, {DEVICES_PER_PROCESS} devices each; then the same experiment here,"
          f" on {jax.local_device_count()} device (the reference)\n")
    run_job(lesson, job)
    reference = train_reference(reference_dir)
    check_processes_and_rows(lesson, job, reference_dir)
    relative = check_training(lesson, job, reference)
    check_checkpoint(lesson, job)
    lesson.fact("max_relative_loss_difference", relative)
    return f"2 processes x {DEVICES_PER_PROCESS} devices, 16 rows each per batch; loss within {relative:.1g} of one process on one device"
