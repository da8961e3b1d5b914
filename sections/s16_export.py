"""The trained model outside Kauldron: the exported forward pass.

With an exporter in its config, `train()` serialises the model's forward pass with
`jax.export` as training starts. The file holds the computation, not the weights: it takes
the parameters, a `key` for the model's RNG streams and the inputs, with the batch size
left free; the weights are in the checkpoints. Whoever serves the model then needs jax and
orbax, not Kauldron. Which mode the file computes in matters, and it is not the one a
server wants.
"""

import dataclasses
import json

import jax
import numpy as np
import orbax.checkpoint as ocp
from kauldron import konfig

from configs import regression
from sections.children import python_m, run_child
from sections.lesson import Lesson
from sections.registry import section
from sections.shared import FEATURES, make_data

with konfig.imports():
    from kauldron import kd as kd_cfg

    from sections.parts import randomness as randomness_cfg

STEPS = 20


@section(16, "export", "The trained model outside Kauldron: the exported forward pass", part="for-real", trains=True,
         shows="train() exports in training mode (params only, CPU and TPU); export for serving; served without Kauldron",
         reference="https://kauldron.readthedocs.io/en/latest/export.html")
def serve_without_kauldron(lesson: Lesson) -> str:
    lesson.md("""
    ## An exporter in the config

    A Trainer exports nothing by default (its exporter is a `kd.export.NoopExporter`).
    With `kd.export.JaxModelExporter()`, `train()` writes `train_model.jax_exported` to
    the workdir. The model here is the MLP with dropout of section 14.
    """)
    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps = str(lesson.workdir / "run"), STEPS
    cfg.model = randomness_cfg.DropoutMLP(inputs="batch.x", rate=0.5)
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=STEPS)
    cfg.exporter = kd_cfg.export.JaxModelExporter()
    trainer = konfig.resolve(cfg)
    state, _ = trainer.train()
    print(sorted(path.name for path in trainer.workdir.iterdir()))
    lesson.check((trainer.workdir / "train_model.jax_exported").is_file(), "train() wrote train_model.jax_exported")
    lesson.check(type(default_exporter(lesson)).__name__ == "NoopExporter",
                 "without an exporter in the config, a Trainer's exporter is a NoopExporter")

    lesson.md("""
    ## What `train()` exported: the training mode

    The file is the forward pass for CPU and TPU, taking the `params` collection only (a
    model with batch statistics would need more), in *training* mode: dropout is on,
    with the training RNG streams seeded from `key`, so two keys give two predictions,
    and the model records that it was training.
    """)
    exported = load(trainer.workdir / "train_model.jax_exported")
    x = make_data("eval")["x"]
    outputs = [exported.call(params=state.params, key=key_data(seed), inputs=x) for seed in (0, 1)]
    print(exported.platforms, sorted(exported.in_tree.unflatten(exported.in_avals)[1]), outputs[0]["interms"]["is_training"])
    lesson.check_equal(tuple(exported.platforms), ("cpu", "tpu"), "the platforms exported by default")
    lesson.check_equal(sorted(exported.in_tree.unflatten(exported.in_avals)[1]), ["inputs", "key", "params"],
                       "the exported function's arguments: params, no other collection")
    lesson.check(not np.array_equal(outputs[0]["preds"]["y"], outputs[1]["preds"]["y"]), "two keys, two predictions: dropout is on")
    lesson.check_equal(float(outputs[0]["interms"]["is_training"][0]), 1.0, "the model recorded is_training")

    lesson.md("""
    ## Export for serving: the same exporter, in eval mode

    `train()` always exports in training mode. For serving, call the exporter yourself
    with `is_training=False`, under another name: dropout is then off, the key no longer
    matters, and the predictions are the model's own in eval mode.
    """)
    serving = dataclasses.replace(trainer.exporter, name="eval_model")
    serving.export(model=trainer.model, state=state, element_spec=trainer.train_ds.element_spec, is_training=False)
    eval_model = load(trainer.workdir / "eval_model.jax_exported")
    served_here = [np.asarray(eval_model.call(params=state.params, key=key_data(seed), inputs=x)["preds"]["y"]) for seed in (0, 1)]
    own = np.asarray(trainer.model.apply({"params": state.params}, x, is_training_property=False)["y"])
    print(np.abs(served_here[0] - served_here[1]).max(), np.abs(served_here[0] - own).max())
    lesson.check(np.array_equal(served_here[0], served_here[1]), "in eval mode, two keys give the same predictions")
    lesson.check(np.array_equal(served_here[0], own), "the eval-mode export = the model's own eval-mode predictions")

    lesson.md("""
    ## Serve it without Kauldron

    `sections/serve_exported.py` (below) loads the file and the last checkpoint's
    parameters with jax and orbax only, in a process that never imports Kauldron, Flax or
    TensorFlow. Its predictions are the model's own, bit for bit, for any batch size; rows
    of the wrong width are refused with the shape it expects.
    """)
    checkpoint = trainer.workdir / "checkpoints" / f"ckpt_{STEPS}" / "default"
    np.save(lesson.workdir / "inputs.npy", x)
    run_child(python_m("sections.serve_exported", str(trainer.workdir / "eval_model.jax_exported"), str(checkpoint),
                       str(lesson.workdir / "inputs.npy"), str(lesson.workdir / "served.npz")), "the serving process",
              fresh_python=True)  # what it imports is checked: nothing imported beforehand
    served = np.load(lesson.workdir / "served.npz")
    report = json.loads(str(served["report"]))
    print(report)
    saved_params = ocp.StandardCheckpointer().restore(checkpoint)["params"]
    lesson.check_equal(report["imported"], [], "what the serving process imported of kauldron, flax and tensorflow")
    lesson.check(np.array_equal(served["preds"], trainer.model.apply({"params": saved_params}, x, is_training_property=False)["y"]),
                 "the served predictions equal the model's own with ckpt's parameters, bit for bit")
    lesson.check_equal(report["five_rows"], [5, 1], "the predictions' shape for 5 rows: the batch size is free")
    lesson.check("Shape mismatch" in (report["refused"] or "") and f"(b, {FEATURES})" in report["refused"],
                 f"rows of {FEATURES - 1} features are refused, naming the shape (b, {FEATURES})")
    lesson.fact("served", {"rows": len(x), "refused": report["refused"]})
    return f"train() exported in training mode; an eval-mode export served {len(x)} rows without Kauldron, bit for bit"


def default_exporter(lesson: Lesson):
    """The exporter of the regression experiment, which names none."""
    cfg = regression.get_config()
    cfg.workdir = str(lesson.workdir / "default")
    return konfig.resolve(cfg).exporter


def load(path):
    return jax.export.deserialize(bytearray(path.read_bytes()))


def key_data(seed: int):
    return jax.random.key_data(jax.random.key(seed))
