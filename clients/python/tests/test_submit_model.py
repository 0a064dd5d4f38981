"""`submit_model`: an ONNX model's tasks, extracted by the server, queued as one job. The tasks
are the ones `tunehub tasks MODEL.onnx` (the command line's extraction) lists, weighted by how
often they occur; a bad model is INVALID_ARGUMENT saying what and where, and stores nothing."""

import json
import subprocess

import grpc
import pytest
from conftest import start_server, tunehub_bin
from onnx_bytes import two_dense, with_unsupported

from tunehub import Client, TunehubError, pb

QUICK = dict(number=1, repeat=1, min_repeat_ms=1, warmup=0, noise_threshold=0.0)


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url, token=server.token, timeout=60) as c:
        yield c


def cli_tasks(path, *args):
    """`tunehub tasks PATH --json`: the command line's own extraction."""
    out = subprocess.run(
        [tunehub_bin(), "tasks", str(path), "--json", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)["tasks"]


def refused(call, *want):
    """The call is INVALID_ARGUMENT and its message holds each of `want`."""
    with pytest.raises(TunehubError) as e:
        call()
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
    for w in want:
        assert w in e.value.message, e.value
    return e.value


def test_a_model_is_tuned_as_the_command_line_extracts_it(client, tmp_path):
    path = tmp_path / "two_dense.onnx"
    path.write_bytes(two_dense())
    job = client.submit_model(
        path, trials=2, measure=QUICK, batch_size=2, seed=5, name="model", priority=1
    )
    want = cli_tasks(path)
    assert [(t.workload_key, t.weight) for t in job.tasks] == [
        (t["workload_key"], float(t["weight"])) for t in want
    ]
    # Two MatMul+Relu of one shape: one task, occurring twice.
    assert [t.weight for t in job.tasks] == [2.0]
    assert (job.name, job.priority, job.seed, job.batch_size) == ("model", 1, 5, 2)
    assert all(t.trials == 2 for t in job.tasks)
    ended = client.wait(job, timeout=300)
    assert ended.state == pb.JOB_STATE_DONE, ended
    assert ended.estimate.missing == 0 and ended.estimate.seconds > 0, ended


def test_dynamic_inputs_take_a_batch_or_shapes(client, tmp_path):
    dynamic = two_dense(batch="N")
    refused(
        lambda: client.submit_model(dynamic, trials=1),
        "input 'x' dimension 0 is dynamic",
        "model.batch",
    )
    path = tmp_path / "dynamic.onnx"
    path.write_bytes(dynamic)
    want = [t["workload_key"] for t in cli_tasks(path, "--batch", "4")]
    for given in (
        dict(batch=4),
        dict(shapes={"x": [4, 16]}),
        dict(shapes={"x": "4x16"}),
        dict(shapes=["x=4x16"]),
    ):
        job = client.submit_model(dynamic, trials=1, **given)
        assert [t.workload_key for t in job.tasks] == want, given
        client.cancel(job)
    refused(lambda: client.submit_model(dynamic, trials=1, shapes={"y": [4, 16]}), "'y'")
    refused(lambda: client.submit_model(dynamic, trials=1, batch=0), "model.batch 0")
    with pytest.raises(ValueError, match="NAME=D0xD1"):
        client.submit_model(dynamic, trials=1, shapes=["x"])


def test_unsupported_nodes_warn_or_under_strict_refuse(client):
    model, sin = with_unsupported()
    before = len(client.jobs(limit=1000))
    refused(
        lambda: client.submit_model(model, trials=1, strict=True),
        f"node '{sin}' (Sin): unsupported operator",
    )
    assert len(client.jobs(limit=1000)) == before, "a refused model stores nothing"
    with pytest.warns(UserWarning, match=f"node '{sin}' \\(Sin\\) skipped"):
        job = client.submit_model(model, trials=1)
    assert len(job.tasks) == 1
    client.cancel(job)


def test_bad_models_are_refused_and_store_nothing(client):
    before = len(client.jobs(limit=1000))
    refused(lambda: client.submit_model(b"not a model", trials=1), "not a valid ONNX model")
    refused(lambda: client.submit_model(b"", trials=1), "model.onnx is empty")
    refused(lambda: client.submit_model(two_dense(), trials=0), "trials_per_task")
    # The job's own settings are checked as for `submit`.
    refused(lambda: client.submit_model(two_dense(), trials=1, priority=11), "priority 11")
    refused(
        lambda: client.submit_model(two_dense(), trials=1, layout="nchw16c"),
        "model.layout",
        "nchw, nhwc or winograd (or auto)",
    )
    assert len(client.jobs(limit=1000)) == before
    with pytest.raises(TypeError, match="path or its bytes"):
        client.submit_model(42, trials=1)  # type: ignore[arg-type]


def test_a_model_over_the_servers_limit_is_refused_with_its_size(tmp_path):
    # 200 KB messages: models up to 200000 - 64 KiB = 134464 bytes.
    small = start_server(tmp_path, "--max-message-bytes", "200000")
    try:
        with Client(small.url, token=small.token, timeout=60) as c:
            big = two_dense(n=192)  # two 192x192 float weights, ~295 KB: past the message limit
            mid = two_dense(n=150)  # ~180 KB: within the message limit, past the model limit
            assert 134464 < len(mid) < 200000 - 1024 < len(big)
            refused(
                lambda: c.submit_model(mid, trials=1),
                f"the model is {len(mid)} bytes",
                "up to 134464 bytes",
            )
            with pytest.raises(TunehubError) as e:
                c.submit_model(big, trials=1)
            # Past the message limit gRPC's decoder refuses it before the server reads it.
            assert e.value.code in (
                grpc.StatusCode.OUT_OF_RANGE,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
            ), e.value
            assert c.jobs() == []
    finally:
        small.stop()
