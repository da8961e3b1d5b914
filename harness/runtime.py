"""Process-wide settings the lessons need before jax, TensorFlow or tqdm start.

The driver calls `prepare` before anything imports jax: jax reads its compilation-cache
settings and its C++ log level when it is imported. They are set as environment
variables, so the processes a lesson starts (`python -m kauldron.main`, a child with 8
simulated devices) get the same settings.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import os
import pathlib
import re
import sys
import tempfile

# Cache every compiled program, however small or fast to compile: on a CPU almost all of
# Kauldron's programs compile in under a second, below jax's default threshold of 1 s.
# Caching only those over 0.1 s, the suite took 44-49 s against 40-43 s (2026-12-07).
# A size cap turns on jax's LRU eviction, which also locks the directory (with filelock),
# so two runs can share the cache safely.
_COMPILE_CACHE_SETTINGS = {
    "jax_persistent_cache_min_compile_time_secs": 0,
    "jax_persistent_cache_min_entry_size_bytes": -1,
    "jax_compilation_cache_max_size": 1 << 30,
}


def default_cache() -> pathlib.Path:
    """Per user, shared by runs: $XDG_CACHE_HOME/kauldron-tutorial (~/.cache/...)."""
    root = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(root) / "kauldron-tutorial"


@functools.cache
def prepare(cache: pathlib.Path | None = None, workdir: pathlib.Path | None = None) -> None:
    """`cache`: the directory runs share (jax's compiled programs in `jax/`, matplotlib's
    font list in `matplotlib/`; both written under locks), or None for none. `workdir`:
    the run's own directory, for what libraries would otherwise write to the home
    directory. Either way, two runs share no other file."""
    # Kauldron draws tqdm bars for training and evaluation, and has no option to turn them
    # off. In a log file they are a flood of carriage returns: keep them for terminals only.
    # tqdm reads this when it is imported, so it must be set before Kauldron imports it.
    if not sys.stderr.isatty():
        os.environ.setdefault("TQDM_DISABLE", "1")
    # TensorFlow's and jaxlib's C++ log lines, among them a misleading "CUDA error" on
    # CPU-only machines. It cannot silence the lines TensorFlow prints while it loads:
    # those are dropped by QuietTensorFlowStartup, below.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    quiet_tensorflow_startup()

    # Libraries imported along the way write to the home directory: Keras its keras.json,
    # matplotlib (imported by Kauldron) a font list that takes half a second to build.
    if workdir is not None:
        os.environ.setdefault("KERAS_HOME", str(workdir / ".keras"))
        os.environ.setdefault("MPLCONFIGDIR", str((cache or workdir) / "matplotlib"))
    # A page's figure is drawn by its own matplotlib code; here into memory (harness/teaching.py
    # takes it as a PNG), never into a window.
    os.environ.setdefault("MPLBACKEND", "Agg")

    if cache is not None:
        settings = {**_COMPILE_CACHE_SETTINGS, "jax_compilation_cache_dir": str(cache / "jax")}
        os.environ.update({name.upper(): str(value) for name, value in settings.items()})
        if "jax" in sys.modules:  # too late for the environment: tell jax directly
            import jax

            for name, value in settings.items():
                jax.config.update(name, value)

    # Orbax warns, on every restore that is not told the arrays' sharding, that it reads it
    # from the checkpoint, which is unsafe on another topology. The lessons restore where
    # they saved (and section 13's own loader places each array explicitly).
    import warnings

    warnings.filterwarnings("ignore", message="Sharding info not provided when restoring", category=UserWarning)

    from absl import logging as absl_logging

    # Kauldron and Orbax log through absl; INFO is hundreds of lines per training run.
    absl_logging.set_verbosity(absl_logging.WARNING)


def quiet_tensorflow_startup() -> None:
    """TensorFlow, whenever something first imports it, loads without its start-up lines."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, QuietTensorFlowStartup) for f in sys.meta_path):
        sys.meta_path.insert(0, QuietTensorFlowStartup())


def send_temporary_files_to(directory: pathlib.Path):
    """Temporary files that libraries make, and some leave behind (tfds, preparing a
    dataset, leaves an empty directory), go to `directory`, in this process and those it
    starts, instead of the system's temporary directory. Returns what puts it back (and
    removes `directory`, and its parent, if nothing was left in them)."""
    directory.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = str(directory)

    def restore() -> None:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        with contextlib.suppress(OSError):  # not empty: kept with the workdir
            directory.rmdir()
            directory.parent.rmdir()

    return restore


# Above this resident size, a finished lesson's compiled programs are dropped (see below).
RELEASE_ABOVE_BYTES = 1_500_000_000


def release_memory() -> None:
    """Drops what a finished lesson left behind, and keeps the next garbage collections
    cheap. With TensorFlow loaded, a full collection takes 0.4 s, most of it scanning the
    libraries' own objects: after collecting, what is left is frozen (`gc.freeze`), so
    later collections skip it. jax's in-memory caches of compiled programs (keyed by each
    Trainer, so they keep every Trainer alive) are dropped only once the process has grown
    past RELEASE_ABOVE_BYTES: the next lesson would trace again what it shares with the
    last. Measured (2026-12-07): `tutorial.py --jobs 1` peaks at 1.49 GB with it, 1.99 GB
    without, in about the same time (108 s and 104 s, run side by side); in the parallel
    run no worker reaches the threshold (the largest, 1.0 GB), so it never acts there. The
    persistent cache still has the compiled programs."""
    import gc

    if "jax" in sys.modules and _resident_bytes() > RELEASE_ABOVE_BYTES:
        sys.modules["jax"].clear_caches()
        from harness import program_memo

        program_memo.forget()
        gc.unfreeze()  # what the caches held may have been frozen by an earlier call
    gc.collect()
    gc.freeze()


def _resident_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


# What TensorFlow 2.21 prints on stderr while its libraries load, once per library (so
# twice): abseil writes every message logged before absl::InitializeLog() to stderr, at
# any level, so TF_CPP_MIN_LOG_LEVEL cannot silence them (abseil-cpp#1718).
TENSORFLOW_STARTUP_NOISE = re.compile(
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    r"|^I0000 \S+ +\d+ (port\.cc:\d+\] oneDNN custom operations are on"
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine)"
)


@contextlib.contextmanager
def stderr_without(noise: re.Pattern):
    """Catches what is written to file descriptor 2 (C++ code included) meanwhile, and
    writes it back without the lines `noise` matches."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not noise.search(line.rstrip("\n"))))
            sys.stderr.flush()


class QuietTensorFlowStartup(importlib.abc.MetaPathFinder):
    """Imports TensorFlow, whenever something first does, without its start-up lines."""

    _finding = False

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or self._finding:
            return None
        self._finding = True  # the lookup below comes through here again
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, self)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader, finder: QuietTensorFlowStartup):
        self._loader, self._finder = loader, finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        if self._finder in sys.meta_path:  # once TensorFlow loads, the finder's job is done
            sys.meta_path.remove(self._finder)
        try:
            with stderr_without(TENSORFLOW_STARTUP_NOISE):
                self._loader.exec_module(module)
        finally:  # the module keeps its own loader
            module.__loader__ = module.__spec__.loader = self._loader
