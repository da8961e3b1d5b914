"""The trained model outside Kauldron: the exported forward pass.

With `cfg.exporter = kd.export.JaxModelExporter()` (the default exports nothing),
`train()` serialises the model's forward pass with `jax.export` into
`workdir/train_model.jax_exported` as training starts. The file holds the computation,
not the weights: it takes the parameters, a `key` for the model's RNG streams and the
model's inputs by name, with the batch size left free. The weights are in the
checkpoints. So whoever serves the model needs jax and orbax, not Kauldron: below, a
separate process that never imports Kauldron (nor flax, nor TensorFlow) loads the
exported function and the last checkpoint's parameters and predicts, and its
predictions are compared with the model's own.
"""

import json
import sys

import numpy as np
import orbax.checkpoint as ocp
from kauldron import kd, konfig

from configs import regression
from sections.lesson import Lesson
from sections.registry import section
from sections.children import run_child
from sections.shared import FEATURES, make_data

STEPS = 200

# The serving program: jax, orbax and numpy only. argv: the exported file, the checkpoint,
# the inputs (.npy) and where to write what it saw (.npz with a JSON report).
SERVE = """
import json, sys
import jax, numpy as np, orbax.checkpoint as ocp

exported_path, checkpoint, inputs_path, out_path = sys.argv[1:]
with open(exported_path, "rb") as f:
    forward = jax.export.deserialize(bytearray(f.read()))
params = ocp.StandardCheckpointer().restore(checkpoint)["params"]
x = np.load(inputs_path)
key = jax.random.key_data(jax.random.key(0))  # the model draws no random numbers; the argument is required
preds = np.asarray(forward.call(params=params, key=key, inputs=x)["preds"]["y"])
try:
    forward.call(params=params, key=key, inputs=x[:, :-1])
    refused = None
except ValueError as e:
    refused = str(e).splitlines()[0]
five_rows = forward.call(params=params, key=key, inputs=x[:5])["preds"]["y"].shape
report = {"arguments": sorted(forward.in_tree.unflatten(forward.in_avals)[1]), "refused": refused,
          "five_rows": list(five_rows),
          "imported": sorted({m.split(".")[0] for m in sys.modules} & {"kauldron", "flax", "tensorflow"})}
np.savez(out_path, preds=preds, report=json.dumps(report))
"""


def experiment(workdir):
    with konfig.imports():
        from kauldron import kd as kd_cfg

    cfg = regression.get_config()
    cfg.workdir, cfg.num_train_steps = str(workdir), STEPS
    cfg.checkpointer = kd_cfg.ckpts.Checkpointer(save_interval_steps=STEPS)
    cfg.exporter = kd_cfg.export.JaxModelExporter()
    return cfg


@section(16, "export", "The trained model outside Kauldron: the exported forward pass", trains=True,
         shows="JaxModelExporter's file and the checkpoint, served by a process that never imports Kauldron",
         reference="https://kauldron.readthedocs.io/en/latest/export.html")
def serve_without_kauldron(lesson: Lesson) -> str:
    default = regression.get_config()
    default.workdir = str(lesson.workdir / "default")
    lesson.check(isinstance(konfig.resolve(default).exporter, kd.export.NoopExporter),
                 "a Trainer exports nothing by default: its exporter is a kd.export.NoopExporter")
    workdir = lesson.workdir / "run"
    trainer = konfig.resolve(experiment(workdir))
    trainer.train()
    exported = workdir / "train_model.jax_exported"
    checkpoint = workdir / "checkpoints" / f"ckpt_{STEPS}" / "default"
    lesson.check(exported.is_file(), "train() wrote workdir/train_model.jax_exported")
    print(f"  {exported.relative_to(lesson.workdir)}: {exported.stat().st_size} bytes;"
          f" weights in {checkpoint.relative_to(lesson.workdir)}")

    x = make_data("eval")["x"]
    np.save(lesson.workdir / "inputs.npy", x)
    served = lesson.workdir / "served.npz"
    print("\n  the serving process (python -c, jax and orbax only):\n    " + SERVE.strip().replace("\n", "\n    "))
    run_child([sys.executable, "-c", SERVE, str(exported), str(checkpoint), str(lesson.workdir / "inputs.npy"),
               str(served)], "the serving process")
    result = np.load(served)
    report = json.loads(str(result["report"]))
    lesson.check_equal(report["imported"], [], "the modules among kauldron, flax and tensorflow the serving process imported")
    lesson.check_equal(report["arguments"], ["inputs", "key", "params"], "the exported function's keyword arguments")
    lesson.check_equal(report["five_rows"], [5, 1], "the predictions' shape for 5 rows: the batch size is left free")

    own = np.asarray(trainer.model.apply({"params": ocp.StandardCheckpointer().restore(checkpoint)["params"]}, x)["y"])
    difference = float(np.max(np.abs(result["preds"] - own)))
    print(f"\n  served predictions for the {len(x)} held-out rows against the model's own with ckpt_{STEPS}:"
          f" max |difference| = {difference}")
    lesson.check(np.array_equal(result["preds"], own), "the served predictions equal the model's own, bit for bit")
    refused = report["refused"] or ""
    print(f"  inputs with {FEATURES - 1} features instead of {FEATURES}: ValueError: {refused}")
    lesson.check("Shape mismatch" in refused and f"(b, {FEATURES})" in refused,
                 f"the exported function refuses inputs of {FEATURES - 1} features, naming the shape (b, {FEATURES}) it expects")
    lesson.fact("served", {"rows": len(x), "max_abs_difference": difference, "refused": refused})
    return f"served {len(x)} predictions without Kauldron, equal to the model's own bit for bit; a wrong shape refused"
