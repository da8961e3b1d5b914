r"""One process of a two-process job that shows jaxlib 0.12.1's hang: a cross-process sum
whose program process 0 loaded from jax's persistent compilation cache and process 1
compiled afresh (bench/jax-0.12.1-allreduce-hang.md).

    export XLA_FLAGS=--xla_force_host_platform_device_count=4
    python -m sections.parts.allreduce_hang --port=23456 --process_id=0 --cache_dir=sums-cache &
    python -m sections.parts.allreduce_hang --port=23456 --process_id=1 --cache_dir=sums-cache &
    wait

Each process joins the job on loopback with 4 CPU devices and sums an array spread over
all 8, twice, forgetting its compiled programs in between. Only process 0 writes the
cache, and on a CPU a program's cache key differs from one process to the next: so the
second sum is a cache hit in process 0 and a fresh compile in process 1. It prints each
result, and HANG if the second does not come within 20 s (then exits 3).
"""

import argparse
import os
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np

SECONDS = 20  # the second sum takes well under a second where it does not hang


def say(*words) -> None:
    """One line in one write: the two processes share a terminal, and print() writes each
    word apart, so their lines would mix mid-line."""
    sys.stdout.write(" ".join(map(str, words)) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", required=True)
    parser.add_argument("--process_id", type=int, required=True)
    parser.add_argument("--cache_dir", required=True)
    args = parser.parse_args()
    jax.config.update("jax_compilation_cache_dir", args.cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # cache even a quick compile
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.distributed.initialize(f"127.0.0.1:{args.port}", num_processes=2, process_id=args.process_id)
    me = jax.process_index()
    jax.monitoring.register_event_listener(
        lambda event, **_: say(me, "persistent cache hit") if event.endswith("cache_hits") else None)
    spread = jax.NamedSharding(jax.make_mesh((8,), ("d",)), jax.P("d"))
    x = jax.make_array_from_process_local_data(spread, np.ones(4, np.float32))
    total = jax.jit(jnp.sum)
    say(me, "first sum:", float(total(x)))
    jax.clear_caches()  # compiled again: from the cache in process 0, afresh in process 1
    watchdog = threading.Timer(SECONDS, lambda: (say(me, f"HANG: no second sum in {SECONDS} s"), os._exit(3)))
    watchdog.start()
    say(me, "second sum:", float(total(x)))
    watchdog.cancel()
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
