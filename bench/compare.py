"""Wall time and peak memory of the suite against the user's original guide.

    .venv/bin/python bench/compare.py                 # 3 rounds
    .venv/bin/python bench/compare.py --rounds 5 --json bench.json

Each variant runs as its own process, with the interpreter running this script, and the
variants take turns round after round, so a noisy neighbour slows them all alike:

    guide       the restored guide (../shared/seed/kauldron_guide_restored.py by default)
    suite-cold  python tutorial.py (every section, default --jobs), with an empty compilation cache
    suite-warm  the same, with a cache filled by an earlier (uncounted) run
    suite-warm-j1  the same with --jobs 1: every section in one process, one after another
    guide-scope python tutorial.py 1 ... 9, warm: what the guide covers (10 on go beyond it)
    kontext     python tutorial.py kontext
    imports     only the imports every training lesson needs (jax, flax, optax, Kauldron
                with kd.train and kd.data, which pull in TensorFlow): the floor under both

Reported per variant: median and range of wall seconds; the median of the largest RSS any
one process reached; the median of the peak memory of all its processes together (their
proportional set sizes, which count shared pages once, summed, sampled every 0.25 s); and
the ratio of each median to the guide's. Medians and ratios, because these machines are
noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Relative to the directory you run from, as in the project's layout (main/ beside shared/).
DEFAULT_GUIDE = pathlib.Path("../shared/seed/kauldron_guide_restored.py")
GUIDE_SECTIONS = [str(number) for number in range(1, 10)]
IMPORTS = "import jax, flax, optax; from kauldron import kd; kd.train.Trainer; kd.data.InMemoryPipeline"
# Targets from the performance issue: (time ratio to the guide, largest RSS of one process in MB).
TARGETS = {"suite-warm": (2.0, None), "guide-scope": (0.7, None), "kontext": (0.1, 300)}


def tree_memory_mb(root: int) -> float:
    """The memory of process `root` and all its descendants now: summed PSS, in MB."""
    try:
        top = psutil.Process(root)
        tree = [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in tree:
        with contextlib.suppress(psutil.Error):  # gone meanwhile
            total += proc.memory_full_info().pss
    return total / 2**20


class PeakMemory(threading.Thread):
    """Samples tree_memory_mb(pid) until told to stop; `.peak` is the largest seen."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0.0, threading.Event()

    def run(self):
        while not self.done.wait(0.25):
            self.peak = max(self.peak, tree_memory_mb(self.pid))


def measure(cmd: list[str], cwd: pathlib.Path) -> tuple[float, float, float]:
    """Runs cmd to completion; returns (wall seconds, largest RSS of one process in MB, peak
    memory of all its processes together in MB). Linux folds waited-for children's largest
    RSS into wait4's."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = PeakMemory(proc.pid)
    sampler.start()
    stderr = proc.stderr.read()
    sampler.done.set()
    sampler.join()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {' | '.join(tail)}")
    return seconds, usage.ru_maxrss / 1024, sampler.peak  # Linux reports ru_maxrss in KB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guide", type=pathlib.Path, default=DEFAULT_GUIDE,
                        help=f"the restored guide (default: {DEFAULT_GUIDE})")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant (default: 3)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the raw measurements here")
    parser.add_argument("--variants", nargs="+", metavar="NAME",
                        help="measure only these variants (the guide is always measured: the ratios need it)")
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
            "suite-warm-j1": lambda r: [python, tutorial, "--jobs", "1", "--cache-dir", str(warm_cache)],
            "guide-scope": lambda r: [python, tutorial, *GUIDE_SECTIONS, "--cache-dir", str(warm_cache)],
            "kontext": lambda r: [python, tutorial, "kontext", "--cache-dir", str(warm_cache)],
            "imports": lambda r: [python, "-c", IMPORTS],
        }
        if args.variants:
            unknown = set(args.variants) - set(variants)
            if unknown:
                parser.error(f"unknown variants {sorted(unknown)}; known: {', '.join(variants)}")
            variants = {name: command for name, command in variants.items() if name == "guide" or name in args.variants}
        print(f"python: {python}\nguide: {args.guide}\nwarming the cache (not counted) ...", flush=True)
        for name in ("suite-warm", "guide-scope", "kontext"):  # the first of them selected fills the warm cache
            if name in variants:
                measure(variants[name](0), tmp)
                break
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants)
            for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                seconds, rss, total = measure(variants[name](r), tmp)
                results[name].append((seconds, rss, total))
                print(f"  round {r + 1}/{args.rounds} {name:<13} {seconds:6.1f} s {rss:7.0f} MB one process"
                      f" {total:7.0f} MB all", flush=True)

    medians = {name: tuple(statistics.median(run[k] for run in runs) for k in range(3))
               for name, runs in results.items()}
    guide_s, guide_mb, guide_total = medians["guide"]
    print("\n| variant | median s | min-max s | time / guide | largest process MB | all processes MB | all / guide |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        seconds = [run[0] for run in runs]
        med_s, med_mb, med_total = medians[name]
        print(f"| {name} | {med_s:.1f} | {min(seconds):.1f}-{max(seconds):.1f} | {med_s / guide_s:.2f} |"
              f" {med_mb:.0f} | {med_total:.0f} | {med_total / guide_total:.2f} |")
    print()
    for name, (time_ratio, rss_mb) in TARGETS.items():
        if name not in medians:
            continue
        med_s, med_mb, _ = medians[name]
        checks = [f"time {med_s / guide_s:.2f} x guide (target <= {time_ratio})"
                  + ("" if med_s / guide_s <= time_ratio else " MISSED")]
        if rss_mb is not None:
            checks.append(f"largest process {med_mb:.0f} MB (target < {rss_mb})" + ("" if med_mb < rss_mb else " MISSED"))
        print(f"{name}: " + "; ".join(checks))
    if args.json:
        args.json.write_text(json.dumps({"python": python, "guide": str(args.guide), "runs": results,
                                         "medians": medians}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
