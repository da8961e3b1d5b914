"""Helpers for tests that run the tutorial the way a user does: as a separate process."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


class Run:
    """A finished `python tutorial.py ...`: exit status, output and (if asked) JSON results."""

    def __init__(self, proc: subprocess.CompletedProcess, json_path: pathlib.Path | None):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.results = json.loads(json_path.read_text()) if json_path and json_path.exists() else None

    def section(self, slug: str) -> dict:
        return next(s for s in self.results["sections"] if s["slug"] == slug)

    def statuses(self) -> dict[str, str]:
        return {s["slug"]: s["status"] for s in self.results["sections"]}


@pytest.fixture
def tutorial(tmp_path):
    """Runs tutorial.py with the given arguments; adds --json unless told not to."""

    def run(*args: str, with_json: bool = True, timeout: float = 900, python: str = sys.executable,
            env: dict | None = None) -> Run:
        json_path = tmp_path / "results.json" if with_json else None
        cmd = [python, str(ROOT / "tutorial.py"), *args]
        if json_path:
            cmd += ["--json", str(json_path)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        return Run(proc, json_path)

    return run
