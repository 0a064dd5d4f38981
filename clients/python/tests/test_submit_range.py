"""A shape range submitted through the client: `submit(range=...)` tunes its representative
shapes as one job naming the range; afterwards `best` answers a shape of it that was never
tuned, from the representative serving it, and `range_table` shows the table. Bad ranges are
INVALID_ARGUMENT with nothing stored; a range beside tasks is refused before anything is sent."""

import grpc
import pytest

from tunehub import Client, TunehubError, pb, shape_range

QUICK = dict(number=1, repeat=1, min_repeat_ms=1, warmup=0, noise_threshold=0.0)
# Two representatives (2 and 4); m=3 is served by 4.
RANGE = "matmul(m=2..4,n=4,k=4)"


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url, token=server.token, timeout=60) as c:
        yield c


def test_a_range_is_tuned_and_answers_its_shapes(client):
    job = client.submit(range=RANGE, trials=2, batch_size=2, measure=QUICK)
    assert job.range.spec == RANGE and job.range.id.startswith("rg-"), job
    assert [t.description for t in job.tasks] == [
        "matmul(m=2,n=4,k=4,layout_free=B)",
        "matmul(m=4,n=4,k=4,layout_free=B)",
    ]
    ended = client.wait(job, timeout=300)
    assert ended.state == pb.JOB_STATE_DONE, ended
    assert all(t.trials_done == 2 for t in ended.tasks), ended

    table = client.range_table(RANGE)
    assert table.range == job.range
    cells = [(e.intervals[0].lo, e.intervals[0].hi) for e in table.entries]
    assert cells == [(2, 2), (3, 4)], table
    # A shape of the range never tuned: answered without allow_transfer, from m=4's record.
    r = client.best("matmul(3,4,4)", omit_kernel=True)
    assert r.found and r.range == job.range, r
    assert r.transfer.ranked_by == "range", r
    assert r.transfer.source_record_id == table.entries[1].record_id, r
    assert r.record.record_id == "", "predicted, not stored"


def test_bad_ranges_store_nothing(client):
    before = len(client.jobs())
    for spec, why in [("matmul(m=4..2,n=4,k=4)", "empty"), ("matmul(4,4,4)", "no range")]:
        with pytest.raises(TunehubError) as e:
            client.submit(range=spec, trials=2)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
        assert why in e.value.message, e.value
    # The range's options and trials travel as given in a ShapeRange.
    with pytest.raises(TunehubError) as e:
        client.submit(range=shape_range(RANGE, trials=0))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert len(client.jobs()) == before
    # Refused here, before anything is sent.
    with pytest.raises(ValueError, match="exclusive"):
        client.submit("matmul(4,4,4)", trials=2, range=RANGE)
    with pytest.raises(ValueError, match="trials"):
        client.submit(range=RANGE)
    with pytest.raises(ValueError, match="tasks, or a range"):
        client.submit(trials=2)
