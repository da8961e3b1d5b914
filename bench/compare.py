"""Wall time and peak memory of the suite against the user's original guide.

    .venv/bin/python bench/compare.py                 # 3 rounds
    .venv/bin/python bench/compare.py --rounds 5 --json bench.json

Each variant runs as its own process, with the interpreter running this script, and the
variants take turns round after round, so a noisy neighbour slows them all alike:

    guide       the restored guide (../shared/seed/kauldron_guide_restored.py by default)
    suite-cold  python tutorial.py (every section, default --jobs), with an empty compilation cache
    suite-warm  the same, with a cache filled by an earlier (uncounted) run
    suite-warm-j1  the same with --jobs 1: every section in one process, one after another
    suite-warm-j3  the same with --jobs 3: one worker more than this machine kind's 2 cores
    suite-warm-nomemo  the same, each worker reading a program from the cache every time it
                needs it (harness/program_memo.py off)
    guide-scope python tutorial.py 1 ... 9, warm: what the guide covers (10 on go beyond it)
    kontext     python tutorial.py kontext
    digits      python tutorial.py digits, warm: section 0, a real dataset end to end
    imports     only the imports every training lesson needs (jax, flax, optax, Kauldron
                with kd.train and kd.data, which pull in TensorFlow): the floor under both

Reported per variant: median and range of wall seconds, and the ratio of the median to the
guide's (medians and ratios, because these machines are noisy); then, from one more run of
each, the largest RSS any one process reached and the peak memory of all its processes
together (their proportional set sizes, which count shared pages once, summed, sampled
every 0.25 s). Memory is sampled apart from the timed rounds: reading a large process's
PSS costs about 26 ms of CPU, and sampling the suite's eight processes every 0.25 s took
most of a core from it.

A run that fails or passes --timeout ends the measurement: what the rounds before it
measured is still reported. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
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
# Targets from the issues: (time ratio to the guide, largest RSS of one process in MB).
TARGETS = {"suite-warm": (2.1, None), "guide-scope": (0.7, None), "kontext": (0.1, 300), "digits": (1.5, None)}


def tree_memory_mb(root: int) -> tuple[float, float]:
    """The memory of process `root` and all its descendants now, in MB: their PSS summed,
    and the largest RSS of one of them."""
    try:
        top = psutil.Process(root)
        tree = [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    total = largest = 0
    for proc in tree:
        with contextlib.suppress(psutil.Error):  # gone meanwhile
            info = proc.memory_full_info()
            total += info.pss
            largest = max(largest, info.rss)
    return total / 2**20, largest / 2**20


class PeakMemory(threading.Thread):
    """Samples tree_memory_mb(pid) until told to stop: `.peak` is the largest sum seen,
    `.largest` the largest single process. Sampling sees the --jobs workers, which the
    forkserver starts and waits for (wait4 on the tutorial reports only its own)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.largest, self.done = pid, 0.0, 0.0, threading.Event()

    def run(self):
        while not self.done.wait(0.25):
            total, largest = tree_memory_mb(self.pid)
            self.peak, self.largest = max(self.peak, total), max(self.largest, largest)


def measure(cmd: list[str], cwd: pathlib.Path, timeout: float, sample: bool = False) -> tuple[float, float, float]:
    """Runs cmd to completion; returns (wall seconds, largest RSS of one process in MB, peak
    memory of all its processes together in MB), the memory sampled only if `sample` (else
    0, 0). Sampling sees every descendant, the --jobs workers a forkserver starts too."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = PeakMemory(proc.pid)
    if sample:
        sampler.start()
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{' '.join(cmd)} ran past --timeout {timeout:.0f} s") from None
    finally:
        sampler.done.set()
        if sample:
            sampler.join()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {' | '.join(tail)}")
    return seconds, sampler.largest, sampler.peak


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guide", type=pathlib.Path, default=DEFAULT_GUIDE,
                        help=f"the restored guide (default: {DEFAULT_GUIDE})")
    parser.add_argument("--rounds", type=positive_int, default=3, help="timed runs of each variant (default: 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one run may take (default: 900)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the raw measurements here")
    parser.add_argument("--variants", nargs="+", metavar="NAME",
                        help="measure only these variants (the guide is always measured: the ratios need it)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        parser.error(f"needs Linux (it reads processes' memory from /proc); this is {sys.platform}")
    if not args.guide.is_file():
        parser.error(f"no guide at {args.guide.resolve()}; pass its path with --guide")

    python = sys.executable
    tutorial = str(ROOT / "tutorial.py")
    seconds: dict[str, list[float]] = {}
    memory: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kauldron-bench-") as tmp:
        tmp = pathlib.Path(tmp)

        def own(name: str) -> str:
            """A warm variant's own copy of the warm cache: each run records its sections'
            times there, and the next run's workers start the longest first by them. Shared,
            the times guide-scope records (sections 1-9 with fewer beside them) reordered the
            full run's workers: the suite took 41.1 s beside guide-scope, 36.4 s alone."""
            return str(tmp / f"warm-cache-{name}")

        variants = {
            "guide": lambda r: [python, str(args.guide.resolve())],
            "suite-cold": lambda r: [python, tutorial, "--cache-dir", str(tmp / f"cold-cache-{r}")],
            "suite-warm": lambda r: [python, tutorial, "--cache-dir", own("suite-warm")],
            "suite-warm-j1": lambda r: [python, tutorial, "--jobs", "1", "--cache-dir", own("suite-warm-j1")],
            "suite-warm-nomemo": lambda r: ["env", "KAULDRON_TUTORIAL_NO_PROGRAM_MEMO=1", python, tutorial,
                                            "--cache-dir", own("suite-warm-nomemo")],
            "suite-warm-j3": lambda r: [python, tutorial, "--jobs", "3", "--cache-dir", own("suite-warm-j3")],
            "guide-scope": lambda r: [python, tutorial, *GUIDE_SECTIONS, "--cache-dir", own("guide-scope")],
            "kontext": lambda r: [python, tutorial, "kontext", "--cache-dir", own("kontext")],
            "digits": lambda r: [python, tutorial, "digits", "--cache-dir", own("digits")],
            "imports": lambda r: [python, "-c", IMPORTS],
        }
        if args.variants:
            unknown = set(args.variants) - set(variants)
            if unknown:
                parser.error(f"unknown variants {sorted(unknown)}; known: {', '.join(variants)}")
            variants = {name: command for name, command in variants.items() if name == "guide" or name in args.variants}
        seconds = {name: [] for name in variants}
        print(f"python: {python}\nguide: {args.guide}\nwarming the cache (not counted) ...", flush=True)
        try:
            # The warm cache: a full run fills it, and the other warm variants start from a copy;
            # without one, each selected warm variant fills its own.
            warm = [name for name in variants if name not in ("guide", "suite-cold", "imports")]
            warming = ["suite-warm"] if "suite-warm" in variants else warm
            for name in warming:
                measure(variants[name](0), tmp, args.timeout)
            for name in set(warm) - set(warming):
                shutil.copytree(own("suite-warm"), own(name))
            for r in range(args.rounds):
                names = list(variants)
                for name in names[r % len(names):] + names[:r % len(names)]:  # rotate who goes first
                    seconds[name].append(measure(variants[name](r), tmp, args.timeout)[0])
                    print(f"  round {r + 1}/{args.rounds} {name:<13} {seconds[name][-1]:6.1f} s", flush=True)
            print("memory: one more run of each, sampled", flush=True)
            for name, command in variants.items():
                memory[name] = measure(command(args.rounds), tmp, args.timeout, sample=True)[1:]
        except RuntimeError as e:
            print(f"stopped: {e}", flush=True)

    report(seconds, memory)
    if args.json:
        args.json.write_text(json.dumps({"python": python, "guide": str(args.guide), "cores": os.cpu_count(),
                                         "versions": versions(python), "seconds": seconds, "memory_mb": memory},
                                        indent=2) + "\n")
    return 0 if all(len(runs) == args.rounds for runs in seconds.values()) and len(memory) == len(seconds) else 1


def report(seconds: dict[str, list[float]], memory: dict[str, tuple[float, float]]) -> None:
    """The table of what was measured, and the targets; variants with no finished run left out."""
    measured = {name: runs for name, runs in seconds.items() if runs}
    if "guide" not in measured:
        print("no finished run of the guide: no ratios")
        return
    guide_s = statistics.median(measured["guide"])
    guide_total = memory.get("guide", (0, 0))[1]
    print("\n| variant | runs | median s | min-max s | time / guide | largest process MB | all processes MB | all / guide |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in measured.items():
        largest, total = memory.get(name, (float("nan"), float("nan")))
        ratio = total / guide_total if guide_total else float("nan")
        print(f"| {name} | {len(runs)} | {statistics.median(runs):.1f} | {min(runs):.1f}-{max(runs):.1f} |"
              f" {statistics.median(runs) / guide_s:.2f} | {largest:.0f} | {total:.0f} | {ratio:.2f} |")
    print()
    for name, (time_ratio, rss_mb) in TARGETS.items():
        if name not in measured:
            continue
        ratio = statistics.median(measured[name]) / guide_s
        checks = [f"time {ratio:.2f} x guide (target <= {time_ratio})" + ("" if ratio <= time_ratio else " MISSED")]
        if rss_mb is not None and name in memory:
            largest = memory[name][0]
            checks.append(f"largest process {largest:.0f} MB (target < {rss_mb})" + ("" if largest < rss_mb else " MISSED"))
        print(f"{name}: " + "; ".join(checks))


def versions(python: str) -> dict[str, str]:
    """The versions the measured runs used, as the interpreter running them sees them."""
    code = ("import importlib.metadata as m, json, platform\n"
            "def version(name):\n"
            "    try:\n        return m.version(name)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            "names = ('kauldron', 'jax', 'flax', 'tensorflow', 'tensorflow-cpu')\n"
            "print(json.dumps({'python': platform.python_version(), **{n: version(n) for n in names if version(n)}}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


if __name__ == "__main__":
    sys.exit(main())
