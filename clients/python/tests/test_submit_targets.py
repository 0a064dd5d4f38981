"""A multi-target submission through the client: `submit(..., targets=[...])` makes one job per
target in a group, `jobs(group=...)` lists it; an unknown key among the targets is NOT_FOUND
naming it, and nothing is stored."""

import grpc
import pytest

from tunehub import Client, TunehubError, pb

QUICK = dict(number=1, repeat=1, min_repeat_ms=1, warmup=0, noise_threshold=0.0)
SPEC = "matmul(4,8,4)"


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url, token=server.token, timeout=60) as c:
        yield c


def test_an_unknown_target_among_several_stores_nothing(client):
    before = len(client.jobs())
    with pytest.raises(TunehubError) as e:
        client.submit(SPEC, trials=2, measure=QUICK, targets=["local", "nope-target"])
    assert e.value.code == grpc.StatusCode.NOT_FOUND, e.value
    assert "'nope-target'" in e.value.message, e.value
    assert len(client.jobs()) == before
    with pytest.raises(ValueError, match="a list of target keys"):
        client.submit(SPEC, trials=2, targets="local")


def test_targets_make_a_group_of_jobs(client):
    job = client.submit(SPEC, trials=2, batch_size=2, measure=QUICK, targets=["local"])
    assert job.group.startswith("g-"), job
    assert [j.id for j in client.jobs(group=job.group)] == [job.id]
    ended = client.wait(job, timeout=300)
    assert ended.state == pb.JOB_STATE_DONE, ended
    assert ended.group == job.group and ended.tasks[0].trials_done == 2
    # Both `target` and `targets`: the server refuses it.
    with pytest.raises(TunehubError) as e:
        client.submit(SPEC, trials=2, target="local", targets=["local"])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
