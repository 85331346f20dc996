"""timm's own published inference benchmark: compiled throughput over eager's, per model
and image size, as shipped in ``data/reference`` (its README says where the figures come
from and how they were measured). The dashboard shows a timm model's figures beside its
cells; ``benchmarks/published_compare.py`` ranks the whole column against them."""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import NamedTuple

REFERENCE = (
    Path(__file__).resolve().parent.parent
    / "data"
    / "reference"
    / "timm-infer-amp-nchw-pt291-cu130-5090.csv"
)
SOURCE = (
    "timm's own benchmark on one RTX 5090 (torch 2.9.1, float16 autocast, batches of up to 1,024)"
)


class Figure(NamedTuple):
    """One published figure of a model: its image size, compiled throughput over eager's,
    and the batch each side ran at (timm's benchmark lowers each side's batch on its own
    until it fits in memory, so the two may differ)."""

    size: int
    ratio: float
    eager_batch: int
    compiled_batch: int

    def label(self) -> str:
        """``2.00x at 224 px (batch 1,024 both sides)``, or the two batches where they
        differ."""
        if self.eager_batch == self.compiled_batch:
            batch = f"batch {self.eager_batch:,} both sides"
        else:
            batch = f"eager at batch {self.eager_batch:,}, compiled at {self.compiled_batch:,}"
        return f"{self.ratio:.2f}x at {self.size} px ({batch})"


def load(path: Path) -> dict[tuple[str, int], Figure]:
    """The figures of a joined reference CSV by (timm model name, image size); a row with
    either side at zero throughput is left out."""
    figures = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            eager = float(row["eager_samples_per_sec"])
            compiled = float(row["compiled_samples_per_sec"])
            if eager > 0 and compiled > 0:
                size = int(row["img_size"])
                figures[(row["model"], size)] = Figure(
                    size, compiled / eager, int(row["eager_batch"]), int(row["compiled_batch"])
                )
    return figures


@functools.cache
def _shipped() -> dict[str, list[Figure]]:
    by_model: dict[str, list[Figure]] = {}
    if REFERENCE.is_file():
        for (model, _), figure in load(REFERENCE).items():
            by_model.setdefault(model, []).append(figure)
    return by_model


def for_model(model_id: str) -> list[Figure]:
    """The shipped figures of one timm model (``timm/<name>``), smallest image size
    first; none for other suites' models."""
    if not model_id.startswith("timm/"):
        return []
    return sorted(_shipped().get(model_id.removeprefix("timm/"), []))
