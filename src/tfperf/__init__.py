"""tfperf: fast, observable TensorFlow/Keras training. The public API lives here."""

from tfperf.config import ConfigError, RunConfig, load_config
from tfperf.data.schema import Feature, RowError, Schema
from tfperf.errors import UserError

__version__ = "0.1.0"

__all__ = ["ConfigError", "Feature", "RowError", "RunConfig", "Schema", "UserError",
           "load_config"]  # fmt: skip
