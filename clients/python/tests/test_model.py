"""`Model(dir)`: a model `tunehub build` compiled, called on numpy arrays. The model is tuned
briefly on a database file and built with the command line, then called from Python; its
outputs are checked against numpy computing the same two layers."""

import subprocess

import numpy as np
import pytest
from conftest import tunehub_bin
from onnx_bytes import two_dense, weight_values

from tunehub import Model, ModelError

QUICK = ["--repeat", "1", "--number", "1", "--min-repeat-ms", "1", "--noise-threshold", "0", "--batch", "2"]


def test_a_built_model_is_callable_on_numpy_arrays(tmp_path):
    n = 16
    model = tmp_path / "two.onnx"
    model.write_bytes(two_dense(batch=3, n=n, filled=True))
    out = tmp_path / "built"
    db = str(tmp_path / "t.db")
    subprocess.run(
        [tunehub_bin(), "build", str(model), "--out", str(out), "--db", db, "--tune", "2", *QUICK],
        check=True,
        capture_output=True,
    )
    m = Model(out)
    m.set_num_threads(1)
    x = np.random.default_rng(0).uniform(-1, 1, size=(3, n))  # float64: converted
    (name,) = [o["name"] for o in m.outputs]
    y = m({"x": x})[name]
    w = np.array(weight_values(n * n), dtype=np.float64).reshape(n, n)
    want = np.maximum(np.maximum(x @ w, 0) @ w, 0)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ModelError, match="is \\[2, 16\\], the model takes \\[3, 16\\]"):
        m({"x": np.zeros((2, n))})
    with pytest.raises(ModelError, match="missing \\['x'\\]"):
        m({})
    m.close()


def test_a_directory_without_a_model_is_an_error(tmp_path):
    with pytest.raises(ModelError, match="not a built model"):
        Model(tmp_path)
