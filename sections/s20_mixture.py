"""A data mixture and a random augmentation, reproduced by the Trainer's seed.

A model meant to read a digit wherever it sits can train on the real digits mixed with
shifted copies of them, each image randomly rotated. `kd.data.py.Mix` mixes Kauldron
pipelines by weight, and a random transform augments every example. Both are random, and
both are drawn from one seed, the Trainer's: a run's data is reproduced by its seed, as
its parameters are. This lesson measures how exact the mixture is, what the seed decides,
and what changes from one epoch to the next. It trains nothing.
"""

import itertools

import matplotlib.pyplot as plt
import numpy as np
from kauldron import kd, konfig

from configs import mixture as mixture_config
from harness import Lesson, section


@section(20, "mixture", "A data mixture and a random augmentation, reproduced by the Trainer's seed", part="recipes",
         shows="kd.data.py.Mix by weight, exact per epoch; a random rotation; both from the Trainer's seed; anew each epoch",
         reference="https://kauldron.readthedocs.io/en/latest/data_py.html")
def mixture_and_augmentation(lesson: Lesson, workdir):
    lesson.md("""
    ## The mixture, as a config

    `configs/mixture.py` (below) is section 0's classifier with a mixture for its data.
    `kd.data.py.Mix` takes pipelines and their weights: here section 0's 1,437 training
    digits, and the same digits moved two pixels right, three to one. Each is a
    `kd.data.py.DataSource`, which reads any object with `len` and `[i]`: `Digits`
    (`sections/parts/mixture.py`) holds scikit-learn's digits in memory, as section 0
    stores them, so this lesson writes no dataset. Each source's transforms run on its own
    examples (a `shifted` flag, the shift); the mixture's run on all of them (the scaling,
    the random rotation, the label's trailing axis). The mixture sets no seed: once the
    Trainer is built, its seed is the Trainer's.

    `Mix` takes from each source its records, its shuffle and its transforms, and
    ignores the source's `batch_size`, `num_epochs`, `num_workers` and `seed`: the
    mixture's own settings decide, and `Mix.num_epochs` counts epochs of the mixture.
    A batch stacks examples of every source, so each must yield the same keys: a key
    one source lacks fails the batch, and a dtype that differs is not refused but
    promoted by numpy.
    """)
    cfg = mixture_config.get_config()
    cfg.workdir = str(workdir / "run")
    trainer = konfig.resolve(cfg)
    print(type(trainer.train_ds).__name__, trainer.train_ds.weights, "seed:", trainer.train_ds.seed)
    print(kd.inspect.json_spec_like(trainer.train_ds.element_spec))
    with lesson.checks():
        lesson.check_equal(kd.inspect.json_spec_like(trainer.train_ds.element_spec),
                           {"image": "f32[64 8 8 1]", "index": "i64[64]", "label": "i64[64 1]", "shifted": "i64[64]"},
                           "a batch of the mixture: 64 images, their record's index, label and shifted flag")
        lesson.check("seed" not in mixture_config.get_config().train_ds and trainer.train_ds.seed == trainer.seed == 0,
                     "the config sets no seed on the mixture, and the built pipeline's is 0, as the Trainer's (seed 1, below, tells them apart)")
        nested = mixture_variant(num_epochs=2, batch_size=None, source_fields={"batch_size": 5, "num_epochs": 3})
        lesson.check(len(nested) == 2 * 1916 and next(iter(nested))["image"].shape == (8, 8, 1),
                     "sources with batch_size=5 and num_epochs=3 under a Mix of num_epochs=2, unbatched: single"
                     " examples, 2 epochs of the mixture (2 x 1,916)")
        lesson.check(not worker_processes_started(mixture_variant(batch_size=64, source_fields={"num_workers": 2}))
                     and worker_processes_started(mixture_variant(batch_size=64, num_workers=2)),
                     "sources with num_workers=2 under a Mix of num_workers=0: no worker processes; a Mix of"
                     " num_workers=2 asks for them",
                     internal="patches grain's IterDataset.mp_prefetch, which Kauldron calls for worker processes, and"
                              " sets aside Kauldron's guard that turns them off in a notebook or a test")
        seeded = [next(iter(mixture_variant(batch_size=64, source_fields={"seed": seed}))) for seed in (5, 7)]
        lesson.check(all(np.array_equal(seeded[0][key], seeded[1][key]) for key in ("index", "shifted", "image")),
                     "shuffled sources with seed 5, then seed 7, under a Mix of seed 0: the same first batch")
        missing = lesson.check_raises(ValueError, lambda: next(iter(mixture_variant(batch_size=64, second_constants={}))),
                                      "a batch of a Mix whose second source yields no `shifted`")
        lesson.check("the same structure" in str(missing) and "shifted" in next(iter(mixture_variant(batch_size=64))),
                     "grain's reason: examples not of 'the same structure'; the same Mix with `shifted` in both"
                     " sources batches")
        promoted = next(iter(mixture_variant(batch_size=64, second_constants={"shifted": 1.0})))["shifted"]
        lesson.check_equal(promoted.dtype.name, "float64",
                           "the dtype of `shifted` in a batch of a Mix whose sources give it as int64 and float64")
        lesson.check(not any(workdir.iterdir()), "the lesson has written nothing in its workdir")

    lesson.md("""
    ## How exact the mixture is: a quarter, per epoch

    `Mix` does not draw each digit's source at random. An epoch of the mixture is 1,916
    digits, the longest in which no record repeats (1,437 / 0.75), and it holds every
    real digit once and 479 shifted copies: exactly a quarter. `Mix` (`shuffle=True`,
    its default) shuffles each epoch, so a batch of 64 holds 16 shifted copies only on
    average. The next epoch takes 479 other shifted copies.
    """)
    iterator = iter(trainer.train_ds)
    seen = [next(iterator) for _ in range(60)]  # 3,840 digits: two epochs, and 8 more
    mixed = {key: np.concatenate([batch[key] for batch in seen]) for key in ("image", "index", "shifted")}
    EPOCH = 1916  # 1,437 real digits / 0.75
    print("shifted per epoch:", [int(mixed["shifted"][e * EPOCH:(e + 1) * EPOCH].sum()) for e in range(2)])
    print("shifted per batch:", [int(batch["shifted"].sum()) for batch in seen[:10]])
    with lesson.checks():
        lesson.check_equal(len(konfig.resolve(one_epoch(seed=0))), EPOCH,
                           "the length of one epoch of this kd.data.py.Mix, unbatched")
        epochs = [slice(e * EPOCH, (e + 1) * EPOCH) for e in range(2)]
        lesson.check_equal([int(mixed["shifted"][rows].sum()) for rows in epochs], [479, 479],
                           "the shifted copies in each of the first two epochs")
        lesson.check(all(sorted(mixed["index"][rows][mixed["shifted"][rows] == 0].tolist()) == list(range(1437))
                         for rows in epochs), "each epoch holds every one of the 1,437 real digits once")
        shifted_records = [set(mixed["index"][rows][mixed["shifted"][rows] == 1].tolist()) for rows in epochs]
        lesson.check(not shifted_records[0] & shifted_records[1],
                     "the 479 shifted copies of epoch 2 are other records than epoch 1's")
        per_batch = [int(batch["shifted"].sum()) for batch in seen[:29]]  # the first epoch's whole batches
        lesson.check(len(set(per_batch)) > 1, "the first epoch's batches hold different numbers of shifted copies")
        lesson.fact("shifted_fraction", {"per_epoch": [int(mixed["shifted"][rows].sum()) for rows in epochs],
                                         "per_batch": per_batch[:10]})

    lesson.md("""
    ## The Trainer's seed decides the mixture

    A Kauldron pipeline's `seed` defaults to a reference to its Trainer's, which building
    the Trainer fills in, and every shuffle of the mixture derives from it. So the same
    seed gives the same digits in the same order, and seed 1 another order. A seed set on
    the `Mix` itself wins over the Trainer's (one set on a source is ignored, as above).
    A pipeline resolved on its own, with neither, draws a random seed when it is first
    read: outside a Trainer, set one.
    """)
    def first_batches(seed):  # a Trainer with this seed: its pipeline's seed, and its first batch (a list of one)
        cfg.seed = seed
        pipeline = konfig.resolve(cfg).train_ds
        return pipeline.seed, list(itertools.islice(pipeline, 1))

    def records(batches):  # (shifted, index) of every digit, in order
        return [(int(s), int(i)) for batch in batches for s, i in zip(batch["shifted"], batch["index"])]

    runs = {"seed 0 again": first_batches(0), "seed 1": first_batches(1)}
    print({name: seed for name, (seed, _) in runs.items()})
    print({name: records(batches) == records(seen[:1]) for name, (_, batches) in runs.items()})
    with lesson.checks():
        lesson.check_equal({name: seed for name, (seed, _) in runs.items()}, {"seed 0 again": 0, "seed 1": 1},
                           "each pipeline's seed, the Trainer's")
        lesson.check(records(runs["seed 0 again"][1]) == records(seen[:1]),
                     "seed 0 again: the same 64 first digits (the first batch), in the same order")
        lesson.check(records(runs["seed 1"][1]) != records(seen[:1]), "seed 1: other first digits, or another order")
        pinned = [first_batch(cfg, trainer_seed, mix_seed=5) for trainer_seed in (0, 1)]
        lesson.check(records(pinned[:1]) == records(pinned[1:]) != records(seen[:1]),
                     "a Mix seed 5 set in the config, under Trainers of seeds 0 and 1: the same first batch, not seed 0's")
        lesson.check(records([first_batch(cfg, 0, shuffle_mix=False)]) != records([first_batch(cfg, 1, shuffle_mix=False)]),
                     "with only the sources shuffled, seeds 0 and 1: other first digits, or another order: the"
                     " sources' shuffles derive from the seed too")
        alone = [konfig.resolve(mixture_config.get_config().train_ds) for _ in range(2)]
        lesson.check(not isinstance(alone[0].seed, int), "resolved without a Trainer or a seed, a pipeline has no seed yet")
        firsts = [records([next(iter(pipeline))]) for pipeline in alone]
        lesson.check(isinstance(alone[0].seed, int) and alone[0].seed != alone[1].seed and firsts[0] != firsts[1],
                     "two pipelines resolved without a Trainer or a seed drew two seeds when first read, and two mixtures")

    lesson.md("""
    ## A random augmentation, from the same seed

    `RandomRotate` (`sections/parts/mixture.py`) rotates an image by a random angle, up
    to `max_degrees`. It subclasses `kd.data.py.ElementWiseRandomTransform`, Kauldron's
    base for a random transform of a PyGrain pipeline: a `grain.RandomMapTransform` that
    changes the features its `key` names, with the numpy generator grain's `random_map`
    gives each example, and passes the others through; given several keys (an image
    and its mask), it hands each a copy of the same generator, so they turn alike. (The contrib
    `kauldron.contrib.data.RandomMapTransform` is TF-Grain's: it does not import from
    PyPI.) Without the augmentation, the mixture holds the same records in the same order,
    each its record's image scaled to [0, 1], the copies shifted; with it, every image of
    the first batch changes. The same seed rotates the same digits the same way, bit for
    bit. Seed 1 rotates them another way: with nothing shuffled, so that both seeds put
    the same records in the same places, every image of the first batch differs.
    """)
    cfg.seed = 0
    del cfg.train_ds.transforms["augment"]
    plain = next(iter(konfig.resolve(cfg).train_ds))
    augmented = seen[0]
    print("changed:", sum(not np.array_equal(a, b) for a, b in zip(augmented["image"], plain["image"])), "of 64")
    print("seed 0 again, the same images:", all(np.array_equal(a, b) for a, b in zip(runs["seed 0 again"][1][0]["image"],
                                                                                 augmented["image"])))
    def unshuffled_first_batch(seed):  # nothing shuffled: every seed puts the same records in the same places
        variant = mixture_config.get_config()
        variant.workdir, variant.seed, variant.train_ds.shuffle = cfg.workdir, seed, False
        for source in variant.train_ds.datasets:
            source.shuffle = False
        return next(iter(konfig.resolve(variant).train_ds))

    unshuffled = [unshuffled_first_batch(seed) for seed in (0, 1)]
    print("unshuffled, seeds 0 and 1:", {"same records": records(unshuffled[:1]) == records(unshuffled[1:]),
          "images alike": sum(np.array_equal(a, b) for a, b in zip(unshuffled[0]["image"], unshuffled[1]["image"]))})
    fig, axes = plt.subplots(2, 12, figsize=(11, 3.2), layout="constrained")
    for row, batch in zip(axes, (plain, augmented)):
        for ax, image, label, shifted in zip(row, batch["image"], batch["label"], batch["shifted"]):
            ax.imshow(image[..., 0], cmap="gray_r")
            ax.set_title(f"{int(label[0])}{' shifted' if shifted else ''}", fontsize=8)
            ax.axis("off")
    fig.suptitle("The mixture's first digits, as stored (top) and augmented (bottom), seed 0")
    plt.show()
    with lesson.checks():
        import grain.python as grain

        from sections.parts.mixture import RandomRotate

        lesson.check(issubclass(kd.data.py.ElementWiseRandomTransform, grain.RandomMapTransform),
                     "kd.data.py.ElementWiseRandomTransform is a grain.RandomMapTransform")
        given = list(grain.MapDataset.range(3).seed(0).random_map(lambda x, rng: type(rng)))
        lesson.check(given == [np.random.Generator] * 3, "grain's random_map gives each example a numpy Generator")
        image = plain["image"][0]
        turned = RandomRotate(key=["image", "mask"]).random_map({"image": image, "mask": image.copy()},
                                                                np.random.default_rng(0))
        lesson.check(np.array_equal(turned["image"], turned["mask"]) and not np.array_equal(turned["image"], image),
                     "RandomRotate on keys image and mask, both the same image: both rotated, alike")
        error = lesson.check_raises(ModuleNotFoundError, contrib_random_map_transform,
                                    "kauldron.contrib.data.RandomMapTransform from PyPI")
        lesson.check("grain.tensorflow" in str(error), "what it misses: grain.tensorflow, TF-Grain")
        lesson.check(records([plain]) == records([augmented]) and np.array_equal(plain["label"], augmented["label"]),
                     "without the augmentation: the same records, in the same order, with the same labels")
        lesson.check(max_difference_from_records(plain) <= 1e-6,
                     "without it, each image is its record's / 255; a shifted copy's moved two pixels right (within 1e-6)")
        lesson.check(all(not np.array_equal(a, b) for a, b in zip(augmented["image"], plain["image"])),
                     "the augmentation changed every image of the first batch")
        lesson.check(all(np.array_equal(a["image"], b["image"]) for a, b in zip(runs["seed 0 again"][1], seen[:1])),
                     "seed 0 again: the 64 first images, bit for bit")
        lesson.check(records([unshuffled[0]]) == records([unshuffled[1]])
                     and all(not np.array_equal(a, b) for a, b in zip(unshuffled[0]["image"], unshuffled[1]["image"])),
                     "with nothing shuffled, seeds 0 and 1: the same records in the first batch, each image rotated"
                     " another way")

    lesson.md("""
    ## Epochs: the same digit, rotated anew

    grain's `MapDataset.repeat`, with `reseed_each_epoch=True` (its default, and
    Kauldron's pipelines repeat with the default), hands the transforms before it each
    example's position counted over every epoch, not within one, and a random transform
    draws from the position (the last step says more). So a digit is rotated one way in
    epoch 1 and another in epoch 2, and the epoch is shuffled anew. Measured on the two
    epochs iterated above: each real digit's image in epoch 1 against its image in
    epoch 2. There every digit also moved; with nothing shuffled, a real digit keeps its
    place in the epoch, and is rotated another way all the same.
    """)
    def real_digits(epoch):  # record index -> its augmented image, for the real digits of one epoch
        rows = slice(epoch * EPOCH, (epoch + 1) * EPOCH)
        return {int(i): image for i, image, s in zip(mixed["index"][rows], mixed["image"][rows], mixed["shifted"][rows])
                if not s}

    first, second = real_digits(0), real_digits(1)
    print("augmented differently in epoch 2:", sum(not np.array_equal(first[i], second[i]) for i in first), "of", len(first))
    with lesson.checks():
        import grain.python as grain

        def epochs_of_draws(**repeat):  # 4 examples, each a draw, over 2 epochs
            return list(grain.MapDataset.range(4).seed(0).random_map(lambda x, rng: int(rng.integers(2**30)))
                        .repeat(2, **repeat))

        draws, kept = epochs_of_draws(), epochs_of_draws(reseed_each_epoch=False)
        lesson.check(draws[:4] != draws[4:] and kept[:4] == kept[4:],
                     "grain's random_map draws anew in each epoch of MapDataset.repeat; with reseed_each_epoch=False,"
                     " the same")
        lesson.check_equal(sum(not np.array_equal(first[i], second[i]) for i in first), len(first),
                           "the real digits this pipeline augments differently in epoch 2")
        lesson.check(list(first) != list(second), "epoch 2 holds the real digits in another order")
        places = still_mixture()
        real = [k for k in range(64) if not places[k]["shifted"]]
        lesson.check(len(real) == 48 and all(int(places[k]["index"]) == int(places[EPOCH + k]["index"])
                                             and not np.array_equal(places[k]["image"], places[EPOCH + k]["image"])
                                             for k in real),
                     "with nothing shuffled, the 48 real digits among the first 64 places: each at the same place in"
                     " epoch 2, rotated another way")

    lesson.md("""
    ## Going further: grain underneath, an interleave and draws by position

    `kd.data.py.Mix` is built on grain's `MapDataset.mix`, which draws no source at
    random either: it interleaves the sources in the weights' proportion, here three
    of the first and one of the second in every four, and `Mix` shuffles the result. A
    random transform after it draws each example's generator from the pipeline's seed,
    the pipeline's structure up to it, and the example's position, not from the
    example: the same seed gives a position the same draw, whatever record the shuffle
    put there, and a transform added before it changes every draw.
    """)
    import grain.python as grain

    print(list(grain.MapDataset.mix([grain.MapDataset.range(0, 6), grain.MapDataset.range(100, 102)],
                                    weights=[0.75, 0.25])))

    def draw(element, rng):  # a random transform that returns its draw
        return int(rng.integers(1000))

    print([list(grain.MapDataset.range(start, start + 4).seed(0).random_map(draw)) for start in (0, 100)])
    with lesson.checks():
        lesson.check(unshuffled_mix(range(0, 300), range(1000, 1100)) == list(grain.MapDataset.mix(
            [grain.MapDataset.source(list(range(0, 300))), grain.MapDataset.source(list(range(1000, 1100)))],
            weights=[0.75, 0.25])), "a kd.data.py.Mix(shuffle=False) of two unshuffled sources, weights 0.75 and 0.25,"
                     " yields grain's MapDataset.mix of their records, position by position")
        interleaved = list(grain.MapDataset.mix([grain.MapDataset.range(0, 300), grain.MapDataset.range(1000, 1100)],
                                                weights=[0.75, 0.25]))
        lesson.check(all(sum(value >= 1000 for value in interleaved[k:k + 4]) == 1 for k in range(0, 400, 4)),
                     "grain's MapDataset.mix with weights 0.75 and 0.25: one of the second source in every four, in order")
        (indices, draws), (other_indices, other_draws) = (first_draws(source) for source in ("train", "reversed"))
        lesson.check(np.array_equal(draws, other_draws) and bool(np.all(indices != other_indices))
                     and len(set(draws.tolist())) > 1,
                     "two Mixes of one structure and seed, over the digits and over them reversed: other records at"
                     " each position of the first batch, the same draws")
        lesson.check(all(a != b for a, b in zip(draws, first_draws("train", seed=1)[1])),
                     "the same Mix with seed 1: another draw at each position of the first batch")
        more_indices, more_draws = first_draws("train", one_more_transform=True)
        lesson.check(np.array_equal(indices, more_indices) and all(a != b for a, b in zip(draws, more_draws)),
                     "the same Mix and seed with one more transform before the draw: the same records, another draw"
                     " at each position of the first batch")
        lesson.summary = (f"Mix 3:1: exactly 479 of {EPOCH} shifted per epoch, shuffled; a rotation reproduced by"
                          " the Trainer's seed, anew in each epoch")


def one_epoch(seed: int):
    """The lesson's mixture as a config of its own: one epoch, unbatched, with a seed."""
    pipeline = mixture_config.get_config().train_ds
    pipeline.num_epochs, pipeline.batch_size, pipeline.seed = 1, None, seed
    return pipeline


def mixture_variant(*, source_fields=None, second_constants=None, **mix_fields):
    """The lesson's mixture built directly, seed 0: `source_fields` set on both sources,
    the second source's constants replaced by `second_constants`, `mix_fields` on the Mix."""
    from sections.parts.mixture import Digits

    def source(constants):
        return kd.data.py.DataSource(data_source=Digits(split="train"), shuffle=True, **(source_fields or {}),
                                     transforms=[kd.data.py.AddConstants(values=constants)] if constants else [])

    second = {"shifted": 1} if second_constants is None else second_constants
    return kd.data.py.Mix(datasets=[source({"shifted": 0}), source(second)], weights=[0.75, 0.25], seed=0,
                          **{"num_workers": 0, **mix_fields})


def unshuffled_mix(first, second) -> list[int]:
    """The values a `kd.data.py.Mix(shuffle=False)`, weights 0.75 and 0.25, yields over two
    unshuffled sources of records `{"v": value}`, one epoch, unbatched."""
    sources = [kd.data.py.DataSource(data_source=[{"v": np.int64(value)} for value in values], shuffle=False)
               for values in (first, second)]
    mix = kd.data.py.Mix(datasets=sources, weights=[0.75, 0.25], shuffle=False, num_epochs=1, seed=0, num_workers=0)
    return [int(record["v"]) for record in mix]


def worker_processes_started(pipeline) -> bool:
    """Whether reading a pipeline's first batch asks grain for worker processes
    (`IterDataset.mp_prefetch`, refused here so that none starts), with the pipeline's own
    `num_workers`."""
    from unittest import mock

    import grain.python as grain

    from kauldron.data.py import base

    # In a notebook or a test Kauldron asks for none whatever the settings; set aside, so
    # that the check tells one setting from another there too.
    with (mock.patch.object(grain.IterDataset, "mp_prefetch", side_effect=RuntimeError("worker processes")) as asked,
          mock.patch.object(base, "_get_num_workers", side_effect=lambda num_workers: num_workers)):
        try:
            next(iter(pipeline))
        except RuntimeError:
            pass
    return asked.called


def first_draws(split: str, seed: int = 0, one_more_transform: bool = False):
    """The record indices and the draws of a probe transform in the first batch of a Mix
    of two sources of `split` ("train", or "reversed": the same digits in reverse order),
    with `seed`: pipelines of the same structure, unless `one_more_transform` adds one
    (that changes nothing of the examples) before the probe."""
    import dataclasses

    from sections.parts.mixture import Digits

    @dataclasses.dataclass(frozen=True)
    class Reversed(Digits):
        def __getitem__(self, index):
            return super().__getitem__(len(self) - 1 - index)

    @dataclasses.dataclass(kw_only=True, frozen=True)
    class Draw(kd.data.py.ElementWiseRandomTransform):
        def random_map_element(self, element, rng):
            return np.float64(rng.uniform())

    data = Reversed(split="train") if split == "reversed" else Digits(split="train")
    sources = [kd.data.py.DataSource(data_source=data, shuffle=True, transforms=[kd.data.py.AddConstants(
        values={"draw": 0.0})]) for _ in range(2)]
    before = [kd.data.py.AddConstants(values={"unused": 0})] if one_more_transform else []
    batch = next(iter(kd.data.py.Mix(datasets=sources, weights=[0.75, 0.25], seed=seed, batch_size=64, num_workers=0,
                                     transforms=[*before, Draw(key="draw")])))
    return batch["index"], batch["draw"]


def contrib_random_map_transform():
    """Kauldron's contrib RandomMapTransform, as a user imports it (its module loads lazily)."""
    from kauldron.contrib import data

    return data.RandomMapTransform


def max_difference_from_records(batch) -> float:
    """The largest |difference| between a batch without the augmentation and its records,
    read from the source and scaled by numpy (a shifted copy moved two pixels right)."""
    from sections.parts.mixture import Digits

    worst = 0.0
    for image, index, shifted in zip(batch["image"], batch["index"], batch["shifted"]):
        stored = Digits(split="train")[int(index)]["image"].astype(np.float32) / 255
        if shifted:
            stored = np.concatenate([np.zeros_like(stored[:, :2]), stored[:, :-2]], axis=1)
        worst = max(worst, float(np.abs(image - stored).max()))
    return worst


def still_mixture():
    """The lesson's mixture, augmented, seed 0, with neither the Mix nor its sources
    shuffled, unbatched, over 2 epochs: its examples by place, `[k]`."""
    pipeline = mixture_config.get_config().train_ds
    pipeline.seed, pipeline.shuffle, pipeline.batch_size, pipeline.num_epochs = 0, False, None, 2
    for source in pipeline.datasets:
        source.shuffle = False
    return konfig.resolve(pipeline)


def first_batch(cfg, seed: int, *, mix_seed: int | None = None, shuffle_mix: bool = True):
    """The first batch of the lesson's mixture, augmented, under a Trainer of `seed` (in
    `cfg`'s workdir), with a seed set on the Mix or none, the Mix shuffled or not."""
    variant = mixture_config.get_config()
    variant.workdir, variant.seed, variant.train_ds.shuffle = cfg.workdir, seed, shuffle_mix
    if mix_seed is not None:
        variant.train_ds.seed = mix_seed
    return next(iter(konfig.resolve(variant).train_ds))
