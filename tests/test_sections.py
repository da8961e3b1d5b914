"""Each section, run alone through the driver in a fresh process, passes and verifies its facts."""

import pathlib

import pytest
from conftest import assert_png_drawn


def run_alone(tutorial, slug: str, *options: str) -> dict:
    """Runs one section in a fresh process; it passes, every check it made passed."""
    run = tutorial(slug, *options)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (result,) = run.results["sections"]
    assert result["status"] == "passed", result
    assert result["checks"] and all(check["passed"] for check in result["checks"]), result["checks"]
    return result["facts"]


def run_alone_with_plots(tutorial, slug: str, plots: pathlib.Path) -> dict:
    """Runs a section with --plots; checks its one figure is a real picture."""
    facts = run_alone(tutorial, slug, "--plots", str(plots))
    (figure,) = plots.iterdir()
    assert figure.name.endswith(f"-{slug}.png")
    assert_png_drawn(figure)
    return facts


def test_konfig_records_the_call_and_rebuilds_an_identical_chain(tutorial):
    facts = run_alone(tutorial, "konfig")
    assert facts["qualname"] == "optax:adam"


def test_ref_schedule_follows_the_run_length_and_reaches_the_optimizer(tutorial):
    facts = run_alone(tutorial, "ref")
    assert facts["lr_at_90pct"]["1000_steps"] == pytest.approx(3.0e-05, rel=0.05)
    assert facts["lr_at_90pct"]["200_steps"] == pytest.approx(9.5e-05, rel=0.05)
    assert facts["literal_lr_at_90pct_of_200"] == pytest.approx(9.8e-04, rel=0.01)
    assert facts["optimizer_lr_after_180_updates"] == pytest.approx(1.049e-04, rel=0.01)  # step 179 of 200


def test_kontext_resolves_paths_and_names_the_missing_one(tutorial):
    facts = run_alone(tutorial, "kontext")
    assert "batch.nope" in facts["missing_path_error"]
    assert (facts["mean_gap"], facts["mean_gap_repointed"]) == (0.5, 1.0)


def test_ktyping_error_names_argument_shape_and_binding_and_shows_kd_typing_beside_it(tutorial):
    facts = run_alone(tutorial, "ktyping")
    assert facts["error_first_line"].startswith("argument weights")
    assert "(5, 32)" in facts["error_first_line"]
    assert facts["legacy_headline"].startswith('argument "weights"')


# The full run, every section in order with a clean log, is tested twice at once in
# test_reliability.py (two concurrent runs).


def test_loss_metric_weights_masks_and_pools(tutorial):
    facts = run_alone(tutorial, "loss-metric")
    losses = facts["losses"]
    assert losses["the same loss, weight=0.5"] == losses["LogCosh(preds, targets)"] * 0.5
    assert losses["LogCosh(preds, targets)"] == pytest.approx(0.574136, abs=1e-6)
    assert losses["mask='batch.mask' (3 of 8 rows)"] == pytest.approx(0.379114, abs=1e-6)
    assert losses["built-in kd.losses.L2"] == pytest.approx(1.871867, abs=1e-6)
    assert facts["merged_ratio"] == 0.4375  # 14 / 32
    assert facts["mean_of_rates"] == 0.5  # (9/24 + 5/8) / 2


def test_trainer_loss_falls_and_inner_norm_is_read(tutorial, tmp_path):
    facts = run_alone_with_plots(tutorial, "trainer", tmp_path / "plots")
    curve = facts["loss_curve"]
    assert curve["1"] == pytest.approx(1.5107, abs=1e-4)
    assert curve["300"] == pytest.approx(0.0049, abs=1e-4)
    assert facts["enc_norm_curve"]["300"] == pytest.approx(5.9958, abs=1e-3)


def test_sweep_final_losses(tutorial, tmp_path):
    facts = run_alone_with_plots(tutorial, "sweep", tmp_path / "plots")
    assert facts["final_logcosh"] == pytest.approx({
        "(baseline)": 0.0082,
        "model.hidden=4": 0.0178,
        "model.hidden=128": 0.0041,
        "optimizer.learning_rate=0.1": 0.0099,
        "optimizer=optax.sgd(0.05)": 0.0393,
    }, abs=2e-4)


def test_guardrails_unseeded_standalone_pipelines_differ(tutorial):
    facts = run_alone(tutorial, "guardrails")
    first, second = facts["standalone_seeds"]
    assert first != second
    assert "ConfigDict only accept other configurables" in facts["error"]


def test_checkpoint_resumes_and_only_pygrain_resumes_exactly(tutorial, tmp_path):
    facts = run_alone_with_plots(tutorial, "checkpoint", tmp_path / "plots")
    assert facts["checkpoints"] == {"first_run": [0, 100, 200], "after_resume": [100, 200, 300]}
    assert list(facts["eval"]) == ["0", "100", "200", "300"]
    assert facts["eval"]["0"] == pytest.approx({"logcosh": 1.2229, "within_tol": 13 / 128}, abs=1e-4)
    assert facts["eval"]["300"]["logcosh"] == pytest.approx(0.0151, abs=1e-4)
    differences = facts["max_param_difference_after_resume"]
    assert differences["kd.data.py.DataSource"] == 0.0
    assert differences["InMemoryPipeline"] == pytest.approx(0.0323, rel=0.05)


def test_cli_runs_a_sweep_command_and_config_json_records_it(tutorial):
    facts = run_alone(tutorial, "cli")
    assert facts["recorded_overrides"]["optimizer"] == {"__qualname__": "optax:sgd", "0": 0.05}
    assert facts["recorded_overrides"]["num_train_steps"] == 50
    assert list(facts["logged_logcosh"]) == ["0", "50"]
    assert facts["logged_logcosh"]["50"] < facts["logged_logcosh"]["0"]
    prefix = "python -m kauldron.main --cfg=configs/regression.py"
    assert facts["sweep_commands"] == [
        prefix, f"{prefix} --cfg.model.hidden=4", f"{prefix} --cfg.model.hidden=128",
        f"{prefix} --cfg.optimizer.learning_rate=0.1",
        f"""{prefix} '--cfg.optimizer={{"__qualname__": "optax:sgd", "0": 0.05}}'"""]


def test_sharding_splits_the_batch_8_ways_and_matches_one_device(tutorial):
    facts = run_alone(tutorial, "sharding")
    assert facts["batch_shards"] == {"devices": 8, "shapes": [[4, 16]] * 8}
    assert facts["max_relative_loss_difference"] <= 1e-5
    assert facts["within_tol_step_0"]["8_devices"] == facts["within_tol_step_0"]["pooled"]


def test_data_transforms_change_the_element_spec_and_follow_overrides(tutorial):
    facts = run_alone(tutorial, "data")
    assert facts["element_spec"] == {
        "raw": {"id": "i64[8]", "image": "ui8[8 8 8 3]", "label": "i64[8]"},
        "transformed": {"image": "f32[8 192]", "target": "i64[8]"},
        "overridden": {"image": "f32[16 3 8 8]", "target": "i64[16]"},
    }


def test_finetune_loads_the_encoder_freezes_it_and_beats_scratch(tutorial, tmp_path):
    facts = run_alone_with_plots(tutorial, "finetune", tmp_path / "plots")
    final = facts["final_logcosh"]
    assert final["fine-tuned"] < final["from scratch"] / 5
    assert final["fine-tuned"] == pytest.approx(0.0130, abs=2e-3)


def test_randomness_lists_the_context_keys(tutorial):
    facts = run_alone(tutorial, "randomness")
    assert facts["context_paths"] >= 30  # batch, params, grads, updates, opt_state, interms, states


def test_evals_recomputed_from_each_checkpoint(tutorial, tmp_path):
    facts = run_alone_with_plots(tutorial, "evals", tmp_path / "plots")
    assert list(facts["heldout"]) == ["0", "100", "200"]
    assert facts["heldout"]["0"]["logcosh"] == pytest.approx(1.2229, abs=1e-4)
    assert facts["heldout"]["200"]["logcosh"] == pytest.approx(0.0149, abs=1e-3)


def test_export_serves_without_kauldron(tutorial):
    facts = run_alone(tutorial, "export")
    assert facts["served"]["rows"] == 128 and facts["served"]["max_abs_difference"] == 0.0
    assert "expected (b, 16)" in facts["served"]["refused"]


def test_nnx_trains_and_matches_linen(tutorial):
    facts = run_alone(tutorial, "nnx")
    assert facts["logcosh"]["300"] * 10 <= facts["logcosh"]["0"]
    assert facts["linen_max_difference"] == 0.0


def test_sections_5_to_9_pass_in_reverse_order_in_one_process(tutorial):
    run = tutorial("9", "8", "7", "6", "5")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert [s["slug"] for s in run.results["sections"]] == [
        "checkpoint", "guardrails", "sweep", "trainer", "loss-metric"]
    assert run.statuses() == dict.fromkeys(run.statuses(), "passed")
