"""The training input: the run file's dataset built per replica, distributed, and what a
checkpoint can save of its iterator. An iterator TensorFlow cannot save (a pipeline that
calls Python through py_function / numpy_function / from_generator, or draws stateful
random numbers) is found at start, by saving it once: training then runs without
`train.checkpoint_input` (one warning) or stops when the user asked for it explicitly.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tfperf.config import RunConfig
from tfperf.config_service import RESUME_WITH_SERVICE as SERVICE_RESUME
from tfperf.errors import UserError
from tfperf.inputs.datasets import make_input_dataset, open_source
from tfperf.inputs.epoch_count import EpochCounter
from tfperf.train.checkpoints.save import warn_if_iterator_large
from tfperf.train.strategy import StrategyInfo, checkpointable_iterator, distribute_input

if TYPE_CHECKING:
    import tensorflow as tf

# What resuming does without the input iterator in the checkpoints (the warning, the error
# and the doctor's finding say the same).
RESUME_WITHOUT_INPUT = (
    "a resumed run restores the model, optimizer and step but restarts the input pipeline "
    "from its beginning (examples read before the stop are read again)"
)
EXACT_RESUME_CHANGE = (
    "for an exact resume, do that work with TensorFlow ops (tf.random.stateless_* with a "
    "seed for randomness) or offline into TFRecords (`tfperf convert`)"
)
# Stateful ops TensorFlow still saves in an iterator (besides the dataset ops themselves):
# asserts and prints, and calls and control flow, whose bodies' ops are judged instead.
_SAVEABLE_STATEFUL = frozenset(
    {"Assert", "Print", "PrintV2", "If", "While", "Case", "StatefulPartitionedCall"}
)
PY_FUNC_OPS = frozenset({"PyFunc", "EagerPyFunc", "PyFuncStateless"})


class InputCheckpointError(UserError):
    """train.checkpoint_input was asked for but the input iterator cannot be saved."""


def dataset_fn(
    cfg: RunConfig, counter: EpochCounter | None = None
) -> Callable[[Any], tf.data.Dataset]:
    """fn(input_context) -> the run file's training dataset (per-replica batches);
    `counter` counts each distributed_epoch epoch's examples from the tf.data service."""

    def fn(input_context: Any) -> Any:
        ds = make_input_dataset(
            cfg,
            training=True,
            input_context=input_context,
            batch_size=cfg.pipeline.batch_size,
            epoch_counter=counter,
        )
        # A user's function often returns one epoch (as for model.fit): training repeats
        # it, as tfperf's own pipeline repeats, unless pipeline.repeat is false (a repeat
        # of an endless dataset changes nothing; its cardinality is unknown inside a
        # parameter_server function, so it is not asked).
        return ds.repeat() if cfg.data.pipeline and cfg.pipeline.repeat else ds

    return fn


def first_of(ds: tf.data.Dataset) -> Callable[[], Any]:
    """sample() -> `ds`'s first element (None when it is empty), pulled on the first call
    only: the real batch the model is checked on, however many checks ask for it."""

    @functools.cache
    def sample() -> Any:
        return next(iter(ds.take(1)), None)

    return sample


def first_batch(cfg: RunConfig) -> Callable[[], Any]:
    """sample() -> one real training batch (as one replica gets it), the pipeline built and
    pulled on the first call only."""

    @functools.cache
    def sample() -> Any:
        import tensorflow as tf

        return first_of(dataset_fn(cfg)(tf.distribute.InputContext()))()

    return sample


def built_input(cfg: RunConfig) -> tf.data.Dataset:
    """The training dataset as one replica gets it, built (never iterated) in this process."""
    # TensorFlow is imported on first use so that `tfperf --help` stays fast.
    import tensorflow as tf

    return dataset_fn(cfg)(tf.distribute.InputContext())


def element_spec(cfg: RunConfig) -> Any:
    """The batch structure, from a pipeline built (never iterated) in this process."""
    return built_input(cfg).element_spec


def mean_record_bytes(cfg: RunConfig) -> int:
    """A training record's mean serialized size (from the manifest); 0 when unknown."""
    if cfg.data.pipeline:
        return 0
    split = open_source(cfg).manifest.splits.get(cfg.data.train_split)
    if split is None or not split.records:
        return 0
    return max(1, sum(s.bytes for s in split.shards) // split.records)


# ---- can the iterator be saved? ------------------------------------------------------------
def save_problem(saveable: Any) -> str | None:
    """Why TensorFlow cannot save `saveable` (an iterator, or the per-replica holder), e.g.
    'PyFunc is stateful'; None when it can. Saves it once into a temporary folder."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="tfperf-input-") as tmp:
        try:
            tf.train.Checkpoint(iterator=saveable).write(str(Path(tmp) / "probe"))
        except tf.errors.OpError as exc:
            text = re.sub(r"\{\{[^}]*\}\}", "", exc.message).split("[Op:")[0]
            return text.strip().rstrip(".") or type(exc).__name__
    return None


def stateful_reason(ops: Iterable[str], generator: bool = False) -> str | None:
    """Why a tf.data stage running `ops` in its functions cannot be saved in an iterator
    (TensorFlow's rule: a stateful op that is not a dataset op), or None."""
    from tensorflow.python.framework import op_def_registry

    if generator:
        return "Dataset.from_generator runs Python (PyFunc is stateful)"
    ops = set(ops)
    if ops & PY_FUNC_OPS:
        op = sorted(ops & PY_FUNC_OPS)[0]
        return f"tf.py_function / tf.numpy_function runs Python ({op} is stateful)"
    for op in sorted(ops):
        op_def = op_def_registry.get(op)
        dataset_op = re.search(r"Dataset(V\d+)?$", op) is not None
        if op_def is not None and op_def.is_stateful and not dataset_op:
            if op not in _SAVEABLE_STATEFUL:
                return f"{op} is stateful"
    return None


def _say(message: str) -> None:
    # Kept whole (paths stay greppable); no markup: messages quote the user's names.
    Console(stderr=True).print(message, highlight=False, soft_wrap=True, markup=False)


def _without_saving(cfg: RunConfig, problem: str) -> None:
    """Stops when train.checkpoint_input was set to true explicitly, else warns once."""
    what = f"data.pipeline {cfg.data.pipeline}" if cfg.data.pipeline else "the input pipeline"
    if not cfg.data.pipeline and cfg.data.variant == "original":
        what = f"workload {cfg.workload}'s original pipeline (data.variant: original)"
    why = f"TensorFlow cannot save the input iterator of {what}: {problem}"
    if "checkpoint_input" in cfg.train.model_fields_set:
        raise InputCheckpointError(
            f"train.checkpoint_input: true, but {why}; set train.checkpoint_input=false in "
            f"{cfg.source or 'the run file'} (then {RESUME_WITHOUT_INPUT}), or "
            f"{EXACT_RESUME_CHANGE}"
        )
    _say(
        f"warning: {why}; training without train.checkpoint_input, so {RESUME_WITHOUT_INPUT}. "
        f"Set train.checkpoint_input=false to say so, or {EXACT_RESUME_CHANGE}"
    )


def input_seeded_by_step(cfg: RunConfig, step: int, say: bool = True) -> RunConfig:
    """The run file for a resume at `step` without train.checkpoint_input: a fixed
    pipeline.seed becomes seed + step, so that each resume reads another order instead of
    replaying the first batches of epoch 0 (a fresh run, step 0, keeps the seed as is)."""
    seed = cfg.pipeline.seed
    if step == 0 or seed is None:
        return cfg
    if say:
        _say(
            f"note: train.checkpoint_input is false: {RESUME_WITHOUT_INPUT}; its shuffles are "
            f"seeded with pipeline.seed + step = {seed} + {step} = {seed + step}, so that this "
            "resume does not replay the first batches of the first run"
        )
    pipeline = cfg.pipeline.model_copy(update={"seed": seed + step})
    return cfg.model_copy(update={"pipeline": pipeline})


def epoch_counter(cfg: RunConfig, info: StrategyInfo) -> EpochCounter | None:
    """A counter of each service epoch's examples: distributed_epoch, tfperf's own pipeline,
    one trainer process (several share the job: each sees only its part)."""
    svc = cfg.pipeline.service
    own_pipeline = not cfg.data.pipeline and cfg.data.variant != "original"
    if svc.mode != "distributed_epoch" or not own_pipeline:
        return None
    return EpochCounter() if info.kind not in ("multi_worker", "parameter_server") else None


def training_input(
    cfg: RunConfig,
    info: StrategyInfo,
    progress: bool,
    counter: EpochCounter | None = None,
    built: tf.data.Dataset | None = None,
) -> tuple[Any, Any]:
    """(the distributed iterator, what of it a checkpoint can save or None). `built`: the
    dataset `built_input(cfg)` already made, read as it is under the default strategy (one
    device, no distribution: the strategy would call dataset_fn once, the same way)."""
    import tensorflow as tf

    svc = cfg.pipeline.service
    if svc.on:  # said once (with the service on, this runs once), also under --json
        _say(
            f"note: the input runs on the tf.data service at {svc.address} ({svc.mode}): "
            f"{SERVICE_RESUME}"
        )
    wanted = cfg.train.checkpoint_input
    fn = dataset_fn(cfg, counter)
    if built is not None and counter is None and info.strategy is tf.distribute.get_strategy():
        fn = lambda _context: built  # noqa: E731 - its pipeline is built once, not twice
    iterator = iter(distribute_input(info, fn, checkpointable=wanted))
    # Under multi_worker and parameter_server TF cannot save the input position
    # (tensorflow#56372): a resumed run restarts its input there.
    saved = checkpointable_iterator(iterator) if wanted else None
    if wanted and saved is None and progress:
        _say(
            f"note: TensorFlow cannot checkpoint the input iterator under {info.kind}; a "
            "resumed run restarts its input pipeline"
        )
    problem = save_problem(saved) if saved is not None else None
    if problem is not None:
        _without_saving(cfg, problem)
        if info.kind == "mirrored":  # the per-replica mode was only needed for saving it
            iterator = iter(distribute_input(info, dataset_fn(cfg, counter)))
        saved = None
    if saved is not None and cfg.pipeline.shuffle_buffer > 1:
        warn_if_iterator_large(cfg.pipeline.shuffle_buffer, mean_record_bytes(cfg))
    return iterator, saved
