"""A lesson worker reads each compiled program from jax's persistent cache once, not once
per Trainer.

Every Trainer jits functions of its own, so jax traces and lowers them again, and finds the
program in the persistent compilation cache again: a lock, a file read and XLA's
deserialisation, 6-9 ms on this project's machine kind. A worker that runs several lessons
on the same model reads the same programs over and over: in one `--jobs 1` run, 508 of the
970 reads were of a program that process had read before (4.1 of its 6.7 CPU-s of reading).
Kept in memory by the cache's own key (which hashes the program, the compile options, the
devices and the backend), a program is read once per process and shared, as jax shares one
between two calls of the same jitted function.

Measured (2026-12-07): in the full run's three workers 430 of 1,042 reads are saved, about
3.5 CPU-s of the lessons' 60; `bench/compare.py --rounds 5 --variants suite-warm
suite-warm-nomemo`, a noisy hour: 44.4 s against 46.9 s (medians, 5% less), and 2044 MB
against 2367 MB for all processes together (14% less: one copy of each program, not one per
Trainer). jax has no setting for this, so it wraps jax's private
`jax._src.compiler._cache_read`; where a jax has no such function, nothing is done (and a
fast test, which reads its parameters, fails). Only the
lesson workers use it: the processes a lesson starts (`python -m kauldron.main`) read the
cache as a user's do.
"""

from __future__ import annotations

import os

# Set to turn it off (bench/compare.py's suite-warm-nomemo variant).
OFF = "KAULDRON_TUTORIAL_NO_PROGRAM_MEMO"

_programs: dict = {}


def install() -> bool:
    """Wraps jax's cache read in this process; True if it did (or had)."""
    if os.environ.get(OFF):
        return False
    from jax._src import compiler

    read = getattr(compiler, "_cache_read", None)
    if read is None:
        return False
    if not getattr(read, "_memo", False):
        compiler._cache_read = remembering(read)
    return True


def remembering(read):
    """`read` (jax's `_cache_read`), remembering each program it found. A program that
    calls back into Python (jax 0.12 passes its host callbacks last) is bound to them: read
    each time."""

    def cache_read(module_name, cache_key, compile_options, backend, executable_devices, *host_callbacks):
        if any(host_callbacks):
            return read(module_name, cache_key, compile_options, backend, executable_devices, *host_callbacks)
        key = (cache_key, tuple(device.id for device in executable_devices))
        found = _programs.get(key)
        if found is None:
            found = read(module_name, cache_key, compile_options, backend, executable_devices, *host_callbacks)
            if found[0] is not None:
                _programs[key] = found
        return found

    cache_read._memo = True
    return cache_read


def forget() -> None:
    """Drops the programs kept (with jax's own in-memory caches)."""
    _programs.clear()
