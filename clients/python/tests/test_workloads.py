"""The short forms `submit`, `best` and `pack` accept, as the messages they become."""

import pytest

from tunehub import expr, key, op, pb
from tunehub import workloads as wl


def test_strings_are_op_specs_or_the_text_form():
    assert wl.workload("matmul(8,8,8)") == pb.Workload(op_spec="matmul(8,8,8)")
    text = "C[i,j] += A[i,k] * B[k,j] where i<8, j<8, k<8"
    assert wl.workload(text) == pb.Workload(expr=text)
    assert wl.workload("conv2d_nchw(n=1,c=8,h=8,w=8,f=8)").op_spec.startswith("conv2d")
    assert key("abc").workload_key == "abc"
    assert expr(text, layout_free=["B"]).options.layout_free == ["B"]
    with pytest.raises(TypeError):
        wl.workload(42)


def test_tasks_take_trials_and_weight_unless_given_as_taskspecs():
    spec = pb.TaskSpec(workload=op("matmul(4,4,4)"), trials=9, weight=3.0)
    got = wl.tasks(
        ["matmul(8,8,8)", op("matmul(8,8,8)", layout_free="B"), spec], trials=2, weight=1.5
    )
    assert [(t.trials, t.weight) for t in got] == [(2, 1.5), (2, 1.5), (9, 3.0)]
    assert got[1].workload.options.layout_free == ["B"]
    assert len(wl.tasks("matmul(8,8,8)", trials=1, weight=1.0)) == 1
    with pytest.raises(ValueError, match="trials"):
        wl.tasks(["matmul(8,8,8)"], trials=None, weight=1.0)
    assert wl.tasks([spec], trials=None, weight=1.0) == [spec]
