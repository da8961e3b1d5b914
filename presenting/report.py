"""A finished run (or one Ctrl-C stopped) reported: the summary, the JSON, the pages."""

from __future__ import annotations

import json
import os
import pathlib
import time

from presenting import terminal
from runner import environment


def report_on(report: dict, results: list, chosen: list, start: float, json_path: pathlib.Path | None, sites: dict,
              run_command: str) -> None:
    """The summary, the JSON and the pages of a run, finished or not."""
    if not report["versions"]:  # stopped before any worker reported: what needs no jax
        report["versions"] = environment.versions()
    totals = {status: sum(r.status == status for r in results) for status in ("passed", "failed", "skipped")}
    totals["checks"] = sum(len(r.checks) for r in results)
    totals["failed_checks"] = sum(r.failed_checks for r in results)
    totals["seconds"] = round(time.perf_counter() - start, 3)
    report.update(sections=[r.to_json() for r in results], totals=totals)
    terminal.print_summary(results, totals)
    if json_path:
        write_json(json_path, report)
        print(f"results: {json_path}")
    for kind, site in sites.items():
        from presenting import site as pages

        written = pages.write(report, chosen, site, kind, run_command=run_command)
        print(f"{kind}: {written[0]} and {len(written) - 1} section pages")


def write_json(path: pathlib.Path, results: dict) -> None:
    # Write beside the target and rename, so a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=2, default=str) + "\n")
    os.replace(tmp, path)
