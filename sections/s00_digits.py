"""Handwritten digits, end to end: a TFDS dataset, a config file, kauldron.main.

The whole picture first, the way Kauldron's own examples train: a TFDS dataset read by
PyGrain, a classifier with a cross-entropy loss and an accuracy metric in a config file,
trained by `python -m kauldron.main`, and the accuracy read back from the run. The data
is real and needs no download: scikit-learn's 1,797 handwritten digits, stored as a TFDS
dataset with tfds's own API. The lessons after this one take each part apart.
"""

import jax
import numpy as np
import orbax.checkpoint as ocp
import sklearn.datasets
import sklearn.metrics
import tensorflow_datasets as tfds
from kauldron import konfig

from configs import digits as digits_config
from sections.children import finish, python_m, start_in_background
from sections.figures import plot_mistakes
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import event_files, read_scalars


@section(0, "digits", "Handwritten digits, end to end: a TFDS dataset, a config file, kauldron.main", trains=True,
         starts_processes=True, start_early=True,
         shows="the whole picture: a real TFDS dataset, a classifier config, python -m kauldron.main, test accuracy read back",
         reference="https://kauldron.readthedocs.io/en/latest/data_py.html")
def digits_end_to_end(lesson: Lesson) -> str:
    lesson.md("""
    ## The data: 1,797 handwritten digits as a TFDS dataset

    scikit-learn ships the digits (8x8 pixels, 0 to 16, ten classes). tfds's
    `store_as_tfds_dataset` writes them as a real TFDS dataset, ArrayRecord files and
    metadata, into the lesson's workdir: from then on, Kauldron reads it like any other
    TFDS dataset, by name and `data_dir`. A fixed random fifth is the test split. (tfds
    prints its usual "downloading and preparing" lines: here it only writes.)
    """)
    data_dir = lesson.workdir / "tensorflow_datasets"
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
    files = sorted(path.name for path in (data_dir / "digits" / "1.0.0").iterdir())
    print({split: info.num_examples for split, info in builder.info.splits.items()}, files)
    lesson.check_equal({split: info.num_examples for split, info in builder.info.splits.items()},
                       {"train": 1437, "test": 360}, "the dataset's splits, as TFDS records them")
    lesson.check_equal(files, ["dataset_info.json", "digits-test.array_record-00000-of-00001",
                               "digits-train.array_record-00000-of-00001", "features.json"],
                       "the dataset's files: its metadata, and one ArrayRecord shard per split")

    lesson.md("""
    ## Train it the way a user does: `python -m kauldron.main`

    `configs/digits.py` (below) is the experiment, as in Kauldron's examples: the data
    (`kd.data.py.Tfds`, with transforms that keep the image and the label, scale the
    pixels to [0, 1] and give the label the trailing axis the loss expects), the model, a
    cross-entropy loss, an accuracy metric, Adam on a warm-up-then-cosine schedule, an
    evaluator on the test split every 50 steps, and a checkpointer that keeps only the
    checkpoint with the best test accuracy. The command names the file and sets what this
    run needs: where to write, and where the dataset is. It trains in a process of its
    own, while this lesson goes on.
    """)
    run = lesson.workdir / "run"
    command = ["kauldron.main", f"--cfg={digits_config.__file__}", f"--cfg.workdir={run}", f"--cfg.aux.data_dir={data_dir}"]
    training = start_in_background(lesson, python_m(*command), lesson.workdir / "kauldron-main.log")
    print("python -m kauldron.main --cfg=configs/digits.py --cfg.workdir=WORKDIR/run"
          " --cfg.aux.data_dir=WORKDIR/tensorflow_datasets")

    lesson.md("""
    ## Meanwhile: what a batch holds, and the model's parameters

    The same config, resolved in this process, builds the same data pipeline and model
    without training: a batch is 64 images of 8x8x1 floats and 64 labels, each with its
    trailing axis, and the model's parameters are the shapes its first batch implies
    (`state_specs`: shapes only, nothing computed).
    """)
    cfg = digits_config.get_config()
    cfg.aux.data_dir, cfg.workdir = str(data_dir), str(lesson.workdir / "inspected")
    trainer = konfig.resolve(cfg)
    spec = trainer.train_ds.element_spec
    print({key: (value.shape, value.dtype.name) for key, value in spec.items()})
    params = jax.tree.map(lambda leaf: leaf.shape, trainer.state_specs.params)
    print(params)
    lesson.check_equal({key: tuple(value.shape) for key, value in spec.items()}, {"image": (64, 8, 8, 1), "label": (64, 1)},
                       "a batch of 64: images 8x8x1, labels with a trailing axis")
    lesson.check_equal((params["hidden"]["kernel"], params["logits"]["kernel"]), ((64, 128), (128, 10)),
                       "the kernels: 64 pixels to 128 hidden units, to 10 logits")
    finish(training, "python -m kauldron.main")
    lesson.check((run / "train_complete.txt").exists(), "kauldron.main trained to the end (train_complete.txt)")

    lesson.md("""
    ## The test accuracy, read back from the run

    The evaluator's accuracy is in `test/`, one value per evaluation. The checkpointer
    kept one checkpoint, at the best of them. Its parameters, applied to all 360 test
    digits read straight from the dataset, give the same accuracy.
    """)
    accuracy = {step: row["metrics/accuracy"] for step, row in read_scalars(*event_files(run, "test")).items()}
    kept = [int(path.name.removeprefix("ckpt_")) for path in (run / "checkpoints").glob("ckpt_*")]
    print({step: round(value, 4) for step, value in accuracy.items()}, "kept:", kept)
    lesson.check(len(kept) == 1 and accuracy[kept[0]] == max(accuracy.values()),
                 "the one checkpoint kept is at a step with the best test accuracy")
    best = kept[0]
    lesson.check(accuracy[best] >= 0.95, f"test accuracy at step {best} is at least 95% ({accuracy[best]:.4f})")
    test = tfds.data_source("digits", split="test", data_dir=data_dir)
    pixels = np.stack([test[i]["image"] for i in range(len(test))]).astype(np.float32) / 255
    labels = np.array([test[i]["label"] for i in range(len(test))])
    params = ocp.StandardCheckpointer().restore(run / "checkpoints" / f"ckpt_{best}" / "default")["params"]
    predicted = np.asarray(trainer.model.apply({"params": params}, pixels)["logits"]).argmax(-1)
    lesson.check_close(float(np.mean(predicted == labels)), accuracy[best],
                       f"the logged test accuracy = numpy's over the 360 test digits with ckpt_{best}")

    lesson.md("""
    ## Where it goes wrong

    The confusion matrix counts each true digit (rows) against the predicted one
    (columns): the diagonal is right, everything else is a mistake. The figure shows it,
    with the test digits the model gets wrong.
    """)
    confusion = sklearn.metrics.confusion_matrix(labels, predicted)
    print(confusion)
    wrong = np.flatnonzero(predicted != labels)
    print("wrong (true->predicted):", [f"{labels[i]}->{predicted[i]}" for i in wrong])
    plot_mistakes(lesson, confusion, pixels[wrong], labels[wrong], predicted[wrong])
    lesson.fact("test_accuracy", {str(step): value for step, value in accuracy.items()})
    return f"test accuracy {accuracy[best]:.4f} at step {best} (kept), equal to numpy's; {len(wrong)} of 360 wrong"
