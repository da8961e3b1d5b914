"""Wall time and peak memory of the suite against the user's original guide.

    .venv/bin/python bench/compare.py                 # 3 rounds
    .venv/bin/python bench/compare.py --rounds 5 --json bench.json

Each variant runs as its own process, with the interpreter running this script, and the
variants take turns round after round, so a noisy neighbour slows them all alike:

    guide       the restored guide (../shared/seed/kauldron_guide_restored.py by default)
    suite-cold  python tutorial.py (every section), with an empty compilation cache
    suite-warm  the same, with a cache filled by an earlier (uncounted) run
    guide-scope python tutorial.py 1 ... 9, warm: what the guide covers (10-12 go beyond it)
    kontext     python tutorial.py kontext
    imports     only the imports every training lesson needs (jax, flax, optax, Kauldron
                with kd.train and kd.data, which pull in TensorFlow): the floor under both

Reported per variant: median and range of wall seconds, median peak RSS, and the ratio
of each median to the guide's. Medians and ratios, because these machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Relative to the directory you run from, as in the project's layout (main/ beside shared/).
DEFAULT_GUIDE = pathlib.Path("../shared/seed/kauldron_guide_restored.py")
GUIDE_SECTIONS = [str(number) for number in range(1, 10)]
IMPORTS = "import jax, flax, optax; from kauldron import kd; kd.train.Trainer; kd.data.InMemoryPipeline"
# Ratio targets from the performance issue: (time ratio, peak RSS ratio, absolute RSS MB).
TARGETS = {"suite-warm": (0.5, 1.0, None), "guide-scope": (0.5, 1.0, None), "kontext": (0.15, None, 300)}


def measure(cmd: list[str], cwd: pathlib.Path) -> tuple[float, float]:
    """Runs cmd to completion; returns (wall seconds, peak RSS in MB): the RSS is the largest
    any one process of the tree reached (Linux folds waited-for children into wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {' | '.join(tail)}")
    return seconds, usage.ru_maxrss / 1024  # Linux reports KB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guide", type=pathlib.Path, default=DEFAULT_GUIDE,
                        help=f"the restored guide (default: {DEFAULT_GUIDE})")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant (default: 3)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the raw measurements here")
    args = parser.parse_args()
    if not args.guide.is_file():
        parser.error(f"no guide at {args.guide.resolve()}; pass its path with --guide")

    python = sys.executable
    tutorial = str(ROOT / "tutorial.py")
    with tempfile.TemporaryDirectory(prefix="kauldron-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        warm_cache = tmp / "warm-cache"
        variants = {
            "guide": lambda r: [python, str(args.guide.resolve())],
            "suite-cold": lambda r: [python, tutorial, "--cache-dir", str(tmp / f"cold-cache-{r}")],
            "suite-warm": lambda r: [python, tutorial, "--cache-dir", str(warm_cache)],
            "guide-scope": lambda r: [python, tutorial, *GUIDE_SECTIONS, "--cache-dir", str(warm_cache)],
            "kontext": lambda r: [python, tutorial, "kontext", "--cache-dir", str(warm_cache)],
            "imports": lambda r: [python, "-c", IMPORTS],
        }
        print(f"python: {python}\nguide: {args.guide}\nwarming the cache (not counted) ...", flush=True)
        measure(variants["suite-warm"](0), tmp)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants)
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                seconds, rss = measure(variants[name](r), tmp)
                results[name].append((seconds, rss))
                print(f"  round {r + 1}/{args.rounds} {name:<10} {seconds:6.1f} s {rss:7.0f} MB", flush=True)

    medians = {name: (statistics.median(s for s, _ in runs), statistics.median(m for _, m in runs))
               for name, runs in results.items()}
    guide_s, guide_mb = medians["guide"]
    print("\n| variant | median s | min-max s | median peak RSS MB | time / guide | RSS / guide |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        seconds = [s for s, _ in runs]
        med_s, med_mb = medians[name]
        print(f"| {name} | {med_s:.1f} | {min(seconds):.1f}-{max(seconds):.1f} | {med_mb:.0f} |"
              f" {med_s / guide_s:.2f} | {med_mb / guide_mb:.2f} |")
    print()
    for name, (time_ratio, rss_ratio, rss_mb) in TARGETS.items():
        med_s, med_mb = medians[name]
        checks = [f"time {med_s / guide_s:.2f} x guide (target <= {time_ratio})"
                  + ("" if med_s / guide_s <= time_ratio else " MISSED")]
        if rss_ratio is not None:
            checks.append(f"RSS {med_mb / guide_mb:.2f} x guide (target <= {rss_ratio})"
                          + ("" if med_mb / guide_mb <= rss_ratio else " MISSED"))
        if rss_mb is not None:
            checks.append(f"RSS {med_mb:.0f} MB (target < {rss_mb})" + ("" if med_mb < rss_mb else " MISSED"))
        print(f"{name}: " + "; ".join(checks))
    if args.json:
        args.json.write_text(json.dumps({"python": python, "guide": str(args.guide), "runs": results,
                                         "medians": medians}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
