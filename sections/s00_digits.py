"""Handwritten digits, end to end: a TFDS dataset, a config file, kauldron.main.

The whole picture first, the way Kauldron's own examples train: a TFDS dataset read by
PyGrain, a classifier with a cross-entropy loss and an accuracy metric in a config file,
trained by `python -m kauldron.main`, and the accuracy read back from the run. The data
is real and needs no download: scikit-learn's 1,797 handwritten digits, stored as a TFDS
dataset with tfds's own API. The lessons after this one take each part apart.
"""

import jax
import matplotlib.pyplot as plt
import numpy as np
import sklearn.datasets
import sklearn.metrics
import tensorflow_datasets as tfds
from kauldron import konfig

from configs import digits as digits_config
from harness import Lesson, section
from sections.parts.logs import read_scalars


@section(0, "digits", "Handwritten digits, end to end: a TFDS dataset, a config file, kauldron.main", trains=True,
         part="picture", start_early=True,
         shows="the whole picture: a real TFDS dataset, a classifier config, python -m kauldron.main, test accuracy read back",
         reference="https://kauldron.readthedocs.io/en/latest/data_py.html")
def digits_end_to_end(lesson: Lesson, workdir):
    lesson.md("""
    ## The data: 1,797 handwritten digits as a TFDS dataset

    scikit-learn ships the digits (8x8 pixels, 0 to 16, ten classes). tfds's
    `store_as_tfds_dataset` writes them as a real TFDS dataset, metadata and data files,
    into the workdir: from then on, Kauldron reads it like any other TFDS dataset, by name
    and `data_dir`. The files are ArrayRecord, not TFRecord: `kd.data.py.Tfds` reads
    through `tfds.data_source`, which needs random access to any record. A fixed random
    fifth is the test split. (tfds prints its usual "downloading and preparing" lines:
    here it only writes.)
    """)
    data_dir = workdir / "tensorflow_datasets"
    digits = sklearn.datasets.load_digits()
    images = (digits.images * 255 / 16).round().astype(np.uint8)[..., None]  # 8x8x1, as image files hold them
    order = np.random.default_rng(0).permutation(len(images))
    splits = {"train": order[:1437], "test": order[1437:]}
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name="digits", version="1.0.0", data_dir=data_dir, file_format="array_record",
        features=tfds.features.FeaturesDict({"image": tfds.features.Image(shape=(8, 8, 1)),
                                             "label": tfds.features.ClassLabel(num_classes=10)}),
        split_datasets={split: [(int(i), {"image": images[i], "label": digits.target[i]}) for i in rows]
                        for split, rows in splits.items()},
    )
    print({split: info.num_examples for split, info in builder.info.splits.items()})
    print(sorted(path.name for path in (data_dir / "digits" / "1.0.0").iterdir()))
    with lesson.checks():
        from kauldron import kd

        source = kd.data.py.Tfds(name="digits", split="train", data_dir=data_dir, shuffle=False).data_source
        lesson.check_equal(type(source).__name__, "ArrayRecordDataSource",
                           "the reader kd.data.py.Tfds gets from tfds.data_source for this dataset",
                           internal="a class tfds does not export")
        lesson.check(tfds.core.FileFormat.ARRAY_RECORD in tfds.core.FileFormat.with_random_access()
                     and tfds.core.FileFormat.TFRECORD not in tfds.core.FileFormat.with_random_access(),
                     "tfds gives random access to ArrayRecord files, not to TFRecord ones")
        lesson.check_equal(sorted(path.name for path in (data_dir / "digits" / "1.0.0").iterdir()),
                           ["dataset_info.json", "digits-test.array_record-00000-of-00001",
                            "digits-train.array_record-00000-of-00001", "features.json"],
                           "the dataset's files: its metadata, and one ArrayRecord shard per split",
                           internal="reads tfds's file layout")

    lesson.md("""
    ## Train it the way a user does: `python -m kauldron.main`

    `configs/digits.py` (below) is the experiment, as in Kauldron's examples: the data
    (`kd.data.py.Tfds`, with transforms that keep the image and the label, scale the
    pixels to [0, 1] and give the label the trailing axis the loss expects), the model, a
    cross-entropy loss, an accuracy metric, and Adam at a constant rate after a 20-step
    warm-up. An evaluator runs on the test split every 25 steps, and the checkpointer
    saves on the same steps, keeping only the checkpoint with the best test accuracy
    (section 9). The file imports what it names inside `konfig.imports()` (section 1) and
    reads `data_dir` from `cfg.aux` through `cfg.ref` (section 2). The model,
    `sections/parts/digits.py`, names its input with a `kontext.Key` field (section 3):
    the config's `image="batch.image"` is the key path the Trainer feeds it from;
    `kt.typechecked` checks its arrays' shapes (section 4). The command names the file
    and sets what this run needs: where to write, and where the dataset is.

    On a machine with one TPU, one process at a time holds the chip: once a notebook's
    kernel has run jax, a `python -m kauldron.main` started from it cannot open the chip
    and fails (libtpu's lock is taken: its error names the lockfile, or the process that
    holds the chip), from a terminal too: the lock is the machine's. Start it once no
    process holds the chip (shut the kernel down, or use one that has not run jax), or
    run kernel and commands on the CPU: `%env JAX_PLATFORMS=cpu` as the kernel's first
    cell, which its commands inherit. This tutorial runs such pages on the CPU there, so
    its numbers are a CPU's: on the chip, float32 matrix products run in bfloat16 at
    jax's default precision, and the accuracies, even the best step, can differ.
    """)
    main_run = lesson.shell("python -m kauldron.main --cfg=configs/digits.py --cfg.workdir=$WORKDIR/run"
                            " --cfg.aux.data_dir=$WORKDIR/tensorflow_datasets",
                            background=True, shows=r"Starting training loop|collection=test losses")
    with lesson.checks():
        accelerator.check_one_chip(lesson)

    lesson.md("""
    ## The same config, resolved in Python

    A config is data until it is resolved (section 1). Resolved here, it builds the same
    pipeline and model, without training: a batch is 32 images of 8x8x1 floats and 32
    labels, each with its trailing axis, and `state_specs` gives the parameters' shapes,
    from the first batch's, without computing a value: it traces the model's `init` on
    shapes and dtypes only, as `jax.eval_shape` does. The pipeline does read one real
    batch for its `element_spec`. The evaluator's batches of 120 divide the 360 test
    digits: a pipeline drops a last, smaller batch by default (section 9).
    """)
    cfg = digits_config.get_config()
    cfg.workdir, cfg.aux.data_dir = str(workdir / "run"), str(data_dir)
    trainer = konfig.resolve(cfg)
    print({key: (value.shape, value.dtype.name) for key, value in trainer.train_ds.element_spec.items()})
    print(jax.tree.map(lambda leaf: leaf.shape, trainer.state_specs.params))
    with lesson.checks():
        spec = trainer.train_ds.element_spec
        params = jax.tree.map(lambda leaf: leaf.shape, trainer.state_specs.params)
        lesson.check_equal({key: tuple(value.shape) for key, value in spec.items()},
                           {"image": (32, 8, 8, 1), "label": (32, 1)}, "a batch of 32: images 8x8x1, labels with a trailing axis")
        lesson.check_equal(spec["image"].dtype.name, "float32", "the images' dtype in a batch: floats")
        lesson.check(all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(trainer.state_specs)),
                     "every leaf of state_specs is a jax.ShapeDtypeStruct: a shape and a dtype, no values")
        lesson.check_equal((params["hidden"]["kernel"], params["logits"]["kernel"]), ((64, 128), (128, 10)),
                           "the kernels: 64 pixels to 128 hidden units, to 10 logits")
        rows = CountedRows()
        _ = kd.data.py.DataSource(data_source=rows, batch_size=4, shuffle=False, num_workers=0).element_spec
        lesson.check_equal(rows.read, 4, "the records a kd.data.py.DataSource with batches of 4 reads for its element_spec")
        test_ds = functools.partial(kd.data.py.Tfds, name="digits", split="test", data_dir=data_dir, shuffle=False,
                                    num_epochs=1, num_workers=0)
        lesson.check_equal((len(trainer.evals["test"].ds), len(test_ds(batch_size=100))), (3, 3),
                           "the test pipeline's batches: 3 of 120; with batches of 100, 3 too (the last 60 dropped)")

    lesson.md("""
    ## What the run logged: TensorBoard's files

    The run wrote its losses and metrics as TensorBoard event files in the workdir, one
    directory per collection: `train/`, and `test/` for the evaluator.
    `tensorboard --logdir $WORKDIR/run` serves them as curves (the Scalars tab, one run
    per directory); `--inspect` lists what the files hold, without a server.
    `sections/parts/logs.py` (below) reads them back with TensorBoard's own reader. The
    test accuracy peaks at step 75: the last evaluation is not the best. The evaluator
    names metrics only, so it reuses the training losses: `test/` holds `losses/xent`
    too. Training metrics are logged every `log_metrics_every` steps, 100 by default: at
    steps 0 and 100, as the loop runs steps 0 to 100. A training metric is not merged
    across steps: the train accuracy logged at step 100 is that step's batch's alone, a
    count of right digits out of 32.
    """)
    lesson.shell("tensorboard --inspect --logdir $WORKDIR/run --tag metrics/accuracy",
                 shows=r"^(Found event files|/|Event statistics|tensor$|   \w+ )")
    accuracy = {step: row["metrics/accuracy"] for step, row in read_scalars(workdir / "run", "test").items()}
    print({step: round(value, 4) for step, value in accuracy.items()})
    train = read_scalars(workdir / "run", "train")
    print("train, right of 32:", {step: round(row["metrics/accuracy"] * 32, 4) for step, row in train.items()})
    with lesson.checks():
        lesson.check(sorted(train) == [0, 100] and all(float(row["metrics/accuracy"] * 32).is_integer()
                                                       for row in train.values()),
                     "the train accuracy logged at steps 0 and 100: each a count out of one batch of 32")
        lesson.check((workdir / "run" / "train_complete.txt").exists(), "kauldron.main trained to the end (train_complete.txt)")
        lesson.check_equal((trainer.log_metrics_every, "log_metrics_every" in cfg, cfg.num_train_steps),
                           (type(trainer).log_metrics_every, False, 100),
                           "log_metrics_every, left at the Trainer's default, unset in the config; num_train_steps")
        lesson.check(all("losses/xent" in row for row in read_scalars(workdir / "run", "test").values())
                     and "losses" not in cfg.evals.test and list(trainer.evals["test"].losses) == ["xent"],
                     "the evaluator names no losses: it reuses the training ones, and test/ holds losses/xent")
        lesson.check_equal(sorted(accuracy), [0, 25, 50, 75, 100], "the steps the test evaluator ran at")
        lesson.check(accuracy[75] > max(value for step, value in accuracy.items() if step != 75),
                     f"the best test accuracy is step 75's ({accuracy[75]:.4f}), above the last one's"
                     f" ({accuracy[100]:.4f})")
        lesson.check(accuracy[75] >= 0.95, f"the best test accuracy is at least 95% ({accuracy[75]:.4f})")
        rates = {step: row["schedules/learning_rate"] for step, row in train.items()}
        lesson.check(rates[0] == 0 and abs(rates[100] - 3e-2) <= 1e-6 * 3e-2,
                     f"the learning rate the run logged: 0 at step 0, 3e-2 at step 100 ({rates[100]:.6g})")
        resolved = np.asarray(trainer.schedules["learning_rate"](np.array([10, 19, 20, 60, 100])))
        lesson.check(np.isclose(resolved[0], 1.5e-2, rtol=1e-6, atol=0) and resolved[1] < 3e-2
                     and np.allclose(resolved[2:], 3e-2, rtol=1e-6, atol=0),
                     "the config's schedule, resolved: half the peak at step 10, below it at 19, 3e-2 at 20, 60 and 100")

    lesson.md("""
    ## The checkpoint it kept: the best, not the latest

    The run saved step 100's checkpoint too, and deleted it: Orbax keeps the
    `max_to_keep` checkpoints best by `best_metric_path`, here one, step 75's.
    `latest_step` is the latest kept, 75, where a restarted `train()` resumes (section
    9). `trainer.checkpointer.restore(state)` reads that latest kept checkpoint: the best
    only because one is kept (with `max_to_keep=3`, the latest of the best three; the
    Going further step below restores one that is not the best). A
    checkpoint holds the state *before* its step's update: `ckpt_75` has had 75 updates.
    The restored parameters, applied to all 360 test digits read straight from the
    dataset, give step 75's logged accuracy.
    """)
    print("kept:", trainer.checkpointer.all_steps, "latest_step:", trainer.checkpointer.latest_step)
    state = trainer.checkpointer.restore(trainer.init_state())
    test = tfds.data_source("digits", split="test", data_dir=data_dir)
    records = [test[i] for i in range(len(test))]
    pixels = np.stack([record["image"] for record in records]).astype(np.float32) / 255
    labels = np.array([record["label"] for record in records])
    predicted = np.asarray(trainer.model.apply({"params": state.params}, pixels)["logits"]).argmax(-1)
    print(f"restored step {int(state.step)}: test accuracy {np.mean(predicted == labels):.4f}")
    with lesson.checks():
        kept = list(trainer.checkpointer.all_steps)
        lesson.check_equal(kept, [75], "the one checkpoint kept: step 75's, the best evaluation's, not step 100's")
        lesson.check("{'step': 100, 'event_type': 'save'" in main_run.output
                     and "Queuing deletion of steps: [100]." in main_run.output,
                     "orbax's log: it saved step 100, then queued its deletion", internal="reads orbax's log lines")
        lesson.check_equal(trainer.checkpointer.latest_step, 75, "latest_step, where a restarted train() resumes")
        lesson.check_equal((int(state.step), int(state.opt_state[0].count)), (75, 75),
                           "the restored state's step, and the updates Adam counted in it: the state before that step's update")
        lesson.check_close(float(np.mean(predicted == labels)), accuracy[75],
                           "numpy's accuracy over the 360 test digits with ckpt_75 = the one logged at step 75")

    lesson.md("""
    ## Where it goes wrong

    The confusion matrix counts each true digit (rows) against the predicted one
    (columns): the diagonal is right, everything else is a mistake. The figure shows it,
    with the test digits the model gets wrong.
    """)
    print(sklearn.metrics.confusion_matrix(labels, predicted))
    wrong = np.flatnonzero(predicted != labels)
    print("wrong (true->predicted):", [f"{labels[i]}->{predicted[i]}" for i in wrong])
    fig = plt.figure(figsize=(12, 4.5), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1, 1.4])
    sklearn.metrics.ConfusionMatrixDisplay.from_predictions(labels, predicted, ax=left.subplots(), colorbar=False)
    right.suptitle("The first test digits it gets wrong (true -> predicted)")
    for ax, i in zip(right.subplots(2, 6).flat, wrong):
        ax.imshow(pixels[i][..., 0], cmap="gray_r")
        ax.set_title(f"{labels[i]} -> {predicted[i]}", fontsize=9)
    for ax in right.axes:
        ax.axis("off")
    fig.suptitle("Handwritten digits: the test split")
    plt.show()
    with lesson.checks():
        lesson.fact("test_accuracy", {str(step): value for step, value in accuracy.items()})

    lesson.md("""
    ## Going further: a save needs its step's evaluation

    The checkpointer ranks a checkpoint by the metrics the evaluator computed in the
    training loop at the step of the save, not by its latest ones: save only on steps the
    evaluator runs. Here the config saves once more, at step 12 (`save_on_steps`), a
    step the evaluator skips (it runs every 25): that save has no `test.accuracy`. Orbax
    ranks the checkpoints when they outnumber `max_to_keep`, here at step 12 already
    (two, and one to keep; with more kept, at a later save), and ranking step 12's stops
    training with a `KeyError`. Step 12's checkpoint stays on disk, after step 0's:
    `restore(state)` reads step 12's, the latest, not the only one evaluated.
    """)
    cfg.workdir = str(workdir / "save_at_12")
    cfg.checkpointer.save_on_steps = [12]  # not a step the evaluator runs
    trainer_12 = konfig.resolve(cfg)
    try:
        trainer_12.train()
    except KeyError as error:
        failure = error
    trainer_12.checkpointer.close()  # waits for the save still in flight
    print(failure)
    with lesson.checks():
        message = str(failure)
        lesson.check("'test.accuracy'" in message and "key: 'test'" in message,
                     "the error: the save's metrics have no test.accuracy")
        check_where_ranking_fails(lesson, failure)
        trainer_12.checkpointer.reload()
        lesson.check_equal(list(trainer_12.checkpointer.all_steps), [0, 12],
                           "the checkpoints on disk: step 0's, evaluated, and step 12's, the failed save;"
                           " none after")
        restored = konfig.resolve(cfg).checkpointer.restore(trainer_12.init_state())
        lesson.check_equal(int(restored.step), 12, "the state.step restore(state) reads there: step 12's, the latest,"
                           " not step 0's, the only one evaluated")
        lesson.summary = (f"test accuracy {accuracy[75]:.4f} at step 75 (kept, the best), {accuracy[100]:.4f} at"
                          f" step 100; numpy's equal; {len(wrong)} of 360 wrong")


import functools  # noqa: E402 - the checks' own

from sections.parts import accelerator  # noqa: E402


def check_where_ranking_fails(lesson: Lesson, failure: KeyError) -> None:
    """The KeyError comes from orbax ranking the checkpoints, which it does only when they
    outnumber the ones to keep (orbax's source, and the error's frames)."""
    import importlib.util
    import pathlib
    import traceback

    frames = [frame.name for frame in traceback.extract_tb(failure.__traceback__)]
    lesson.check("should_preserve" in frames and "_best_fn" in frames[frames.index("should_preserve"):],
                 "the KeyError is raised as orbax chooses the checkpoints to keep (should_preserve), in"
                 " Kauldron's ranking function (_best_fn)", internal="reads the error's frames")
    orbax = pathlib.Path(importlib.util.find_spec("orbax.checkpoint").origin).parent
    policy = (orbax / "_src" / "checkpoint_managers" / "preservation_policy.py").read_text()
    lesson.check("if self.n is None or len(checkpoints) <= self.n:\n      return [True] * len(checkpoints)" in policy,
                 "orbax's best-N policy keeps every checkpoint, ranking none, while they are no more than max_to_keep",
                 internal="reads orbax's source")


class CountedRows:
    """Ten records for a kd.data.py.DataSource, counting the ones it reads."""

    def __init__(self):
        self.read = 0

    def __len__(self):
        return 10

    def __getitem__(self, index):
        self.read += 1
        return {"x": np.float32(index)}
