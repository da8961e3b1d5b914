"""Calls `jax.distributed.initialize()` after one thing, and says whether jax accepted it.

    python -m sections.parts.initialize_after json            # after importing json
    python -m sections.parts.initialize_after jax.devices     # after jax.devices()
    python -m sections.parts.initialize_after kauldron.main   # after importing kauldron.main

Run it in a fresh process: jax refuses `initialize()` once anything in the process has
started its backend (importing json does not: the first line is a control). The job it
asks for is of one process, its coordinator on this machine's loopback only: where jax
accepts the call, it starts the coordinator and joins it at once (section 11).
"""

import importlib
import socket
import sys

import jax


def main(first: str) -> None:
    if first == "jax.devices":
        jax.devices()
    else:
        importlib.import_module(first)
    with socket.socket() as probe:  # a free port on loopback
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    try:
        jax.distributed.initialize(coordinator_address=address, num_processes=1, process_id=0,
                                   coordinator_bind_address=address)
        print(f"after {first}: initialize() accepted")
    except RuntimeError as error:
        print(f"after {first}: initialize() refused: {str(error).split('. ')[0]}")


if __name__ == "__main__":
    main(*sys.argv[1:])
