"""Serves an exported Kauldron model with jax and orbax only: no Kauldron, Flax or TensorFlow.

    python -m sections.serve_exported MODEL.jax_exported CHECKPOINT INPUTS.npy OUT.npz

Loads the forward pass `jax.export` wrote, the parameters from a checkpoint, predicts the
rows of INPUTS.npy, and writes the predictions to OUT.npz with a JSON report: the
function's arguments, the shape it gives 5 rows, what it says to rows of the wrong width,
and which of kauldron, flax and tensorflow this process imported (none).
"""

import json
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp


def main(exported_path: str, checkpoint: str, inputs_path: str, out_path: str) -> None:
    with open(exported_path, "rb") as f:
        forward = jax.export.deserialize(bytearray(f.read()))
    params = ocp.StandardCheckpointer().restore(checkpoint)["params"]
    x = np.load(inputs_path)
    key = jax.random.key_data(jax.random.key(0))  # required, whether or not the mode exported draws randomness
    preds = np.asarray(forward.call(params=params, key=key, inputs=x)["preds"]["y"])
    try:
        forward.call(params=params, key=key, inputs=x[:, :-1])
        refused = None
    except ValueError as e:
        refused = str(e).splitlines()[0]
    report = {"arguments": sorted(forward.in_tree.unflatten(forward.in_avals)[1]), "refused": refused,
              "five_rows": list(forward.call(params=params, key=key, inputs=x[:5])["preds"]["y"].shape),
              "imported": sorted({name.split(".")[0] for name in sys.modules} & {"kauldron", "flax", "tensorflow"})}
    np.savez(out_path, preds=preds, report=json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
