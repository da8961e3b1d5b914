"""A lesson worker reads each compiled program from jax's persistent cache once
(harness/program_memo.py): what jax would read again is the program it read before."""

import inspect
import types

import pytest

from harness import program_memo

CPU0, CPU1 = types.SimpleNamespace(id=0), types.SimpleNamespace(id=1)


class CacheOnDisk:
    """Stands in for jax's `_cache_read`: each read of a key it holds gives a new object,
    as deserialising a program does."""

    def __init__(self, *keys):
        self.keys, self.reads = set(keys), []

    def __call__(self, module_name, cache_key, compile_options, backend, executable_devices, *host_callbacks):
        self.reads.append(cache_key)
        return (object(), 12) if cache_key in self.keys else (None, None)


@pytest.fixture(autouse=True)
def nothing_remembered():
    program_memo.forget()
    yield
    program_memo.forget()


def test_a_program_read_once_is_the_same_program_the_next_time():
    disk = CacheOnDisk("step")
    read = program_memo.remembering(disk)
    first = read("jit_step", "step", None, None, [CPU0], [])
    assert read("jit_step", "step", None, None, [CPU0], []) is first
    assert disk.reads == ["step"]


def test_a_program_not_in_the_cache_is_looked_for_again():
    disk = CacheOnDisk()
    read = program_memo.remembering(disk)
    assert read("jit_step", "step", None, None, [CPU0], []) == (None, None)
    read("jit_step", "step", None, None, [CPU0], [])
    assert disk.reads == ["step", "step"]  # jax compiles it meanwhile and writes it there


def test_a_program_for_other_devices_or_with_host_callbacks_is_read_each_time():
    disk = CacheOnDisk("step")
    read = program_memo.remembering(disk)
    on_0 = read("jit_step", "step", None, None, [CPU0], [])
    assert read("jit_step", "step", None, None, [CPU1], []) is not on_0
    calling_back = [read("jit_step", "step", None, None, [CPU0], [print]) for _ in range(2)]
    assert calling_back[0] is not calling_back[1]
    assert len(disk.reads) == 4


def test_the_older_jax_without_host_callbacks_is_read_the_same_way():
    disk = CacheOnDisk("step")
    read = program_memo.remembering(disk)  # jax 0.10's _cache_read has five parameters
    assert read("jit_step", "step", None, None, [CPU0]) is read("jit_step", "step", None, None, [CPU0])
    assert disk.reads == ["step"]


def test_forgetting_drops_what_was_kept():
    disk = CacheOnDisk("step")
    read = program_memo.remembering(disk)
    read("jit_step", "step", None, None, [CPU0], [])
    program_memo.forget()
    read("jit_step", "step", None, None, [CPU0], [])
    assert disk.reads == ["step", "step"]


def test_install_wraps_jax_s_cache_read_once_unless_turned_off(monkeypatch):
    from jax._src import compiler

    jax_s = compiler._cache_read
    monkeypatch.setattr(compiler, "_cache_read", jax_s)  # put back after the test
    monkeypatch.setenv(program_memo.OFF, "1")
    assert not program_memo.install() and compiler._cache_read is jax_s
    monkeypatch.delenv(program_memo.OFF)
    assert program_memo.install() and program_memo.install()
    wrapped = compiler._cache_read
    assert wrapped is not jax_s and wrapped._memo
    program_memo.install()
    assert compiler._cache_read is wrapped


def test_jax_s_cache_read_takes_what_the_memo_passes_on():
    """Fails the day jax changes the private function the memo wraps (then it would do nothing, or break)."""
    from jax._src import compiler

    names = list(inspect.signature(compiler._cache_read).parameters)
    assert names[:5] == ["module_name", "cache_key", "compile_options", "backend", "executable_devices"]
    assert names[5:] in ([], ["host_callbacks"])
