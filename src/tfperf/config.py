"""The run file: typed sections, loading from YAML, `--set a.b=c` overrides and validation
with errors that name the field's path, what was expected and what was found.

Every command takes one run file. Defaults are noted where they come from.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tfperf.errors import UserError

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
    dir: str | None = None  # directory holding manifest.json (from `tfperf convert`)
    train_split: str = "train"
    eval_split: str = "eval"
    # 'module:function' returning a tf.data.Dataset of (features, labels) batches; it
    # replaces tfperf's pipeline (the doctor diagnoses any pipeline).
    pipeline: str | None = None
    label: str | None = None  # feature used as the label when no workload is set
    variant: Literal["tuned", "original"] = "tuned"  # original: the original author's pipeline
    examples: int = Field(100_000, gt=0)  # size of a built-in workload's generated data
    eval_examples: int = Field(10_000, ge=0)
    seed: int = 0  # generator seed for built-in workloads


class PipelineConfig(_Section):
    batch_size: int = Field(512, gt=0)  # per replica; the chess workload's batch
    shuffle_files: bool = True
    interleave_cycle: int | Auto = "auto"  # files read at once; auto: min(#files, 16)
    read_parallelism: int | Auto = "auto"  # auto: tf.data.AUTOTUNE
    cache_records: bool | str = False  # True: RAM, a string: a cache file path prefix
    shuffle_buffer: int = Field(10_000, ge=0)  # the chess workload's buffer; 0 disables
    shuffle_ram_mb: float = Field(1024.0, gt=0)  # RAM budget for the shuffle buffer
    repeat: bool = True  # in training; evaluation reads one epoch
    parse: Literal["batched", "per_example"] = "batched"
    preprocess_parallelism: int | Auto = "auto"
    cache_preprocessed: bool | str = False  # only valid after deterministic stages
    prefetch: int | Auto = "auto"
    deterministic: bool | None = None  # None: False in training, True in evaluation
    on_corrupt: Literal["error", "skip"] = "error"
    seed: int | None = None  # fixes every shuffle when set


class ModelConfig(_Section):
    name: str | None = None  # 'module:function' returning a Keras model; default: workload's
    loss: str | None = None  # default: the workload's or the compiled model's
    optimizer: str = "adam"
    learning_rate: float = Field(1e-3, gt=0)
    lr_schedule: Literal["constant", "cosine", "exponential"] = "constant"
    warmup_steps: int = Field(0, ge=0)
    metrics: list[str] | None = None


class CheckpointConfig(_Section):
    every_steps: int | None = Field(500, gt=0)
    every_seconds: float | None = Field(None, gt=0)
    keep: int = Field(3, gt=0)


class TrainConfig(_Section):
    out_dir: str = "runs/default"
    max_steps: int | None = Field(None, gt=0)
    epochs: int | None = Field(None, gt=0)
    max_time: float | None = Field(None, gt=0)  # seconds
    steps_per_epoch: int | None = Field(None, gt=0)  # default: records // global batch
    steps_per_loop: int | Auto = "auto"
    precision: Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"] = "float32"
    strategy: Literal["auto", "one_device", "mirrored", "multi_worker", "parameter_server"] = "auto"
    devices: int | None = Field(None, gt=0)  # replicas for mirrored; default: all
    # cluster.yaml ({worker: [host:port], ps: [...], chief: [...]}) for parameter_server;
    # default: the TF_CONFIG environment variable (multi_worker always reads TF_CONFIG).
    cluster: str | None = None
    checkpoint: CheckpointConfig = CheckpointConfig()
    checkpoint_input: bool = True  # save the input iterator (exact resume)
    init_from: str | None = None
    freeze: list[str] = []
    log_every: int = Field(50, gt=0)
    histogram_every: int = Field(500, gt=0)
    print_tensors: list[str] = []
    print_steps: int = Field(3, gt=0)
    monitor_system: bool = True
    seed: int = 0


class EvalConfig(_Section):
    steps: int | None = Field(None, gt=0)  # default: the whole eval split
    metric: str = "loss"  # chooses best/
    mode: Literal["min", "max"] = "min"
    batch_size: int | None = Field(None, gt=0)  # default: pipeline.batch_size


class DoctorConfig(_Section):
    steps: int = Field(30, gt=0)  # measured steps per variant
    warmup: int = Field(5, ge=0)
    repeats: int = Field(3, gt=0)
    # Each measurement runs at least `steps` and at least this long: a busy machine's
    # scheduling jitter then averages out (tests use less).
    min_seconds: float = Field(0.5, ge=0)
    # Compute-side what-ifs to time: other precision policies, training at 4x the batch.
    what_ifs: list[Literal["precision", "batch"]] = ["precision", "batch"]


class RunConfig(_Section):
    """A whole run file."""

    workload: str | None = None  # a built-in workload: chess, regression, deblur, ...
    # The workload's own knobs, e.g. {patch: 256} for deblur (see each workload's class).
    workload_options: dict[str, Any] = {}
    data: DataConfig = DataConfig()
    pipeline: PipelineConfig = PipelineConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    doctor: DoctorConfig = DoctorConfig()
    source: str | None = Field(None, exclude=True)  # the file this came from, for messages

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


_UNION_TAGS = {"int", "float", "str", "bool", "none", "list", "dict"}


def _is_union_tag(part: object) -> bool:
    # pydantic adds the union member it tried (e.g. "int", "literal['auto']") to the path
    p = str(part)
    return p in _UNION_TAGS or "[" in p


def _format_errors(err: ValidationError, origin: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not _is_union_tag(p)) or "(top level)"
        found = e.get("input")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; `tfperf <command> --help` lists keys)"
        else:
            msg = e["msg"]
        lines.append(f"{origin}: {loc}: {msg}; found {found!r}")
    # pydantic reports each union member; keep one line per field
    seen, out = set(), []
    for line in lines:
        key = line.split(": ")[1]
        if key not in seen:
            seen.add(key)
            out.append(line)
    return "\n".join(out)


def parse_override(item: str) -> tuple[list[str], Any]:
    """'a.b=c' -> (['a','b'], value parsed as YAML: numbers, bools, lists, null)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key.path=value")
    key, _, raw = item.partition("=")
    keys = [k for k in key.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
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
                raise ConfigError(f"--set {item}: '{k}' is a value, not a section")
            node = nxt
        node[keys[-1]] = value
    return out


def config_from_dict(
    data: dict[str, Any], overrides: list[str] | None = None, origin: str = "run file"
) -> RunConfig:
    data = apply_overrides(data or {}, overrides or [])
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err, origin)) from None
    return cfg


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Loads a run file (YAML) and applies overrides; None gives the defaults."""
    if path is None:
        return config_from_dict({}, overrides, "defaults")
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such run file")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of sections, found {type(data).__name__}")
    cfg = config_from_dict(data, overrides, str(p))
    cfg.source = str(p.resolve())
    return cfg


def dump_config(cfg: RunConfig) -> str:
    """YAML of the run file with every value spelled out (used by doctor --fix)."""
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude={"source"}), sort_keys=False)
