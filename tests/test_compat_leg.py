"""What each CI matrix leg expects of the compat layer (.ci/run sets the expectation).

TUTORIAL_EXPECT_ETILS_PRNG is "not needed" on the pinned legs (etils 1.15.0) and "applied"
on the broken-etils leg (etils 1.14.0 with jax 0.10.2). Without it, these tests skip.
"""

import os

import pytest


EXPECTED = os.environ.get("TUTORIAL_EXPECT_ETILS_PRNG")
ARRAYSPEC_SECTIONS = ["digits", "ref", "ktyping", "loss-metric", "trainer", "sweep", "guardrails", "checkpoint", "cli",
                      "sharding", "data", "finetune", "randomness", "evals", "export", "nnx", "multihost", "grad-accum",
                      "mixture", "writer"]
# They fail in a command they run (`python -m ...`), and report its last error line.
CHILD_PROCESS_SECTIONS = ["digits", "cli", "sharding", "evals", "multihost"]
PRNG_ERROR = ("AttributeError", "module 'jax._src' has no attribute 'prng'")

pytestmark = [pytest.mark.slow,  # the suite with and without compat
              pytest.mark.skipif(EXPECTED is None, reason="set by .ci/run for each matrix leg")]


def test_versions_report_the_expected_compat_decision(tutorial):
    run = tutorial("--versions")
    assert run.returncode == 0, run.stderr
    # Every Kauldron of every leg hands its writers schedules' values unconverted, and fakes
    # every thread's imports in konfig.imports(): the day one does not, this fails, and
    # compat/kauldron_schedules.py or compat/konfig_imports.py can say which fixed it.
    assert [(fix["name"], fix["state"]) for fix in run.results["compat"]] == [("etils-prng", EXPECTED),
                                                                            ("kauldron-schedules", "applied"),
                                                                            ("konfig-imports", "applied")]
    assert f"compat etils-prng: {EXPECTED} (" in run.stdout
    for package in ("kauldron", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "etils", "numpy",
                    "tensorflow"):
        assert run.results["versions"][package] != "not installed"


@pytest.mark.skipif(EXPECTED != "applied", reason="only the broken-etils leg has the breakage")
def test_without_compat_exactly_the_arrayspec_sections_fail_with_the_prng_error(tutorial):
    run = tutorial("--no-compat")
    assert run.returncode == 1
    assert "compat etils-prng: skipped (--no-compat)" in run.stdout
    failed = {s["slug"]: s["error"] for s in run.results["sections"] if s["status"] == "failed"}
    assert sorted(failed) == sorted(ARRAYSPEC_SECTIONS)
    for slug, error in failed.items():
        if slug in CHILD_PROCESS_SECTIONS:
            assert error["type"] == "LessonFailed" and error["message"].endswith(": ".join(PRNG_ERROR))
        elif error["type"] == "CheckFailed":  # a check that expected another error met this one
            assert error["message"].endswith("got " + ": ".join(PRNG_ERROR)), error["message"]
        else:
            assert (error["type"], error["message"]) == PRNG_ERROR
    assert run.results["totals"]["passed"] == len(run.results["sections"]) - len(ARRAYSPEC_SECTIONS)
