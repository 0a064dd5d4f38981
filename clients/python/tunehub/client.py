"""`Client`: one gRPC channel to a tunehub server and the calls a compiler or a script makes.

Methods return the protobuf messages of proto/tunehub/v1/tunehub.proto (`tunehub.pb`) as they
are; a refused or failed call raises `TunehubError` with its gRPC status code and message.
Names are the command line's: schedulers "gradient" and "round-robin", job states "queued",
"running", "done", "failed", "cancelled", the target "local".
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, Union, cast
from urllib.parse import urlsplit

import grpc

from . import config as cfg
from . import workloads as wl
from ._proto import tunehub_pb2 as pb
from ._proto import tunehub_pb2_grpc as rpc
from .errors import TunehubError

_T = TypeVar("_T")
PathLike = Union[str, "os.PathLike[str]"]

# Messages up to this size are accepted from the server (exports, packs, kernel sources), as
# the Rust client does.
MAX_RECEIVE_BYTES = 64 << 20
# Lines per message of an import stream, as `tunehub records import` sends them.
IMPORT_CHUNK_LINES = 256

# The command line's names (`tunehub submit --scheduler`); "" is the server's default
# (gradient, as the command line's).
SCHEDULERS: dict[str, pb.SchedulerKind] = {
    "": pb.SCHEDULER_KIND_UNSPECIFIED,
    "round-robin": pb.SCHEDULER_KIND_ROUND_ROBIN,
    "gradient": pb.SCHEDULER_KIND_GRADIENT,
}
# Spellings of earlier releases, accepted with a DeprecationWarning for one more release.
_OLD_SCHEDULERS = {"round_robin": "round-robin"}

# Job states by the command line's names (`tunehub jobs --state`, its listings).
STATES: dict[str, pb.JobState] = {
    "queued": pb.JOB_STATE_QUEUED,
    "running": pb.JOB_STATE_RUNNING,
    "done": pb.JOB_STATE_DONE,
    "failed": pb.JOB_STATE_FAILED,
    "cancelled": pb.JOB_STATE_CANCELLED,
}


def state_name(state: pb.Job | int) -> str:
    """A job's state (or a `pb.JOB_STATE_*` value) as the command line names it: "queued",
    "running", "done", "failed", "cancelled" ("unknown" for anything else)."""
    value = state.state if isinstance(state, pb.Job) else state
    return next((name for name, v in STATES.items() if v == value), "unknown")


class Client:
    """A connection to a tunehub server.

    `url`: `http://HOST:PORT` (plain gRPC) or `https://HOST:PORT` (TLS; the system's roots, or
    `ca_cert`: a PEM file's path or the PEM bytes). `token`: sent as `authorization: Bearer
    <token>` on every call. `timeout`: seconds allowed per call (None: no limit; `watch` takes
    its own).

    Each of `url`, `token` and `ca_cert` left out (None) is taken as the command line takes it
    (`tunehub.config`): from TUNEHUB_SERVER, TUNEHUB_TOKEN, TUNEHUB_CA_CERT, else from the
    `[client]` table of the configuration file (`config`, else TUNEHUB_CONFIG, else
    `~/.config/tunehub/config.toml` if it exists), else the default: `http://127.0.0.1:50051`
    with no token. So `Client()` reaches the server `tunehub jobs` reaches. `token=""` sends
    no token whatever the environment says. `self.config` holds what was resolved.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        ca_cert: PathLike | bytes | None = None,
        *,
        timeout: float | None = None,
        config: PathLike | None = None,
    ):
        resolved = cfg.resolve(url, token, ca_cert, config=config)
        url = resolved.server
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
            ca = resolved.ca_cert
            if ca is not None:
                roots = ca if isinstance(ca, bytes) else Path(ca).read_bytes()
            creds = grpc.ssl_channel_credentials(root_certificates=roots)
            self._channel = grpc.secure_channel(parts.netloc, creds, options=options)
        else:
            # Given here with a plain URL it is a mistake; from the environment or the file it
            # is there for https URLs, and left unused as the command line leaves it.
            if ca_cert is not None:
                raise ValueError("ca_cert is for an https:// URL")
            self._channel = grpc.insecure_channel(parts.netloc, options=options)
        self.config = resolved
        self.url = url
        self.timeout = timeout
        tok = resolved.token
        self._metadata: list[tuple[str, str]] = [("authorization", f"Bearer {tok}")] if tok else []
        # The generated stubs are untyped (grpcio-tools writes no .pyi for them).
        self._jobs: Any = rpc.JobsStub(self._channel)
        self._query: Any = rpc.QueryStub(self._channel)
        self._records: Any = rpc.RecordsStub(self._channel)
        self._workers: Any = rpc.WorkersStub(self._channel)
        self.records = Records(self)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- Jobs -------------------------------------------------------------------------------

    def submit(
        self,
        tasks: wl.Tasks | None = None,
        *,
        trials: int | None = None,
        target: str | None = None,
        measure: pb.MeasureOptions | Mapping[str, Any] | None = None,
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
        a `pb.MeasureOptions` or a dict of its fields. `scheduler`: "gradient", "round-robin"
        (the command line's names), or "" for the server's default (gradient). `priority`:
        -10..10; a pool's queued jobs start highest first, and jobs sharing a pool get its
        workers in proportion to 2^(priority/5).

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
        if range is not None:
            # The server refuses a range beside tasks too; said here before anything is sent.
            if tasks is not None:
                raise ValueError("tasks and range are exclusive: a range's tasks are its shapes")
            shape_range, task_specs = wl.shape_range(range, trials), []
        elif tasks is None:
            raise ValueError("submit needs tasks, or a range")
        else:
            shape_range, task_specs = None, wl.tasks(tasks, trials, weight)
        req = self._job_request(
            target, targets, measure, batch_size, seed, scheduler, name, priority
        )
        req.tasks.extend(task_specs)
        if shape_range is not None:
            req.range.CopyFrom(shape_range)
        return self._unary(self._jobs.Submit, req, "Jobs.Submit", pb.SubmitResponse).job

    def submit_model(
        self,
        model: PathLike | bytes,
        *,
        trials: int,
        batch: int | None = None,
        shapes: Mapping[str, Sequence[int] | str] | Iterable[str] | None = None,
        strict: bool = False,
        layout: str = "",
        target: str | None = None,
        targets: Sequence[str] = (),
        measure: pb.MeasureOptions | Mapping[str, Any] | None = None,
        batch_size: int = 0,
        seed: int = 0,
        scheduler: str | int = "",
        name: str = "",
        priority: int = 0,
    ) -> pb.Job:
        """Queues the tasks of an ONNX model as one job and returns it, as `tunehub submit
        MODEL.onnx` does: the server extracts the tasks (the same workloads, weighted by how
        often each occurs) and each gets `trials` candidates. The other arguments are
        `submit`'s, except that the fields `measure` leaves unset time the tasks cold, as a
        network runs them (one run per repeat, ten repeats, each after a cache flush; Ansor's
        network set-up): `measure={"flush_cache": False}` times them warm.

        `model`: the model file's path, or its bytes (weights inside the file: external data
        files cannot be sent). `batch`: the value of every input's dynamic first dimension
        (`--model-batch`). `shapes`: whole input shapes (`--shape`), as `{"input": [1, 3, 224,
        224]}`, `{"input": "1x3x224x224"}` or `["input=1x3x224x224"]`. `strict`: an
        unsupported operator is an error instead of a skipped node; without it each skipped
        node is reported as a `UserWarning`, as the command line warns on stderr. `layout`:
        the layout the f32 convolutions' tasks are written in, "nchw" (the model's) or "nhwc",
        or "winograd" (nhwc with 3x3 stride-1 convolutions by Winograd's minimal filtering)
        (`--layout`), or "auto" (also ""): the tasks of nhwc and winograd together, for
        `build_model` (with "auto") to build each such convolution in the form whose tuned
        kernels take least.

        A bad model (unreadable, a dynamic dimension without a value, with `strict` an
        unsupported operator, no task at all, larger than the server takes) raises
        TunehubError INVALID_ARGUMENT saying what and where; nothing is stored.
        """
        source = pb.ModelSource(
            onnx=_model_bytes(model),
            batch=batch,
            shapes=_input_shapes(shapes),
            strict=strict,
            trials_per_task=trials,
            layout=layout,
        )
        job = self._job_request(
            target, targets, measure, batch_size, seed, scheduler, name, priority
        )
        req = pb.SubmitModelRequest(model=source, job=job)
        resp = self._unary(self._jobs.SubmitModel, req, "Jobs.SubmitModel", pb.SubmitModelResponse)
        for s in resp.skipped:
            warnings.warn(
                f"node '{s.node}' ({s.op}) skipped, not tuned nor in the estimate: {s.reason}",
                UserWarning,
                stacklevel=2,
            )
        return resp.job

    def build_model(
        self,
        model: PathLike | bytes,
        out_dir: PathLike,
        *,
        name: str = "",
        batch: int | None = None,
        shapes: Mapping[str, Sequence[int] | str] | Iterable[str] | None = None,
        layout: str = "",
        target: str | None = None,
        embed_weights: bool = False,
        compile: bool = True,
    ) -> pb.BuildModelSummary:
        """Compiles an ONNX model as a C library that runs it whole, as `tunehub build` does,
        and writes its files into `out_dir` (created if missing): NAME.c, NAME.h,
        NAME.weights, manifest.json and, with `compile`, libNAME.so, built on the server and
        checked there against a reference execution of the model (tract). `tunehub.Model(
        out_dir)` then runs it. Every task's kernel is its tuned record, else a zero-shot
        answer from tuned neighbours of the same structure (`zero_shot_tasks` counts them).

        `name`: the library's, a C identifier ("": "model"). `batch`, `shapes`, `layout`: as
        in `submit_model` (the layout the model was tuned in). `compile=False`: the sources only, to build elsewhere (needed for a
        `target` other than the server's own machine).

        Raises TunehubError: INVALID_ARGUMENT for a bad model or name or a node no library can
        run, NOT_FOUND listing every task with neither a record nor a tuned neighbour (tune
        them first: `submit_model`), FAILED_PRECONDITION for `compile` on another target.
        """
        req = pb.BuildModelRequest(
            model=pb.ModelSource(
                onnx=_model_bytes(model), batch=batch, shapes=_input_shapes(shapes), layout=layout
            ),
            target=target or "",
            name=name,
            embed_weights=embed_weights,
            compile=compile,
        )
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stream = self._query.BuildModel(req, metadata=self._metadata, timeout=self.timeout)
        current: tuple[str, Any] | None = None
        done: set[str] = set()
        try:
            for piece in stream:
                if piece.HasField("summary"):
                    if current is not None:
                        _finish(out, *current)
                    return cast(pb.BuildModelSummary, piece.summary)
                if current is not None and current[0] != piece.file:
                    done.add(current[0])
                    _finish(out, *current)
                    current = None
                if current is None:
                    if not _BARE_NAME.fullmatch(piece.file) or piece.file in done:
                        raise TunehubError(
                            grpc.StatusCode.INTERNAL,
                            f"the server sent a file named {piece.file!r}: not a new bare file name",
                            "Query.BuildModel",
                        )
                    current = (piece.file, open(out / f"{piece.file}.tmp", "wb"))
                current[1].write(piece.data)
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, "Query.BuildModel") from None
        finally:
            if current is not None and not current[1].closed:
                current[1].close()
                (out / f"{current[0]}.tmp").unlink(missing_ok=True)
        raise TunehubError(
            grpc.StatusCode.INTERNAL,
            "the server's answer ended before its summary: the build is incomplete",
            "Query.BuildModel",
        )

    def _job_request(
        self,
        target: str | None,
        targets: Sequence[str],
        measure: pb.MeasureOptions | Mapping[str, Any] | None,
        batch_size: int,
        seed: int,
        scheduler: str | int,
        name: str,
        priority: int,
    ) -> pb.SubmitRequest:
        # A job's settings, checked as far as the client can before anything is sent.
        if isinstance(measure, Mapping):
            measure = pb.MeasureOptions(**measure)
        if isinstance(targets, str):
            raise ValueError(f"targets={targets!r}: a list of target keys (one target: target=)")
        return pb.SubmitRequest(
            target=("" if targets else "local") if target is None else target,
            measure=measure,
            batch_size=batch_size,
            seed=seed,
            scheduler=_scheduler(scheduler),
            name=name,
            priority=priority,
            targets=list(targets),
        )

    def get(self, job_id: str | pb.Job) -> pb.Job:
        req = pb.GetJobRequest(id=_job_id(job_id))
        return self._unary(self._jobs.Get, req, "Jobs.Get", pb.Job)

    def jobs(
        self, states: Sequence[str | int] = (), limit: int = 0, group: str = ""
    ) -> list[pb.Job]:
        """Jobs, newest first; only those in `states` when given (the command line's names,
        "queued", "running", "done", "failed", "cancelled", or `pb.JOB_STATE_*` values), only
        those of a multi-target submission's `group` when given."""
        if isinstance(states, str):
            states = [states]
        req = pb.ListJobsRequest(states=[_state(s) for s in states], limit=limit, group=group)
        return list(self._unary(self._jobs.List, req, "Jobs.List", pb.ListJobsResponse).jobs)

    def cancel(self, job_id: str | pb.Job) -> pb.Job:
        req = pb.CancelJobRequest(id=_job_id(job_id))
        return self._unary(self._jobs.Cancel, req, "Jobs.Cancel", pb.Job)

    def watch(self, job_id: str | pb.Job, timeout: float | None = None) -> Iterator[pb.JobEvent]:
        """The job's progress events (`pb.JobEvent`): a snapshot first, then candidates, rounds,
        new bests, errors and estimates as they happen; the last one is `done`
        (`event.HasField("done")`), after which the iterator ends. A `candidate` event comes as
        each candidate is built (`stage` CANDIDATE_STAGE_BUILT, `round_built` of `round_size`)
        and measured (CANDIDATE_STAGE_MEASURED: `job_done` of `job_trials`, `trials_per_s`,
        `eta_s`, and whether it was `ok`, `noisy` or an `error`), so a job of one round shows
        progress before its end. `timeout`: seconds for the whole watch."""
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

    def wait(self, job_id: str | pb.Job, timeout: float | None = None) -> pb.Job:
        """Watches the job to its end and returns it as it ended (done, failed or cancelled)."""
        for ev in self.watch(job_id, timeout=timeout):
            if ev.WhichOneof("event") == "done":
                return ev.done
        raise AssertionError("unreachable: watch ends with `done` or raises")

    # --- Query ------------------------------------------------------------------------------

    def best(
        self,
        workload: wl.WorkloadLike,
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
        return self._unary(self._query.Best, req, "Query.Best", pb.BestResponse)

    def best_batch(
        self,
        workloads: wl.Workloads,
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
        resp = self._unary(self._query.BestBatch, req, "Query.BestBatch", pb.BestBatchResponse)
        return list(resp.results)

    def top_k(
        self,
        workload: wl.WorkloadLike,
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
        return self._unary(self._query.TopK, req, "Query.TopK", pb.TopKResponse)

    def list_tuned(self) -> pb.ListTunedResponse:
        req = pb.ListTunedRequest()
        return self._unary(self._query.ListTuned, req, "Query.ListTuned", pb.ListTunedResponse)

    def range_table(
        self, spec: str, target: str = "local", *, layout_free: Sequence[str] = ()
    ) -> pb.RangeResponse:
        """A tuned shape range's dispatch table (`matmul(m=1..512,n=768,k=768)`): which
        interval of its ranged extents each representative shape serves, with its best record.
        `layout_free`: the range's options, as submitted. A shape of the range is answered by
        `best` (marked `transfer`, with `range` set)."""
        options = pb.WorkloadOptions(layout_free=list(layout_free)) if layout_free else None
        req = pb.RangeRequest(spec=spec, target=target, options=options)
        return self._unary(self._query.Range, req, "Query.Range", pb.RangeResponse)

    def pack(
        self,
        workloads: wl.Workloads,
        target: str = "local",
        *,
        name: str = "",
        symbol_prefix: str = "",
        out_dir: PathLike | None = None,
    ) -> pb.PackResponse:
        """A kernel pack of the workloads' best kernels. With `out_dir`, also writes
        `<name>.c`, `<name>.h` and `manifest.json` there (the directory is created). A
        workload with no record: TunehubError NOT_FOUND naming every missing one, nothing
        written."""
        req = pb.PackRequest(
            workloads=wl.workloads(workloads), target=target, name=name, symbol_prefix=symbol_prefix
        )
        resp = self._unary(self._query.Pack, req, "Query.Pack", pb.PackResponse)
        if out_dir is not None:
            write_pack(resp, out_dir)
        return resp

    # --- plumbing ---------------------------------------------------------------------------

    def _unary(self, method: Callable[..., Any], req: Any, name: str, out: type[_T]) -> _T:
        # `out`: the method's response type, for the type checker (the stubs are untyped).
        try:
            return cast(_T, method(req, metadata=self._metadata, timeout=self.timeout))
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, name) from None


class Records:
    """Every measurement as JSON lines (proto/tunehub/v1/tunehub.proto, "Records as JSON
    lines"): `client.records.export(...)`, `client.records.import_(...)`."""

    def __init__(self, client: Client):
        self._client = client

    def export(
        self,
        path: PathLike | None = None,
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

    def import_(self, source: PathLike | Iterable[str]) -> pb.ImportResponse:
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
            resp = c._records.Import(chunks, metadata=c._metadata, timeout=c.timeout)
            return cast(pb.ImportResponse, resp)
        except grpc.RpcError as e:
            raise TunehubError.from_rpc(e, "Records.Import") from None


def write_pack(pack: pb.PackResponse, out_dir: PathLike) -> dict[str, Path]:
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


def _job_id(job: str | pb.Job) -> str:
    # A Job message (as `submit` returns it) or its id.
    return job.id if isinstance(job, pb.Job) else job


def _scheduler(s: str | int) -> pb.SchedulerKind:
    if not isinstance(s, str):
        return cast(pb.SchedulerKind, s)
    if s in _OLD_SCHEDULERS:
        new = _OLD_SCHEDULERS[s]
        warnings.warn(
            f"scheduler {s!r} is now {new!r}, as the command line names it; {s!r} will be "
            "refused in a later release",
            DeprecationWarning,
            stacklevel=4,
        )
        s = new
    if s not in SCHEDULERS:
        raise ValueError(f"scheduler {s!r}: one of {sorted(SCHEDULERS)}")
    return SCHEDULERS[s]


def _state(s: str | int) -> pb.JobState:
    if not isinstance(s, str):
        return cast(pb.JobState, s)
    if s not in STATES:
        raise ValueError(f"job state {s!r}: one of {', '.join(STATES)}")
    return STATES[s]


# A file name from BuildModel: bare, staying in the directory it is written to.
_BARE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


def _model_bytes(model: PathLike | bytes) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        return Path(model).read_bytes()
    raise TypeError(f"a model is a file's path or its bytes, not {type(model).__name__}")


def _finish(out: Path, name: str, f: Any) -> None:
    """A received file complete: closed and renamed into place (never half a file)."""
    f.close()
    os.replace(out / f"{name}.tmp", out / name)


def _input_shapes(
    shapes: Mapping[str, Sequence[int] | str] | Iterable[str] | None,
) -> list[pb.InputShape]:
    # `{"x": [1, 3, 8, 8]}`, `{"x": "1x3x8x8"}` or the command line's `["x=1x3x8x8"]`.
    if shapes is None:
        return []
    if isinstance(shapes, str):
        shapes = [shapes]
    items: list[tuple[str, Sequence[int] | str]] = []
    if isinstance(shapes, Mapping):
        items = list(shapes.items())
    else:
        for arg in shapes:
            name, sep, text = arg.partition("=")
            if not sep or not name:
                raise ValueError(f"shape {arg!r}: expected NAME=D0xD1x...")
            items.append((name, text))
    out = []
    for name, given in items:
        if isinstance(given, str):
            try:
                dims = [int(d) for d in given.split("x")]
            except ValueError:
                raise ValueError(f"shape of {name!r}: {given!r} is not D0xD1x...") from None
        else:
            dims = [int(d) for d in given]
        out.append(pb.InputShape(name=name, dims=dims))
    return out
