"""A warm-start server (harness/warm_start.py) for the tests, until its stdin closes:

    python tests/warm_server.py [--nice N]

It prints its address first ("" where warm start is not available), then forks each
`python -m ...` asked of it with jax, flax, optax and Kauldron imported
(harness/warm_imports.py), which a process started afresh spends about 8 CPU seconds on.
jax reads its settings from the environment as it is imported, here: start the server in
the environment its children need (a compilation cache of their own, for one). `--nice`
lowers its priority and its children's (fork keeps it).
"""

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # the repository, for harness

from harness import warm_start  # noqa: E402

if __name__ == "__main__":  # the server's forkserver imports this module too
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nice", type=int, default=0, help="added to its niceness (default: 0)")
    os.nice(parser.parse_args().nice)
    with warm_start.server() as address:
        print(address or "", flush=True)
        sys.stdin.read()  # until the test closes it
