"""`Model(dir)`: a model `tunehub build` compiled, called on numpy arrays. The model is tuned
briefly on a database file and built with the command line, then called from Python; its
outputs are checked against numpy computing the same two layers. `Client.build_model`: the
same built by a server (tuned there through `submit_model`), written into a directory."""

import subprocess

import numpy as np
import pytest
from conftest import tunehub_bin
from onnx_bytes import two_dense, weight_values

from tunehub import Client, Model, ModelError, TunehubError, pb

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


def test_a_server_builds_a_model_the_client_then_runs(server, tmp_path):
    n, batch = 12, 2
    onnx = two_dense(batch=batch, n=n, filled=True)
    with Client(server.url, token=server.token, timeout=120) as c:
        quick = dict(number=1, repeat=1, min_repeat_ms=1, warmup=0, noise_threshold=0.0)
        job = c.submit_model(onnx, trials=2, measure=quick, batch_size=2)
        assert c.wait(job, timeout=300).state == pb.JOB_STATE_DONE
        with pytest.raises(TunehubError, match="INVALID_ARGUMENT.*name"):
            c.build_model(onnx, tmp_path / "bad", name="9two")
        out = tmp_path / "two"
        summary = c.build_model(onnx, out, name="two")
    assert (summary.name, summary.zero_shot_tasks) == ("two", 0)
    assert list(summary.checked_outputs) and not list(out.glob("*.tmp"))
    assert sorted(p.name for p in out.iterdir()) == [
        "libtwo.so", "manifest.json", "two.c", "two.h", "two.weights"
    ]
    m = Model(out)
    x = np.random.default_rng(1).uniform(-1, 1, size=(batch, n)).astype(np.float32)
    (name,) = [o["name"] for o in m.outputs]
    w = np.array(weight_values(n * n), dtype=np.float64).reshape(n, n)
    want = np.maximum(np.maximum(x @ w, 0) @ w, 0)
    np.testing.assert_allclose(m({"x": x})[name], want, rtol=1e-4, atol=1e-5)
    m.close()
