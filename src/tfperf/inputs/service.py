"""`pipeline.service`: a run file's pipeline moved onto tf.data service workers. The stages up
to the final prefetch are sent to the dispatcher (`tf.data.experimental.service.distribute`)
and run on its workers; this process keeps only the prefetch. Before that, the dispatcher is
asked for its workers within pipeline.service.timeout: TensorFlow itself retries an
unreachable dispatcher for an hour.

distributed_epoch (ShardingPolicy.DYNAMIC) splits by shard file: the file list is the first
source, so the dispatcher hands out whole files (per-element splits measured 7-10x slower)
and each example is read once per epoch. The file order is shuffled once here (the
dispatcher walks it again each epoch) and records are shuffled on each worker, after the
split: a worker's shuffle of the file list would take every file for itself. In training
each epoch is one iteration of the job, repeated here (not on the workers), so that the
examples each epoch delivered can be counted (epoch_count.py): the service delivers at most
once when a worker dies. Several trainer tasks (multi_worker, parameter_server) share one job
by pipeline.service.job_name instead of sharding by their input context.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from tfperf.config import PipelineConfig, RunConfig
from tfperf.config_service import ServiceConfig
from tfperf.errors import UserError
from tfperf.inputs.epoch_count import EpochCounter

if TYPE_CHECKING:
    import tensorflow as tf

_GET_WORKERS = "/tensorflow.data.DispatcherService/GetWorkers"
_workers_seen: dict[str, int] = {}  # dispatcher HOST:PORT -> workers, once it has answered


class ServiceError(UserError):
    """The tf.data service named by pipeline.service cannot serve the pipeline."""


def registered_workers(target: str, timeout: float) -> int:
    """Workers registered with the dispatcher at `target` (HOST:PORT); raises grpc.RpcError
    (DEADLINE_EXCEEDED when nothing answers within `timeout` seconds)."""
    import grpc
    from google.protobuf import empty_pb2, unknown_fields

    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(
            _GET_WORKERS,
            request_serializer=lambda _: b"",  # GetWorkersRequest has no fields
            response_deserializer=empty_pb2.Empty.FromString,
        )
        reply = call(None, timeout=timeout, wait_for_ready=True)
    # GetWorkersResponse repeats field 1 once per worker; counted without TF's private protos.
    return sum(1 for f in unknown_fields.UnknownFieldSet(reply) if f.field_number == 1)


def wait_for_service(cfg: RunConfig) -> int:
    """The number of workers of pipeline.service's dispatcher, waiting up to its timeout
    for the dispatcher to answer and a worker to register; a ServiceError otherwise."""
    import grpc

    svc = cfg.pipeline.service
    if _workers_seen.get(svc.target):
        return _workers_seen[svc.target]
    where = f"pipeline.service in {cfg.origin('pipeline.service.address')}"
    deadline = time.monotonic() + svc.timeout
    answered = False
    while True:
        try:
            workers = registered_workers(svc.target, max(0.1, deadline - time.monotonic()))
            answered = True
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise ServiceError(
                    f"{where}: {svc.address} answers gRPC but is not a tf.data dispatcher "
                    f"({exc.details()}); expected the address `tfperf data-service "
                    "dispatcher` or `local` printed"
                ) from None
            workers = 0
        if workers:
            _workers_seen[svc.target] = workers
            return workers
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)  # workers register within a second or two of starting
    if not answered:
        raise ServiceError(
            f"{where}: no tf.data dispatcher answered at {svc.address} within "
            f"{svc.timeout:g} s (pipeline.service.timeout); start one (`tfperf data-service "
            "local --workers 2` prints its address), fix pipeline.service.address, or set "
            "pipeline.service.mode: off"
        )
    raise ServiceError(
        f"{where}: the dispatcher at {svc.address} has no worker after {svc.timeout:g} s "
        f"(pipeline.service.timeout); start one with `tfperf data-service worker "
        f"--dispatcher {svc.target}`"
    )


def service_applies(cfg: RunConfig, stop_after: str | None) -> bool:
    """Whether this dataset goes through the service: only the whole pipeline (bench's and
    the doctor's stage prefixes run in this process)."""
    return cfg.pipeline.service.on and stop_after in (None, "prefetch")


def check_sharing(svc: ServiceConfig, input_context: Any, training: bool) -> None:
    """Several trainer processes must share one job: without job_name each would read it all."""
    pipelines = getattr(input_context, "num_input_pipelines", 1)
    if training:
        require_job_name(svc, pipelines, "trainer processes")


def require_job_name(svc: ServiceConfig, readers: int, what: str) -> None:
    """A ServiceError when `readers` (> 1) trainer tasks (`what`) would read the service
    without a shared pipeline.service.job_name."""
    if svc.on and readers > 1 and not svc.job_name:
        raise ServiceError(
            f"pipeline.service.job_name: {readers} {what} read the tf.data service and the "
            "service replaces their per-worker sharding, so they must share one job: set "
            "pipeline.service.job_name to a name unique to this training run (without it each "
            "process would read the whole dataset)"
        )


def distributed_options(
    cfg: RunConfig, files: list[str], opts: PipelineConfig, *, training: bool
) -> tuple[list[str], PipelineConfig]:
    """The file order and pipeline options for a DYNAMIC (file-split) job: the file list is
    shuffled once here instead of on the workers, and each worker's interleave opens no more
    than its share of the files (a cycle over all of them would take every file at once)."""
    files = list(files)
    if training and opts.shuffle_files:
        random.Random(opts.seed).shuffle(files)
    cycle = opts.interleave_cycle
    if cycle == "auto":
        cycle = max(1, min(16, len(files) // wait_for_service(cfg)))
    # Training repeats here, one job iteration per epoch (to_service's `one_epoch`).
    update = {"shuffle_files": False, "interleave_cycle": cycle, "repeat": not training}
    return files, opts.model_copy(update=update)


def _refuse_python(ds: tf.data.Dataset, cfg: RunConfig) -> None:
    """A pipeline that calls Python cannot run on the workers: they get its graph only."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.data.ops.options import ExternalStatePolicy

    if tf.executing_eagerly():
        raw = ds._as_serialized_graph(external_state_policy=ExternalStatePolicy.IGNORE)
        graph = graph_pb2.GraphDef.FromString(raw.numpy())
    else:
        # Built inside a function (parameter_server: each worker's dataset function): the
        # graph being traced holds the pipeline's ops and its functions.
        graph = tf.compat.v1.get_default_graph().as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    python = sorted(ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"})
    if python:
        what = f"data.pipeline {cfg.data.pipeline}" if cfg.data.pipeline else "the pipeline"
        raise ServiceError(
            f"pipeline.service.mode '{cfg.pipeline.service.mode}': {what} calls Python "
            f"({python[0]}: tf.py_function, tf.numpy_function or Dataset.from_generator), "
            "which tf.data service workers cannot run (they receive the graph, not the "
            "Python); do that work with TensorFlow ops or offline (`tfperf convert`), or set "
            "pipeline.service.mode: off"
        )


def _policy(svc: ServiceConfig, training: bool) -> Any:
    import tensorflow as tf

    policy = tf.data.experimental.service.ShardingPolicy
    # Evaluation reads each example once, whatever training does.
    return policy.OFF if training and svc.mode == "parallel_epochs" else policy.DYNAMIC


def to_service(
    ds: tf.data.Dataset,
    cfg: RunConfig,
    *,
    training: bool,
    batch: int,
    one_epoch: bool = False,
    counter: EpochCounter | None = None,
) -> tf.data.Dataset:
    """`ds` (every stage but the final prefetch) run on the service's workers. With
    `one_epoch` (distributed_epoch training: `ds` is one epoch, its last batch partial),
    the epochs are repeated and rebatched here, each counted by `counter` when given."""
    import tensorflow as tf

    svc = cfg.pipeline.service
    _refuse_python(ds, cfg)
    wait_for_service(cfg)
    if svc.remote == "preprocess":
        ds = ds.unbatch()  # the workers send single examples, batched below
    ds = ds.apply(
        tf.data.experimental.service.distribute(
            processing_mode=_policy(svc, training),
            service=svc.address,
            # Evaluation's job is its own: a trainer's shared job must not be joined by it.
            job_name=svc.job_name if training else None,
        )
    )
    if one_epoch:
        counted = counter.counted(ds, batched=svc.remote == "all") if counter else None
        ds = ds if counted is None else counted
        if cfg.pipeline.repeat:  # pipeline.repeat: false reads one epoch (it would hang)
            ds = ds.repeat()
        if svc.remote == "all":  # an epoch's partial last batch joins the next epoch's
            return ds.rebatch(batch, drop_remainder=True)
    if svc.remote == "preprocess":
        ds = ds.batch(batch, drop_remainder=training)
    return ds


def user_pipeline_to_service(
    ds: tf.data.Dataset, cfg: RunConfig, *, training: bool, spec: str
) -> tf.data.Dataset:
    """A data.pipeline function's dataset (or a workload's original pipeline) on the service:
    its final prefetch (and the options above it) stay here, the rest runs on the workers."""
    import tensorflow as tf

    if cfg.pipeline.service.remote == "preprocess":
        raise ServiceError(
            f"pipeline.service.remote: 'preprocess' needs tfperf's own pipeline, but {spec} "
            "returns finished batches that tfperf cannot split; set pipeline.service.remote: "
            "all (its batches are then made on the workers)"
        )
    options = ds.options()
    inner = ds
    while type(inner).__name__ == "_OptionsDataset":
        inner = inner._input_dataset
    if type(inner).__name__ == "_PrefetchDataset":
        inner = inner._input_dataset
    remote = to_service(inner, cfg, training=training, batch=0)
    return remote.prefetch(tf.data.AUTOTUNE).with_options(options)
