"""The built-in workloads, each from a well-known slow-training write-up, with a generator,
schema, tuned batch preprocessing, the original pipeline and a Keras model. Modules are
imported only when asked for."""

from __future__ import annotations

import importlib
from typing import Any

from tfperf.config import WORKLOAD_NAMES
from tfperf.workloads.base import Workload

# name -> "module:Class"; imported lazily so that `tfperf --help` stays fast.
_REGISTRY = {
    "chess": "tfperf.workloads.chess:ChessWorkload",
    "regression": "tfperf.workloads.regression:RegressionWorkload",
    "deblur": "tfperf.workloads.deblur:DeblurWorkload",
    "distance_maps": "tfperf.workloads.distance_maps:DistanceMapsWorkload",
}
assert frozenset(_REGISTRY) == WORKLOAD_NAMES, "config.WORKLOAD_NAMES names every workload"


def get_workload(name: str, **options: Any) -> Workload:
    """The built-in workload called `name`; options are its size knobs."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown workload '{name}'; expected one of {sorted(_REGISTRY)}")
    module, _, cls = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**options)


__all__ = ["WORKLOAD_NAMES", "Workload", "get_workload"]
