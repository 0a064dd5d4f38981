"""`Client`: one gRPC channel to a tunehub server and the calls a compiler or a script makes.

Methods return the protobuf messages of proto/tunehub/v1/tunehub.proto (`tunehub.pb`) as they
are; a refused or failed call raises `TunehubError` with its gRPC status code and message.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import grpc

from . import workloads as wl
from ._proto import tunehub_pb2 as pb
from ._proto import tunehub_pb2_grpc as rpc
from .errors import TunehubError

# Messages up to this size are accepted from the server (exports, packs, kernel sources), as
# the Rust client does.
MAX_RECEIVE_BYTES = 64 << 20
# Lines per message of an import stream, as `tunehub records import` sends them.
IMPORT_CHUNK_LINES = 256

_SCHEDULERS = {
    "": pb.SCHEDULER_KIND_UNSPECIFIED,
    "round_robin": pb.SCHEDULER_KIND_ROUND_ROBIN,
    "gradient": pb.SCHEDULER_KIND_GRADIENT,
}


class Client:
    """A connection to a tunehub server.

    `url`: `http://HOST:PORT` (plain gRPC) or `https://HOST:PORT` (TLS; the system's roots, or
    `ca_cert`: a PEM file's path or the PEM bytes). `token`: sent as `authorization: Bearer
    <token>` on every call. `timeout`: seconds allowed per call (None: no limit; `watch` takes
    its own).
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:50051",
        token: str | None = None,
        ca_cert: str | os.PathLike | bytes | None = None,
        *,
        timeout: float | None = None,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"bad server URL {url!r}: expected http://HOST:PORT or https://HOST:PORT"
            )
        if parts.path not in ("", "/"):
            raise ValueError(f"bad server URL {url!r}: no path is expected")
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
        if parts.scheme == "https":
            roots = None
            if ca_cert is not None:
                roots = ca_cert if isinstance(ca_cert, bytes) else Path(ca_cert).read_bytes()
            creds = grpc.ssl_channel_credentials(root_certificates=roots)
            self._channel = grpc.secure_channel(parts.netloc, creds, options=options)
        else:
            if ca_cert is not None:
                raise ValueError("ca_cert is for an https:// URL")
            self._channel = grpc.insecure_channel(parts.netloc, options=options)
        self.url = url
        self.timeout = timeout
        self._metadata = [("authorization", f"Bearer {token}")] if token else []
        self._jobs = rpc.JobsStub(self._channel)
        self._query = rpc.QueryStub(self._channel)
        self._records = rpc.RecordsStub(self._channel)
        self._workers = rpc.WorkersStub(self._channel)
        self.records = Records(self)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- Jobs -------------------------------------------------------------------------------

    def submit(
        self,
        tasks=None,
        *,
        trials: int | None = None,
        target: str | None = None,
        measure: pb.MeasureOptions | dict | None = None,
        batch_size: int = 0,
        seed: int = 0,
        scheduler: str | int = "",
        name: str = "",
        weight: float = 1.0,
        priority: int = 0,
        targets: Sequence[str] = (),
        range: str | pb.ShapeRange | None = None,
    ) -> pb.Job:
        """Queues a tuning job and returns it (`job.id` to watch it).

        `tasks`: one or a list of workloads (op specs, text forms, `pb.Workload`s: each gets
        `trials` candidates and `weight`) or `pb.TaskSpec`s (taken as they are). `measure`:
        a `pb.MeasureOptions` or a dict of its fields. `scheduler`: "round_robin", "gradient",
        or "" for the server's default. `priority`: -10..10; a pool's queued jobs start highest
        first, and jobs sharing a pool get its workers in proportion to 2^(priority/5).

        `target`: "local" (the default: the server's own machine) or a target key. `targets`:
        several target keys instead (exclusive with `target`): one job per target, in one group;
        the first job is returned, `jobs(group=job.group)` lists them all.

        `range`: a shape range to tune instead of `tasks` (exclusive with them): an op spec
        with one or two extents given as `lo..hi` (`"matmul(m=1..512,n=768,k=768)"`, each
        representative shape getting `trials`) or a `pb.ShapeRange` (`workloads.shape_range`,
        for layout-free weights). The job's tasks are the range's representative shapes and
        `job.range` names the range; afterwards `best` answers any shape of it and
        `range_table` shows which representative serves which shapes.
        """
        if isinstance(measure, dict):
            measure = pb.MeasureOptions(**measure)
        if isinstance(scheduler, str):
            if scheduler not in _SCHEDULERS:
                raise ValueError(f"scheduler {scheduler!r}: one of {sorted(_SCHEDULERS)}")
            scheduler = _SCHEDULERS[scheduler]
        if isinstance(targets, str):
            raise ValueError(f"targets={targets!r}: a list of target keys (one target: target=)")
        if range is not None:
            # The server refuses a range beside tasks too; said here before anything is sent.
            if tasks is not None:
                raise ValueError("tasks and range are exclusive: a range's tasks are its shapes")
            shape_range, task_specs = wl.shape_range(range, trials), []
        elif tasks is None:
            raise ValueError("submit needs tasks, or a range")
        else:
            shape_range, task_specs = None, wl.tasks(tasks, trials, weight)
        req = pb.SubmitRequest(
            tasks=task_specs,
            target=("" if targets else "local") if target is None else target,
            measure=measure,
            batch_size=batch_size,
            seed=seed,
            scheduler=scheduler,
            name=name,
            priority=priority,
            targets=list(targets),
            range=shape_range,
        )
        return self._unary(self._jobs.Submit, req, "Jobs.Submit").job

    def get(self, job_id: str) -> pb.Job:
        return self._unary(self._jobs.Get, pb.GetJobRequest(id=_job_id(job_id)), "Jobs.Get")

    def jobs(self, states: Sequence[int] = (), limit: int = 0, group: str = "") -> list[pb.Job]:
        """Jobs, newest first; only those in `states` (`pb.JOB_STATE_*`) when given, only those
        of a multi-target submission's `group` when given."""
        req = pb.ListJobsRequest(states=list(states), limit=limit, group=group)
        return list(self._unary(self._jobs.List, req, "Jobs.List").jobs)

    def cancel(self, job_id: str) -> pb.Job:
        return self._unary(
            self._jobs.Cancel, pb.CancelJobRequest(id=_job_id(job_id)), "Jobs.Cancel"
        )

    def watch(self, job_id, timeout: float | None = None) -> Iterator[pb.JobEvent]:
        """The job's progress events (`pb.JobEvent`): a snapshot first, then rounds, new bests,
        errors and estimates as they happen; the last one is `done` (`event.HasField("done")`),
        after which the iterator ends. `timeout`: seconds for the whole watch."""
        stream = self._jobs.Watch(
            pb.WatchRequest(id=_job_id(job_id)), metadata=self._metadata, timeout=timeout
        )
        try:
            for ev in stream:
                yield ev
                if ev.WhichOneof("event") == "done":
                    return
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, "Jobs.Watch") from None
        finally:
            stream.cancel()
        raise TunehubError(
            grpc.StatusCode.UNAVAILABLE, "the watch stream ended before the job did", "Jobs.Watch"
        )

    def wait(self, job_id, timeout: float | None = None) -> pb.Job:
        """Watches the job to its end and returns it as it ended (done, failed or cancelled)."""
        for ev in self.watch(job_id, timeout=timeout):
            if ev.WhichOneof("event") == "done":
                return ev.done
        raise AssertionError("unreachable: watch ends with `done` or raises")

    # --- Query ------------------------------------------------------------------------------

    def best(
        self,
        workload,
        target: str = "local",
        *,
        with_source: bool = False,
        allow_transfer: bool = False,
        symbol_prefix: str = "",
        omit_kernel: bool = False,
    ) -> pb.BestResponse:
        """The best trusted record of a workload on a target, with its `kernel`
        (`tunehub.kernel.build(resp.kernel)` compiles it). No record: TunehubError NOT_FOUND."""
        req = pb.BestRequest(
            workload=wl.workload(workload),
            target=target,
            with_source=with_source,
            allow_transfer=allow_transfer,
            symbol_prefix=symbol_prefix,
            omit_kernel=omit_kernel,
        )
        return self._unary(self._query.Best, req, "Query.Best")

    def best_batch(
        self,
        workloads,
        target: str = "local",
        *,
        with_source: bool = False,
        allow_transfer: bool = False,
        symbol_prefix: str = "",
        omit_kernel: bool = False,
    ) -> list[pb.BestResponse]:
        """`best` of many workloads in one call, in order; one with no record gives a response
        with `found = False` (not an error)."""
        req = pb.BestBatchRequest(
            workloads=wl.workloads(workloads),
            target=target,
            with_source=with_source,
            allow_transfer=allow_transfer,
            symbol_prefix=symbol_prefix,
            omit_kernel=omit_kernel,
        )
        return list(self._unary(self._query.BestBatch, req, "Query.BestBatch").results)

    def top_k(
        self,
        workload,
        target: str = "local",
        k: int = 0,
        *,
        symbol_prefix: str = "",
        omit_kernel: bool = False,
    ) -> pb.TopKResponse:
        """The k fastest trusted records (0: 10), cheapest first, with a kernel each."""
        req = pb.TopKRequest(
            workload=wl.workload(workload),
            target=target,
            k=k,
            symbol_prefix=symbol_prefix,
            omit_kernel=omit_kernel,
        )
        return self._unary(self._query.TopK, req, "Query.TopK")

    def list_tuned(self) -> pb.ListTunedResponse:
        return self._unary(self._query.ListTuned, pb.ListTunedRequest(), "Query.ListTuned")

    def range_table(
        self, spec: str, target: str = "local", *, layout_free: Sequence[str] = ()
    ) -> pb.RangeResponse:
        """A tuned shape range's dispatch table (`matmul(m=1..512,n=768,k=768)`): which
        interval of its ranged extents each representative shape serves, with its best record.
        `layout_free`: the range's options, as submitted. A shape of the range is answered by
        `best` (marked `transfer`, with `range` set)."""
        options = pb.WorkloadOptions(layout_free=list(layout_free)) if layout_free else None
        req = pb.RangeRequest(spec=spec, target=target, options=options)
        return self._unary(self._query.Range, req, "Query.Range")

    def pack(
        self,
        workloads,
        target: str = "local",
        *,
        name: str = "",
        symbol_prefix: str = "",
        out_dir: str | os.PathLike | None = None,
    ) -> pb.PackResponse:
        """A kernel pack of the workloads' best kernels. With `out_dir`, also writes
        `<name>.c`, `<name>.h` and `manifest.json` there (the directory is created). A
        workload with no record: TunehubError NOT_FOUND naming every missing one, nothing
        written."""
        req = pb.PackRequest(
            workloads=wl.workloads(workloads), target=target, name=name, symbol_prefix=symbol_prefix
        )
        resp = self._unary(self._query.Pack, req, "Query.Pack")
        if out_dir is not None:
            write_pack(resp, out_dir)
        return resp

    # --- plumbing ---------------------------------------------------------------------------

    def _unary(self, method, req, name: str):
        try:
            return method(req, metadata=self._metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, name) from None


class Records:
    """Every measurement as JSON lines (proto/tunehub/v1/tunehub.proto, "Records as JSON
    lines"): `client.records.export(...)`, `client.records.import_(...)`."""

    def __init__(self, client: Client):
        self._client = client

    def export(
        self,
        path: str | os.PathLike | None = None,
        *,
        workload_key: str = "",
        target_key: str = "",
    ) -> list[str] | int:
        """The records (of one workload and/or target when given). With `path`: written there,
        one line each, and the number of lines returned; without: the lines, as a list."""
        c = self._client
        req = pb.ExportRequest(workload_key=workload_key, target_key=target_key)
        stream = c._records.Export(req, metadata=c._metadata, timeout=c.timeout)
        try:
            if path is None:
                return [line for msg in stream for line in msg.lines]
            n = 0
            # Written to a temporary name first: a failed export leaves no truncated file.
            tmp = Path(f"{os.fspath(path)}.partial")
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    for msg in stream:
                        for line in msg.lines:
                            f.write(line)
                            f.write("\n")
                            n += 1
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            return n
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, "Records.Export") from None

    def import_(self, source: str | os.PathLike | Iterable[str]) -> pb.ImportResponse:
        """Imports records, all or nothing: `source` is a file's path (str or PathLike) or an
        iterable of lines (without newlines). Every line is sent, blank ones included, so the
        server's line numbers in an error are the file's."""
        if isinstance(source, (str, os.PathLike)):
            with open(source, encoding="utf-8") as f:
                lines = f.read().splitlines()
        else:
            lines = [line.rstrip("\n") for line in source]
        chunks = (
            pb.RecordLines(lines=lines[i : i + IMPORT_CHUNK_LINES])
            for i in range(0, len(lines), IMPORT_CHUNK_LINES)
        )
        c = self._client
        try:
            return c._records.Import(chunks, metadata=c._metadata, timeout=c.timeout)
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, "Records.Import") from None


def write_pack(pack: pb.PackResponse, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Writes a pack's three files into `out_dir`; their paths by kind ("source", "header",
    "manifest")."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    name = pack.name or "tunehub_pack"
    paths = {
        "source": d / f"{name}.c",
        "header": d / f"{name}.h",
        "manifest": d / "manifest.json",
    }
    paths["source"].write_text(pack.source, encoding="utf-8")
    paths["header"].write_text(pack.header, encoding="utf-8")
    paths["manifest"].write_text(pack.manifest_json, encoding="utf-8")
    return paths


def _job_id(job) -> str:
    # A Job message (as `submit` returns it) or its id.
    return job.id if isinstance(job, pb.Job) else job
