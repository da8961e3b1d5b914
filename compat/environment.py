"""What this environment runs: package versions and jax devices.

Versions come from installed distribution metadata, so reading them imports nothing.
"""

from __future__ import annotations

import importlib.metadata
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
