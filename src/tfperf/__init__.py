"""tfperf: fast, observable TensorFlow/Keras training. The public API lives here.

The Python API mirrors the commands:

    convert(source, out_dir, ...)            tfperf convert
    make_input_dataset(cfg, training=True)   the run file's tf.data pipeline
    bench_pipeline(cfg)                      tfperf bench
    train(cfg)                               tfperf train
    evaluate_checkpoint(cfg, path), watch()  tfperf evaluate [--watch]
    diagnose(cfg), fix_pipeline(...)         tfperf doctor [--fix]
    diagnose(dataset, model)                 the doctor's findings for any tf.data.Dataset
    optimize(dataset, model) -> (ds, report) --fix on any dataset; apply_rewrites replays it
    optimize(dataset, step=fn)               the same with your own (e.g. JAX) training step
    testing.assert_same_examples(a, b), ...  assertions for your own pipeline's unit tests
    keras.InputMonitor, keras.monitor(ds)    input wait inside your own model.fit

Names that need TensorFlow are imported on first use, so `import tfperf` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from tfperf.config import ConfigError, RunConfig, config_from_dict, load_config
from tfperf.data.manifest import Manifest, load_manifest
from tfperf.data.schema import Feature, RowError, Schema
from tfperf.errors import UserError

__version__ = "0.1.0"

# public name -> "module:attribute", resolved lazily (PEP 562).
_LAZY = {
    "convert": "tfperf.data.convert.run:convert",
    "write_workload_data": "tfperf.inputs.workload_data:write_workload_data",
    "verify_dir": "tfperf.data.verify:verify_dir",
    "write_tfds_metadata": "tfperf.data.tfds_export:write_tfds_metadata",
    "make_dataset": "tfperf.data.pipeline:make_dataset",
    "make_input_dataset": "tfperf.inputs.datasets:make_input_dataset",
    "get_workload": "tfperf.workloads:get_workload",
    "Workload": "tfperf.workloads.base:Workload",
    "bench_pipeline": "tfperf.bench:bench_pipeline",
    "measure_datasets": "tfperf.bench:measure_datasets",
    "train": "tfperf.train.loop:train",
    "measure_compute_limit": "tfperf.train.compute_limit:measure_compute_limit",
    "Hook": "tfperf.hooks:Hook",
    "RunState": "tfperf.hooks:RunState",
    "evaluate_checkpoint": "tfperf.train.evaluator:evaluate_checkpoint",
    "watch": "tfperf.train.watch:watch",
    "warm_start": "tfperf.train.warm_start:warm_start",
    "diagnose": "tfperf.doctor.api:diagnose",
    "optimize": "tfperf.doctor.api:optimize",
    "apply_rewrites": "tfperf.doctor.api:apply_rewrites",
    "OptimizeReport": "tfperf.doctor.api:OptimizeReport",
    "fix_pipeline": "tfperf.doctor.fix.entry:fix_pipeline",
    "testing": "tfperf.testing",  # a module: assertions for your own unit tests
    "keras": "tfperf.keras",  # a module: InputMonitor and monitor() for model.fit
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tfperf' has no attribute '{name}'")
    module, _, attr = _LAZY[name].partition(":")
    value = importlib.import_module(module)
    value = getattr(value, attr) if attr else value
    globals()[name] = value  # cache: the next access skips __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ConfigError",
    "Feature",
    "Manifest",
    "RowError",
    "RunConfig",
    "Schema",
    "UserError",
    "config_from_dict",
    "load_config",
    "load_manifest",
    *_LAZY,
]
