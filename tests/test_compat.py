"""The compat layer patches the etils prng breakage only when it is there, and verifies it.

The broken function is simulated (as etils 1.14.0 wrote it), so these tests mean the same
on every environment; the `broken-etils` CI leg also runs the whole suite on the real thing.
"""

import jax
import numpy as np
import pytest
from etils import enp
from etils.enp import array_spec

import compat
from compat import etils_prng


def etils_1_14_is_jax_random_dtype(dtype):
    """etils 1.14.0's version: jax 0.10.2 removed `jax._src.prng`, so this raises."""
    return isinstance(dtype, jax._src.prng.KeyTy)  # noqa: SLF001


@pytest.fixture
def installed(monkeypatch):
    """Lets a test install a function as etils' own, restoring the real one afterwards."""
    def install(fn):
        monkeypatch.setattr(array_spec, "_is_jax_random_dtype", fn)
        return fn
    return install


def test_a_working_function_is_left_alone(installed):
    def works(dtype):
        return jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)

    installed(works)
    report = etils_prng.apply()
    assert report.state == "not needed" and not report.applied
    assert array_spec._is_jax_random_dtype is works


@pytest.mark.skipif(hasattr(jax._src, "prng"), reason="this jax still has jax._src.prng")
def test_the_etils_1_14_function_is_replaced_and_then_works(installed):
    installed(etils_1_14_is_jax_random_dtype)
    key_dtype = jax.random.key(0).dtype
    with pytest.raises(AttributeError, match="has no attribute 'prng'"):
        enp.ArraySpec(shape=(), dtype=key_dtype)

    report = etils_prng.apply()
    assert report.state == "applied" and report.applied
    assert "AttributeError" in report.reason and "prng" in report.reason
    assert etils_prng.problem(array_spec._is_jax_random_dtype) is None
    assert enp.ArraySpec(shape=(), dtype=key_dtype).dtype == np.dtype("O")
    assert enp.ArraySpec.from_array(np.zeros((2, 3), np.float32)).shape == (2, 3)


def test_a_function_giving_wrong_answers_is_replaced_too(installed):
    installed(lambda dtype: False)  # never raises, but misses PRNG keys
    report = etils_prng.apply()
    assert report.state == "applied"
    assert "does not recognise a jax PRNG key dtype" in report.reason


def test_a_patch_that_does_not_help_is_reported_failed_and_undone(installed, monkeypatch):
    installed(etils_1_14_is_jax_random_dtype)
    monkeypatch.setattr(etils_prng, "_public_is_jax_random_dtype", lambda dtype: True)
    report = etils_prng.apply()
    assert report.state == "failed"
    assert "float32" in report.reason
    assert array_spec._is_jax_random_dtype is etils_1_14_is_jax_random_dtype


def test_after_apply_all_this_environment_works():
    reports = compat.apply_all()
    assert [r.name for r in reports] == ["etils-prng"]
    assert reports[0].state in ("applied", "not needed")
    assert etils_prng.problem(array_spec._is_jax_random_dtype) is None
