"""Installs the tutorial's Python 3.11 pins on a TPU machine without internet, beside the
JAX and libtpu it has. Two steps:

    python3 tools/tpu_install.py wheels .whl-tpu        # where pip reaches PyPI
    python3 tools/tpu_install.py install /tmp/site --index /opt/pypi/simple --wheels .whl-tpu   # there

`wheels` fetches the pins that machine's index lacks (tools/tpu-wheels.txt) as Python 3.11
manylinux wheels, and builds one for a pin PyPI has only as source. `install` takes every
other pin from the machine's own index, at the index's version where it lacks the pin,
and the carried wheels, into TARGET, byte-compiled, which then goes at the END of
PYTHONPATH so that the machine's JAX stays first (TARGET/bin holds the console scripts:
`tensorboard`, `kauldron`). It prints what it took from where, and what neither had.
"""

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEEP = {"jax", "jaxlib", "numpy", "scipy", "libtpu", "ml-dtypes"}  # the machine's own, built for its TPU
ALSO = {"tensorflow": "tensorflow-cpu"}  # the same code, built without CUDA: what such an index holds


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    """name -> version, requirements.txt's lines for Python 3.11."""
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^ ;]+) ; (.*)$", line)
        if match and ('"3.11"' in match[3] and ("==" in match[3] or ">=" in match[3])):
            found[normal(match[1])] = match[2]
    return found


def wheels(folder: pathlib.Path) -> None:
    """The wheels of tools/tpu-wheels.txt, for CPython 3.11 on manylinux x86-64, into `folder`."""
    lines = (ROOT / "tools" / "tpu-wheels.txt").read_text().splitlines()
    listed = {line.split("#")[0].strip(): "# sdist" in line for line in lines if line.split("#")[0].strip()}
    binary, sources = [pin for pin, sdist in listed.items() if not sdist], [pin for pin, sdist in listed.items() if sdist]
    platforms = ["manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any"]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.11", "--implementation", "cp",
                    *(option for platform in platforms for option in ("--platform", platform)), "-d", str(folder),
                    *binary], check=True)
    # Pure Python (checked: a py3-none-any wheel comes out), so built here for any machine.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), *sources], check=True)
    print(f"{len(list(folder.glob('*.whl')))} wheels in {folder}")


def install(target: str, index: str, folder: str) -> None:
    carried = {normal(path.name.split("-")[0]): path for path in pathlib.Path(folder).glob("*.whl")}
    from_index, other_version, missing = [], [], []
    for name, version in sorted(pins().items()):
        if name in KEEP or name in carried:
            continue
        for candidate in filter(None, (name, ALSO.get(name))):
            listed = pathlib.Path(index) / candidate
            # A PEP 503 index: a page per project listing its files.
            pages = " ".join(path.read_text(errors="replace") for path in listed.glob("*")) if listed.is_dir() else ""
            if re.search(rf"-{re.escape(version)}[-.]", pages):
                from_index.append(f"{candidate}=={version}")
                break
            if pages:
                other_version.append(candidate)
                break
        else:
            missing.append(f"{name}=={version}")
    print(f"{len(carried)} carried; from the index: {len(from_index)} pinned, {len(other_version)} at its own version"
          f" ({', '.join(other_version)}); in neither: {', '.join(missing) or 'none'}", flush=True)
    common = [sys.executable, "-m", "pip", "install", "--isolated", "-q", "--no-deps", "--no-compile",
              "--no-cache-dir", "--upgrade", "--target", target]
    # One pip: a second `--target --upgrade` would replace the first's TARGET/bin, scripts and all.
    subprocess.run([*common, "--index-url", f"file://{index}", *from_index, *other_version,
                    *map(str, carried.values())], check=True)
    # Byte-compiled at install, as README's install is (compileall, after pip's --no-compile,
    # uses a process per core): where PYTHONDONTWRITEBYTECODE is set (that machine), each
    # process otherwise compiles what it imports, TensorFlow's 10 s among it. Measured
    # there: 24 s once; `import harness.warm_imports` 25.3 s -> 15.3 s. Not checked: a file
    # some package ships that is not Python 3.11 fails here, and would fail no import.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", target], stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    fetch = steps.add_parser("wheels", help="where pip reaches PyPI: fetch and build the wheels to carry")
    fetch.add_argument("folder", type=pathlib.Path)
    there = steps.add_parser("install", help="on the TPU machine: install from its index and the carried wheels")
    there.add_argument("target")
    there.add_argument("--index", default="/opt/pypi/simple")
    there.add_argument("--wheels", default=".whl-tpu")
    args = parser.parse_args()
    if args.step == "wheels":
        wheels(args.folder)
    else:
        install(args.target, args.index, args.wheels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
