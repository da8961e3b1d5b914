r"""Runs `python -m kauldron.main` as one process of a multi-process JAX job.

    python -m sections.parts.distributed_main --coordinator_address=10.0.0.1:1234 \
        --num_processes=2 --process_id=0 --cfg=configs/multihost.py --cfg.workdir=/shared/wd

Every process of the job runs the same command with its own `--process_id`. Kauldron does
not call `jax.distributed.initialize()`, `kauldron.main` has no flag for it, and it must
come before anything starts jax's backend: Kauldron 1.4.4's `kauldron.main` already calls
`jax.devices()` when it is imported. So this module calls it first, then runs
`kauldron.main` as `python -m` does, with the remaining arguments. On TPU pods, Slurm and
Open MPI, leave out the coordinator, process count and id: `initialize()` finds them in the
environment. On jaxlib 0.12.1 it turns jax's persistent compilation cache off: with it on,
a job hangs there (section 18's last step).
"""

import argparse
import runpy
import sys

import jax
import jaxlib


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)  # the rest of the command line is kauldron.main's
    parser.add_argument("--coordinator_address")
    parser.add_argument("--num_processes", type=int)
    parser.add_argument("--process_id", type=int)
    ours, kauldron_args = parser.parse_known_args()
    if tuple(int(part) for part in jaxlib.__version__.split(".")[:3]) >= (0, 12, 1):
        # A cross-process sum hangs when one process loaded its program from the cache and
        # another compiled it (bench/jax-0.12.1-allreduce-hang.md): compile in every process.
        jax.config.update("jax_enable_compilation_cache", False)
    # Every process waits here until all have joined (jax's default: up to 300 s).
    jax.distributed.initialize(coordinator_address=ours.coordinator_address, num_processes=ours.num_processes,
                               process_id=ours.process_id)
    print(f"process {jax.process_index()} of {jax.process_count()}: {jax.local_device_count()} local devices,"
          f" {jax.device_count()} in the job", flush=True)
    sys.argv = [sys.argv[0], *kauldron_args]
    runpy.run_module("kauldron.main", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
