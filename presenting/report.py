"""A finished run (or one Ctrl-C stopped) reported: the summary, the JSON, the pages."""

from __future__ import annotations

import json
import os
import pathlib

from harness import environment
from harness.results import Report
from presenting import terminal


def report_on(report: Report, chosen: list, json_path: pathlib.Path | None, sites: dict, run_command: str) -> None:
    """The summary, the JSON and the pages of a run, finished or not."""
    if not report.environment:  # stopped before any worker reported: what needs no jax
        report.environment = {"versions": environment.versions(), "devices": [], "compat": [], "cache": None}
    terminal.print_summary(report.sections, report.totals)
    found = report.to_json()
    if json_path:
        write_json(json_path, found)
        print(f"results: {json_path}")
    for kind, site in sites.items():
        from presenting import site as pages

        written = pages.write(found, chosen, site, kind, run_command=run_command)
        print(f"{kind}: {written[0]} and {len(written) - 1} section pages")


def write_json(path: pathlib.Path, results: dict) -> None:
    # Write beside the target and rename, so a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(results, indent=2, default=str) + "\n")
    os.replace(tmp, path)
