"""Runs a module as `python -m` does, with the compat fixes installed first.

    python -m compat.run kauldron.main --cfg=configs/regression.py --cfg.workdir=/tmp/x
    python -m compat.run pytest tests/
    python -m compat.run --script tensorboard --logdir /tmp/x    # a console script
    python -m compat.run -c "import kauldron.ktyping"            # a program, as python -c

A new Python process starts without the fixes the driver applied to itself; this is how
the lessons (and you, on a broken combination such as etils 1.14.0 + jax 0.10.2) start
Kauldron's own command line with them. Installing the fixes imports nothing the module
would not import itself (they wait for the broken module), so the module runs as it
would under `python -m`. A fix that was needed and failed says so on stderr, in one line.
"""

import functools
import runpy
import sys

import compat


def report_failure(fix: compat.FixReport) -> None:
    print(f"compat {fix.line()}", file=sys.stderr)


def run_module(module: str, args: list[str]) -> None:
    """Runs `module` as `python -m module args` does: as `__main__`, with `sys.argv` set.
    The one way the tutorial runs a module in a process that is already running (here,
    and in a child forked by the warm-start server, harness/warm_start.py)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except ImportError:
        found = None
    if found is None:  # as `python -m` says it
        sys.exit(f"{sys.executable}: No module named {module}")
    sys.argv = [module, *args]  # runpy puts the module's path first, as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def run_script(name: str, args: list[str]) -> None:
    """Runs the console script `name` of this environment (`tensorboard`, `kauldron`) as
    its own file in the environment's bin/ does: its entry point, with `sys.argv` set."""
    import importlib.metadata

    (entry_point,) = importlib.metadata.entry_points(group="console_scripts", name=name)
    first, *rest = entry_point.attr.split(".")
    # As the script pip writes does it: `from MODULE import NAME` (which finds a submodule
    # of that name too), then calls it.
    found: dict = {}
    exec(f"from {entry_point.module} import {first} as entry", found)  # noqa: S102
    sys.argv = [name, *args]
    sys.exit(functools.reduce(getattr, rest, found["entry"])())


def run_code(code: str, args: list[str]) -> None:
    """Runs `code` as `python -c code args` does: as a fresh `__main__` module, with
    `sys.argv` set and the current directory first on `sys.path`."""
    import types

    main_module = types.ModuleType("__main__")
    sys.modules["__main__"] = main_module
    sys.argv = ["-c", *args]
    sys.path[0] = ""
    exec(compile(code, "<string>", "exec"), main_module.__dict__)  # noqa: S102


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m compat.run MODULE [ARGS ...]  |  --script NAME [ARGS ...]  |  -c CODE [ARGS ...]")
    compat.install_all(on_failure=report_failure)
    if sys.argv[1] == "--script":
        run_script(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "-c":
        run_code(sys.argv[2], sys.argv[3:])
    else:
        run_module(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()
