"""A metric writer of your own: every scalar in a JSON-lines file too.

A Kauldron Trainer logs through its `writer`, by default `kd.train.KDMetricWriter`, which
writes TensorBoard's event files. A spreadsheet, pandas or a CI job reads a CSV or
JSON-lines file more easily, with no TensorBoard installed. This recipe subclasses the
default writer so that it also appends every scalar it logs to `metrics.jsonl` in the
workdir, sets it in the config, holds the file against TensorBoard's files of the same
run, step by step, resumes the run, and says what else Kauldron asks of a writer.
Kauldron's own extra writers, in `kauldron.contrib.train`, come last.
"""

import collections
import json

import numpy as np
from kauldron import kd, konfig

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.logs import read_scalars

with konfig.imports():
    import optax as optax_cfg
    from kauldron import kd as kd_cfg

    from sections.parts import jsonl_writer as jsonl_writer_cfg
    from sections.parts import regression as regression_cfg


@section(21, "writer", "A metric writer of your own: every scalar to JSON lines", part="recipes", trains=True,
         shows="a KDMetricWriter subclass in cfg.writer appends every scalar to metrics.jsonl: equal to TensorBoard's, "
               "step by step; the contrib writers",
         reference="https://github.com/google-research/kauldron/blob/main/kauldron/train/metric_writer.py")
def metric_writer_of_your_own(lesson: Lesson, workdir):
    lesson.md("""
    ## The writer, set in the config

    `JsonlWriter` (`sections/parts/jsonl_writer.py`, below) subclasses `KDMetricWriter`
    and overrides the two methods that receive numbers, `write_scalars` and
    `write_summaries`: each calls `KDMetricWriter`'s own, then appends one line per
    number to `<workdir>/<collection>/metrics.jsonl` (of what `write_summaries` is given,
    only single numbers). A config names it like any part, so it lives in a module of its
    own.

    The regression experiment is edited for the lesson: 20 steps, logging every 5; a
    second loss, `l1`, so that `losses/total` has two to add; a learning-rate schedule
    in `cfg.schedules`, so that there is one to log; an evaluator on the held-out rows
    every 10 steps; a checkpoint every 20 steps, for a resume below; and the writer in
    `cfg.writer`. The Trainer fills in the writer's `workdir` (unless the config sets
    one) with its own and sets its `collection` to `train`; the evaluator writes through
    a copy of it whose collection is the evaluator's name. A writer is a frozen
    dataclass, and both make their copy with `dataclasses.replace`: a subclass keeps its
    settings in dataclass fields, as `filename` is, or the copies lose them.
    """)
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir / "run")
    cfg.num_train_steps, cfg.log_metrics_every = 20, 5
    cfg.train_losses["l1"] = kd_cfg.losses.L1(preds="preds.y", targets="batch.y")
    cfg.schedules = {"lr": optax_cfg.linear_schedule(1e-2, 1e-3, transition_steps=cfg.ref.num_train_steps)}
    cfg.optimizer = optax_cfg.adam(learning_rate=cfg.ref.schedules["lr"])
    cfg.evals = {"heldout": kd_cfg.evals.Evaluator(
        run=kd_cfg.evals.EveryNSteps(10),
        ds=kd_cfg.data.InMemoryPipeline(loader=regression_cfg.make_loader("eval"), batch_size=32, num_epochs=1))}
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=20)
    cfg.writer = jsonl_writer_cfg.JsonlWriter()
    trainer = konfig.resolve(cfg)
    for writer in (trainer.writer, trainer.evals["heldout"].writer):
        print(type(writer).__name__, writer.collection, writer.path.relative_to(workdir))
    with lesson.checks():
        import dataclasses

        from etils import epath

        from sections.parts.jsonl_writer import JsonlWriter

        default_cfg = regression_config.get_config()
        default_cfg.workdir = str(workdir / "default")
        lesson.check(type(konfig.resolve(default_cfg).writer) is kd.train.KDMetricWriter,
                     "a Trainer resolved from a config that sets no writer writes through a kd.train.KDMetricWriter")
        lesson.check(trainer.writer.collection == "train"
                     and trainer.writer.workdir == trainer.workdir == epath.Path(cfg.workdir),
                     "the resolved Trainer's writer has collection 'train' and the Trainer's workdir, the config's")
        heldout = trainer.evals["heldout"].writer
        lesson.check(type(heldout) is type(trainer.writer) and heldout.collection == "heldout"
                     and heldout.workdir == trainer.workdir,
                     "the evaluator's writer: of the Trainer's writer's class, with collection 'heldout', the same workdir")
        lesson.check_raises(dataclasses.FrozenInstanceError, lambda: setattr(trainer.writer, "collection", "other"),
                            "setting the resolved writer's collection")
        given = JsonlWriter(filename="other.jsonl")
        object.__setattr__(given, "note", "not a field")
        copies = [dataclasses.replace(trainer, writer=given).writer,
                  dataclasses.replace(trainer.evals["heldout"], writer=given).writer]
        lesson.check(all(copy is not given and copy.filename == "other.jsonl" and not hasattr(copy, "note")
                         for copy in copies),
                     "a writer given to a Trainer and to an Evaluator: each writes through a copy, which keeps the"
                     " field filename and loses an attribute set outside the fields")
        # From here to the step "What else Kauldron asks of a writer": every call of a JsonlWriter's
        # write_step_metrics, flush and close, over this page's runs (the evaluator's copies too).
        jsonl_calls, stop_recording = record_calls(JsonlWriter, ("write_step_metrics", "flush", "close"))

    lesson.md("""
    ## Train, and read the file

    At each logging step, `train()` calls the writer's `write_step_metrics`, which
    computes the step's values and hands all of its scalars to `write_scalars` in one
    mapping: each loss and their sum (`losses/total`), the metrics, each schedule at
    that step (`schedules/`), and the Trainer's timings (`perf_stats/`). Before the
    first step, `write_param_overview` logs the parameter count, `num_params`, through
    `write_summaries` instead: a writer that overrode `write_scalars` alone would miss
    it. The evaluator logs its losses and metrics the same way, with no schedules and no
    timings. The timings are this run's own measurements: the page prints only their names.
    """)
    state, aux = trainer.train()
    lesson.shell("head -n 3 $WORKDIR/run/train/metrics.jsonl")
    run = workdir / "run"
    rows = [json.loads(line) for line in (run / "train" / "metrics.jsonl").read_text().splitlines()]
    print("rows per step:", dict(collections.Counter(row["step"] for row in rows)))
    print(*sorted({row["tag"] for row in rows}), sep="\n")
    heldout_rows = [json.loads(line) for line in (run / "heldout" / "metrics.jsonl").read_text().splitlines()]
    print("heldout, rows per step:", dict(collections.Counter(row["step"] for row in heldout_rows)))
    print(*sorted({row["tag"] for row in heldout_rows}), sep="\n")
    with lesson.checks():
        import optax

        by_step = table(rows)
        perf_stats = {"perf_stats/" + name for name in ("steps_per_sec", "total_training_time_hours",
                                                        "data_points_per_sec_global", "data_points_per_sec_per_device",
                                                        "train/avg_time_sec", "evals_along_train/avg_time_sec")}
        losses = {"losses/l1", "losses/logcosh", "losses/total"}
        step_tags = losses | {"metrics/within_tol", "schedules/lr"} | perf_stats
        lesson.check_equal(sorted(by_step), [0, 5, 10, 15, 20],
                           "the steps train() logged, with num_train_steps=20 and log_metrics_every=5")
        saved = {"perf_stats/checkpoint/avg_time_sec"}
        lesson.check(all(set(values) - {"num_params"} == step_tags | (saved if step in (0, 20) else set())
                         for step, values in by_step.items()),
                     "at each of them, the file holds losses/l1, losses/logcosh, losses/total, metrics/within_tol,"
                     f" schedules/lr and the {len(perf_stats)} perf_stats: {', '.join(sorted(perf_stats))}; and at the"
                     " steps that saved a checkpoint (0 and 20), perf_stats/checkpoint/avg_time_sec")
        lesson.check(rows[0]["tag"] == "num_params" and [step for step, values in by_step.items() if "num_params" in values]
                     == [0] and by_step[0]["num_params"] == parameter_count(state.params),
                     "num_params, the file's first line, at step 0 alone, is the model's parameter count")
        lesson.check(all(values["losses/total"] == float(np.float32(values["losses/l1"]) + np.float32(values["losses/logcosh"]))
                         for values in by_step.values()),
                     "losses/total = losses/l1 + losses/logcosh, added in float32, at every logged step")
        schedule = optax.linear_schedule(1e-2, 1e-3, transition_steps=20)
        lesson.check(all(values["schedules/lr"] == float(np.float32(schedule(step))) for step, values in by_step.items()),
                     "schedules/lr at each logged step = the schedule's value at that step (float32)")
        step_calls = calls_made(lambda w: w.write_step_metrics(step=20, aux=aux, schedules=trainer.schedules,
                                                                log_summaries=False), workdir)
        lesson.check_equal([call for call in step_calls if call[0].startswith("write_")],
                           [("write_scalars", sorted(step_tags - perf_stats))],
                           "what write_step_metrics writes through, given the last step's aux and no timer:"
                           " write_scalars, once",
                           internal="a writer's calls to its own methods, which Kauldron does not document")
        lesson.check_equal(calls_made(lambda w: w.write_param_overview(0, state.params), workdir),
                           [("write_texts", ["parameters"]), ("write_summaries", ["num_params"])],
                           "what write_param_overview calls: num_params goes through write_summaries",
                           internal="a writer's calls to its own methods, which Kauldron does not document")
        lesson.check_equal({step: sorted(values) for step, values in table(heldout_rows).items()},
                           {step: sorted(losses | {"metrics/within_tol"}) for step in (0, 10, 20)},
                           "the heldout evaluator's file, with EveryNSteps(10): its steps and tags")
        lesson.fact("jsonl_rows", {"train": len(rows), "heldout": len(heldout_rows)})

    lesson.md("""
    ## The same numbers as TensorBoard's

    `read_scalars` (`sections/parts/logs.py`) reads TensorBoard's event files for the
    `train` collection as `{step: {tag: value}}`. The file and TensorBoard hold the same
    steps and the same tags, and every value but the timings is equal to the last bit:
    the losses, the metrics and the schedules arrive as float32 and stay so in both (the
    timings: the last step of this page).
    """)
    logged = read_scalars(run, "train")  # TensorBoard's {step: {tag: value}}
    in_file = {}
    for row in rows:
        in_file.setdefault(row["step"], {})[row["tag"]] = row["value"]
    print("same steps and tags:", {s: set(tags) for s, tags in in_file.items()} == {s: set(tags) for s, tags in logged.items()})
    print("same values, timings aside:", all(value == logged[step][tag] for step, values in in_file.items()
                                             for tag, value in values.items() if not tag.startswith("perf_stats/")))
    print("step  losses/logcosh  losses/l1  schedules/lr")
    for step, values in sorted(in_file.items()):
        print(f"{step:4d}  {values['losses/logcosh']:14.6f}  {values['losses/l1']:9.6f}  {values['schedules/lr']:12.6f}")
    with lesson.checks():
        tensorboard = read_scalars(workdir / "run", "train")
        lesson.check({step: set(values) for step, values in table(rows).items()}
                     == {step: set(values) for step, values in tensorboard.items()},
                     "the file holds the (step, tag) pairs TensorBoard's train/ files hold, no more, no fewer")
        lesson.check(all(value == tensorboard[step][tag] for step, values in table(rows).items()
                         for tag, value in values.items() if not tag.startswith("perf_stats/")),
                     "every value but the timings: the file's = TensorBoard's, exactly")
        lesson.check(table(heldout_rows) == read_scalars(workdir / "run", "heldout"),
                     "the heldout evaluator's file = TensorBoard's heldout/ files: the same steps, tags and values")
        lesson.fact("logcosh", {str(step): in_file[step]["losses/logcosh"] for step in (0, 20)})

    lesson.md("""
    ## A resumed run appends

    The writer appends, and a run resumed from a checkpoint logs again from the
    checkpoint's step. `train()` called again on this Trainer finds `ckpt_20`, the state
    before the last update, as a job restarted on the same workdir would, and redoes
    step 20 (not step 0: no `num_params`). (That job would build a new Trainer, whose
    writer opens new event files, as in section 9; this one keeps its own.) The file then holds two rows
    for each loss, metric and schedule of step 20, in the train file and in the
    evaluator's: read them as `read_scalars` reads TensorBoard's files, keeping the last
    row. TensorBoard's own reader keeps both. This run's `InMemoryPipeline` starts its
    data over (section 9), so the redone step trains on another batch, and its losses
    differ.
    """)
    resumed, _ = trainer.train()  # from ckpt_20
    appended = [json.loads(line) for line in (run / "train" / "metrics.jsonl").read_text().splitlines()]
    print("rows per step:", dict(collections.Counter(row["step"] for row in appended)))
    print("losses/logcosh at 20:", [row["value"] for row in appended if (row["step"], row["tag"]) == (20, "losses/logcosh")])
    with lesson.checks():
        counts = collections.Counter((row["step"], row["tag"]) for row in appended)
        lesson.check(all(count == 1 for (step, tag), count in counts.items() if step != 20)
                     and all(counts[20, tag] == 2 for tag in in_file[20] if not tag.startswith("perf_stats/")),
                     "after the resume, train/metrics.jsonl holds two rows for each loss, metric and schedule of"
                     " step 20, one for each (step, tag) of the other steps")
        again = collections.Counter((row["step"], row["tag"])
                                    for row in map(json.loads, (run / "heldout" / "metrics.jsonl").read_text().splitlines()))
        lesson.check({key for key, count in again.items() if count == 2} == {(20, tag) for tag in table(heldout_rows)[20]},
                     "and in heldout/metrics.jsonl, each tag of step 20 alone has two")
        from sections.parts.logs import event_files

        last = {(row["step"], row["tag"]): row["value"] for row in appended}  # the last row of each pair wins
        tensorboard = read_scalars(run, "train")
        lesson.check(all(last[20, tag] == tensorboard[20][tag] for tag in in_file[20] if not tag.startswith("perf_stats/"))
                     and last[20, "losses/logcosh"] != in_file[20]["losses/logcosh"],
                     "the last rows of step 20 = read_scalars' values of step 20, the resumed run's; not the first run's")
        lesson.check_equal(tensorboard_steps(run, "train", "losses/logcosh"), [0, 5, 10, 15, 20, 20],
                           "the steps of the losses/logcosh events TensorBoard's EventAccumulator keeps for train/")
        lesson.check_equal(len(event_files(run, "train")), 1,
                           "the event files in train/ after two train() calls on one Trainer")

    lesson.md("""
    ## What else Kauldron asks of a writer

    With several processes, `write_step_metrics` returns on every process but the first
    without writing, but `write_param_overview` calls the writer's `write_summaries` on
    all of them: `KDMetricWriter` writes TensorBoard's files on process 0 alone, and
    `JsonlWriter` checks `jax.process_index()` before it appends, or every process would
    add its lines. Kauldron calls `flush()` at the end of each `write_step_metrics` (on
    process 0), and its training and evaluation loops never call `close()`:
    `JsonlWriter` opens the file for each append, so it needs neither. And the writer
    writes `config.json` and `element_spec.json` in the workdir, through
    `MetadataWriter`, which `KDMetricWriter` subclasses. With `cfg.writer = None`, a
    `NoopWriter`, nothing writes them, nor with a writer that derives from neither
    `MetadataWriter` nor `KDMetricWriter` and does not write them itself; a separate
    eval job (section 15) then waits for `element_spec.json` forever, looking every 10
    s. Nor is `NoopWriter` a base for a writer of your own: its `write_step_metrics`
    does nothing, so a subclass's `write_scalars` is never called there.
    """)
    print(sorted(path.name for path in run.iterdir() if path.suffix == ".json"))
    silent_cfg = regression_config.get_config()
    silent_cfg.workdir, silent_cfg.writer = str(workdir / "no-writer"), None
    silent_cfg.num_train_steps = 0  # a single step, step 0
    silent = konfig.resolve(silent_cfg)
    silent.train()
    print(type(silent.writer).__name__, sorted(path.name for path in (workdir / "no-writer").glob("*.json")))
    with lesson.checks():
        from kauldron.train import metric_writer

        stop_recording()

        lesson.check_equal(calls_made(lambda w: w.write_step_metrics(step=20, aux=aux, schedules=trainer.schedules,
                                                                      log_summaries=False), workdir, process=1), [],
                           "what write_step_metrics calls on process 1: nothing",
                           internal="Kauldron's status.is_lead_host patched to play process 1")
        lesson.check_equal(calls_made(lambda w: w.write_param_overview(0, state.params), workdir, process=1),
                           [("write_texts", ["parameters"]), ("write_summaries", ["num_params"])],
                           "what write_param_overview calls on process 1: write_summaries too",
                           internal="Kauldron's status.is_lead_host patched to play process 1")
        lesson.check_equal(written_as_process_1(workdir / "process-1", state.params), [],
                           "what JsonlWriter's write_param_overview writes on process 1: no line, no TensorBoard file",
                           internal="Kauldron's status.is_lead_host and jax.process_index patched to play process 1")
        lesson.check(step_calls[-1] == ("flush", []) and not any(name == "close" for name, _ in step_calls),
                     "write_step_metrics ends with the writer's flush(), and calls no close()",
                     internal="a writer's calls to its own methods, which Kauldron does not document")
        lesson.check(jsonl_calls.count("write_step_metrics") == jsonl_calls.count("flush") == 10
                     and "close" not in jsonl_calls,
                     "the JsonlWriter's calls over this page's two train() calls: 10 write_step_metrics (train's 5"
                     " then 1, the evaluator's 3 then 1), as many flush(), no close()")
        lesson.check((run / "config.json").exists() and (run / "element_spec.json").exists()
                     and issubclass(kd.train.KDMetricWriter, metric_writer.MetadataWriter),
                     "JsonlWriter's run wrote config.json and element_spec.json; KDMetricWriter is a MetadataWriter")
        lesson.check(type(silent.writer) is metric_writer.NoopWriter
                     and not issubclass(metric_writer.NoopWriter, metric_writer.MetadataWriter),
                     "cfg.writer=None resolves to a NoopWriter, not a MetadataWriter")
        lesson.check(not (workdir / "no-writer" / "config.json").exists()
                     and not (workdir / "no-writer" / "element_spec.json").exists(),
                     "its train() wrote neither config.json nor element_spec.json")
        lesson.check({"write_config", "write_element_spec"} <= metric_writer.WriterBase.__abstractmethods__,
                     "a writer deriving from WriterBase alone must implement write_config and write_element_spec itself")
        slept = sleeps_waiting_for_element_spec(silent, stop_after=100)
        lesson.check_equal((len(slept), set(slept)), (100, {10}),
                           "an eval job's element spec, for a workdir without element_spec.json: its sleeps between"
                           " looks, and their seconds, until its sleep was made to stop it at the 100th",
                           internal="a private function of Kauldron's eval job, its sleep patched")
        lesson.check_equal(scalars_a_noop_subclass_is_given(aux, trainer.schedules), [],
                           "the write_scalars calls a NoopWriter subclass that defines write_scalars gets from"
                           " write_step_metrics")

    lesson.md("""
    ## Kauldron's own writers, in `kauldron.contrib.train`

    The installed Kauldron's `contrib` folder holds three more public writers, each a
    `KDMetricWriter` subclass. As their docstrings say, `MLFlowMetricWriter` also logs
    to MLflow (by default: with `pass_to_default_writer=False`, it logs to MLflow alone,
    and writes neither `config.json` nor `element_spec.json`, so an eval job waits),
    `NpzWriter` also saves arrays to `.npz` files, and `GifVideoWriter` writes video
    summaries as animated GIFs. All three import from PyPI's Kauldron, but not as
    `contrib/README.md` says ("all contrib are exposed under a single namespace:
    `kd.contrib` (no extra import required)"): `kauldron/contrib/__init__.py` imports
    none of its subpackages, so `kd.contrib.train` is an `AttributeError`, in code and
    in a config being resolved, until something imports `kauldron.contrib.train`. In a
    config, import it inside `konfig.imports()`: `from kauldron.contrib import train`.
    """)
    from kauldron.contrib import train as contrib_train  # before this, kd.contrib.train is an AttributeError

    for writer_class in (contrib_train.MLFlowMetricWriter, contrib_train.NpzWriter, contrib_train.GifVideoWriter):
        print(f"{writer_class.__name__}: a KDMetricWriter: {issubclass(writer_class, kd.train.KDMetricWriter)}")
    with lesson.checks():
        lesson.check_equal(contrib_writers(), ["GifVideoWriter", "MLFlowMetricWriter", "NpzWriter"],
                           "the public writers (subclasses of Kauldron's writer classes) kauldron/contrib's source defines",
                           internal="reads the installed package's source files")
        lesson.check(all(issubclass(getattr(contrib_train, name), kd.train.KDMetricWriter) for name in contrib_writers()),
                     "each imports from PyPI's Kauldron as kauldron.contrib.train.<name>, a KDMetricWriter subclass")
        from sections.parts.logs import read_tensors

        animated = contrib_train.GifVideoWriter(workdir=workdir / "gif", collection="train")
        animated.write_animation(0, {"v": np.zeros((1, 3, 8, 8, 3), np.uint8)}, "GIF")
        animated.flush()
        lesson.check(bytes(read_tensors(workdir / "gif", "train")["v"][0][2]).startswith(b"GIF89a"),
                     "GifVideoWriter.write_animation of a 3-frame video: the image in its event file is a GIF"
                     " (its bytes begin GIF89a)")
        lesson.check("MLFlow" in contrib_train.MLFlowMetricWriter.__doc__,
                     "MLFlowMetricWriter's docstring: it logs to MLflow (NpzWriter's .npz files: run below)")
        lesson.check_equal({passing: metadata_an_mlflow_writer_writes(workdir / f"mlflow-{passing}", cfg, trainer, passing)
                            for passing in (True, False)},
                           {True: ["config.json", "element_spec.json"], False: []},
                           "the files MLFlowMetricWriter's write_config and write_element_spec write in its workdir,"
                           " with pass_to_default_writer True (its default) and False",
                           internal="mlflow, not installed here, replaced by a mock")
        lesson.check(contrib_train.MLFlowMetricWriter.pass_to_default_writer is True,
                     "MLFlowMetricWriter's pass_to_default_writer by default: True")
        lesson.check("`kd.contrib` (no extra import required)" in contrib_readme(),
                     "kauldron/contrib/README.md says every contrib is under kd.contrib with no extra import",
                     internal="reads the installed package's README")
        lesson.check(not hasattr(run_afresh("kauldron.contrib"), "train"),
                     "kauldron/contrib/__init__.py, run afresh, defines no `train`")
        with as_if_never_imported("kauldron.contrib.train"):
            lesson.check_raises(AttributeError, lambda: kd.contrib.train,
                                "kd.contrib.train where kauldron.contrib.train is not imported yet")
            lesson.check_raises(AttributeError, lambda: konfig.resolve(kd_cfg.contrib.train.NpzWriter(save_scalars=True)),
                                "kd.contrib.train.NpzWriter from PyPI: a config naming it, resolved where"
                                " kauldron.contrib.train is not imported yet")
            with konfig.imports():
                from kauldron.contrib import train as contrib_train_cfg
            resolved = type(konfig.resolve(contrib_train_cfg.NpzWriter(save_scalars=True)))
        lesson.check((resolved.__module__, resolved.__qualname__) == (contrib_train.NpzWriter.__module__, "NpzWriter"),
                     "a config naming it through `from kauldron.contrib import train` in konfig.imports(), resolved"
                     " where kauldron.contrib.train is not imported yet: an NpzWriter")

    lesson.md("""
    ## NpzWriter's scalars, and MLflow's missing dependency

    `NpzWriter(save_scalars=True)` saves the losses and the metrics, not the schedules,
    and only at a step that logs summaries (every `log_summaries_every` steps: 1000 by
    default, so step 0 alone in this run); an evaluator asks for summaries at every
    evaluation, so in `cfg.writer` it saves an `.npz` for each. Below, it is given this
    run's last step (the `aux` that the first `train()` returned), as `train()` gave it
    to `JsonlWriter`, but with `log_summaries=True`, which `train()` did not pass at
    step 20. `MLFlowMetricWriter` needs `mlflow`, which Kauldron's package does not
    require, not even in an extra: here, its first write fails, saying what to install.
    """)
    npz = contrib_train.NpzWriter(workdir=workdir / "npz", collection="train", save_scalars=True)
    npz.write_step_metrics(step=20, aux=aux, schedules=trainer.schedules, log_summaries=True)
    saved = np.load(workdir / "npz" / "array_dumps" / "train" / "000000020.npz")
    print({name: round(float(saved[name]), 6) for name in saved})
    try:
        contrib_train.MLFlowMetricWriter(workdir=workdir / "mlflow", collection="train").write_scalars(0, {"x": 1.0})
    except ImportError as e:
        print(type(e).__name__, "|", str(e).strip().splitlines()[-1])
    with lesson.checks():
        import dataclasses

        lesson.check({name: float(saved[name]) for name in saved}
                     == {tag: value for tag, value in in_file[20].items() if tag.startswith(("losses/", "metrics/"))},
                     "NpzWriter(save_scalars=True) given step 20 saves JsonlWriter's losses and metrics of step 20, no more")
        quiet = contrib_train.NpzWriter(workdir=workdir / "npz-quiet", collection="train", save_scalars=True)
        quiet.write_step_metrics(step=5, aux=aux, schedules=trainer.schedules, log_summaries=False)
        lesson.check(not (workdir / "npz-quiet" / "array_dumps").exists(),
                     "given a step that logs no summaries, NpzWriter saves no .npz")
        lesson.check_equal(trainer.log_summaries_every, 1000, "a Trainer's log_summaries_every by default")
        evaluator = dataclasses.replace(trainer.evals["heldout"], writer=contrib_train.NpzWriter(
            workdir=workdir / "npz-eval", save_scalars=True))
        evaluator.evaluate(resumed, step=15)
        lesson.check((workdir / "npz-eval" / "array_dumps" / "heldout" / "000000015.npz").exists(),
                     "an evaluator with an NpzWriter(save_scalars=True), evaluating at step 15: it saves an .npz")
        refused = lesson.check_raises(
            ModuleNotFoundError, lambda: contrib_train.MLFlowMetricWriter(workdir=workdir / "mlflow-check",
                                                                          collection="train").write_scalars(0, {"x": 1.0}),
            "MLFlowMetricWriter.write_scalars where mlflow is not installed")
        lesson.check("pip install 'mlflow" in str(refused), f"it says: {str(refused).strip().splitlines()[-1]}")
        lesson.check(not any(requirement.lower().startswith("mlflow") for requirement in kauldron_requirements()),
                     "kauldron's package metadata requires no mlflow, not even in an extra")

    lesson.md("""
    ## Going further: the timings, float64 in the file, float32 in TensorBoard's

    TensorBoard keeps what `write_scalars` gives it as float32 (and `num_params` as the
    int64 it is). The losses, the metrics and the schedules arrive as float32 already
    (jax computes in float32 unless `jax_enable_x64` is set), and are equal in both; the
    timings arrive as Python floats (float64), which the file keeps whole and
    TensorBoard rounds. Rounded to float32, every value is equal.
    """)
    both = [(tag, value, logged[step][tag]) for step, values in in_file.items() for tag, value in values.items()]
    print("tags whose values differ:")
    for tag in sorted({tag for tag, ours, theirs in both if ours != theirs}):
        print(f"  {tag}")
    print("...once rounded to float32:", sorted({tag for tag, ours, theirs in both if np.float32(ours) != np.float32(theirs)}))
    with lesson.checks():
        from sections.parts.logs import read_tensors

        dtypes = {tag: {value.dtype.name for step, value in by_step.items() if step in in_file}
                  for tag, by_step in read_tensors(workdir / "run", "train").items() if tag in in_file[0]}
        lesson.check_equal(dtypes, {tag: {"int64" if tag == "num_params" else "float32"} for tag in in_file[0]},
                           "the dtype TensorBoard's files hold, for each tag of the file")
        timings = [(value, logged[step][tag]) for step, values in table(rows).items()
                   for tag, value in values.items() if tag.startswith("perf_stats/")]
        lesson.check(all(float(np.float32(ours)) == theirs for ours, theirs in timings),
                     "every timing of the first run: TensorBoard's = the file's rounded to float32")
        lesson.check(sum(ours != theirs for ours, theirs in timings) > len(timings) // 2,
                     "and most differ from it unrounded: the file keeps them as float64")
        lesson.summary = (f"{len(rows)} rows in train/metrics.jsonl (steps 0-20, every 5): TensorBoard's scalars, equal"
                          " (timings as float32); a resume appends step 20 again; contrib's 3 writers import once"
                          " kauldron.contrib.train is imported")


import contextlib  # noqa: E402 - what the helpers below use, apart from the page's imports


def table(rows: list[dict]) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} of a JSON-lines file's rows."""
    found: dict[int, dict[str, float]] = {}
    for row in rows:
        found.setdefault(row["step"], {})[row["tag"]] = row["value"]
    return found


def tensorboard_steps(workdir, collection: str, tag: str) -> list[int]:
    """The steps of every event of `tag` that TensorBoard's EventAccumulator keeps for a collection."""
    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(str(workdir / collection), size_guidance={event_accumulator.TENSORS: 0})
    events.Reload()
    return [event.step for event in events.Tensors(tag)]


def parameter_count(params) -> int:
    import jax

    return sum(int(np.size(leaf)) for leaf in jax.tree.leaves(params))


def calls_made(use, workdir, process: int = 0) -> list[tuple[str, list[str]]]:
    """The writer methods that receive values, and flush and close, as `use(writer)` calls
    them on a KDMetricWriter: (method, the names given), in order; on process 1 as Kauldron
    sees it (`status.is_lead_host` False) if `process` is 1."""
    import dataclasses

    calls = []

    @dataclasses.dataclass(frozen=True, eq=True, kw_only=True)
    class Recording(kd.train.KDMetricWriter):
        def write_scalars(self, step, scalars):
            calls.append(("write_scalars", sorted(scalars)))

        def write_summaries(self, step, values, metadata=None):
            calls.append(("write_summaries", sorted(values)))

        def write_texts(self, step, texts):
            calls.append(("write_texts", sorted(texts)))

        def write_images(self, step, images):
            calls.append(("write_images", sorted(images)))

        def flush(self):
            calls.append(("flush", []))

        def close(self):
            calls.append(("close", []))

    with as_process(process):
        use(Recording(workdir=workdir / "recording", collection="recording"))
    return calls


@contextlib.contextmanager
def as_process(index: int):
    """This process as Kauldron and jax see process `index` of several (0: as it is)."""
    from unittest import mock

    import jax
    from kauldron.utils.status_utils import status

    if index == 0:
        yield
        return
    with mock.patch.dict(status.__dict__, {"is_lead_host": False}), mock.patch.object(jax, "process_index",
                                                                                      return_value=index):
        yield


def written_as_process_1(where, params) -> list[str]:
    """The files a JsonlWriter's write_param_overview writes in `where` on process 1."""
    from sections.parts.jsonl_writer import JsonlWriter

    writer = JsonlWriter(workdir=where, collection="train")
    with as_process(1):
        writer.write_param_overview(0, params)
    return sorted(str(path.relative_to(where)) for path in where.rglob("*") if path.is_file())


def record_calls(cls, names) -> tuple[list[str], object]:
    """Records the name of each call of `cls`'s methods `names` (any instance, subclasses
    too), passing each on; returns the list and a function that stops the recording."""
    from unittest import mock

    calls: list[str] = []

    def recording(name, method):
        def recorded(self, *args, **kwargs):
            calls.append(name)
            return method(self, *args, **kwargs)
        return recorded

    patches = [mock.patch.object(cls, name, recording(name, getattr(cls, name))) for name in names]
    for patch in patches:
        patch.start()
    return calls, lambda: [patch.stop() for patch in patches]


def sleeps_waiting_for_element_spec(trainer, stop_after: int) -> list[float]:
    """The sleeps of an eval job's reading of the element spec, for this Trainer's
    workdir, until it returns or `stop_after` sleeps (the last one raises, to end the wait)."""
    from unittest import mock

    from kauldron.evals import eval_impl

    class Stopped(Exception):
        pass

    slept = []

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == stop_after:
            raise Stopped

    with mock.patch.object(eval_impl.time, "sleep", side_effect=sleep):
        try:
            eval_impl._get_element_spec(trainer)
        except Stopped:
            pass
    return slept


def scalars_a_noop_subclass_is_given(aux, schedules) -> list:
    """The calls of write_scalars on a NoopWriter subclass that defines it, from one
    write_step_metrics with `aux`: the writer you might write on NoopWriter."""
    import dataclasses

    from kauldron.train import metric_writer

    given = []

    @dataclasses.dataclass(frozen=True, eq=True, kw_only=True)
    class Recording(metric_writer.NoopWriter):
        def write_scalars(self, step, scalars):
            given.append((step, sorted(scalars)))

    Recording().write_step_metrics(step=20, aux=aux, schedules=schedules, log_summaries=False)
    return given


def contrib_writers() -> list[str]:
    """The public classes kauldron/contrib's source defines on one of Kauldron's writer classes."""
    import ast
    import pathlib

    import kauldron.contrib

    bases = {"WriterBase", "KDMetricWriter", "MetadataWriter", "NoopWriter"}
    found = set()
    for path in pathlib.Path(kauldron.contrib.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and any(ast.unparse(base).split(".")[-1] in bases for base in node.bases)):
                found.add(node.name)
    return sorted(found)


def kauldron_requirements() -> list[str]:
    """Every requirement of the installed kauldron's metadata, extras included."""
    import importlib.metadata

    return importlib.metadata.requires("kauldron") or []


def metadata_an_mlflow_writer_writes(workdir, cfg, trainer, pass_to_default_writer: bool) -> list[str]:
    """The .json files an MLFlowMetricWriter's write_config and write_element_spec write in
    `workdir`, with mlflow (not installed) replaced by a mock."""
    from unittest import mock

    from kauldron.contrib.train import mlflow_metric_writer

    workdir.mkdir()
    with mock.patch.object(mlflow_metric_writer, "mlflow", mock.MagicMock()):
        writer = mlflow_metric_writer.MLFlowMetricWriter(workdir=workdir, collection="train",
                                                         pass_to_default_writer=pass_to_default_writer)
        writer.write_config(cfg)
        writer.write_element_spec(0, trainer.train_ds.element_spec)
    return sorted(path.name for path in workdir.glob("*.json"))


def contrib_readme() -> str:
    import pathlib

    import kauldron.contrib

    return (pathlib.Path(kauldron.contrib.__file__).parent / "README.md").read_text()


def run_afresh(name: str):
    """A package's __init__.py run again into a new module object: what importing it
    defines, whatever this process imported since."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def as_if_never_imported(name: str):
    """This process as one that never imported the module `name` (a submodule): it and
    its submodules leave sys.modules and their parent package, and come back after."""
    import importlib
    import sys

    parent_name, _, child = name.rpartition(".")
    parent = importlib.import_module(parent_name)
    hidden = {key: module for key, module in sys.modules.items() if key == name or key.startswith(name + ".")}
    attribute = parent.__dict__.pop(child, None)
    for key in hidden:
        del sys.modules[key]
    try:
        yield
    finally:
        sys.modules.update(hidden)
        if attribute is not None:
            setattr(parent, child, attribute)
