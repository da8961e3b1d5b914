"""Runs a module like `python -m`, with the compat fixes applied first.

    python -m compat.run kauldron.main --cfg=configs/regression.py --cfg.workdir=/tmp/x

A new Python process starts without the fixes the driver applied to itself; this is how
the lessons (and you, on a broken combination such as etils 1.14.0 + jax 0.10.2) start
Kauldron's own command line with them.
"""

import runpy
import sys

import compat


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m compat.run MODULE [ARGS ...]")
    for fix in compat.apply_all():
        if fix.state == "failed":
            print(f"compat {fix.line()}", file=sys.stderr)
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
