"""Kauldron 1.4.2 and 1.4.4: `train()` can fail on a TPU or GPU while it logs `cfg.schedules`.

`train()` runs its loop under `jax.transfer_guard("disallow")`. At each logging step its
metric writer evaluates every schedule (`metric_writer._compute_schedule`, under "allow")
and hands the value on unconverted (for optax's schedules, a jax array on the
accelerator) to the two writers that read it: the log writer, an `AsyncWriter` that
formats it in a thread of its own, where no guard is set, and the TensorBoard writer,
which converts it in the loop's thread, under the guard. If the log writer's thread has
already fetched the value, jax keeps its host copy and nothing is transferred; if not,
the guard refuses the transfer and `train()` fails with `Disallowed device-to-host
transfer` (seen once in eleven TPU runs of section 2). On a CPU converting an array to
numpy copies nothing, so there is nothing to refuse. Kauldron converts losses and metrics
before its writers see them (`auxiliaries._compute_metric` with `_convert_leaf`), "to
ensure that the metric writers do not accidentally invoke any jax operations"; the fix
does the same for schedules.

It watches `kauldron.train.metric_writer`, which imports TensorFlow (a heavy fix: a run
decides when a lesson imports it), and decides without starting jax's backend (a
forkserver forks after it, and `jax.distributed.initialize()` must come before the
backend starts): it hands `_compute_schedule` a schedule whose value is a stand-in for a
device array, and sees whether a device array comes back.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from compat.fix import Fix, FixReport, replace_if_broken

NAME = "kauldron-schedules"


def _on_device():
    """A stand-in for a schedule's value on an accelerator: a `jax.Array` to `isinstance`,
    which converts to the host as one does (numpy, `jax.device_get`, `float`, `.item()`),
    with no device behind it."""
    import jax
    import numpy as np

    class OnDevice(jax.Array):
        __slots__ = ()
        dtype, shape, ndim, size = np.dtype(np.float32), (), 0, 1

        def __array__(self, dtype=None, copy=None):
            return np.asarray(0.5, dtype=dtype or self.dtype)

        def copy_to_host_async(self):
            pass

        def item(self):
            return 0.5

        def __float__(self):
            return 0.5

    return OnDevice()


def problem(compute_schedule: Callable[[Any, int], Any]) -> str | None:
    """Why `compute_schedule` is broken, or None if it hands the writers host values."""
    import jax

    try:
        value = compute_schedule(lambda step: _on_device(), 0)
    except Exception as e:  # noqa: BLE001 - any exception is a breakage too
        return f"{type(e).__name__}: {e}"
    if isinstance(value, jax.Array):
        return "it returns a schedule's value unconverted"
    return None


def _on_host(compute_schedule: Callable[[Any, int], Any]) -> Callable[[Any, int], Any]:
    @functools.wraps(compute_schedule)
    def on_host(sched, step):
        import jax
        from kauldron.train import auxiliaries

        value = compute_schedule(sched, step)
        with jax.transfer_guard("allow"):
            return jax.tree.map(auxiliaries._convert_leaf, value)  # as Kauldron converts a metric's

    return on_host


def apply() -> FixReport:
    """Decides and patches; called once `kauldron.train.metric_writer` is imported."""
    return replace_if_broken(
        NAME, sys.modules["kauldron.train.metric_writer"], "_compute_schedule", problem, _on_host,
        works="kauldron's metric writer hands schedules' values over as host values",
        fixed="kauldron.train.metric_writer._compute_schedule returns a schedule's value unconverted, and"
              " TensorBoard's writer converts it under train()'s transfer guard: a race on a TPU or GPU; now numpy,"
              " as Kauldron's losses and metrics are")


FIX = Fix(NAME, watches=("kauldron.train.metric_writer",), apply=apply, heavy=True)
