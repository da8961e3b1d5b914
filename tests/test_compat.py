"""The compat layer patches each known breakage (etils 1.14.0's prng lookup, Kauldron's
unconverted schedule values) only when it is there, and verifies it.

The broken functions are simulated (as etils 1.14.0 and Kauldron 1.4 wrote them), so these tests mean the same
on every environment; the `broken-etils` CI leg also runs the whole suite on the real thing.
"""

import json
import os
import subprocess
import sys
import threading

import jax
import numpy as np
import optax
import pytest
from conftest import ROOT
from etils import enp
from etils.enp import array_spec

from compat import etils_prng, kauldron_schedules, konfig_imports


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


# --- Kauldron's schedules: handed to the writers as numpy -----------------------------------


def kauldron_1_4_compute_schedule(sched, step):
    """Kauldron 1.4's `metric_writer._compute_schedule`: the schedule's value, unconverted."""
    with jax.transfer_guard("allow"):
        return sched(step)


@pytest.fixture
def compute_schedule(monkeypatch):
    """Lets a test install a function as Kauldron's own, restoring the real one afterwards."""
    from kauldron.train import metric_writer

    def install(fn):
        monkeypatch.setattr(metric_writer, "_compute_schedule", fn)
        return fn
    return install


def test_kauldrons_unconverted_schedule_values_are_converted_to_numpy(compute_schedule):
    from kauldron.train import metric_writer

    compute_schedule(kauldron_1_4_compute_schedule)
    assert isinstance(metric_writer._compute_schedule(optax.linear_schedule(1.0, 0.0, 10), 3), jax.Array)
    report = kauldron_schedules.apply()
    assert report.state == "applied" and "unconverted" in report.reason
    value = metric_writer._compute_schedule(optax.linear_schedule(1.0, 0.0, 10), 3)
    assert type(value) is np.ndarray and np.isclose(value, 0.7)
    assert kauldron_schedules.problem(metric_writer._compute_schedule) is None


def kauldrons_convert_leaf(value):
    """Kauldron's conversion of a metric's value, imported when called: collecting the
    fast tier, on every worker, would otherwise import TensorFlow (7 s)."""
    from kauldron.train import auxiliaries

    return jax.tree.map(auxiliaries._convert_leaf, value)


@pytest.mark.parametrize("convert", [np.asarray, jax.device_get, float, lambda value: value.item(),
                                     kauldrons_convert_leaf],
                         ids=["np.asarray", "jax.device_get", "float", "item", "Kauldron's _convert_leaf"])
def test_a_compute_schedule_that_converts_is_left_alone(compute_schedule, convert):
    from kauldron.train import metric_writer

    def converts(sched, step):
        with jax.transfer_guard("allow"):
            return convert(sched(step))

    compute_schedule(converts)
    assert kauldron_schedules.apply().state == "not needed"
    assert metric_writer._compute_schedule is converts


def test_deciding_starts_no_jax_backend(compute_schedule):
    from jax._src import xla_bridge

    compute_schedule(kauldron_1_4_compute_schedule)
    started = dict(xla_bridge._backends)
    xla_bridge._backends.clear()  # as in a process that has not computed yet
    try:
        assert kauldron_schedules.apply().state == "applied"
        assert not xla_bridge._backends
    finally:
        xla_bridge._backends.update(started)


def test_a_schedule_patch_that_does_not_help_is_reported_failed_and_undone(compute_schedule, monkeypatch):
    from kauldron.train import metric_writer

    compute_schedule(kauldron_1_4_compute_schedule)
    monkeypatch.setattr(kauldron_schedules, "_on_host", lambda fn: fn)
    report = kauldron_schedules.apply()
    assert report.state == "failed" and "unconverted" in report.reason
    assert metric_writer._compute_schedule is kauldron_1_4_compute_schedule


# --- konfig.imports() fakes its own thread's imports only -------------------------------------

@pytest.fixture
def kauldrons_fake_imports(monkeypatch):
    """Kauldron's own `_fake_imports` in place, and put back after the test. Rebuilt from its
    generator: an earlier test of this process (one that ran `tutorial.main`) may have
    applied the fix, whose wrapper keeps Kauldron's name and module."""
    import builtins
    import contextlib
    import inspect

    from kauldron.konfig import fake_import_utils

    generator = inspect.unwrap(fake_import_utils._fake_imports)
    assert inspect.isgeneratorfunction(generator) and generator.__module__ == "kauldron.konfig.fake_import_utils"
    kauldrons = contextlib.contextmanager(generator)
    monkeypatch.setattr(fake_import_utils, "_fake_imports", kauldrons)
    yield kauldrons
    assert builtins.__import__ is REAL_IMPORT


REAL_IMPORT = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def imported_in_a_thread(name: str):
    """What `import name` gives on another thread, now (called inside a block: nothing here imports)."""
    found = {}
    thread = threading.Thread(target=lambda: found.update(module=__import__(name)))
    thread.start()
    thread.join(10)
    return found["module"]


def test_kauldrons_konfig_imports_fakes_other_threads_imports_and_the_fix_only_its_own(kauldrons_fake_imports):
    from kauldron import konfig

    assert "another thread" in konfig_imports.problem(kauldrons_fake_imports)
    report = konfig_imports.apply()
    assert report.state == "applied" and "every thread" in report.reason
    with konfig.imports():
        import json as json_cfg
        import os as os_cfg  # after an import, the block's thread still imports stand-ins

        elsewhere = imported_in_a_thread("json")
        with konfig.imports():  # a block in a block: no endless recursion
            import optax as optax_cfg
        import sys as sys_cfg
    stand_ins = [json_cfg, os_cfg, optax_cfg, sys_cfg]
    assert [type(module).__name__ for module in stand_ins] == ["ConfigDictProxyObject"] * 4 and elsewhere is json
    assert konfig.resolve(konfig.ConfigDict({"__qualname__": "json:dumps", "0": [1]})) == "[1]"


def test_blocks_entered_beside_another_thread_s_imports_leave_every_import_real(kauldrons_fake_imports):
    from kauldron import konfig

    konfig_imports.apply()
    stop, wrong = threading.Event(), []

    def importing():
        while not stop.is_set():
            import json as imported

            if imported is not json:
                wrong.append(imported)

    thread = threading.Thread(target=importing)
    thread.start()
    for _ in range(2000):  # with Kauldron's own, about 2 runs in 3 end with __import__ faked
        with konfig.imports():
            __import__("json")  # as `import json` does: a stand-in, in the block
    stop.set()
    thread.join(10)
    assert not wrong  # and the fixture: __import__ is the real one


def test_a_konfig_imports_patch_that_does_not_help_is_reported_failed_and_undone(kauldrons_fake_imports, monkeypatch):
    from kauldron.konfig import fake_import_utils

    monkeypatch.setattr(konfig_imports, "_this_thread_only", lambda kauldrons: kauldrons)
    report = konfig_imports.apply()
    assert report.state == "failed" and "another thread" in report.reason
    assert fake_import_utils._fake_imports is kauldrons_fake_imports


# --- python -m compat.run runs a module as python -m does -----------------------------------

# Records how it was run and what it imported, in order. It imports pytest before
# etils.enp, and etils attaches `enp.testing` only in that order.
PROBE = """
import json, sys
import pytest
from etils import enp
import jax
imported = [name for name in sys.modules
            if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith(("compat", "wrapt"))]
print(json.dumps({"argv": sys.argv, "name": __name__, "spec": __spec__.name, "path0": sys.path[0],
                  "enp.testing": hasattr(enp, "testing"), "imported": imported}))
"""


def run_module(tmp_path, *launcher: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", *launcher, "probe", "--flag", "value"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_compat_run_runs_a_module_exactly_as_python_m_does(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    plain, through_compat = run_module(tmp_path), run_module(tmp_path, "compat.run")
    assert plain.returncode == through_compat.returncode == 0, plain.stderr[-2000:] + through_compat.stderr[-2000:]
    plain, through_compat = json.loads(plain.stdout), json.loads(through_compat.stdout)
    assert plain["enp.testing"] is True  # pytest came first, so etils attached it
    assert through_compat == plain  # argv, __name__, sys.path[0], and every import, in order
    assert plain["argv"] == [str(tmp_path / "probe.py"), "--flag", "value"]


CODE_PROBE = ("import json, sys; print(json.dumps({'argv': sys.argv, 'name': __name__, 'path0': sys.path[0], "
              "'main': sys.modules['__main__'].__dict__ is globals()}))")


@pytest.mark.slow
def test_compat_run_runs_a_program_exactly_as_python_c_does(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    plain, through_compat = (
        subprocess.run([sys.executable, *launcher, "-c", CODE_PROBE, "--flag"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
        for launcher in ([], ["-m", "compat.run"]))
    assert plain.returncode == through_compat.returncode == 0, plain.stderr[-2000:] + through_compat.stderr[-2000:]
    assert json.loads(through_compat.stdout) == json.loads(plain.stdout) == {
        "argv": ["-c", "--flag"], "name": "__main__", "path0": "", "main": True}


@pytest.mark.slow
def test_pytest_through_compat_run_collects_a_test_that_needs_enp_testing(tmp_path):
    (tmp_path / "test_uses_enp_testing.py").write_text(
        "from etils import enp\n\ndef test_it():\n    assert enp.testing\n")
    command = [sys.executable, "-m", "compat.run", "pytest", "-q", "-p", "no:cacheprovider",
               str(tmp_path / "test_uses_enp_testing.py")]
    proc = subprocess.run(command, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout


@pytest.mark.slow
def test_installing_the_fixes_imports_nothing_and_decides_when_the_modules_arrive():
    code = ("import sys, compat\n"
            "compat.install_all()\n"
            "print(sorted(m for m in ('jax', 'etils.enp', 'etils.enp.array_spec') if m in sys.modules))\n"
            "print(compat.reports()[0].state)\n"
            "import jax\nprint(compat.reports()[0].state)\n"
            "from etils import enp\nprint(compat.reports()[0].state)\n"
            "from jax._src import xla_bridge\nprint(xla_bridge.backends_are_initialized())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported, before, after_jax, after_both, backend_started = proc.stdout.split("\n")[:5]
    assert (imported, before, after_jax) == ("[]", "pending", "pending")
    assert after_both in ("applied", "not needed")
    assert backend_started == "False"  # deciding did not start jax's backend
