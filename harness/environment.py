"""What this environment runs: package versions, jax devices and the compat decisions, as
the header, `--versions` and every JSON result report them.

Versions come from installed distribution metadata, so reading them imports nothing.
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import platform

# Distribution names; the first one installed wins (tensorflow-cpu on Python >= 3.12).
PACKAGES = {
    "kauldron": ("kauldron",),
    "jax": ("jax",),
    "jaxlib": ("jaxlib",),
    "flax": ("flax",),
    "optax": ("optax",),
    "orbax-checkpoint": ("orbax-checkpoint",),
    "etils": ("etils",),
    "numpy": ("numpy",),
    "tensorflow": ("tensorflow", "tensorflow-cpu"),
}


def _version(distributions: tuple[str, ...]) -> str:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    found.update({key: _version(names) for key, names in PACKAGES.items()})
    return found


def devices() -> list[str]:
    """The jax devices, e.g. ['cpu:0']. Imports jax and starts its backend."""
    import jax

    return [f"{d.platform}:{d.id}" for d in jax.devices()]


def set_up_and_describe(no_compat: bool, cache: pathlib.Path | None = None,
                        workdir: pathlib.Path | None = None, heavy: bool = False) -> tuple[dict, list]:
    """Applies the process settings and the compat fixes (unless told not to), then
    describes this environment: it starts jax."""
    # Process settings first (jax reads some when it is imported), then the fixes, all
    # before any section imports Kauldron.
    from harness import runtime

    runtime.prepare(cache, workdir)
    if not no_compat:
        import compat

        compat.install_all()
    return describe(*here(no_compat, heavy), cache)


def here(no_compat: bool, heavy: bool = False) -> tuple[list[str], list]:
    """This process's jax devices and what each compat fix decided. The lessons import what
    the fixes watch anyway: it is imported now, so that every decision is made; what a
    heavy fix watches only with `heavy` (else it decides when a lesson imports it)."""
    import compat

    return devices(), compat.skipped_all() if no_compat else compat.reports(settle=True, heavy=heavy)


def describe(devices: list[str], fixes: list, cache: pathlib.Path | None) -> tuple[dict, list]:
    """The report's environment entries, and the fixes (to print)."""
    return {"versions": versions(), "devices": devices, "compat": [fix.to_json() for fix in fixes],
            "cache": str(cache) if cache else None}, fixes


def missing_requirements() -> list[str]:
    """Top-level packages the lessons need that are not installed (checked without importing)."""
    import importlib.util

    return [name for name in ("kauldron", "jax", "flax", "optax") if importlib.util.find_spec(name) is None]


def one_process_accelerator() -> str | None:
    """What jax would open here that one process holds at a time, found without starting
    jax (this process must not hold it): a TPU, when libtpu is installed and JAX_PLATFORMS
    does not keep jax off it. A second process that opens it fails ("libtpu multi-process
    lockfile", seen on a TPU v5e). None on a CPU, or with JAX_PLATFORMS=cpu."""
    import importlib.util
    import os

    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms and "tpu" not in platforms.split(","):
        return None
    return "a TPU" if importlib.util.find_spec("libtpu") is not None else None
