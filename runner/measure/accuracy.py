"""Is the compiled output still right: the RMSE rule of PyTorch's dynamo benchmark
harness, compiled and eager outputs each against a float64 reference."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from runner.matrix.axes import REDUCED_PRECISIONS

# Elements of an output compared at a time (2 MiB of float64 per temporary).
CHUNK = 1 << 18


@dataclass
class Accuracy:
    """The outcome of comparing compiled outputs with eager ones and a reference."""

    passed: bool
    max_abs_error: float | None = None
    rmse: float | None = None
    eager_rmse: float | None = None
    failure: str | None = None
    # The indices of every output that failed (structure, values or the RMSE rule).
    failed: list[int] = field(default_factory=list)


def accuracy_tolerance(precision: str, device_type: str) -> tuple[float, float]:
    """``(tol, multiplier)`` of the RMSE rule for a precision on a device type."""
    if precision in REDUCED_PRECISIONS:
        return 1e-2, 3.0
    return (1e-3 if device_type == "cuda" else 1e-4), 2.0


def rmse_bound(eager_rmse: float, tol: float, multiplier: float) -> float:
    """The most RMSE against the reference a compiled output may have: ``multiplier`` x
    eager's + tol/10."""
    return multiplier * eager_rmse + tol / 10


def compare_outputs(
    fp64_ref: list[torch.Tensor],
    eager: list[torch.Tensor],
    compiled: list[torch.Tensor],
    *,
    tol: float,
    multiplier: float,
) -> Accuracy:
    """The RMSE rule of PyTorch's dynamo benchmark harness, output by output.

    A floating output passes if it is allclose to eager, or if its RMSE against the
    reference is at most ``multiplier`` x eager's RMSE against the reference + tol/10;
    one whose reference has another shape (a size that depends on the values) only if
    it is allclose to eager.
    Other outputs must be equal. ``rmse``/``eager_rmse`` are those of the output
    closest to failing (or failing worst); ``max_abs_error`` is over all outputs.
    """
    if not len(fp64_ref) == len(eager) == len(compiled):
        return Accuracy(
            False,
            failure=f"{len(compiled)} compiled outputs, {len(eager)} eager, "
            f"{len(fp64_ref)} reference",
        )
    accuracy = Accuracy(True)
    worst_margin = -math.inf
    for index, (gold, ref, res) in enumerate(zip(fp64_ref, eager, compiled, strict=True)):
        mismatch = _structural_mismatch(ref, res)
        if mismatch:
            return Accuracy(False, failure=f"output {index}: {mismatch}", failed=[index])
        if not _is_float(ref):
            if not torch.equal(ref, res):
                accuracy.passed = False
                accuracy.failed.append(index)
                accuracy.failure = accuracy.failure or f"output {index}: values differ"
            continue
        if ref.numel() == 0:
            continue
        if gold.shape != ref.shape:
            # A size that depends on the values (keypoints found): the float64 copy found
            # another count, so the rule has no reference here; eager alone judges.
            difference = (ref.to(torch.float64) - res.to(torch.float64)).abs()
            accuracy.max_abs_error = max(accuracy.max_abs_error or 0.0, difference.max().item())
            if not torch.allclose(ref, res, rtol=tol, atol=tol, equal_nan=True):
                accuracy.passed = False
                accuracy.failed.append(index)
                accuracy.failure = accuracy.failure or (
                    f"output {index}: not close to eager, and the float64 reference has "
                    f"shape {list(gold.shape)} against eager's {list(ref.shape)} (a size "
                    "that depends on the values), so the RMSE rule cannot judge it"
                )
            continue
        check = _compare_float(gold, ref, res, tol, multiplier)
        accuracy.max_abs_error = max(accuracy.max_abs_error or 0.0, check.max_abs_error)
        if check.margin > worst_margin:
            worst_margin = check.margin
            accuracy.rmse, accuracy.eager_rmse = check.rmse, check.eager_rmse
        if not check.passed:
            accuracy.passed = False
            accuracy.failed.append(index)
            accuracy.failure = accuracy.failure or (
                f"output {index}: rmse {check.rmse:.3g} > {multiplier:g} x eager rmse "
                f"{check.eager_rmse:.3g} + {tol / 10:g}"
            )
    return accuracy


@dataclass
class _FloatCheck:
    passed: bool
    max_abs_error: float
    rmse: float
    eager_rmse: float
    margin: float  # how far past the RMSE bound (positive: failing)


def _compare_float(
    gold: torch.Tensor, ref: torch.Tensor, res: torch.Tensor, tol: float, multiplier: float
) -> _FloatCheck:
    """The rule on one output, a slice of ``CHUNK`` elements at a time: the float64
    temporaries of a whole output are several times its size (an LM head over a
    262k-token vocabulary: 0.5 G elements, tens of GB), and workers comparing such
    outputs side by side were killed by the host's OOM killer."""
    gold, ref, res = (_flat(t) for t in (gold, ref, res))
    max_abs, res_sq, ref_sq, count, close = 0.0, 0.0, 0.0, 0, True
    for start in range(0, ref.numel(), CHUNK):
        g, e, c = (_as_float64(t[start : start + CHUNK]) for t in (gold, ref, res))
        identical = (e == c) | (e.isnan() & c.isnan())
        max_abs = max(max_abs, (e - c).abs().masked_fill_(identical, 0).max().item())
        # NaN or inf in the same place in both is agreement, and no distance to the
        # reference.
        finite = ~(identical & ~e.isfinite())
        g = g[finite]
        res_sq += (g - c[finite]).square_().sum().item()
        ref_sq += (g - e[finite]).square_().sum().item()
        count += g.numel()
        close = close and torch.allclose(e, c, rtol=tol, atol=tol, equal_nan=True)
    rmse = math.sqrt(res_sq / count) if count else 0.0
    eager_rmse = math.sqrt(ref_sq / count) if count else 0.0
    bound = rmse_bound(eager_rmse, tol, multiplier)
    passed = close or rmse <= bound
    return _FloatCheck(passed, max_abs, rmse, eager_rmse, rmse - bound)


def _structural_mismatch(ref: torch.Tensor, res: torch.Tensor) -> str | None:
    if ref.shape != res.shape:
        return f"shape {list(ref.shape)} eager, {list(res.shape)} compiled"
    if _is_float(ref) != _is_float(res) or (not _is_float(ref) and ref.dtype != res.dtype):
        return f"dtype {ref.dtype} eager, {res.dtype} compiled"
    return None


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _flat(t: torch.Tensor) -> torch.Tensor:
    """The output's real numbers in one dimension, at its own precision."""
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64)
