"""The run file's `pipeline.service` section: whether and how the input pipeline runs on a
tf.data service (a dispatcher and worker processes started by `tfperf data-service`). The
checks that tie it to the other sections are config.py's (service_conflicts);
inputs/service.py does the distributing.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# grpc://HOST:PORT or HOST:PORT; HOST a name, an IPv4 address or a bracketed IPv6 address.
_ADDRESS = re.compile(r"^(grpc://)?(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")

# What the service can restore on resume: said by the keys' descriptions and the train note.
RESUME_WITH_SERVICE = (
    "TensorFlow cannot save a tf.data service iterator, so train.checkpoint_input is off: a "
    "resumed run restores the model, optimizer and step but not its input position (a new "
    "job starts a new pass over the data; a trainer rejoining a shared job_name that is "
    "still served reads on from where that job is)"
)


class ServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    address: str | None = Field(
        None,
        description="the dispatcher, grpc://HOST:PORT or HOST:PORT (`tfperf data-service "
        "local` prints one); the workers read data.dir's shards by the same paths",
    )
    mode: Literal["off", "parallel_epochs", "distributed_epoch"] = Field(
        "off",
        description="off: the pipeline runs in this process; parallel_epochs: every worker "
        "serves the whole dataset in its own order (an epoch is then read once per worker; "
        "pipeline.seed is not used there, else every worker would serve the same order); "
        "distributed_epoch: the dispatcher hands out the shard files, so each example is read "
        "exactly once per epoch (at most once if a worker dies). The stages up to the final "
        "prefetch run on the workers (they get its graph: no py_function or from_generator), "
        "the prefetch here; bench's and the doctor's per-stage "
        "prefixes run here. Evaluation always reads distributed_epoch (each example once). "
        f"{RESUME_WITH_SERVICE}",
    )
    job_name: str | None = Field(
        None,
        description="a name shared by several trainer processes (multi_worker, "
        "parameter_server) so that they split one job instead of each reading all the data; "
        "required then (the service replaces the per-worker sharding); unique per training "
        "run while the service lives",
    )
    remote: Literal["all", "preprocess"] = Field(
        "all",
        description="all: the workers send finished batches (fewest transfers); preprocess: "
        "they send single preprocessed examples and this process batches them (one transfer "
        "per example, slower; not for a data.pipeline function, whose batches are its own)",
    )
    timeout: float = Field(
        30.0,
        gt=0,
        description="seconds to wait for the dispatcher to answer and a worker to register "
        "before an error (tf.data itself would retry for an hour)",
    )

    @field_validator("address")
    @classmethod
    def _address_form(cls, address: str | None) -> str | None:
        if address is None:
            return None
        m = _ADDRESS.match(address.strip())
        if m is None or not 0 < int(m["port"]) < 65536:
            raise ValueError(
                "expected grpc://HOST:PORT or HOST:PORT (e.g. grpc://127.0.0.1:5050), "
                f"found '{address}'"
            )
        return address.strip()

    @model_validator(mode="after")
    def _mode_needs_address(self) -> ServiceConfig:
        if self.mode != "off" and not self.address:
            raise ValueError(
                f"mode '{self.mode}' needs pipeline.service.address (grpc://HOST:PORT of a "
                "dispatcher, e.g. from `tfperf data-service local`); set it or mode: off"
            )
        return self

    @property
    def on(self) -> bool:
        return self.mode != "off"

    @property
    def target(self) -> str:
        """HOST:PORT (the address without its protocol)."""
        return (self.address or "").removeprefix("grpc://")
