"""The client against a real server, as a compiler's build script would use it: submit a tiny
job, watch it to the end, ask for the best kernels, build them and compare with numpy; then
the batch query, a pack, and the records out and back in."""

import json

import grpc
import numpy as np
import pytest

import tunehub
from tunehub import Client, TunehubError, kernel, op, pb

# Short timing and no noise guard (tests share the machine): they check behaviour, not speed.
QUICK = dict(
    number=1,
    repeat=1,
    min_repeat_ms=1,
    warmup=0,
    flush_cache=False,
    timeout_s=10.0,
    noise_threshold=0.0,
)
# The API packs an operator's constant weight unless told: `layout_free=none` keeps B as given.
PLAIN = "matmul(16,16,16,layout_free=none)"
# The same matmul with B a layout-free weight: its kernel reads B packed.
PACKED = op("matmul(16,16,16)", layout_free=["B"])
UNTUNED = "matmul(3,5,7)"


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url, token=server.token, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def tuned(client):
    """The job, watched to its end: (the job as submitted, every event)."""
    job = client.submit(
        [PLAIN, PACKED],
        trials=4,
        measure=QUICK,
        batch_size=4,
        seed=7,
        name="python",
        priority=3,
    )
    events = list(client.watch(job, timeout=300))
    return job, events


def test_submit_and_watch_to_the_end(client, tuned):
    job, events = tuned
    assert job.id.startswith("j-") and len(job.tasks) == 2
    assert (job.name, job.priority, job.seed) == ("python", 3, 7)
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "snapshot" and kinds[-1] == "done", kinds
    assert "round" in kinds and "new_best" in kinds, kinds
    # Each candidate as it is measured, counts rising to the job's 8 trials.
    counts = [e.candidate.job_done for e in events if e.HasField("candidate")]
    assert counts == sorted(counts) and counts[-1] == 8, counts
    done = events[-1].done
    assert done.state == pb.JOB_STATE_DONE, done
    # The gradient scheduler shares the tasks' 4 + 4 trials: a first round of 2 each, then
    # the rounds go where the weighted latency is.
    assert sum(t.trials_done for t in done.tasks) == 8, done
    assert all(t.trials_done >= 2 for t in done.tasks), done
    assert all(t.ok > 0 for t in done.tasks), done
    # A finished job: its snapshot and `done` at once.
    ended = client.wait(job, timeout=60)
    assert (ended.id, ended.state) == (job.id, pb.JOB_STATE_DONE)
    assert client.get(job.id).state == pb.JOB_STATE_DONE
    assert job.id in [j.id for j in client.jobs(states=[pb.JOB_STATE_DONE])]


def random_inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


@pytest.mark.parametrize("workload", [PLAIN, PACKED], ids=["plain", "packed"])
def test_best_kernel_builds_and_matches_numpy(client, tuned, workload):
    best = client.best(workload)
    assert best.found and best.record.record_id
    k = best.kernel
    assert k.symbol.startswith("tunehub_") and k.record_id == best.record.record_id
    assert [a.role for a in k.args] == (
        ["input", "weight", "output"] if workload is PACKED else ["input", "input", "output"]
    )
    assert [list(a.shape) for a in k.args] == [[16, 16]] * 3
    f = kernel.build(k)
    a, b = random_inputs([(16, 16), (16, 16)], seed=1)
    np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-4, atol=1e-4)
    if workload is PACKED:
        assert k.args[1].pack_function and k.args[1].packed_elements >= 16 * 16
        np.testing.assert_allclose(f(a, f.pack("B", b)), a @ b, rtol=1e-4, atol=1e-4)
    if k.set_num_threads:
        f.set_num_threads(1)
        np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_the_default_layout_is_the_apis(client, tuned):
    # A spec that says nothing is the packed workload, as `tunehub query 'matmul(16,16,16)'`
    # asks for it: every client gets one default.
    default = client.best("matmul(16,16,16)")
    assert default.found
    assert default.record.workload_key == client.best(PACKED).record.workload_key
    assert default.description == "matmul(m=16,n=16,k=16,layout_free=B)"


def test_best_batch_marks_the_missing(client, tuned):
    results = client.best_batch([PLAIN, PACKED, UNTUNED], symbol_prefix="mylib_")
    assert [r.found for r in results] == [True, True, False]
    assert all(r.kernel.symbol.startswith("mylib_") for r in results[:2])
    assert results[0].kernel.symbol != results[1].kernel.symbol


def test_top_k_gives_a_kernel_per_record(client, tuned):
    top = client.top_k(PLAIN, k=2)
    assert 1 <= len(top.records) <= 2 and len(top.kernels) == len(top.records)
    assert [k.record_id for k in top.kernels] == [r.record_id for r in top.records]
    assert top.records[0].seconds <= top.records[-1].seconds


def test_pack_writes_the_three_files(client, tuned, tmp_path):
    pack = client.pack([PLAIN, PACKED], name="mypack", out_dir=tmp_path)
    assert pack.name == "mypack"
    header = (tmp_path / "mypack.h").read_text()
    source = (tmp_path / "mypack.c").read_text()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest and len(pack.kernels) == 2
    for k in pack.kernels:
        assert k.symbol in header and k.symbol in source
    with pytest.raises(TunehubError) as e:
        client.pack([PLAIN, UNTUNED], out_dir=tmp_path / "none")
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert not (tmp_path / "none").exists()


def test_records_export_and_import_round_trip(client, tuned, tmp_path):
    path = tmp_path / "records.jsonl"
    n = client.records.export(path)
    lines = path.read_text().splitlines()
    assert n == len(lines) and lines == client.records.export()
    records = [line for line in lines if json.loads(line).get("i")]
    assert len(records) >= 8, "4 trials of each of the 2 tasks"
    again = client.records.import_(path)
    assert (again.records_new, again.records_known) == (0, len(records))
    same = client.records.import_(iter(lines))
    assert same.records_known == len(records)
    with pytest.raises(TunehubError) as e:
        client.records.import_(["{not json"])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "1" in e.value.message


def test_errors_carry_the_status(client, server):
    with pytest.raises(TunehubError) as e:
        client.best(UNTUNED)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(TunehubError) as e:
        client.best("no_such_operator(1)")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with Client(server.url, token="wrong") as intruder:
        with pytest.raises(TunehubError) as e:
            intruder.jobs()
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(TunehubError) as e:
        list(client.watch("j-unknown"))
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_submit_forms(client):
    # Refused before anything is queued: the form of each task reaches the server as given.
    with pytest.raises(ValueError, match="trials"):
        client.submit(PLAIN)
    with pytest.raises(TunehubError) as e:
        client.submit(["C[i] = A[i] * 2.0 where i<"], trials=1)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert tunehub.pb.TaskSpec(workload=op(PLAIN), trials=1).workload.op_spec == PLAIN


def test_an_integer_kernel_matches_numpy_exactly(client):
    """A `dtype=u8i8` matmul tuned and called as a quantized model's layer: uint8 data, int8
    weights (packed), int32 out, equal to numpy's integer product at the types' extremes."""
    spec = "matmul(8,32,16,dtype=u8i8)"
    job = client.submit([spec], trials=4, measure=QUICK, batch_size=4, seed=3)
    assert client.wait(job, timeout=300).state == pb.JOB_STATE_DONE
    k = client.best(spec).kernel
    assert [a.dtype for a in k.args] == ["uint8", "int8", "int32"]
    f = kernel.build(k)
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, size=(8, 16)).astype(np.uint8)
    b = rng.integers(-128, 128, size=(16, 32)).astype(np.int8)
    a[0, :], b[:, 0] = 255, -128
    want = a.astype(np.int32) @ b.astype(np.int32)
    got = f(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="uint8"):
        f(a.astype(np.float32), b)


def test_a_requantized_kernel_matches_numpy_exactly(client):
    """`out_dtype=u8`: the i32 sum times a float32 scale per output channel, rounded half to
    even, plus the zero point, saturated to uint8: numpy's float32 product and `rint` give the
    same values, element for element."""
    spec = "matmul(8,32,16,dtype=u8i8,out_dtype=u8)"
    job = client.submit([spec], trials=4, measure=QUICK, batch_size=4, seed=5)
    assert client.wait(job, timeout=300).state == pb.JOB_STATE_DONE
    k = client.best(spec).kernel
    assert [a.dtype for a in k.args] == ["uint8", "int8", "float32", "uint8", "uint8"]
    f = kernel.build(k)
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, size=(8, 16)).astype(np.uint8)
    b = rng.integers(-128, 128, size=(16, 32)).astype(np.int8)
    scale = (2.0 ** -rng.integers(8, 14, size=32)).astype(np.float32)
    zero_point = np.array([128], dtype=np.uint8)
    acc = (a.astype(np.int32) @ b.astype(np.int32)).astype(np.float32)
    want = np.clip(np.rint(acc * scale) + np.float32(128), 0, 255).astype(np.uint8)
    got = f(a, b, scale, zero_point)
    assert got.dtype == np.uint8
    # Both ends and the values between are reached.
    assert (got == 0).any() and (got == 255).any() and ((got > 0) & (got < 255)).mean() > 0.5
    np.testing.assert_array_equal(got, want)
