"""The run file: typed sections, loading from YAML, `--set a.b=c` overrides and validation
with errors that name the field's path, what was expected and what was found (worded by
config_errors.py; `pipeline.service` is config_service.py's).

Every command takes one run file. Each key's description says what it means and where its
default comes from; `tfperf config` lists them all from these models.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from tfperf.config_errors import format_errors, given_by
from tfperf.config_service import RESUME_WITH_SERVICE, ServiceConfig
from tfperf.errors import UserError
from tfperf.util.format import cut, quoted
from tfperf.util.yaml_load import YamlBombError, load_yaml

# The built-in workloads' names (tfperf/workloads registers one class for each): named here,
# below the workloads, so that validating a run file never imports them.
WORKLOAD_NAMES = frozenset({"chess", "regression", "deblur", "distance_maps"})

Auto = Literal["auto"]


class ConfigError(UserError):
    """A run file or override that cannot be used; the message says where and why."""


class _Section(BaseModel):
    # Unknown keys are mistakes (a typo would otherwise be silently ignored).
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(_Section):
    dir: str | None = Field(
        None,
        description="folder holding manifest.json and the shards from `tfperf convert`; "
        "default for a workload: runs/<workload>/data",
    )
    train_split: str = Field("train", description="split that training reads")
    eval_split: str = Field("eval", description="split that evaluation reads")
    pipeline: str | None = Field(
        None,
        description="'module:function' returning a tf.data.Dataset of (features, labels) "
        "batches; replaces tfperf's pipeline (it may take training, batch_size, split, "
        "input_context, config)",
    )
    label: str | None = Field(
        None,
        description="feature used as the label when no workload is set; the model gets "
        "the other features as a dict by name",
    )
    variant: Literal["tuned", "original"] = Field(
        "tuned", description="tuned: tfperf's pipeline; original: the workload author's"
    )
    examples: int = Field(
        100_000, gt=0, description="examples of a built-in workload's generated train split"
    )
    eval_examples: int = Field(
        10_000, ge=0, description="examples of a built-in workload's generated eval split"
    )
    seed: int = Field(0, description="generator seed of a built-in workload's data")


class PipelineConfig(_Section):
    batch_size: int = Field(512, gt=0, description="per replica; the chess workload's batch")
    shuffle_files: bool = Field(True, description="shuffle the shard order (in training)")
    interleave_cycle: int | Auto = Field(
        "auto", description="shards read at once; auto: min(shards, 16)"
    )
    read_parallelism: int | Auto = Field(
        "auto", description="parallel shard reads; auto: tf.data.AUTOTUNE"
    )
    cache_records: bool | str = Field(
        False, description="cache raw records: true in RAM, a string: a cache file prefix"
    )
    shuffle_buffer: int = Field(
        10_000, ge=0, description="records in the shuffle buffer (the chess workload's); 0: off"
    )
    shuffle_ram_mb: float = Field(
        1024.0, gt=0, description="RAM budget of the shuffle buffer; a warning names the sizes"
    )
    repeat: bool = Field(True, description="repeat in training; evaluation reads one epoch")
    parse: Literal["batched", "per_example"] = Field(
        "batched", description="one parse_example per batch, or one per record"
    )
    preprocess_parallelism: int | Auto = Field(
        "auto", description="parallel calls of the preprocessing; auto: tf.data.AUTOTUNE"
    )
    cache_preprocessed: bool | str = Field(
        False,
        description="cache after preprocessing (true: RAM, a string: a file prefix); only "
        "for deterministic preprocessing",
    )
    prefetch: int | Auto = Field("auto", description="batches prefetched; auto: tf.data.AUTOTUNE")
    threads: int | Auto = Field(
        "auto",
        description="threads tf.data may use for this pipeline (its own pool); auto: the "
        "shared pool, one thread per core. Where the model trains on the same CPU, fewer "
        "leave it cores (the doctor times it)",
    )
    deterministic: bool | None = Field(
        None, description="element order of parallel stages; null: false in training, true in eval"
    )
    on_corrupt: Literal["error", "skip"] = Field(
        "error", description="a damaged shard stops the run, or is skipped (counted each epoch)"
    )
    seed: int | None = Field(None, description="fixes every shuffle when set")
    service: ServiceConfig = Field(
        default_factory=ServiceConfig,
        description="run the pipeline on a tf.data service (`tfperf data-service`): "
        "train, evaluate, bench, doctor and profile read from its workers",
    )


class ModelConfig(_Section):
    name: str | None = Field(
        None,
        description="'module:function' returning a Keras 3 model (a module beside the run "
        "file is found); default: the workload's",
    )
    # Several outputs take a list (the outputs' order) or a dict keyed by output name, as
    # Keras' compile does; one name applies to every output.
    loss: str | list[str | None] | dict[str, str | None] | None = Field(
        None,
        description="a Keras loss name (e.g. sparse_categorical_crossentropy, or "
        "binary_crossentropy_from_logits), or one per output (a list, or a dict keyed by "
        "output name); default: the compiled model's, else the workload's",
    )
    loss_weights: list[float] | dict[str, float] | None = Field(
        None,
        description="each output's weight in the total loss (a list, or a dict keyed by output "
        "name); default: the compiled model's, else 1 each",
    )
    optimizer: str = Field("adam", description="a Keras optimizer name")
    learning_rate: float = Field(1e-3, gt=0, description="peak learning rate")
    lr_schedule: Literal["constant", "cosine", "exponential"] = Field(
        "constant", description="learning-rate schedule after the warm-up"
    )
    warmup_steps: int = Field(0, ge=0, description="steps of linear learning-rate warm-up")
    metrics: list[str | list[str] | None] | dict[str, str | list[str]] | None = Field(
        None,
        description="Keras metric names (e.g. [accuracy, mae, auc]; stateful ones such as "
        "auc, precision, recall are reported as fit reports them); with several outputs a "
        "dict keyed by output name or a list with an entry per output; default: the "
        "workload's, else the compiled model's",
    )


class CheckpointConfig(_Section):
    every_steps: int | None = Field(500, gt=0, description="save every N global steps")
    every_seconds: float | None = Field(None, gt=0, description="save every N seconds")
    keep: int = Field(3, gt=0, description="newest checkpoints kept")


class TrainConfig(_Section):
    out_dir: str = Field(
        "runs/default", description="checkpoints, logs and eval results (relative to the run file)"
    )
    max_steps: int | None = Field(None, gt=0, description="stop at this global step")
    epochs: int | None = Field(None, gt=0, description="stop after this many epochs")
    max_time: float | None = Field(None, gt=0, description="stop after this many seconds")
    steps_per_epoch: int | None = Field(
        None, gt=0, description="default: train records // global batch"
    )
    steps_per_loop: int | Auto = Field(
        "auto", description="steps per compiled call; auto: about 0.3 s per call, measured"
    )
    precision: Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"] = Field(
        "float32", description="auto: each policy the hardware runs is timed, the fastest kept"
    )
    strategy: Literal["auto", "one_device", "mirrored", "multi_worker", "parameter_server"] = Field(
        "auto",
        description="tf.distribute strategy; auto: from TF_CONFIG, else mirrored with several "
        "GPUs, else one_device",
    )
    devices: int | None = Field(None, gt=0, description="replicas for mirrored; default: all")
    cluster: str | None = Field(
        None,
        description="cluster.yaml ({worker: [host:port], ps: [...], chief: [...]}) for "
        "parameter_server; default: the TF_CONFIG variable (multi_worker always reads it)",
    )
    checkpoint: CheckpointConfig = Field(
        default_factory=CheckpointConfig, description="when checkpoints are saved, how many kept"
    )
    checkpoint_input: bool = Field(
        True,
        description="save the input iterator too (exact resume mid-epoch); turned off with "
        "one warning for a pipeline TensorFlow cannot save (py_function, numpy_function, "
        "from_generator, stateful random ops), an error if set to true explicitly",
    )
    restore_input: Literal["auto", "require", "skip"] = Field(
        "auto",
        description="resuming from a checkpoint whose input iterator belongs to another "
        "pipeline (the pipeline changed, e.g. by doctor --fix): auto restores the model, "
        "optimizer and step and starts the new pipeline from its beginning; require stops "
        "with an error; skip never restores the input",
    )
    init_from: str | None = Field(
        None,
        description="warm start: a tfperf run or checkpoint, .weights.h5, .h5 or .keras file "
        "whose layers (matched by name) initialize the model",
    )
    freeze: list[str] = Field([], description="names of layers not trained (warm start)")
    log_every: int = Field(50, gt=0, description="TensorBoard scalars every N steps")
    histogram_every: int = Field(500, gt=0, description="weight histograms every N steps")
    print_tensors: list[str] = Field(
        [], description="layer names (or loss, labels) whose values are printed in the first steps"
    )
    print_steps: int = Field(3, gt=0, description="steps that print_tensors prints")
    monitor_system: bool = Field(True, description="CPU, RAM and GPU use in TensorBoard")
    seed: int = Field(0, description="seed of weights and dropout")
    jit_compile: bool | Literal["auto"] = Field(
        "auto",
        description="compile the train step with XLA; auto: as Keras' compile (on with an "
        "accelerator when every layer supports it, off on CPU-only hosts and under mirrored "
        "or multi-worker)",
    )

    @field_validator("out_dir")
    @classmethod
    def _a_folder(cls, path: str) -> str:
        # "" resolves to the run file's own folder: checkpoints and logs among its files.
        if not path.strip():
            raise ValueError(
                "expected a folder for checkpoints, logs and results (relative to the run "
                "file), e.g. runs/my_run; an empty one would be the run file's own folder"
            )
        return path


class EvalConfig(_Section):
    steps: int | None = Field(None, gt=0, description="batches per evaluation; default: all")
    metric: str = Field("loss", description="the metric that chooses best/")
    mode: Literal["min", "max"] = Field("min", description="whether lower or higher is better")
    batch_size: int | None = Field(None, gt=0, description="default: pipeline.batch_size")


class DoctorConfig(_Section):
    steps: int = Field(30, gt=0, description="measured steps per variant")
    warmup: int = Field(5, ge=0, description="steps before measuring each variant")
    repeats: int = Field(3, gt=0, description="interleaved repeats per variant (median kept)")
    # A busy machine's scheduling jitter averages out over a longer measurement.
    min_seconds: float = Field(
        0.5, ge=0, description="each measurement runs at least steps and this many seconds"
    )
    what_ifs: list[Literal["precision", "batch", "xla", "steps", "threads"]] = Field(
        ["precision", "batch", "xla", "steps", "threads"],
        description="compute what-ifs to time: other precision policies, 2x and 4x the batch, the "
        "train step compiled with XLA (train.jit_compile: true), the run's own steps per call "
        "(a fixed train.steps_per_loop) against doctor.steps per call, the input on half the "
        "cores where the model trains on the same CPU (pipeline.threads)",
    )
    target: float | None = Field(
        None,
        gt=0,
        description="examples/s the accelerator will consume (from a GPU run or a spec sheet): "
        "the pipeline alone is then judged against it and --fix keeps what raises its rate; "
        "null: training on this host is the judge",
    )
    fit_steps_per_execution: int | None = Field(
        None,
        gt=0,
        description="set by tfperf.optimize for a handed Keras model: the steps_per_execution "
        "its model.fit uses, which the steps what-if times",
    )
    # Precision and batch size change the numbers a run ends with: --fix applies them only
    # when allowed; what keeps the results (XLA, steps per call, devices) needs no leave.
    allow: list[Literal["precision", "batch"]] = Field(
        [],
        description="changes --fix may apply although they change the results: precision "
        "(another dtype policy), batch (a larger pipeline.batch_size; the learning rate must "
        "follow)",
    )


class RunConfig(_Section):
    """A whole run file."""

    workload: str | None = Field(
        None, description="a built-in workload: chess, regression, deblur or distance_maps"
    )
    workload_options: dict[str, Any] = Field(
        {}, description="the workload's knobs, e.g. {patch: 256} for deblur"
    )
    data: DataConfig = Field(
        default_factory=DataConfig, description="where the data is and which feature is the label"
    )
    pipeline: PipelineConfig = Field(
        default_factory=PipelineConfig, description="tfperf's tf.data pipeline, stage by stage"
    )
    model: ModelConfig = Field(
        default_factory=ModelConfig, description="the Keras model, loss, metrics and optimizer"
    )
    train: TrainConfig = Field(
        default_factory=TrainConfig, description="tfperf's training loop and its outputs"
    )
    eval: EvalConfig = Field(default_factory=EvalConfig, description="the separate evaluator")
    doctor: DoctorConfig = Field(
        default_factory=DoctorConfig, description="how `tfperf doctor` measures"
    )
    source: str | None = Field(None, exclude=True)  # the file this came from, for messages
    # Dotted key -> the `--set` item that gave it (or the section holding it), for messages.
    _overrides: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("workload")
    @classmethod
    def _known_workload(cls, name: str | None) -> str | None:
        if name is None:
            return None
        if name not in WORKLOAD_NAMES:
            raise ValueError(f"expected one of {sorted(WORKLOAD_NAMES)}, found '{name}'")
        return name

    def resolve(self, path: str | None) -> str | None:
        """A path from the run file, relative to the run file's folder."""
        if path is None or self.source is None or Path(path).is_absolute():
            return path
        return str((Path(self.source).parent / path).resolve())

    def origin(self, key: str) -> str:
        """Where the value of `key` (e.g. "data.label") came from, for error messages: the
        `--set` item that gave it, else the run file, else "the defaults"."""
        return given_by(key, self._overrides) or self.source or "the defaults"


def service_conflicts(cfg: RunConfig) -> list[str]:
    """(key, problem) texts for settings the service cannot honour in a whole run file."""
    svc = cfg.pipeline.service
    if not svc.on:
        return []
    out = []
    if cfg.train.checkpoint_input and "checkpoint_input" in cfg.train.model_fields_set:
        out.append(
            "train.checkpoint_input: true cannot be honoured with pipeline.service.mode "
            f"'{svc.mode}': {RESUME_WITH_SERVICE}; remove train.checkpoint_input or set "
            "pipeline.service.mode: off"
        )
    caches = [k for k in ("cache_records", "cache_preprocessed") if getattr(cfg.pipeline, k)]
    if svc.mode == "distributed_epoch" and caches:
        # A worker's cache replays its own share of one epoch instead of asking for splits.
        out.append(
            f"pipeline.{caches[0]} cannot be used with pipeline.service.mode "
            "'distributed_epoch': each worker would cache and replay only the files it was "
            "handed in the first epoch; turn the cache off or use mode parallel_epochs"
        )
    return out


def parse_override(item: str) -> tuple[list[str], Any]:
    """'a.b=c' -> (['a','b'], value parsed as YAML: numbers, bools, lists, null)."""
    if "=" not in item:
        raise ConfigError(f"--set {quoted(item)}: expected key.path=value")
    key, _, raw = item.partition("=")
    keys = [k for k in key.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"--set {quoted(item)}: empty key")
    try:
        value = load_yaml(raw, f"--set {quoted(item)}") if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    except YamlBombError as exc:
        raise ConfigError(str(exc)) from None
    return keys, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for item in overrides:
        keys, value = parse_override(item)
        node = out
        for k in keys[:-1]:
            nxt = node.get(k)
            if nxt is None:
                nxt = node[k] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {cut(item)}: '{cut(k)}' is a value, not a section")
            node = nxt
        node[keys[-1]] = value
    return out


def override_keys(overrides: list[str]) -> dict[str, str]:
    """Dotted key -> the `--set` item that sets it (the last one wins, as in apply_overrides)."""
    return {".".join(parse_override(item)[0]): item for item in overrides}


def config_from_dict(
    data: dict[str, Any], overrides: list[str] | None = None, origin: str = "run file"
) -> RunConfig:
    overrides = overrides or []
    data = apply_overrides(data or {}, overrides)
    given = override_keys(overrides)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_errors(err, RunConfig, origin, given)) from None
    cfg._overrides = given
    problems = service_conflicts(cfg)
    if problems:
        raise ConfigError(f"{given_by('pipeline.service', given) or origin}: {problems[0]}")
    if cfg.pipeline.service.on:
        cfg.train.checkpoint_input = False  # the service's iterators cannot be saved
    return cfg


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Loads a run file (YAML) and applies overrides; None gives the defaults."""
    if path is None:
        return config_from_dict({}, overrides, "defaults")
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such run file")
    try:
        data = load_yaml(p.read_text(), str(p)) or {}
    except YamlBombError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        # PyYAML names the text it parsed "<unicode string>": the file is what the user knows.
        where = str(exc).replace('"<unicode string>"', f'"{p}"')
        raise ConfigError(f"{p}: not valid YAML: {cut(where, 600)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of sections, found {type(data).__name__}")
    cfg = config_from_dict(data, overrides, str(p))
    cfg.source = str(p.resolve())
    return cfg


def dump_config(cfg: RunConfig) -> str:
    """YAML of the run file with every value spelled out (used by doctor --fix)."""
    data = cfg.model_dump(mode="json", exclude={"source"})
    # No line width: a long path or text stays on its line.
    return yaml.safe_dump(data, sort_keys=False, width=float("inf"))
