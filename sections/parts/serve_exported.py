"""Serves an exported Kauldron model with jax and orbax only: no Kauldron, Flax or TensorFlow.

    python -m sections.parts.serve_exported MODEL.jax_exported CHECKPOINT INPUTS.npy OUT.npy

Loads the forward pass that `jax.export` wrote, and the parameters from a checkpoint of
the run (`<workdir>/checkpoints/ckpt_<step>/default`); predicts the rows of INPUTS.npy
and saves the predictions to OUT.npy. It prints the function's arguments, the shapes
of its predictions, and what it says to rows of the wrong width.
"""

import pathlib
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp


def main(exported_path: str, checkpoint: str, inputs_path: str, out_path: str) -> None:
    forward = jax.export.deserialize(bytearray(pathlib.Path(exported_path).read_bytes()))
    params = ocp.StandardCheckpointer().restore(checkpoint)["params"]
    x = np.load(inputs_path)
    key = jax.random.key_data(jax.random.key(0))  # required, whether or not the mode exported draws randomness
    print("arguments:", sorted(forward.in_tree.unflatten(forward.in_avals)[1]))
    preds = np.asarray(forward.call(params=params, key=key, inputs=x)["preds"]["y"])
    np.save(out_path, preds)
    five = forward.call(params=params, key=key, inputs=x[:5])["preds"]["y"]
    print(f"predictions: {preds.shape} for {len(x)} rows, {five.shape} for 5: the batch size is free")
    try:
        forward.call(params=params, key=key, inputs=x[:, :-1])
    except ValueError as e:
        print(f"rows of {x.shape[1] - 1} features: {str(e).splitlines()[0]}")


if __name__ == "__main__":
    main(*sys.argv[1:])
