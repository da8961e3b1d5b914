"""The results page, docs/results.md: each section's status in each kept run (a platform
and a set of pins), with each run's date and versions, and the values a section recorded
(`lesson.fact`) that differ between runs: what changes with the platform or the versions.

A run is kept as docs/runs/NAME.json, the part of `tutorial.py --json`'s file the page
reads (no outputs, no machine paths):

    python tutorial.py --json /tmp/run.json
    python -m presenting.runs add cpu-py312 /tmp/run.json   # keeps it, and writes the page
    python -m presenting.runs render                        # the page from the kept runs
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib

import jinja2

from harness.registry import catalog

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
RUNS = DOCS / "runs"
PAGE = DOCS / "results.md"
# The order of the page's columns: the pinned CPU legs, the newest releases, then the rest.
ORDER = ["cpu-py311", "cpu-py312", "cpu-latest", "tpu-v5e-py311"]
# Two runs' values differ where a number differs by more than RTOL of it and ATOL: float32
# sums taken in another order differ by about 1e-7 relative, a TPU's default precision in
# the fifth digit; a difference of two tiny numbers (1e-7 against 8e-8) is no difference.
RTOL, ATOL = 1e-5, 1e-6
KEPT = ("finished", "versions", "devices", "compat", "jobs", "totals")


def kept(run: dict) -> dict:
    """What the page needs of a --json file, without the paths of the machine that ran it
    (as pages show them: presenting/site.py)."""
    from presenting.site import without_machine_paths

    sections = [{**{key: section[key] for key in ("number", "slug", "status", "seconds", "facts")},
                 "summary": without_machine_paths(section["summary"], run.get("workdir") or "",
                                                  f"{section['number']:02d}-{section['slug']}")}
                for section in run["sections"]]
    return {**{key: run.get(key) for key in KEPT}, "sections": sections}


def load() -> dict[str, dict]:
    """The kept runs, by name, in the page's order."""
    runs = {path.stem: json.loads(path.read_text()) for path in RUNS.glob("*.json")}
    rank = {name: index for index, name in enumerate(ORDER)}
    return dict(sorted(runs.items(), key=lambda item: (rank.get(item[0], len(ORDER)), item[0])))


def same(a, b) -> bool:
    """Whether two recorded values agree: numbers within RTOL and ATOL, the rest equal."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def differences(runs: dict[str, dict]) -> list[dict]:
    """Each (section, fact) whose value is not the same (`same`) in every run that recorded
    it, with each run's value."""
    found = []
    for info in catalog():
        values = {}
        for name, run in runs.items():
            section = next((s for s in run["sections"] if s["slug"] == info.slug), None)
            for fact, value in (section or {}).get("facts", {}).items():
                values.setdefault(fact, {})[name] = value
        for fact, by_run in values.items():
            first, *others = by_run.values()
            if others and not all(same(first, other) for other in others):
                found.append({"number": info.number, "slug": info.slug, "fact": fact,
                              "values": {name: json.dumps(v, sort_keys=True) for name, v in by_run.items()}})
    return found


def render(runs: dict[str, dict]) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("presenting", "templates"), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    statuses = {name: {s["slug"]: s for s in run["sections"]} for name, run in runs.items()}
    return env.get_template("results.md.j2").render(runs=runs, sections=catalog(), statuses=statuses,
                                                    differences=differences(runs), rtol=RTOL, atol=ATOL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="keep a run's --json file as docs/runs/NAME.json, and write the page")
    add.add_argument("name", help="the run's column: platform-python (cpu-py312, tpu-v5e-py311, ...)")
    add.add_argument("json", type=pathlib.Path, help="the file tutorial.py --json wrote")
    commands.add_parser("render", help="write docs/results.md from the kept runs")
    args = parser.parse_args(argv)
    if args.command == "add":
        RUNS.mkdir(parents=True, exist_ok=True)
        (RUNS / f"{args.name}.json").write_text(json.dumps(kept(json.loads(args.json.read_text())), indent=1) + "\n")
    PAGE.write_text(render(load()))
    print(f"wrote {PAGE.relative_to(DOCS.parent)} from {len(load())} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
