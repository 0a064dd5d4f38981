"""Workloads and tasks from the short forms the client accepts.

A workload is given as an op spec (`"matmul(64,64,64)"`), tunehub's text form
(`"C[i,j] += A[i,k] * B[k,j] where i<8, j<8, k<8"`: any string with a `[` is taken as the
text form, since op specs have none), or a `pb.Workload`. `op`, `expr` and `key` build the
message explicitly, with workload options (layout-free weights).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeAlias, Union

from ._proto import tunehub_pb2 as pb

# What the client takes for a workload, and for a job's tasks.
WorkloadLike: TypeAlias = Union[str, pb.Workload]
TaskLike: TypeAlias = Union[str, pb.Workload, pb.TaskSpec]
Tasks: TypeAlias = Union[TaskLike, Iterable[TaskLike]]
Workloads: TypeAlias = Union[WorkloadLike, Iterable[WorkloadLike]]


def op(spec: str, layout_free: str | Sequence[str] = ()) -> pb.Workload:
    """A library operator with its parameters, e.g. `op("matmul(64,64,64)", layout_free=["B"])`."""
    return pb.Workload(op_spec=spec, options=_options(layout_free))


def expr(text: str, layout_free: str | Sequence[str] = ()) -> pb.Workload:
    """A computation in tunehub's text form."""
    return pb.Workload(expr=text, options=_options(layout_free))


def key(workload_key: str) -> pb.Workload:
    """A workload already in the database, by its key."""
    return pb.Workload(workload_key=workload_key)


def workload(w: WorkloadLike) -> pb.Workload:
    """`w` as a Workload message: a string (op spec or text form) or a Workload already."""
    if isinstance(w, pb.Workload):
        return w
    if isinstance(w, str):
        return expr(w) if "[" in w else op(w)
    raise TypeError(
        f"a workload is an op spec, a text form or a pb.Workload, not {type(w).__name__}"
    )


def workloads(ws: Workloads) -> list[pb.Workload]:
    """A list of workloads from one workload or an iterable of them."""
    if isinstance(ws, (str, pb.Workload)):
        return [workload(ws)]
    return [workload(w) for w in ws]


def tasks(items: Tasks, trials: int | None, weight: float) -> list[pb.TaskSpec]:
    """TaskSpecs from workloads (given `trials` each) or TaskSpecs (taken as they are)."""
    seq = [items] if isinstance(items, (str, pb.Workload, pb.TaskSpec)) else _iter(items)
    out = []
    for i, item in enumerate(seq):
        if isinstance(item, pb.TaskSpec):
            out.append(item)
            continue
        if trials is None:
            raise ValueError(
                f"task {i}: `trials` is needed for a workload given without a TaskSpec"
            )
        out.append(pb.TaskSpec(workload=workload(item), trials=trials, weight=weight))
    return out


def shape_range(
    r: str | pb.ShapeRange, trials: int | None = None, layout_free: str | Sequence[str] = ()
) -> pb.ShapeRange:
    """A shape range (`SubmitRequest.range`): an op spec with ranged extents,
    `"matmul(m=1..512,n=768,k=768)"`, given `trials` per representative shape and the options
    `layout_free`; or a `pb.ShapeRange`, taken as it is."""
    if isinstance(r, pb.ShapeRange):
        return r
    if not isinstance(r, str):
        raise TypeError(f"a shape range is an op spec or a pb.ShapeRange, not {type(r).__name__}")
    if trials is None:
        raise ValueError(f"range {r!r}: `trials` (per representative shape) is needed")
    return pb.ShapeRange(spec=r, trials=trials, options=_options(layout_free))


def _iter(items: Iterable[TaskLike]) -> Iterator[TaskLike]:
    try:
        return iter(items)
    except TypeError:
        raise TypeError(f"tasks are workloads or TaskSpecs, not {type(items).__name__}") from None


def _options(layout_free: str | Sequence[str]) -> pb.WorkloadOptions | None:
    if isinstance(layout_free, str):
        layout_free = [layout_free]
    return pb.WorkloadOptions(layout_free=list(layout_free)) if layout_free else None
