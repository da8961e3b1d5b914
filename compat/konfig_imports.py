"""Kauldron 1.4.2 and 1.4.4: `konfig.imports()` fakes every thread's imports, and can leave them faked.

While its block runs, `konfig.imports()` replaces `builtins.__import__`, the whole
process's (`fake_import_utils._fake_imports`), and at its end puts back what it found. So
an import on another thread meanwhile gets a stand-in; and since Kauldron's real imports
inside the block (`_maybe_import`) replace it and put it back too, another thread's can
put the fake back after the block has ended: from then on every import of the process
gets a stand-in. A Jupyter kernel has such a thread: ipykernel 7 handles its messages on a
thread of its own, where pyzmq imports on socket events (`from zmq import ZMQError` in
`AttributeSetter.__getattr__`). Seen once in the tests: a page's kernel, after its `with
konfig.imports():` cell, spun in that thread at 100% CPU and never ran the next cell. In a
plain process, one thread entering the block 2,000 times while another imports `json`
left `__import__` faked in 2 runs of 3.

The fix makes the replacement the block's own thread's: while any block runs,
`__import__` is a function that imports as the innermost block of the calling thread
says, and as before on every other thread; after the last block it is put back. It
decides by behaviour: inside a block, another thread imports `json`, and only the block's
own thread's import may go through the block's function.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import sys
import threading
from typing import Callable

from compat.fix import Fix, FixReport, replace_if_broken

NAME = "konfig-imports"


def problem(fake_imports: Callable) -> str | None:
    """Why `fake_imports` (Kauldron's `_fake_imports`) is broken, or None if, while its
    block runs, the block's own thread imports through the block's function and another
    thread does not. The function it is given imports for real: another thread of this
    process that imports meanwhile (a kernel's) gets its module either way."""
    real = builtins.__import__
    callers = set()

    def recording(*args, **kwargs):
        callers.add(threading.get_ident())
        return real(*args, **kwargs)

    inside = threading.Event()

    def elsewhere():
        if inside.wait(10):
            __import__("json")  # as `import json` does

    thread = threading.Thread(target=elsewhere, daemon=True)
    thread.start()
    try:
        with fake_imports(new_import=recording):
            __import__("json")  # as `import json` does
            inside.set()
            thread.join(10)
    except Exception as e:  # noqa: BLE001 - any exception is a breakage too
        return f"{type(e).__name__}: {e}"
    if builtins.__import__ is not real:
        return "it left another import function in place"
    if threading.get_ident() not in callers:
        return "the block's own imports did not go through its import function"
    if thread.ident in callers:
        return "an import on another thread, while the block ran, went through the block's import function"
    return None


_calling_thread = threading.local()
_lock = threading.Lock()
_blocks = 0
_outside: Callable | None = None  # the __import__ found when the first running block began


def _import(*args, **kwargs):
    return (getattr(_calling_thread, "fake", None) or _outside)(*args, **kwargs)


@contextlib.contextmanager
def _fake_imports_on_this_thread(*, new_import: Callable):
    """Kauldron's `_fake_imports`, for the calling thread only."""
    global _blocks, _outside
    with _lock:
        if _blocks == 0:
            _outside = builtins.__import__
            builtins.__import__ = _import
        _blocks += 1
    enclosing = getattr(_calling_thread, "fake", None)
    # Kauldron's real imports inside a block hand back the __import__ it found: the real one.
    _calling_thread.fake = None if new_import in (_import, _outside) else new_import
    try:
        yield
    finally:
        _calling_thread.fake = enclosing
        with _lock:
            _blocks -= 1
            if _blocks == 0:
                builtins.__import__ = _outside


def _this_thread_only(kauldrons: Callable) -> Callable:
    @functools.wraps(kauldrons)  # inspect.unwrap finds Kauldron's own (section 1 checks it)
    def fake_imports(*, new_import: Callable):
        return _fake_imports_on_this_thread(new_import=new_import)

    return fake_imports


def apply() -> FixReport:
    """Decides and patches; called once `kauldron.konfig.fake_import_utils` is imported."""
    return replace_if_broken(
        NAME, sys.modules["kauldron.konfig.fake_import_utils"], "_fake_imports", problem,
        _this_thread_only,
        works="konfig.imports() fakes the imports of its own thread only",
        fixed="konfig.imports() replaced every thread's imports, and another thread could leave them replaced"
              " (a Jupyter kernel's, which then hangs); now only its own thread's")


FIX = Fix(NAME, watches=("kauldron.konfig.fake_import_utils",), apply=apply)
