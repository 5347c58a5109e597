"""Choosing and building the tf.distribute strategy, and handing it the input pipeline.

one_device, mirrored (several local devices), multi_worker (MultiWorkerMirroredStrategy,
TF_CONFIG) and parameter_server (ParameterServerStrategy with a ClusterCoordinator in this
process; ps and worker tasks run `tfperf cluster-server`). The global batch is the
per-replica batch times the replicas; every strategy reads its data through
`distribute_datasets_from_function`, so each input pipeline reads its own shards.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.util.format import quoted
from tfperf.util.yaml_load import load_yaml

KINDS = ("one_device", "mirrored", "multi_worker", "parameter_server")


class ClusterError(UserError):
    """A cluster file or TF_CONFIG that cannot describe a cluster."""


@dataclass
class StrategyInfo:
    strategy: Any  # tf.distribute.Strategy
    kind: str
    replicas: int
    is_chief: bool = True
    task_type: str | None = None
    task_id: int = 0
    coordinator: Any = None  # ClusterCoordinator for parameter_server

    def describe(self) -> str:
        where = f" ({self.task_type} {self.task_id})" if self.task_type else ""
        return f"{self.kind}, {self.replicas} replica(s){where}"


def load_cluster(path: str | Path) -> dict[str, list[str]]:
    """Reads cluster.yaml: {job: [host:port, ...]} with jobs among chief, worker, ps."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise ClusterError(f"{p}: no such cluster file")
    try:
        data = load_yaml(p.read_text(), str(p))
    except yaml.YAMLError as exc:
        raise ClusterError(f"{p}: not valid YAML: {exc}") from None
    return validate_cluster(data, str(p))


def validate_cluster(data: Any, origin: str) -> dict[str, list[str]]:
    if not isinstance(data, dict) or not data:
        found = type(data).__name__
        raise ClusterError(
            f"{origin}: expected a mapping of jobs to host:port lists, found {found}"
        )
    out: dict[str, list[str]] = {}
    for job, addrs in data.items():
        if job not in ("chief", "worker", "ps", "evaluator"):
            raise ClusterError(f"{origin}: job '{job}': expected chief, worker, ps or evaluator")
        if isinstance(addrs, str):
            addrs = [addrs]
        if not isinstance(addrs, list) or not all(isinstance(a, str) and ":" in a for a in addrs):
            raise ClusterError(
                f"{origin}: job '{job}': expected a list of host:port, found {quoted(addrs)}"
            )
        out[job] = list(addrs)
    return out


def tf_config() -> dict[str, Any] | None:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ClusterError(f"TF_CONFIG: not valid JSON: {exc}") from None
    if "cluster" not in data:
        raise ClusterError("TF_CONFIG: expected a 'cluster' key")
    return data


def _kind_from_tf_config() -> str | None:
    """`auto`'s choice from TF_CONFIG alone (no TensorFlow): a cluster kind, or None."""
    conf = tf_config()
    if conf:
        cluster = conf["cluster"]
        if cluster.get("ps"):
            return "parameter_server"
        if len(cluster.get("worker", [])) + len(cluster.get("chief", [])) > 1:
            return "multi_worker"
    return None


def _kind_without_tensorflow(requested: str) -> str | None:
    """The strategy kind as far as it is known without TensorFlow: the one named, else
    `auto`'s choice from TF_CONFIG; None when only the devices can tell."""
    return requested if requested != "auto" else _kind_from_tf_config()


def resolve_kind(requested: str) -> str:
    """`auto`: TF_CONFIG with ps -> parameter_server, several workers -> multi_worker,
    several GPUs -> mirrored, else one_device."""
    kind = _kind_without_tensorflow(requested)
    if kind:
        return kind
    import tensorflow as tf

    return "mirrored" if len(tf.config.list_physical_devices("GPU")) > 1 else "one_device"


def ensure_cpu_devices(n: int) -> None:
    """Splits the CPU into n logical devices (for mirrored on a CPU-only machine).

    Must run before TensorFlow initializes its devices; afterwards it is a no-op if enough
    logical CPUs already exist, else an error that says so.
    """
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    # Listing *logical* devices would start the runtime: configure first, check after.
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    except RuntimeError as exc:
        if len(tf.config.list_logical_devices("CPU")) >= n:
            return
        raise UserError(
            f"train.devices={n}: cannot split the CPU into {n} devices after TensorFlow "
            f"started ({exc}); run in a fresh process"
        ) from None


def make_strategy(cfg: RunConfig) -> StrategyInfo:
    """Builds the strategy named by cfg.train.strategy (and train.devices / train.cluster)."""
    import tensorflow as tf

    kind = resolve_kind(cfg.train.strategy)
    if kind == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return StrategyInfo(tf.distribute.OneDeviceStrategy(gpus[0].name), kind, 1)
        # On a CPU the default strategy is one device with no distribution overhead.
        return StrategyInfo(tf.distribute.get_strategy(), kind, 1)
    if kind == "mirrored":
        if tf.config.list_physical_devices("GPU"):
            gpus = tf.config.list_logical_devices("GPU")
            devices = [d.name for d in gpus[: cfg.train.devices or len(gpus)]]
        else:
            n = cfg.train.devices or 2
            ensure_cpu_devices(n)
            devices = [d.name for d in tf.config.list_logical_devices("CPU")[:n]]
        # On CPU, NCCL is unavailable: reduce with plain copies.
        on_gpu = "GPU" in devices[0].upper()
        cross = None if on_gpu else tf.distribute.ReductionToOneDevice()
        strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=cross)
        return StrategyInfo(strategy, kind, strategy.num_replicas_in_sync)
    if kind in ("multi_worker", "parameter_server"):
        _warn_if_unbound(cfg)
        _check_shared_job(cfg, kind)
    if kind == "multi_worker":
        conf = tf_config()
        if conf is None:
            raise ClusterError(
                "train.strategy=multi_worker: set TF_CONFIG on every worker "
                '({"cluster": {"worker": [...]}, "task": {"type": "worker", "index": i}})'
            )
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        task = conf.get("task", {})
        ttype, tid = task.get("type", "worker"), int(task.get("index", 0))
        has_chief = bool(conf["cluster"].get("chief"))
        chief = ttype == "chief" or (not has_chief and ttype == "worker" and tid == 0)
        return StrategyInfo(strategy, kind, strategy.num_replicas_in_sync, chief, ttype, tid)
    if kind == "parameter_server":
        return _parameter_server(cfg)
    raise UserError(f"train.strategy: expected auto or one of {list(KINDS)}, found '{kind}'")


def _check_shared_job(cfg: RunConfig, kind: str) -> None:
    """Before any cluster connection: the tasks that read the input (multi_worker's workers,
    parameter_server's worker tasks) must share one tf.data service job. parameter_server
    gives each worker task an input context of its own (1 of 1), so the check in the
    dataset function cannot see that there are several."""
    from tfperf.inputs.service import require_job_name

    if not cfg.pipeline.service.on:
        return
    if kind == "multi_worker":
        conf = tf_config()
        cluster = validate_cluster(conf["cluster"], "TF_CONFIG") if conf else {}
        readers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
        what = "multi_worker tasks (TF_CONFIG)"
    else:
        cluster, origin = _ps_cluster(cfg)
        readers, what = len(cluster.get("worker", [])), f"parameter_server worker tasks ({origin})"
    require_job_name(cfg.pipeline.service, readers, what)


def _ps_cluster(cfg: RunConfig) -> tuple[dict[str, list[str]], str]:
    """parameter_server's cluster (from train.cluster, else TF_CONFIG) and where it is from."""
    if cfg.train.cluster:
        path = cfg.resolve(cfg.train.cluster) or cfg.train.cluster
        return load_cluster(path), str(path)
    conf = tf_config()
    if conf is None:
        raise ClusterError(
            "train.strategy=parameter_server: set train.cluster to a cluster.yaml "
            "({chief: [host:port], worker: [...], ps: [...]}) or TF_CONFIG"
        )
    return validate_cluster(conf["cluster"], "TF_CONFIG"), "TF_CONFIG"


def own_server_address(cfg: RunConfig) -> tuple[str, str] | None:
    """("host:port", where it is named) of the TensorFlow server this training process starts
    (its TF_CONFIG task under multi_worker, the chief under parameter_server), read without
    TensorFlow; None when it starts none (or the cluster is left for make_strategy to refuse)."""
    kind: str | None = cfg.train.strategy
    if kind == "auto":
        kind = _kind_from_tf_config()
    if kind == "multi_worker":
        conf = tf_config()
        task = (conf or {}).get("task", {})
        ttype, tid = task.get("type", "worker"), int(task.get("index", 0))
        addrs = validate_cluster(conf["cluster"], "TF_CONFIG").get(ttype, []) if conf else []
        return (addrs[tid], f"TF_CONFIG's {ttype} {tid}") if tid < len(addrs) else None
    if kind == "parameter_server":
        cluster, origin = _ps_cluster(cfg)
        chief = cluster.get("chief") or []
        return (chief[0], f"{origin}'s chief") if chief else None
    return None


def check_shared_job(cfg: RunConfig) -> None:
    """A cluster run whose input tasks would not share one tf.data service job is refused
    here, before TensorFlow's import and the bind re-exec (seconds a refusal need not cost);
    make_strategy checks again for the library's callers."""
    kind = _kind_without_tensorflow(cfg.train.strategy)
    if kind in ("multi_worker", "parameter_server"):
        _check_shared_job(cfg, kind)


def bind_own_server(cfg: RunConfig) -> None:
    """Makes the TensorFlow server this process will start (own_server_address) listen only
    on the host its address names, not on every interface as TensorFlow's own does: it
    re-executes the process under util/bind's shim, so call it before TensorFlow is imported.
    Warns on stderr when other hosts can reach that address (0.0.0.0, another interface)."""
    from tfperf.util.bind import ensure_bound, is_wildcard, resolve
    from tfperf.util.net import exposure_warning
    from tfperf.util.progress import stderr_console

    named = own_server_address(cfg)
    if named is None:
        return
    address, origin = named
    host, _, port = address.rpartition(":")
    try:
        ensure_bound(host)
    except UserError as exc:
        raise ClusterError(f"{origin} names {address}: {exc}") from None
    ip = "*" if is_wildcard(host) else resolve(host)
    if ip == "*" or not ipaddress.ip_address(ip).is_loopback:
        text = exposure_warning(f"{ip}:{port}", port, f"{origin} names {address}")
        stderr_console().print(text, markup=False, highlight=False, soft_wrap=True)


def _warn_if_unbound(cfg: RunConfig) -> None:
    """A caller that skipped bind_own_server (the library, not `tfperf train`) gets
    TensorFlow's server on every interface: said, with the remedy."""
    from tfperf.util.bind import active_host, is_wildcard
    from tfperf.util.progress import stderr_console

    named = own_server_address(cfg)
    if named is None or is_wildcard(named[0].rpartition(":")[0]) or active_host():
        return
    stderr_console().print(
        f"warning: {named[1]} names {named[0]}, but this process's TensorFlow server will "
        "listen on every interface, with no authentication: call "
        "tfperf.train.strategy.bind_own_server(cfg) before TensorFlow is imported (as "
        "`tfperf train` does)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _parameter_server(cfg: RunConfig) -> StrategyInfo:
    import tensorflow as tf

    cluster, _ = _ps_cluster(cfg)
    for job in ("worker", "ps"):
        if not cluster.get(job):
            raise ClusterError(f"train.cluster: parameter_server needs at least one '{job}'")
    if not cluster.get("chief"):
        raise ClusterError("train.cluster: parameter_server needs a 'chief' (this coordinator)")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    return StrategyInfo(
        strategy, "parameter_server", strategy.num_replicas_in_sync, True, "chief", 0, coordinator
    )


def distribute_input(
    info: StrategyInfo, dataset_fn: Callable[[Any], Any], *, checkpointable: bool = False
) -> Any:
    """The distributed dataset (or per-worker dataset under parameter_server).

    checkpointable=True under mirrored gives each replica its own pipeline (reading its
    own shards) and a plain tf.data iterator: TensorFlow cannot save the default
    multi-device iterator (tensorflow#56372), but it can save these. On GPUs this gives
    up prefetching to the device; train.checkpoint_input=false restores it.
    """
    import tensorflow as tf

    if checkpointable and info.kind == "mirrored":
        options = tf.distribute.InputOptions(
            experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
            experimental_fetch_to_device=False,
        )
        return info.strategy.distribute_datasets_from_function(dataset_fn, options=options)
    if info.coordinator is not None:
        # Each worker builds its own pipeline (the function runs on the workers), through
        # distribute_datasets_from_function so that it gets its input context. Not converted
        # by AutoGraph (nothing in it needs to be): AutoGraph would wrap a UserError raised
        # while the pipeline is built (e.g. pipeline.service's checks) in a StagingError.
        @tf.autograph.experimental.do_not_convert
        def per_worker() -> Any:
            return info.strategy.distribute_datasets_from_function(dataset_fn)

        return info.coordinator.create_per_worker_dataset(per_worker)
    return info.strategy.distribute_datasets_from_function(dataset_fn)


def checkpointable_iterator(iterator: Any) -> Any:
    """What a tf.train.Checkpoint can save of `iterator`, or None.

    A tf.data iterator saves itself; a distributed iterator built with
    `distribute_input(..., checkpointable=True)` holds one tf.data iterator per replica
    (private attributes, checked here, so a TF change means "not saved", never a crash).
    """
    import tensorflow as tf

    trackable = tf.__internal__.tracking.Trackable
    if isinstance(iterator, trackable):
        return iterator
    inner = [getattr(w, "_iterator", None) for w in getattr(iterator, "_iterators", None) or []]
    if inner and all(isinstance(i, tf.data.Iterator) and isinstance(i, trackable) for i in inner):
        holder = tf.Module()
        holder.replicas = inner  # tracked as a list: saved and restored in order
        return holder
    return None
