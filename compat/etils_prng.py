"""etils 1.14.0 + jax >= 0.10.2: `etils.enp` cannot describe an array any more.

etils 1.14.0's `etils.enp.array_spec._is_jax_random_dtype` reads `jax._src.prng`, a
private module that jax 0.10.2 removed. Once jax is imported, anything that builds an
`enp.ArraySpec` (a pipeline's element_spec, `kd.inspect`, the Trainer, ktyping's error
report) raises `AttributeError: module 'jax._src' has no attribute 'prng'`.
etils 1.15.0 asks jax's public API instead (`jax.dtypes.prng_key`); so does this fix.

It watches `etils.enp.array_spec` and `jax` (etils only consults jax once jax is
imported), and decides when both are.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from compat.fix import Fix, FixReport, replace_if_broken

NAME = "etils-prng"


def _public_is_jax_random_dtype(dtype: Any) -> bool:
    # Same as etils 1.15.0: only consult jax if it is already imported.
    from etils.enp import numpy_utils

    lazy = numpy_utils.lazy
    return lazy.has_jax and lazy.jax.dtypes.issubdtype(dtype, lazy.jax.dtypes.prng_key)


def problem(is_jax_random_dtype: Callable[[Any], bool]) -> str | None:
    """Why `is_jax_random_dtype` is broken, or None if it behaves correctly."""
    import jax
    import numpy as np

    # A PRNG key's dtype, traced abstractly: jax.random.key(0) itself would start jax's
    # backend, after which jax.distributed.initialize() is refused.
    key_dtype = jax.eval_shape(lambda: jax.random.key(0)).dtype
    try:
        if is_jax_random_dtype(np.dtype("float32")):
            return "it calls float32 a PRNG key dtype"
        if not is_jax_random_dtype(key_dtype):
            return "it does not recognise a jax PRNG key dtype"
    except Exception as e:  # noqa: BLE001 - any exception is the breakage we look for
        return f"{type(e).__name__}: {e}"
    return None


def apply() -> FixReport:
    """Decides and patches; called once `etils.enp.array_spec` and `jax` are imported."""
    return replace_if_broken(
        NAME, sys.modules["etils.enp.array_spec"], "_is_jax_random_dtype", problem,
        lambda original: _public_is_jax_random_dtype,
        works="etils.enp.array_spec._is_jax_random_dtype works",
        fixed="etils.enp.array_spec._is_jax_random_dtype was broken ({found}); now uses jax.dtypes.prng_key as"
              " etils 1.15.0 does")


FIX = Fix(NAME, watches=("etils.enp.array_spec", "jax"), apply=apply)
