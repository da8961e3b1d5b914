"""The trained model outside Kauldron: the exported forward pass.

With an exporter in its config, `train()` serialises the model's forward pass with
`jax.export` when it starts a run, not when it resumes one from a checkpoint past step
0. The file holds the computation, not the
weights: it takes the parameters, a `key` for the model's RNG streams and the inputs,
with the batch size left free; the weights are in the checkpoints (a `kd.ckpts.Checkpointer`
in the config writes them; the Trainer's default writes none). Whoever serves the
model then needs jax and orbax, not Kauldron. Which mode the file computes in matters,
and it is not the one a server wants. On a machine with one TPU, make
`%env JAX_PLATFORMS=cpu` this page's first cell (its last step says why).
"""

import dataclasses

import jax
import numpy as np
from kauldron import kd, konfig

from configs import regression as regression_config
from harness import Lesson, section
from sections.parts.regression import make_data

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import randomness as randomness_cfg


@section(16, "export", "The trained model outside Kauldron: the exported forward pass", part="for-real", trains=True,
         shows="train() exports in training mode (params only, CPU and TPU); export for serving; served without Kauldron",
         reference="https://kauldron.readthedocs.io/en/latest/export.html")
def serve_without_kauldron(lesson: Lesson, workdir):
    lesson.md("""
    ## An exporter in the config

    A Trainer's exporter is by default a `kd.export.NoopExporter`, which writes nothing.
    With `kd.export.JaxModelExporter()`, `train()` writes `train_model.jax_exported` to
    the workdir when it starts a run; a `train()` that resumes one from a checkpoint
    past step 0 writes none. The model here is the MLP with dropout of section 14.
    """)
    cfg = regression_config.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir / "run"), 20
    cfg.model = randomness_cfg.DropoutMLP(inputs="batch.x", rate=0.5)
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=20)
    cfg.exporter = kd_cfg.export.JaxModelExporter()
    trainer = konfig.resolve(cfg)
    state, _ = trainer.train()
    print(sorted(path.name for path in trainer.workdir.iterdir()))
    with lesson.checks():
        lesson.check((trainer.workdir / "train_model.jax_exported").is_file(), "train() wrote train_model.jax_exported")
        default = default_exporter(workdir / "default")
        default.export(model=trainer.model, state=state, element_spec=trainer.train_ds.element_spec, is_training=True)
        lesson.check(type(default).__name__ == "NoopExporter" and not any((workdir / "default").iterdir()),
                     "a Trainer's default exporter is a NoopExporter, and its export writes nothing to the workdir")
        import os

        exported_at = os.stat(trainer.workdir / "train_model.jax_exported").st_mtime_ns
        trainer.train()  # the same run again: it resumes from ckpt_20
        lesson.check(os.stat(trainer.workdir / "train_model.jax_exported").st_mtime_ns == exported_at,
                     "train() resumed from ckpt_20 wrote no export")

    lesson.md("""
    ## What `train()` exported: the training mode

    The file is the forward pass for CPU and TPU, `JaxModelExporter`'s default
    `platforms`: jax refuses to run it on any other, so for a GPU server add `"cuda"` to
    `platforms`. It is exported with the state's sharding, for the run's device count, 1
    here: a run on 8 devices writes a file that runs only on 8. It computes in
    *training* mode: dropout is on, with `key` folded into the training RNG streams, so
    two keys give two predictions, and the model records that it was training. It
    returns a dict: `preds`, the model's output, and `interms`, its `intermediates`
    collection: what the model sowed there, and every layer's output (the exporter
    applies the model with `capture_intermediates=True`). Its arguments are `params`, `key` and the model's
    inputs, by their name in the model (`inputs`), and nothing else:
    `JaxModelExporter` applies the model to `{"params": params}` alone, so no other
    collection of the state goes in. `key` is a raw `uint32[2]` key, not a typed
    `jax.random.key`, hence `jax.random.key_data` below. A BatchNorm layer in this
    training-mode file normalises each call's rows with their own statistics.
    """)
    exported = jax.export.deserialize(bytearray((trainer.workdir / "train_model.jax_exported").read_bytes()))
    x = make_data("eval")["x"]
    keys = [jax.random.key_data(jax.random.key(seed)) for seed in (0, 1)]
    outputs = [exported.call(params=state.params, key=key, inputs=x) for key in keys]
    print(exported.platforms, sorted(exported.in_tree.unflatten(exported.in_avals)[1]))
    print("is_training:", float(outputs[0]["interms"]["is_training"][0]),
          " two keys, same predictions:", np.array_equal(outputs[0]["preds"]["y"], outputs[1]["preds"]["y"]))
    with lesson.checks():
        lesson.check_equal(tuple(exported.platforms), ("cpu", "tpu"), "the platforms exported by default")
        check_platforms(lesson, trainer, state, x, keys[0])
        lesson.skip_check("a run on 8 devices exports a file that jax refuses to call on another count",
                          "this run has one device, and a file exported for 1 runs on any count")
        lesson.check_equal(str(exported.in_tree.unflatten(exported.in_avals)[1]["key"]), "uint32[2]",
                           "the exported function's key argument")
        lesson.check_equal(sorted(exported.in_tree.unflatten(exported.in_avals)[1]), ["inputs", "key", "params"],
                           "the exported function's arguments: params, no other collection")
        lesson.check(not np.array_equal(outputs[0]["preds"]["y"], outputs[1]["preds"]["y"]),
                     "two keys, two predictions: dropout is on")
        lesson.check_equal(float(outputs[0]["interms"]["is_training"][0]), 1.0, "the model recorded is_training")
        lesson.check(sorted(outputs[0]) == ["interms", "preds"]
                     and {"enc", "out"} <= set(outputs[0]["interms"]) and "is_training" in outputs[0]["interms"],
                     "the file returns preds and interms: what the model sowed, and its Dense layers' outputs (enc, out)")
        batchnorm = export_batchnorm_model(trainer, state, x, is_training=True)
        lesson.check(batchnorm["arguments"] == ["inputs", "key", "params"] and batchnorm["own rows"]
                     and not batchnorm["fresh"] and not batchnorm["state's"],
                     "a BatchNorm model exported in training mode normalises with the rows' own statistics,"
                     " neither fresh nor the state's batch_stats, which it takes no argument for")

    lesson.md("""
    ## Export for serving: the same exporter, in eval mode

    `train()` always exports in training mode. For serving, call the exporter yourself
    with `is_training=False`, under another name: a copy of the Trainer's own exporter
    (`dataclasses.replace`), whose workdir, among other settings, refers to the
    Trainer's and was filled in when the Trainer was built; a
    `kd.export.JaxModelExporter()` made alone refers to no Trainer, and refuses to
    export. Dropout is then off and, for a model
    like this one that draws nothing in eval mode, the key no longer matters: the
    predictions are the model's own in eval mode. A model with BatchNorm cannot be
    served this way: its trained statistics are not among the arguments, so its
    eval-mode file normalises with freshly initialised ones, silently.
    """)
    serving = dataclasses.replace(trainer.exporter, name="eval_model")
    serving.export(model=trainer.model, state=state, element_spec=trainer.train_ds.element_spec, is_training=False)
    eval_model = jax.export.deserialize(bytearray((trainer.workdir / "eval_model.jax_exported").read_bytes()))
    served_here = [np.asarray(eval_model.call(params=state.params, key=key, inputs=x)["preds"]["y"]) for key in keys]
    own = np.asarray(trainer.model.apply({"params": state.params}, x, is_training_property=False)["y"])
    print(np.abs(served_here[0] - served_here[1]).max(), np.abs(served_here[0] - own).max())
    with lesson.checks():
        alone = lesson.check_raises(ValueError, lambda: kd.export.JaxModelExporter(name="alone").export(
            model=trainer.model, state=state, element_spec=trainer.train_ds.element_spec, is_training=False),
            "a kd.export.JaxModelExporter() made alone, asked to export")
        lesson.check("unresolved `ROOT_CFG_REF`" in str(alone) and ".workdir" in str(alone)
                     and serving.workdir == trainer.workdir,
                     "the first setting it lacks, its workdir, refers to a Trainer's, and the copy has the Trainer's")
        lesson.check(np.array_equal(served_here[0], served_here[1]),
                     "in eval mode, for this model that draws nothing then, two keys give the same predictions")
        lesson.check(np.array_equal(served_here[0], own), "the eval-mode export = the model's own eval-mode predictions")
        batchnorm = export_batchnorm_model(trainer, state, x, is_training=False)
        lesson.check(batchnorm["fresh"] and not batchnorm["state's"] and not batchnorm["own rows"],
                     "a BatchNorm model exported in eval mode normalises with freshly initialised batch_stats,"
                     " not the state's")

    lesson.md("""
    ## Serve it without Kauldron

    `sections/parts/serve_exported.py` (below) loads the file and the last checkpoint's
    parameters with jax and orbax only, and imports neither Kauldron, nor Flax, nor
    TensorFlow: `-X importtime` makes Python list every module it imports, and none of
    them is there. Its predictions are the model's own with the checkpoint's parameters,
    bit for bit; the batch size is free, and rows of the wrong width are refused with
    the shape it expects.
    On a machine with one TPU, a command started from a kernel that has run jax cannot
    open the chip the kernel holds (section 0), and the page compares the kernel's numbers
    with the commands': there, the kernel must have set `JAX_PLATFORMS=cpu` before it
    imported jax (`%env JAX_PLATFORMS=cpu` as the first cell, as the page's introduction
    says; its commands inherit it), as this tutorial does for this page.
    """)
    np.save(workdir / "inputs.npy", x)
    serve = lesson.shell("python -X importtime -m sections.parts.serve_exported $WORKDIR/run/eval_model.jax_exported"
                         " $WORKDIR/run/checkpoints/ckpt_20/default $WORKDIR/inputs.npy $WORKDIR/served.npy",
                         shows=r"^(arguments|predictions|rows of)")
    served = np.load(workdir / "served.npy")
    ckpt_20 = kd.ckpts.Checkpointer(workdir=workdir / "run", save_interval_steps=1).restore(trainer.init_state(), step=20)
    own_20 = np.asarray(trainer.model.apply({"params": ckpt_20.params}, x, is_training_property=False)["y"])
    print("served = the model's own with ckpt_20:", np.array_equal(served, own_20))
    with lesson.checks():
        accelerator.check_one_chip(lesson)
        imported = imported_packages(serve.output)
        lesson.check({"jax", "orbax", "numpy"} <= imported and not imported & {"kauldron", "flax", "tensorflow"},
                     "the serving process imported jax, orbax and numpy, and none of kauldron, flax and tensorflow")
        lesson.check(np.array_equal(served, own_20),
                     "the served predictions equal the model's own with ckpt_20's parameters, bit for bit")
        lesson.check("(5, 1) for 5" in serve.output, "the predictions' shape for 5 rows: the batch size is free")
        refused = next(line for line in serve.output.splitlines() if line.startswith("rows of 15 features: "))
        lesson.check("Shape mismatch" in refused and "(b, 16)" in refused,
                     "rows of 15 features are refused, naming the shape (b, 16)")
        lesson.fact("served", {"rows": len(x), "refused": refused.removeprefix("rows of 15 features: ")})
        lesson.summary = (f"train() exported in training mode; an eval-mode export served {len(x)} rows without"
                          " Kauldron, bit for bit")


def default_exporter(workdir):
    """The exporter of the regression experiment, which names none, on `workdir` (made empty)."""
    workdir.mkdir()
    cfg = regression_config.get_config()
    cfg.workdir = str(workdir)
    return konfig.resolve(cfg).exporter


def check_platforms(lesson: Lesson, trainer, state, x, key) -> None:
    """The Trainer's exporter with `platforms` naming only one this machine is not (cuda,
    or tpu on a GPU): it exports from here, and jax refuses the file here."""
    elsewhere = "tpu" if jax.default_backend() == "gpu" else "cuda"
    dataclasses.replace(trainer.exporter, name="elsewhere", platforms=(elsewhere,)).export(
        model=trainer.model, state=state, element_spec=trainer.train_ds.element_spec, is_training=False)
    exported = jax.export.deserialize(bytearray((trainer.workdir / "elsewhere.jax_exported").read_bytes()))
    try:
        exported.call(params=state.params, key=key, inputs=x)
        refused = ""
    except ValueError as error:
        refused = str(error)
    lesson.check(tuple(exported.platforms) == (elsewhere,) and f"exported for platforms '('{elsewhere}',)'" in refused,
                 f"exported with platforms=('{elsewhere}',): jax refuses to run it on this machine's"
                 f" {jax.default_backend()}")


def imported_packages(output: str) -> set[str]:
    """The top-level packages `python -X importtime` says the process imported."""
    lines = [line.split("|")[-1].strip() for line in output.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines if name and name != "imported package"}


def export_batchnorm_model(trainer, state, x, is_training: bool) -> dict:
    """A model with BatchNorm, exported in a mode by the Trainer's exporter with a state
    holding batch statistics that are not the initial ones: whether the export's
    predictions for `x` are those with the state's statistics, with fresh ones, or with
    the rows' own (training mode's normalisation), and the export's arguments."""
    import flax.linen as nn
    from kauldron import kontext

    class BatchNormMLP(nn.Module):
        inputs: kontext.Key = kontext.REQUIRED
        is_training = kd.nn.train_property()

        @nn.compact
        def __call__(self, inputs):
            return {"y": nn.Dense(1)(nn.BatchNorm(use_running_average=not self.is_training)(inputs))}

    model = BatchNormMLP(inputs="batch.x")
    fresh = model.init(jax.random.key(0), x, is_training_property=False)
    trained_stats = jax.tree.map(lambda value: value + 3.0, fresh["batch_stats"])  # as if trained
    bn_state = state.replace(params=fresh["params"], collections={"batch_stats": trained_stats})
    name = f"batchnorm_{'train' if is_training else 'eval'}"
    dataclasses.replace(trainer.exporter, name=name).export(
        model=model, state=bn_state, element_spec=trainer.train_ds.element_spec, is_training=is_training)
    exported = jax.export.deserialize(bytearray((trainer.workdir / f"{name}.jax_exported").read_bytes()))
    preds = np.asarray(exported.call(params=fresh["params"], key=jax.random.key_data(jax.random.key(0)), inputs=x)["preds"]["y"])
    candidates = {
        "state's": model.apply({"params": fresh["params"], "batch_stats": trained_stats}, x, is_training_property=False)["y"],
        "fresh": model.apply(fresh, x, is_training_property=False)["y"],
        "own rows": model.apply(fresh, x, is_training_property=True, mutable=["batch_stats"])[0]["y"],
    }
    # The candidates differ by 0.1 or more here; an exported program may round differently
    # from a jitted one by an ulp or so, which np.allclose's relative default rejects near 0.
    return {**{what: bool(np.allclose(preds, value, atol=1e-5)) for what, value in candidates.items()},
            "arguments": sorted(exported.in_tree.unflatten(exported.in_avals)[1])}


# How the lesson checks itself.
from sections.parts import accelerator  # noqa: E402 - the checks' own, not the page's
