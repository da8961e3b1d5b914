"""Each section, run alone through the driver in a fresh process, passes and verifies its facts."""

import subprocess
import sys

import pytest
from conftest import ROOT


def run_alone(tutorial, slug: str) -> dict:
    run = tutorial(slug)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (result,) = run.results["sections"]
    assert result["status"] == "passed", result
    return result["facts"]


def test_konfig_records_the_call_and_rebuilds_an_identical_chain(tutorial):
    facts = run_alone(tutorial, "konfig")
    assert facts["qualname"] == "optax:adam"
    assert facts["chain_max_update_difference"] == 0.0
    assert facts["chain_steps_compared"] >= 3


def test_ref_schedule_follows_the_run_length(tutorial):
    facts = run_alone(tutorial, "ref")
    assert facts["lr_at_90pct"]["1000_steps"] == pytest.approx(3.0e-05, rel=0.05)
    assert facts["lr_at_90pct"]["200_steps"] == pytest.approx(9.5e-05, rel=0.05)
    assert facts["lr_at_50pct"]["200_steps"] == pytest.approx(1e-3)  # the end of warmup: the peak
    assert facts["literal_lr_at_90pct_of_200"] == pytest.approx(9.8e-04, rel=0.01)


def test_kontext_resolves_paths_and_names_the_missing_one(tutorial):
    facts = run_alone(tutorial, "kontext")
    assert "batch.nope" in facts["missing_path_error"]
    assert (facts["mean_gap"], facts["mean_gap_repointed"]) == (0.5, 1.5)


def test_ktyping_error_names_argument_shape_and_binding(tutorial):
    facts = run_alone(tutorial, "ktyping")
    assert facts["error_first_line"].startswith("argument weights")
    assert "(5, 32)" in facts["error_first_line"]


def test_what_section_4_says_of_the_legacy_kauldron_typing_is_true():
    """Section 4 describes the legacy report without importing it (TensorFlow); check it here."""
    code = (
        "import compat; compat.apply_all()\n"  # as the driver does, for the broken-etils leg
        "from sections import s04_ktyping as s\n"
        "report = s.legacy_report()\n"
        "headline = report.strip().splitlines()[0]\n"
        "assert all(part in headline for part in s.LEGACY_HEADLINE), headline\n"
        "missing = [line for line in s.LEGACY_DETAILS if line not in report]\n"
        "assert not missing, (missing, report)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_full_run_passes_every_section_in_order(tutorial):
    from sections import registry

    run = tutorial()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    expected = [info.slug for info in registry.catalog()]
    assert [s["slug"] for s in run.results["sections"]] == expected
    assert run.results["totals"]["passed"] == len(expected)
    assert f"{len(expected)} passed, 0 failed, 0 skipped" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr
