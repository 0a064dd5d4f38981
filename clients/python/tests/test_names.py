"""The client names things as the command line does: schedulers "gradient" and "round-robin"
(the old "round_robin" still taken, with a DeprecationWarning), job states "queued",
"running", "done", "failed", "cancelled"."""

import warnings

import pytest

import tunehub
from tunehub import Client, pb

# A shape no other test submits: the workload (and its description) is this test's alone.
SPEC = "matmul(6,4,2)"


@pytest.fixture(scope="module")
def client(server):
    with Client(server.url, token=server.token, timeout=60) as c:
        yield c


def test_state_names_are_the_command_lines():
    assert list(tunehub.STATES) == ["queued", "running", "done", "failed", "cancelled"]
    assert tunehub.state_name(pb.JOB_STATE_CANCELLED) == "cancelled"
    assert tunehub.state_name(pb.Job(state=pb.JOB_STATE_DONE)) == "done"
    assert tunehub.state_name(pb.JOB_STATE_UNSPECIFIED) == "unknown"
    assert sorted(tunehub.SCHEDULERS) == ["", "gradient", "round-robin"]


def test_schedulers_by_the_command_lines_names(client):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for the current names
        rr = client.submit(SPEC, trials=1, scheduler="round-robin", name="names")
        grad = client.submit(SPEC, trials=1, scheduler="gradient", name="names")
    with pytest.warns(DeprecationWarning, match="'round_robin' is now 'round-robin'") as w:
        old = client.submit(SPEC, trials=1, scheduler="round_robin", name="names")
    # Reported at the caller's line, not inside the client.
    assert w[0].filename == __file__, w[0].filename
    assert rr.scheduler == old.scheduler == pb.SCHEDULER_KIND_ROUND_ROBIN
    assert grad.scheduler == pb.SCHEDULER_KIND_GRADIENT
    with pytest.raises(ValueError, match="scheduler 'fifo'"):
        client.submit(SPEC, trials=1, scheduler="fifo")
    for j in (rr, grad, old):
        client.cancel(j)
        # Cancelled, or done if it ended first: listed under its state's name and value.
        ended = client.wait(j, timeout=300)
        name = tunehub.state_name(ended)
        assert name in ("cancelled", "done"), ended
        assert j.id in [x.id for x in client.jobs(states=[name], limit=1000)]
        assert j.id in [x.id for x in client.jobs(states=[ended.state], limit=1000)]
        other = "done" if name == "cancelled" else "cancelled"
        assert j.id not in [x.id for x in client.jobs(states=[other], limit=1000)]
    with pytest.raises(ValueError, match="job state 'canceled'"):
        client.jobs(states=["canceled"])
