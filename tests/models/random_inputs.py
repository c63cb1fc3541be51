#!/usr/bin/env python3
"""Random float inputs for a model's runtime graph inputs, one NAME.npy each (npusim run --inputs DIR):
standard normal, seeded, so that two runs of a check compare the same inputs."""
import os

import numpy as np
import onnx


def write_random_inputs(model_path, folder, seed=1):
    """Writes FOLDER/NAME.npy for every graph input of the model that is not an initializer."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in m.graph.input:
        if i.name not in inits:
            dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
            np.save(os.path.join(folder, i.name + ".npy"), rng.standard_normal(dims).astype(np.float32))
