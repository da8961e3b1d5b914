"""Regenerates requirements.txt: one fully pinned set per supported Python, merged with markers.

    python tools/pin_requirements.py                      # needs `uv` and network access
    python tools/pin_requirements.py --extras-only        # requirements-extras.txt only
    python tools/pin_requirements.py --broken-etils-only  # from requirements.txt, offline

Also writes requirements-extras.txt: what `--plots` (matplotlib) and `--notebook`
(nbformat; nbclient and ipykernel to run it headless, as the tests do) add, pinned per
Python on top of requirements.txt, whose pins it keeps.

Also writes .ci/requirements-broken-etils.txt for CI's `broken-etils` leg: the Python 3.11
set with etils 1.14.0, the release the user's guide was written against, whose
`jax._src.prng` lookup breaks on jax 0.10.2 (what compat/etils_prng.py fixes).

Why not `uv pip compile --universal`: it picked google-cloud-bigquery==2.28.1, whose
Requires-Python (<3.10) plain pip honours, so `pip install -r requirements.txt` failed.
Resolving per Python and pinning every transitive package means pip never backtracks
(the unpinned `kauldron==1.4.2` resolve ran for over 7 minutes with pip 23.2).
"""

import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Kauldron 1.4.3+ needs Python >= 3.12; 1.4.2 is the newest for 3.11.
TARGETS = {"3.11": "kauldron==1.4.2", "3.12": "kauldron==1.4.4"}
# What the tutorial itself needs beyond Kauldron: filelock lets JAX's persistent compilation
# cache lock its directory, so concurrent runs can share it; wrapt's post-import hooks let
# compat/ wait for the module it fixes (TensorFlow already pulls both in). tensorflow-datasets
# 4.9.10 imports importlib_resources to write a dataset (section 0) without requiring it
# (tensorflow/datasets#11212). setproctitle: a child forked by harness/warm_start.py shows
# `ps` the command it runs, not its server's.
EXTRA = ["filelock", "wrapt", "importlib-resources", "setproctitle"]
# uv ignores Requires-Python upper bounds when it picks versions; steer it past those.
CONSTRAINTS = ["google-cloud-bigquery>=3.4"]
# Optional: --plots and --notebook, and running a notebook headless. ipywidgets: in a
# notebook, kd.inspect displays through etils.ecolab, which imports it.
EXTRAS = ["matplotlib", "nbformat", "nbclient", "ipykernel", "ipywidgets"]
MARKERS = {"3.11": 'python_version == "3.11"', "3.12": 'python_version >= "3.12"'}
BROKEN_ETILS = "1.14.0"
COMMON = 'python_version >= "3.11"'


def compile_for(python: str, requirement: str, tmp: pathlib.Path, current: dict[str, str],
                extras: tuple[str, ...] = (), keep: dict[str, str] | None = None) -> dict[str, str]:
    """Pins for one Python. `keep`: pins that must not move (requirements.txt's, when
    compiling the extras on top of it)."""
    (tmp / "in.txt").write_text("\n".join([requirement, *EXTRA, *extras]) + "\n")
    held = [f"{name}=={version}" for name, version in (keep or {}).items()]
    (tmp / "constraints.txt").write_text("\n".join(CONSTRAINTS + held) + "\n")
    out = tmp / f"out-{python}.txt"
    # uv keeps the versions already in its output file where it can: pins move only when
    # the requirements change, not whenever a new release appears.
    out.write_text("".join(f"{name}=={version}\n" for name, version in current.items()))
    subprocess.run(
        ["uv", "pip", "compile", "-q", str(tmp / "in.txt"), "-c", str(tmp / "constraints.txt"),
         "--python-version", python, "--no-header", "--no-annotate", "-o", str(out)],
        check=True,
    )
    pins = {}
    for line in out.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name] = version
    return pins


def current_pins(python: str, filename: str = "requirements.txt") -> dict[str, str]:
    """The pins a requirements file holds for one of TARGETS' Pythons (not its -r lines)."""
    path = ROOT / filename
    pins = {}
    for line in (path.read_text() if path.exists() else "").splitlines():
        if line and not line.startswith(("#", "-r")):
            pin, marker = (part.strip() for part in line.split(";"))
            if marker in (COMMON, MARKERS[python]):
                name, version = pin.split("==")
                pins[name] = version
    return pins


def merged_lines(pins: dict[str, dict[str, str]]) -> list[str]:
    """One line per package, with a marker per Python where the versions differ."""
    lines = []
    for name in sorted(set().union(*pins.values())):
        versions = {py: p.get(name) for py, p in pins.items()}
        if len(set(versions.values())) == 1:
            lines.append(f"{name}=={versions['3.11']} ; {COMMON}")
        else:
            lines += [f"{name}=={v} ; {MARKERS[py]}" for py, v in versions.items() if v]
    return lines


def write_extras() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        extras = {}
        for py, req in TARGETS.items():
            base = current_pins(py)
            full = compile_for(py, req, pathlib.Path(tmp), base, tuple(EXTRAS), keep=base)
            extras[py] = {name: version for name, version in full.items() if name not in base}
    header = [
        "# Generated by tools/pin_requirements.py: what --plots (matplotlib) and --notebook (nbformat;",
        "# nbclient and ipykernel run a notebook headless) need, pinned per Python on top of:",
        "-r requirements.txt",
    ]
    lines = merged_lines(extras)
    (ROOT / "requirements-extras.txt").write_text("\n".join(header + lines) + "\n")
    print(f"requirements-extras.txt: {len(lines)} pins")


def write_broken_etils() -> None:
    """CI's broken-etils leg: exactly requirements.txt's 3.11 set, but etils 1.14.0."""
    broken = dict(current_pins("3.11"), etils=BROKEN_ETILS)
    tests = [line for line in (ROOT / "requirements-test.txt").read_text().splitlines()
             if line and not line.startswith(("#", "-r"))]
    (ROOT / ".ci" / "requirements-broken-etils.txt").write_text("\n".join([
        "# Generated by tools/pin_requirements.py for CI's broken-etils leg (Python 3.11 only):",
        f"# requirements.txt's 3.11 set with etils {BROKEN_ETILS}, the extras, and the test tools.",
        *(f"{name}=={version}" for name, version in sorted(broken.items())),
        *(f"{name}=={version}" for name, version in sorted(current_pins("3.11", "requirements-extras.txt").items())),
        *tests,
    ]) + "\n")
    print(f".ci/requirements-broken-etils.txt: etils {BROKEN_ETILS}")


def main() -> int:
    if sys.argv[1:] == ["--broken-etils-only"]:
        write_broken_etils()
        return 0
    if sys.argv[1:] == ["--extras-only"]:
        write_extras()
        write_broken_etils()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        pins = {py: compile_for(py, req, pathlib.Path(tmp), current_pins(py)) for py, req in TARGETS.items()}
    lines = merged_lines(pins)
    header = [
        "# Generated by tools/pin_requirements.py: every package pinned, per Python.",
        "# Python 3.11: kauldron 1.4.2 + jax 0.10.2.  Python >= 3.12: kauldron 1.4.4 + jax 0.12.0.1.",
        "# Python < 3.11 installs nothing from here; tutorial.py then says which Python it needs.",
    ]
    (ROOT / "requirements.txt").write_text("\n".join(header + lines) + "\n")
    print(f"requirements.txt: {len(lines)} pins")
    write_extras()
    write_broken_etils()
    return 0


if __name__ == "__main__":
    sys.exit(main())
