"""A ``Cell`` is one model under one configuration on one device in one environment.

It is plain data: it travels to a worker process as JSON. Its key identifies it across
runs and machines (resume, merge, compare).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from runner.matrix.axes import NO_MODE
from zoo.spec import ModelSpec

# ``Cell.extra``'s entry for the batch an out-of-memory retry runs at.
RUN_BATCH = "batch_size_run"
# ``Cell.extra``'s entry counting the retries at the same batch of a cell that ran out of
# memory while other processes held most of the device's (``runner.plan.smaller_batch``).
CROWDED_RETRIES = "crowded_retries"
# ``Cell.extra``'s entry for a timing window the run asked for (``zoo-run --timing-s``)
# in place of the protocol's (``runner.measure.timing.TIMING_PLANS``).
TIMING_S = "timing_s"
# The fields of a cell's key, in the order they are hashed.
KEY_FIELDS = (
    "model_id",
    "size",
    "backend",
    "mode",
    "dynamic",
    "precision",
    "step",
    "batch_size",
    "seq_len",
    "device",
    "env_id",
)


@dataclass(frozen=True)
class CellConfig:
    """One column of the matrix."""

    backend: str
    mode: str
    dynamic: str
    precision: str
    step: str = "infer"

    def label(self) -> str:
        mode = "" if self.mode == NO_MODE else f"/{self.mode}"
        return f"{self.backend}{mode} dyn={self.dynamic} {self.precision} {self.step}"


@dataclass(frozen=True)
class Cell:
    """One model x one config x batch/sequence/device/environment."""

    spec: ModelSpec
    config: CellConfig
    size: str
    batch_size: int | None
    seq_len: int | None
    device: str
    env_id: str
    timeout_s: float = 300.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def key_fields(self) -> dict[str, Any]:
        """The fields that identify a cell across runs and machines."""
        return {
            "model_id": self.spec.id,
            "size": self.size,
            "backend": self.config.backend,
            "mode": self.config.mode,
            "dynamic": self.config.dynamic,
            "precision": self.config.precision,
            "step": self.config.step,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "device": self.device,
            "env_id": self.env_id,
        }

    @property
    def key(self) -> str:
        return cell_key(self.key_fields(), build_limit=self.spec.build_limit)

    @property
    def run_batch_size(self) -> int | None:
        """The batch this attempt runs at: the cell's, or the smaller one an
        out-of-memory retry asked for (the key keeps the cell's)."""
        return self.extra.get(RUN_BATCH, self.batch_size)

    def with_run_batch(self, batch_size: int) -> Cell:
        """This cell, to be run at ``batch_size`` (an out-of-memory retry)."""
        return replace(self, extra={**self.extra, RUN_BATCH: batch_size})

    @property
    def crowded_retries(self) -> int:
        return self.extra.get(CROWDED_RETRIES, 0)

    @property
    def timing_s(self) -> float | None:
        """The timing window the run asked for; None: the protocol's."""
        return self.extra.get(TIMING_S)

    def crowded_retry(self) -> Cell:
        """This cell again at the same batch, after running out of memory beside other
        processes that held most of the device's."""
        return replace(self, extra={**self.extra, CROWDED_RETRIES: self.crowded_retries + 1})

    def describe(self) -> str:
        return f"{self.spec.id} · {self.config.label()}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        data = dict(data)
        data["spec"] = ModelSpec.from_dict(data["spec"])
        data["config"] = CellConfig(**data["config"])
        return cls(**data)


def cell_key(fields: dict[str, Any], build_limit: int | None = None) -> str:
    """A stable hash of the key fields (same on every machine and Python), and of a
    parameter limit other than the default (``ModelSpec.build_limit``): cells built at
    the default limit keep the keys they had before the limit existed."""
    ordered: list[Any] = [fields[name] for name in KEY_FIELDS]
    if build_limit is not None:
        ordered.append(["max_params", build_limit])
    return hashlib.sha256(json.dumps(ordered).encode()).hexdigest()[:24]
