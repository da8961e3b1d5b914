"""Installs the tutorial's Python 3.11 pins on a TPU machine without internet, beside the
JAX and libtpu it has: from its own package index where that has a pin, else the
wheelhouse carried there (tools/tpu_wheels.sh builds it), into TARGET, which then goes at
the END of PYTHONPATH so that the machine's JAX stays first.

    python3 tools/tpu_install.py /tmp/site --index /opt/pypi/simple --wheels .whl-tpu

Prints what it took from where, and what neither had (kept out: what the tutorial does
not import, or a version the index lacks, said in one line each).
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target")
    parser.add_argument("--index", default="/opt/pypi/simple")
    parser.add_argument("--wheels", default=".whl-tpu")
    args = parser.parse_args()
    carried = {normal(path.name.split("-")[0]): path for path in pathlib.Path(args.wheels).glob("*.whl")}
    from_index, other_version, missing = [], [], []
    for name, version in sorted(pins().items()):
        if name in KEEP or name in carried:
            continue
        for candidate in filter(None, (name, ALSO.get(name))):
            listed = pathlib.Path(args.index) / candidate
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
              "--no-cache-dir", "--upgrade", "--target", args.target]
    subprocess.run([*common, "--index-url", f"file://{args.index}", *from_index, *other_version], check=True)
    subprocess.run([*common, "--no-index", *map(str, carried.values())], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
