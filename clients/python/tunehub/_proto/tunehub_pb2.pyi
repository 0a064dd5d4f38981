from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchedulerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULER_KIND_UNSPECIFIED: _ClassVar[SchedulerKind]
    SCHEDULER_KIND_ROUND_ROBIN: _ClassVar[SchedulerKind]
    SCHEDULER_KIND_GRADIENT: _ClassVar[SchedulerKind]

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_QUEUED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_DONE: _ClassVar[JobState]
    JOB_STATE_FAILED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class CandidateStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANDIDATE_STAGE_UNSPECIFIED: _ClassVar[CandidateStage]
    CANDIDATE_STAGE_BUILT: _ClassVar[CandidateStage]
    CANDIDATE_STAGE_MEASURED: _ClassVar[CandidateStage]
SCHEDULER_KIND_UNSPECIFIED: SchedulerKind
SCHEDULER_KIND_ROUND_ROBIN: SchedulerKind
SCHEDULER_KIND_GRADIENT: SchedulerKind
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_QUEUED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_DONE: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_CANCELLED: JobState
CANDIDATE_STAGE_UNSPECIFIED: CandidateStage
CANDIDATE_STAGE_BUILT: CandidateStage
CANDIDATE_STAGE_MEASURED: CandidateStage

class Workload(_message.Message):
    __slots__ = ("op_spec", "expr", "workload_key", "options")
    OP_SPEC_FIELD_NUMBER: _ClassVar[int]
    EXPR_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    op_spec: str
    expr: str
    workload_key: str
    options: WorkloadOptions
    def __init__(self, op_spec: _Optional[str] = ..., expr: _Optional[str] = ..., workload_key: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ...) -> None: ...

class WorkloadOptions(_message.Message):
    __slots__ = ("layout_free",)
    LAYOUT_FREE_FIELD_NUMBER: _ClassVar[int]
    layout_free: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, layout_free: _Optional[_Iterable[str]] = ...) -> None: ...

class MeasureOptions(_message.Message):
    __slots__ = ("number", "repeat", "min_repeat_ms", "warmup", "flush_cache", "timeout_s", "noise_threshold")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    MIN_REPEAT_MS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_FIELD_NUMBER: _ClassVar[int]
    FLUSH_CACHE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    NOISE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    number: int
    repeat: int
    min_repeat_ms: int
    warmup: int
    flush_cache: bool
    timeout_s: float
    noise_threshold: float
    def __init__(self, number: _Optional[int] = ..., repeat: _Optional[int] = ..., min_repeat_ms: _Optional[int] = ..., warmup: _Optional[int] = ..., flush_cache: _Optional[bool] = ..., timeout_s: _Optional[float] = ..., noise_threshold: _Optional[float] = ...) -> None: ...

class JobTrialsRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class JobTrialsResponse(_message.Message):
    __slots__ = ("job", "tasks")
    JOB_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    job: Job
    tasks: _containers.RepeatedCompositeFieldContainer[TaskTrials]
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskTrials, _Mapping]]] = ...) -> None: ...

class TaskTrials(_message.Message):
    __slots__ = ("task_index", "trials")
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    task_index: int
    trials: _containers.RepeatedCompositeFieldContainer[Trial]
    def __init__(self, task_index: _Optional[int] = ..., trials: _Optional[_Iterable[_Union[Trial, _Mapping]]] = ...) -> None: ...

class Trial(_message.Message):
    __slots__ = ("at_ms", "seconds", "noisy")
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    seconds: float
    noisy: bool
    def __init__(self, at_ms: _Optional[int] = ..., seconds: _Optional[float] = ..., noisy: _Optional[bool] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("workload", "trials", "weight", "alternative")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVE_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    trials: int
    weight: float
    alternative: bool
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., trials: _Optional[int] = ..., weight: _Optional[float] = ..., alternative: _Optional[bool] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ("tasks", "target", "measure", "batch_size", "seed", "scheduler", "name", "priority", "targets", "range", "cost_model")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    MEASURE_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    COST_MODEL_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    target: str
    measure: MeasureOptions
    batch_size: int
    seed: int
    scheduler: SchedulerKind
    name: str
    priority: int
    targets: _containers.RepeatedScalarFieldContainer[str]
    range: ShapeRange
    cost_model: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ..., target: _Optional[str] = ..., measure: _Optional[_Union[MeasureOptions, _Mapping]] = ..., batch_size: _Optional[int] = ..., seed: _Optional[int] = ..., scheduler: _Optional[_Union[SchedulerKind, str]] = ..., name: _Optional[str] = ..., priority: _Optional[int] = ..., targets: _Optional[_Iterable[str]] = ..., range: _Optional[_Union[ShapeRange, _Mapping]] = ..., cost_model: _Optional[str] = ...) -> None: ...

class ShapeRange(_message.Message):
    __slots__ = ("spec", "options", "trials")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    spec: str
    options: WorkloadOptions
    trials: int
    def __init__(self, spec: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., trials: _Optional[int] = ...) -> None: ...

class ShapeRangeRef(_message.Message):
    __slots__ = ("id", "spec")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    id: str
    spec: str
    def __init__(self, id: _Optional[str] = ..., spec: _Optional[str] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("job", "jobs")
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    job: Job
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class SubmitModelRequest(_message.Message):
    __slots__ = ("model", "job")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    model: ModelSource
    job: SubmitRequest
    def __init__(self, model: _Optional[_Union[ModelSource, _Mapping]] = ..., job: _Optional[_Union[SubmitRequest, _Mapping]] = ...) -> None: ...

class ModelSource(_message.Message):
    __slots__ = ("onnx", "batch", "shapes", "strict", "trials_per_task", "layout")
    ONNX_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SHAPES_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    TRIALS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    onnx: bytes
    batch: int
    shapes: _containers.RepeatedCompositeFieldContainer[InputShape]
    strict: bool
    trials_per_task: int
    layout: str
    def __init__(self, onnx: _Optional[bytes] = ..., batch: _Optional[int] = ..., shapes: _Optional[_Iterable[_Union[InputShape, _Mapping]]] = ..., strict: _Optional[bool] = ..., trials_per_task: _Optional[int] = ..., layout: _Optional[str] = ...) -> None: ...

class InputShape(_message.Message):
    __slots__ = ("name", "dims")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., dims: _Optional[_Iterable[int]] = ...) -> None: ...

class SubmitModelResponse(_message.Message):
    __slots__ = ("job", "jobs", "skipped")
    JOB_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    job: Job
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    skipped: _containers.RepeatedCompositeFieldContainer[SkippedNode]
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., skipped: _Optional[_Iterable[_Union[SkippedNode, _Mapping]]] = ...) -> None: ...

class SkippedNode(_message.Message):
    __slots__ = ("node", "op", "reason")
    NODE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    node: str
    op: str
    reason: str
    def __init__(self, node: _Optional[str] = ..., op: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class TaskProgress(_message.Message):
    __slots__ = ("index", "workload_key", "description", "options", "flops", "weight", "trials", "trials_done", "ok", "errors", "new_records", "best_seconds", "best_gflops", "best_record_id", "last_error", "exhausted", "error_counts", "dropped", "share", "alternative", "rounds", "search_s", "model_s", "measure_s", "build_s", "run_s", "noisy")
    class ErrorCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    INDEX_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    TRIALS_DONE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    NEW_RECORDS_FIELD_NUMBER: _ClassVar[int]
    BEST_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BEST_GFLOPS_FIELD_NUMBER: _ClassVar[int]
    BEST_RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_COUNTS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    SEARCH_S_FIELD_NUMBER: _ClassVar[int]
    MODEL_S_FIELD_NUMBER: _ClassVar[int]
    MEASURE_S_FIELD_NUMBER: _ClassVar[int]
    BUILD_S_FIELD_NUMBER: _ClassVar[int]
    RUN_S_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    index: int
    workload_key: str
    description: str
    options: WorkloadOptions
    flops: int
    weight: float
    trials: int
    trials_done: int
    ok: int
    errors: int
    new_records: int
    best_seconds: float
    best_gflops: float
    best_record_id: str
    last_error: str
    exhausted: bool
    error_counts: _containers.ScalarMap[str, int]
    dropped: int
    share: float
    alternative: bool
    rounds: int
    search_s: float
    model_s: float
    measure_s: float
    build_s: float
    run_s: float
    noisy: int
    def __init__(self, index: _Optional[int] = ..., workload_key: _Optional[str] = ..., description: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., flops: _Optional[int] = ..., weight: _Optional[float] = ..., trials: _Optional[int] = ..., trials_done: _Optional[int] = ..., ok: _Optional[int] = ..., errors: _Optional[int] = ..., new_records: _Optional[int] = ..., best_seconds: _Optional[float] = ..., best_gflops: _Optional[float] = ..., best_record_id: _Optional[str] = ..., last_error: _Optional[str] = ..., exhausted: _Optional[bool] = ..., error_counts: _Optional[_Mapping[str, int]] = ..., dropped: _Optional[int] = ..., share: _Optional[float] = ..., alternative: _Optional[bool] = ..., rounds: _Optional[int] = ..., search_s: _Optional[float] = ..., model_s: _Optional[float] = ..., measure_s: _Optional[float] = ..., build_s: _Optional[float] = ..., run_s: _Optional[float] = ..., noisy: _Optional[int] = ...) -> None: ...

class Estimate(_message.Message):
    __slots__ = ("seconds", "missing")
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    seconds: float
    missing: int
    def __init__(self, seconds: _Optional[float] = ..., missing: _Optional[int] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("id", "name", "state", "target_key", "seed", "batch_size", "scheduler", "tasks", "created_at_ms", "updated_at_ms", "error", "claimed_by", "claims", "waiting", "estimate", "owner", "priority", "model", "group", "range", "cost_model")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_BY_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    COST_MODEL_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    state: JobState
    target_key: str
    seed: int
    batch_size: int
    scheduler: SchedulerKind
    tasks: _containers.RepeatedCompositeFieldContainer[TaskProgress]
    created_at_ms: int
    updated_at_ms: int
    error: str
    claimed_by: str
    claims: int
    waiting: str
    estimate: Estimate
    owner: str
    priority: int
    model: str
    group: str
    range: ShapeRangeRef
    cost_model: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., target_key: _Optional[str] = ..., seed: _Optional[int] = ..., batch_size: _Optional[int] = ..., scheduler: _Optional[_Union[SchedulerKind, str]] = ..., tasks: _Optional[_Iterable[_Union[TaskProgress, _Mapping]]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., error: _Optional[str] = ..., claimed_by: _Optional[str] = ..., claims: _Optional[int] = ..., waiting: _Optional[str] = ..., estimate: _Optional[_Union[Estimate, _Mapping]] = ..., owner: _Optional[str] = ..., priority: _Optional[int] = ..., model: _Optional[str] = ..., group: _Optional[str] = ..., range: _Optional[_Union[ShapeRangeRef, _Mapping]] = ..., cost_model: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("states", "limit", "group")
    STATES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[JobState]
    limit: int
    group: str
    def __init__(self, states: _Optional[_Iterable[_Union[JobState, str]]] = ..., limit: _Optional[int] = ..., group: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("job_id", "at_ms", "snapshot", "round", "new_best", "error", "done", "estimate", "candidate")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    NEW_BEST_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    at_ms: int
    snapshot: Job
    round: TaskProgress
    new_best: NewBest
    error: TaskError
    done: Job
    estimate: Estimate
    candidate: CandidateProgress
    def __init__(self, job_id: _Optional[str] = ..., at_ms: _Optional[int] = ..., snapshot: _Optional[_Union[Job, _Mapping]] = ..., round: _Optional[_Union[TaskProgress, _Mapping]] = ..., new_best: _Optional[_Union[NewBest, _Mapping]] = ..., error: _Optional[_Union[TaskError, _Mapping]] = ..., done: _Optional[_Union[Job, _Mapping]] = ..., estimate: _Optional[_Union[Estimate, _Mapping]] = ..., candidate: _Optional[_Union[CandidateProgress, _Mapping]] = ...) -> None: ...

class CandidateProgress(_message.Message):
    __slots__ = ("stage", "round_built", "round_size", "task_index", "task_done", "task_trials", "job_done", "job_trials", "ok", "noisy", "error", "trials_per_s", "eta_s")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ROUND_BUILT_FIELD_NUMBER: _ClassVar[int]
    ROUND_SIZE_FIELD_NUMBER: _ClassVar[int]
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    TASK_DONE_FIELD_NUMBER: _ClassVar[int]
    TASK_TRIALS_FIELD_NUMBER: _ClassVar[int]
    JOB_DONE_FIELD_NUMBER: _ClassVar[int]
    JOB_TRIALS_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRIALS_PER_S_FIELD_NUMBER: _ClassVar[int]
    ETA_S_FIELD_NUMBER: _ClassVar[int]
    stage: CandidateStage
    round_built: int
    round_size: int
    task_index: int
    task_done: int
    task_trials: int
    job_done: int
    job_trials: int
    ok: bool
    noisy: bool
    error: str
    trials_per_s: float
    eta_s: float
    def __init__(self, stage: _Optional[_Union[CandidateStage, str]] = ..., round_built: _Optional[int] = ..., round_size: _Optional[int] = ..., task_index: _Optional[int] = ..., task_done: _Optional[int] = ..., task_trials: _Optional[int] = ..., job_done: _Optional[int] = ..., job_trials: _Optional[int] = ..., ok: _Optional[bool] = ..., noisy: _Optional[bool] = ..., error: _Optional[str] = ..., trials_per_s: _Optional[float] = ..., eta_s: _Optional[float] = ...) -> None: ...

class NewBest(_message.Message):
    __slots__ = ("task_index", "record_id", "seconds", "gflops")
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    GFLOPS_FIELD_NUMBER: _ClassVar[int]
    task_index: int
    record_id: str
    seconds: float
    gflops: float
    def __init__(self, task_index: _Optional[int] = ..., record_id: _Optional[str] = ..., seconds: _Optional[float] = ..., gflops: _Optional[float] = ...) -> None: ...

class TaskError(_message.Message):
    __slots__ = ("task_index", "errors", "message")
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    task_index: int
    errors: int
    message: str
    def __init__(self, task_index: _Optional[int] = ..., errors: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class BuildModelRequest(_message.Message):
    __slots__ = ("model", "target", "name", "embed_weights", "compile")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EMBED_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    COMPILE_FIELD_NUMBER: _ClassVar[int]
    model: ModelSource
    target: str
    name: str
    embed_weights: bool
    compile: bool
    def __init__(self, model: _Optional[_Union[ModelSource, _Mapping]] = ..., target: _Optional[str] = ..., name: _Optional[str] = ..., embed_weights: _Optional[bool] = ..., compile: _Optional[bool] = ...) -> None: ...

class BuildModelPiece(_message.Message):
    __slots__ = ("file", "data", "summary")
    FILE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    file: str
    data: bytes
    summary: BuildModelSummary
    def __init__(self, file: _Optional[str] = ..., data: _Optional[bytes] = ..., summary: _Optional[_Union[BuildModelSummary, _Mapping]] = ...) -> None: ...

class BuildModelSummary(_message.Message):
    __slots__ = ("name", "tasks", "zero_shot_tasks", "checked_outputs", "manifest_json", "searched_tasks")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    ZERO_SHOT_TASKS_FIELD_NUMBER: _ClassVar[int]
    CHECKED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    SEARCHED_TASKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    tasks: int
    zero_shot_tasks: int
    checked_outputs: _containers.RepeatedScalarFieldContainer[str]
    manifest_json: str
    searched_tasks: int
    def __init__(self, name: _Optional[str] = ..., tasks: _Optional[int] = ..., zero_shot_tasks: _Optional[int] = ..., checked_outputs: _Optional[_Iterable[str]] = ..., manifest_json: _Optional[str] = ..., searched_tasks: _Optional[int] = ...) -> None: ...

class BestRequest(_message.Message):
    __slots__ = ("workload", "target", "with_source", "allow_transfer", "symbol_prefix", "omit_kernel", "measure_transfer")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WITH_SOURCE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_TRANSFER_FIELD_NUMBER: _ClassVar[int]
    SYMBOL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    OMIT_KERNEL_FIELD_NUMBER: _ClassVar[int]
    MEASURE_TRANSFER_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    target: str
    with_source: bool
    allow_transfer: bool
    symbol_prefix: str
    omit_kernel: bool
    measure_transfer: bool
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., target: _Optional[str] = ..., with_source: _Optional[bool] = ..., allow_transfer: _Optional[bool] = ..., symbol_prefix: _Optional[str] = ..., omit_kernel: _Optional[bool] = ..., measure_transfer: _Optional[bool] = ...) -> None: ...

class Kernel(_message.Message):
    __slots__ = ("symbol", "source", "header", "args", "cflags", "ldflags", "compiler", "compiler_version", "threads", "set_num_threads", "record_id", "workload_key", "target_key", "description", "gflops")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CFLAGS_FIELD_NUMBER: _ClassVar[int]
    LDFLAGS_FIELD_NUMBER: _ClassVar[int]
    COMPILER_FIELD_NUMBER: _ClassVar[int]
    COMPILER_VERSION_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    SET_NUM_THREADS_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GFLOPS_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    source: str
    header: str
    args: _containers.RepeatedCompositeFieldContainer[KernelArg]
    cflags: _containers.RepeatedScalarFieldContainer[str]
    ldflags: _containers.RepeatedScalarFieldContainer[str]
    compiler: str
    compiler_version: str
    threads: int
    set_num_threads: str
    record_id: str
    workload_key: str
    target_key: str
    description: str
    gflops: float
    def __init__(self, symbol: _Optional[str] = ..., source: _Optional[str] = ..., header: _Optional[str] = ..., args: _Optional[_Iterable[_Union[KernelArg, _Mapping]]] = ..., cflags: _Optional[_Iterable[str]] = ..., ldflags: _Optional[_Iterable[str]] = ..., compiler: _Optional[str] = ..., compiler_version: _Optional[str] = ..., threads: _Optional[int] = ..., set_num_threads: _Optional[str] = ..., record_id: _Optional[str] = ..., workload_key: _Optional[str] = ..., target_key: _Optional[str] = ..., description: _Optional[str] = ..., gflops: _Optional[float] = ...) -> None: ...

class KernelArg(_message.Message):
    __slots__ = ("name", "role", "dtype", "shape", "strides", "alignment", "pack_function", "packed_elements", "layout")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    STRIDES_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    PACK_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    PACKED_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    strides: _containers.RepeatedScalarFieldContainer[int]
    alignment: int
    pack_function: str
    packed_elements: int
    layout: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., strides: _Optional[_Iterable[int]] = ..., alignment: _Optional[int] = ..., pack_function: _Optional[str] = ..., packed_elements: _Optional[int] = ..., layout: _Optional[str] = ...) -> None: ...

class Transfer(_message.Message):
    __slots__ = ("source_record_id", "source_workload_key", "source_description", "distance", "predicted_seconds", "dropped", "ranked_by")
    SOURCE_RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    RANKED_BY_FIELD_NUMBER: _ClassVar[int]
    source_record_id: str
    source_workload_key: str
    source_description: str
    distance: float
    predicted_seconds: float
    dropped: _containers.RepeatedScalarFieldContainer[str]
    ranked_by: str
    def __init__(self, source_record_id: _Optional[str] = ..., source_workload_key: _Optional[str] = ..., source_description: _Optional[str] = ..., distance: _Optional[float] = ..., predicted_seconds: _Optional[float] = ..., dropped: _Optional[_Iterable[str]] = ..., ranked_by: _Optional[str] = ...) -> None: ...

class ScheduleRecord(_message.Message):
    __slots__ = ("record_id", "workload_key", "target_key", "steps_json", "seconds", "costs", "gflops", "worker", "created_at_ms", "noisy")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    STEPS_JSON_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    COSTS_FIELD_NUMBER: _ClassVar[int]
    GFLOPS_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    record_id: str
    workload_key: str
    target_key: str
    steps_json: str
    seconds: float
    costs: _containers.RepeatedScalarFieldContainer[float]
    gflops: float
    worker: str
    created_at_ms: int
    noisy: bool
    def __init__(self, record_id: _Optional[str] = ..., workload_key: _Optional[str] = ..., target_key: _Optional[str] = ..., steps_json: _Optional[str] = ..., seconds: _Optional[float] = ..., costs: _Optional[_Iterable[float]] = ..., gflops: _Optional[float] = ..., worker: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., noisy: _Optional[bool] = ...) -> None: ...

class BestResponse(_message.Message):
    __slots__ = ("found", "record", "description", "options", "flops", "source", "records_total", "records_ok", "transfer", "kernel", "range")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RECORDS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RECORDS_OK_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    found: bool
    record: ScheduleRecord
    description: str
    options: WorkloadOptions
    flops: int
    source: str
    records_total: int
    records_ok: int
    transfer: Transfer
    kernel: Kernel
    range: ShapeRangeRef
    def __init__(self, found: _Optional[bool] = ..., record: _Optional[_Union[ScheduleRecord, _Mapping]] = ..., description: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., flops: _Optional[int] = ..., source: _Optional[str] = ..., records_total: _Optional[int] = ..., records_ok: _Optional[int] = ..., transfer: _Optional[_Union[Transfer, _Mapping]] = ..., kernel: _Optional[_Union[Kernel, _Mapping]] = ..., range: _Optional[_Union[ShapeRangeRef, _Mapping]] = ...) -> None: ...

class BestBatchRequest(_message.Message):
    __slots__ = ("workloads", "target", "with_source", "allow_transfer", "symbol_prefix", "omit_kernel")
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WITH_SOURCE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_TRANSFER_FIELD_NUMBER: _ClassVar[int]
    SYMBOL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    OMIT_KERNEL_FIELD_NUMBER: _ClassVar[int]
    workloads: _containers.RepeatedCompositeFieldContainer[Workload]
    target: str
    with_source: bool
    allow_transfer: bool
    symbol_prefix: str
    omit_kernel: bool
    def __init__(self, workloads: _Optional[_Iterable[_Union[Workload, _Mapping]]] = ..., target: _Optional[str] = ..., with_source: _Optional[bool] = ..., allow_transfer: _Optional[bool] = ..., symbol_prefix: _Optional[str] = ..., omit_kernel: _Optional[bool] = ...) -> None: ...

class BestBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BestResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[BestResponse, _Mapping]]] = ...) -> None: ...

class TopKRequest(_message.Message):
    __slots__ = ("workload", "target", "k", "symbol_prefix", "omit_kernel")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    SYMBOL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    OMIT_KERNEL_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    target: str
    k: int
    symbol_prefix: str
    omit_kernel: bool
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., target: _Optional[str] = ..., k: _Optional[int] = ..., symbol_prefix: _Optional[str] = ..., omit_kernel: _Optional[bool] = ...) -> None: ...

class TopKResponse(_message.Message):
    __slots__ = ("records", "kernels")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[ScheduleRecord]
    kernels: _containers.RepeatedCompositeFieldContainer[Kernel]
    def __init__(self, records: _Optional[_Iterable[_Union[ScheduleRecord, _Mapping]]] = ..., kernels: _Optional[_Iterable[_Union[Kernel, _Mapping]]] = ...) -> None: ...

class PackRequest(_message.Message):
    __slots__ = ("workloads", "target", "name", "symbol_prefix")
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SYMBOL_PREFIX_FIELD_NUMBER: _ClassVar[int]
    workloads: _containers.RepeatedCompositeFieldContainer[Workload]
    target: str
    name: str
    symbol_prefix: str
    def __init__(self, workloads: _Optional[_Iterable[_Union[Workload, _Mapping]]] = ..., target: _Optional[str] = ..., name: _Optional[str] = ..., symbol_prefix: _Optional[str] = ...) -> None: ...

class PackResponse(_message.Message):
    __slots__ = ("name", "source", "header", "manifest_json", "kernels")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: str
    header: str
    manifest_json: str
    kernels: _containers.RepeatedCompositeFieldContainer[Kernel]
    def __init__(self, name: _Optional[str] = ..., source: _Optional[str] = ..., header: _Optional[str] = ..., manifest_json: _Optional[str] = ..., kernels: _Optional[_Iterable[_Union[Kernel, _Mapping]]] = ...) -> None: ...

class RangeRequest(_message.Message):
    __slots__ = ("spec", "options", "target")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    spec: str
    options: WorkloadOptions
    target: str
    def __init__(self, spec: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., target: _Optional[str] = ...) -> None: ...

class RangeInterval(_message.Message):
    __slots__ = ("extent", "lo", "hi")
    EXTENT_FIELD_NUMBER: _ClassVar[int]
    LO_FIELD_NUMBER: _ClassVar[int]
    HI_FIELD_NUMBER: _ClassVar[int]
    extent: str
    lo: int
    hi: int
    def __init__(self, extent: _Optional[str] = ..., lo: _Optional[int] = ..., hi: _Optional[int] = ...) -> None: ...

class RangeEntry(_message.Message):
    __slots__ = ("intervals", "values", "workload_key", "description", "record_id", "seconds", "gflops", "records_total")
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    GFLOPS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    intervals: _containers.RepeatedCompositeFieldContainer[RangeInterval]
    values: _containers.RepeatedScalarFieldContainer[int]
    workload_key: str
    description: str
    record_id: str
    seconds: float
    gflops: float
    records_total: int
    def __init__(self, intervals: _Optional[_Iterable[_Union[RangeInterval, _Mapping]]] = ..., values: _Optional[_Iterable[int]] = ..., workload_key: _Optional[str] = ..., description: _Optional[str] = ..., record_id: _Optional[str] = ..., seconds: _Optional[float] = ..., gflops: _Optional[float] = ..., records_total: _Optional[int] = ...) -> None: ...

class RangeResponse(_message.Message):
    __slots__ = ("range", "target_key", "options", "entries", "job_ids")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    range: ShapeRangeRef
    target_key: str
    options: WorkloadOptions
    entries: _containers.RepeatedCompositeFieldContainer[RangeEntry]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, range: _Optional[_Union[ShapeRangeRef, _Mapping]] = ..., target_key: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[RangeEntry, _Mapping]]] = ..., job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListTunedRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TunedWorkload(_message.Message):
    __slots__ = ("workload_key", "description", "options", "target_key", "trials", "ok", "best_gflops", "noisy")
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    BEST_GFLOPS_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    workload_key: str
    description: str
    options: WorkloadOptions
    target_key: str
    trials: int
    ok: int
    best_gflops: float
    noisy: int
    def __init__(self, workload_key: _Optional[str] = ..., description: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., target_key: _Optional[str] = ..., trials: _Optional[int] = ..., ok: _Optional[int] = ..., best_gflops: _Optional[float] = ..., noisy: _Optional[int] = ...) -> None: ...

class TargetInfo(_message.Message):
    __slots__ = ("key", "target_json", "trials")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_JSON_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    key: str
    target_json: str
    trials: int
    def __init__(self, key: _Optional[str] = ..., target_json: _Optional[str] = ..., trials: _Optional[int] = ...) -> None: ...

class ListTunedResponse(_message.Message):
    __slots__ = ("targets", "workloads")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[TargetInfo]
    workloads: _containers.RepeatedCompositeFieldContainer[TunedWorkload]
    def __init__(self, targets: _Optional[_Iterable[_Union[TargetInfo, _Mapping]]] = ..., workloads: _Optional[_Iterable[_Union[TunedWorkload, _Mapping]]] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("workload_key", "target_key")
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    workload_key: str
    target_key: str
    def __init__(self, workload_key: _Optional[str] = ..., target_key: _Optional[str] = ...) -> None: ...

class RecordLines(_message.Message):
    __slots__ = ("lines",)
    LINES_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lines: _Optional[_Iterable[str]] = ...) -> None: ...

class ImportResponse(_message.Message):
    __slots__ = ("records_new", "records_known", "workloads", "targets")
    RECORDS_NEW_FIELD_NUMBER: _ClassVar[int]
    RECORDS_KNOWN_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    records_new: int
    records_known: int
    workloads: int
    targets: int
    def __init__(self, records_new: _Optional[int] = ..., records_known: _Optional[int] = ..., workloads: _Optional[int] = ..., targets: _Optional[int] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("device_id", "target_json")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_JSON_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    target_json: str
    def __init__(self, device_id: _Optional[str] = ..., target_json: _Optional[str] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ("worker_id", "target_key", "heartbeat_ms", "redirect")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    target_key: str
    heartbeat_ms: int
    redirect: str
    def __init__(self, worker_id: _Optional[str] = ..., target_key: _Optional[str] = ..., heartbeat_ms: _Optional[int] = ..., redirect: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_id", "lease_id")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    lease_id: str
    def __init__(self, worker_id: _Optional[str] = ..., lease_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_lost", "redirect")
    LEASE_LOST_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    lease_lost: bool
    redirect: str
    def __init__(self, lease_lost: _Optional[bool] = ..., redirect: _Optional[str] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("worker_id", "wait_ms")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    wait_ms: int
    def __init__(self, worker_id: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class WorkPiece(_message.Message):
    __slots__ = ("lease_id", "workload_key", "dag_json", "description", "options", "steps_json", "options_json", "job_id")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_KEY_FIELD_NUMBER: _ClassVar[int]
    DAG_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    STEPS_JSON_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    workload_key: str
    dag_json: str
    description: str
    options: WorkloadOptions
    steps_json: _containers.RepeatedScalarFieldContainer[str]
    options_json: str
    job_id: str
    def __init__(self, lease_id: _Optional[str] = ..., workload_key: _Optional[str] = ..., dag_json: _Optional[str] = ..., description: _Optional[str] = ..., options: _Optional[_Union[WorkloadOptions, _Mapping]] = ..., steps_json: _Optional[_Iterable[str]] = ..., options_json: _Optional[str] = ..., job_id: _Optional[str] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("piece",)
    PIECE_FIELD_NUMBER: _ClassVar[int]
    piece: WorkPiece
    def __init__(self, piece: _Optional[_Union[WorkPiece, _Mapping]] = ...) -> None: ...

class MeasuredCandidate(_message.Message):
    __slots__ = ("costs", "error_code", "error_msg", "build_s", "run_s", "noisy")
    COSTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MSG_FIELD_NUMBER: _ClassVar[int]
    BUILD_S_FIELD_NUMBER: _ClassVar[int]
    RUN_S_FIELD_NUMBER: _ClassVar[int]
    NOISY_FIELD_NUMBER: _ClassVar[int]
    costs: _containers.RepeatedScalarFieldContainer[float]
    error_code: int
    error_msg: str
    build_s: float
    run_s: float
    noisy: bool
    def __init__(self, costs: _Optional[_Iterable[float]] = ..., error_code: _Optional[int] = ..., error_msg: _Optional[str] = ..., build_s: _Optional[float] = ..., run_s: _Optional[float] = ..., noisy: _Optional[bool] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ("worker_id", "lease_id", "results", "handed_back")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    HANDED_BACK_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    lease_id: str
    results: _containers.RepeatedCompositeFieldContainer[MeasuredCandidate]
    handed_back: bool
    def __init__(self, worker_id: _Optional[str] = ..., lease_id: _Optional[str] = ..., results: _Optional[_Iterable[_Union[MeasuredCandidate, _Mapping]]] = ..., handed_back: _Optional[bool] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    def __init__(self, accepted: _Optional[bool] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("id", "device_id", "target_key", "status", "last_heartbeat_ms", "measured", "errors", "quarantine_reason", "target_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    QUARANTINE_REASON_FIELD_NUMBER: _ClassVar[int]
    TARGET_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    device_id: str
    target_key: str
    status: str
    last_heartbeat_ms: int
    measured: int
    errors: int
    quarantine_reason: str
    target_json: str
    def __init__(self, id: _Optional[str] = ..., device_id: _Optional[str] = ..., target_key: _Optional[str] = ..., status: _Optional[str] = ..., last_heartbeat_ms: _Optional[int] = ..., measured: _Optional[int] = ..., errors: _Optional[int] = ..., quarantine_reason: _Optional[str] = ..., target_json: _Optional[str] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers", "queued", "targets")
    class QueuedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TargetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    queued: _containers.ScalarMap[str, int]
    targets: _containers.ScalarMap[str, str]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ..., queued: _Optional[_Mapping[str, int]] = ..., targets: _Optional[_Mapping[str, str]] = ...) -> None: ...
