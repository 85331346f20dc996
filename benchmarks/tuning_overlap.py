"""How often a GEMM or convolution that Inductor's max-autotune would tune for a model
was already tuned for an earlier model of the run: what a run-wide pool of tuning
results could share, counted on the CPU without a GPU::

    python benchmarks/tuning_overlap.py --models @core
    python benchmarks/tuning_overlap.py --models @core --limit 40

Each model is built as the headline column's cell builds it (``runner.plan`` for its
batch and sequence, timm batch 64 at its default input size, HF 16 x 128 at size full,
depth-cut by the zoo's own build path) but on the meta device, so nothing is allocated,
and runs one inference forward (eval mode, ``no_grad``, as the infer step runs it) under a
``TorchDispatchMode`` that records each ``aten.mm``, ``addmm``, ``bmm``, ``baddbmm`` and
``convolution``: the op, each tensor argument's shape and dtype, and a convolution's
stride, padding, dilation, transposition and groups.

Precision: autocast does nothing on meta tensors (neither ``device_type="cuda"`` nor
``"cpu"`` casts them), so the model stays fp32, as the headline's autocast cells keep
it, and the key records a float32 argument as bfloat16: what CUDA autocast feeds these
ops (all of them are on its lower-precision list). Casting the model to bf16 instead
would run code paths the GPU sweep did not (a model's own fp32 upcasts).

The keys follow what Inductor makes of these calls on CUDA: a convolution's bias is
left out (Inductor peels it off into a pointwise add); a 1x1, stride-1, unpadded,
ungrouped convolution is keyed as the ``mm``/``addmm`` max-autotune turns it into when
the layout is channels-last (the usual case in conv nets); the matmuls of
``scaled_dot_product_attention`` are not keyed (on meta it runs its math path's
``bmm``s, on CUDA a fused attention kernel that nothing tunes); nor is an ``mm`` or
``bmm`` with one row or one column (max-autotune's coordinate descent tuning has
Inductor decompose it into pointwise code), nor a dilated or transposed convolution
(ATen's kernel is Inductor's only choice: nothing to tune).

A meta tensor has no values: ``Tensor.item()`` of one (HF's check that an attention mask
is all ones, before it picks the causal-mask shortcut) answers a one, what the zoo's
all-ones masks would give; the count of models that read one is printed. Shapes that
hang on values (a mixture of experts' routing) fail on meta instead.

A model whose build or forward fails on meta (data-dependent code, a CPU-only check) or
takes over ``--timeout`` seconds is listed as skipped with the exception's type. Prints
markdown: per suite, the keys each model tunes by itself against those a run-wide pool
tunes (each distinct key once, in feed order), the share of a model's keys an earlier
model already tuned, and the most shared keys.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from runner.matrix import columns  # noqa: E402
from runner.plan import PlanOptions, plan_cells  # noqa: E402
from zoo.catalog import select  # noqa: E402
from zoo.spec import ModelSpec  # noqa: E402

aten = torch.ops.aten
GEMMS = (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)
CONV = aten.convolution
# What CUDA autocast feeds a GEMM or convolution of the headline's bf16 cells.
AUTOCAST_FROM, AUTOCAST_TO = torch.float32, torch.bfloat16
DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
TOP = 10

# A key: (op, ((shape, dtype) or None per tensor argument), conv settings or ()).
Key = tuple


def _dtype(tensor: torch.Tensor) -> str:
    dtype = AUTOCAST_TO if tensor.dtype == AUTOCAST_FROM else tensor.dtype
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _arg(value) -> tuple | None:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), _dtype(value))
    return None


def gemm_key(func, args: tuple) -> Key | None:
    """The tuning key of one call, ``None`` for a call Inductor would not tune."""
    packet = func.overloadpacket
    if packet in GEMMS:
        if _vector_product(packet, args):
            return None
        tensors = tuple(_arg(a) for a in args if isinstance(a, torch.Tensor))
        scalars = tuple(a for a in args[len(tensors) :] if not isinstance(a, torch.Tensor))
        return (packet.__name__, tensors, scalars)
    if packet is not CONV:
        return None
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    if transposed or any(d != 1 for d in dilation) or any(p != 0 for p in output_padding):
        return None  # ATen's kernel alone: nothing to tune
    kernel = tuple(weight.shape[2:])
    if (
        all(k == 1 for k in kernel)
        and all(s == 1 for s in stride)
        and all(p == 0 for p in padding)
        and groups == 1
    ):
        # max-autotune's channels-last 1x1 convolution: a matmul over the pixels.
        rows = x.shape[0] * int(torch.Size(x.shape[2:]).numel())
        lhs = ((rows, x.shape[1]), _dtype(x))
        rhs = ((weight.shape[1], weight.shape[0]), _dtype(weight))
        if bias is None:
            return ("mm", (lhs, rhs), ())
        return ("addmm", (_arg(bias), lhs, rhs), ())
    settings = (tuple(stride), tuple(padding), int(groups))
    return ("convolution", (_arg(x), _arg(weight)), settings)


def _vector_product(packet, args: tuple) -> bool:
    """An ``mm`` or ``bmm`` with one row or one column: max-autotune's coordinate descent
    tuning has Inductor decompose it into a pointwise product and a sum on CUDA."""
    if packet is aten.mm:
        return args[0].shape[0] == 1 or args[1].shape[1] == 1
    if packet is aten.bmm:
        return args[0].shape[1] == 1 or args[1].shape[2] == 1
    return False


class _Attention(TorchFunctionMode):
    """Marks the calls made inside ``scaled_dot_product_attention``."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **(kwargs or {}))
        self.depth += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.depth -= 1


def one(dtype: torch.dtype) -> bool | int | float:
    """What ``Tensor.item()`` of a meta tensor answers: a one, what the zoo's all-ones
    attention masks give the checks that read them (``mask.all()``)."""
    if dtype == torch.bool:
        return True
    return 1.0 if dtype.is_floating_point else 1


class GemmRecorder(TorchDispatchMode):
    """The distinct tuning keys of the GEMMs and convolutions run under it."""

    def __init__(self, attention: _Attention) -> None:
        super().__init__()
        self.attention = attention
        self.keys: set[Key] = set()
        self.answered = 0  # scalars read off meta tensors, answered with a one

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is aten._local_scalar_dense.default and args[0].is_meta:
            self.answered += 1
            return one(args[0].dtype)
        if not self.attention.depth:
            key = gemm_key(func, tuple(args) + tuple(kwargs.values()))
            if key is not None:
                self.keys.add(key)
        return func(*args, **kwargs)


def forward_keys(model: torch.nn.Module, inputs: tuple) -> tuple[frozenset[Key], int]:
    """The keys of one inference forward of ``model`` (as the infer step calls it: eval
    mode, no gradients), and how many scalars it read off meta tensors."""
    model.eval()
    attention = _Attention()
    recorder = GemmRecorder(attention)
    with torch.no_grad(), attention, recorder:
        model(*inputs)
    return frozenset(recorder.keys), recorder.answered


def headline_cells(specs: Iterable[ModelSpec]) -> list:
    """The headline column's cells of ``specs`` on CUDA, in feed order (their batch,
    sequence length and built spec)."""
    h = columns.HEADLINE
    axes = ((h.backend,), (h.mode,), (h.dynamic,), (h.precision,), (h.step,))
    options = PlanOptions(*axes, device="cuda", columns=(h,))
    return plan_cells(specs, options, "env").cells


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum, frame):
        raise TimeoutError(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _build(spec: ModelSpec) -> torch.nn.Module:
    """The model on the meta device; a timm model whose constructor computes on the
    device it is built on (RegNet's widths, ``torch.unique``) is built on the CPU."""
    try:
        with torch.device("meta"):
            return spec.build()
    except NotImplementedError:
        if spec.suite != "timm":
            raise
    return spec.build()


@dataclass(frozen=True)
class Measured:
    model_id: str
    suite: str
    keys: frozenset[Key] | None  # None: skipped
    skipped: str | None = None
    answered: int = 0  # scalars read off meta tensors, answered with a one


def measure_cell(cell, timeout_s: float) -> Measured:
    """One cell's keys on the meta device, or why it was skipped."""
    spec = replace(cell.spec, device="meta") if cell.spec.suite == "hf" else cell.spec
    try:
        with _time_limit(timeout_s), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = _build(spec).to("meta")
            inputs = spec.example_inputs(cell.run_batch_size, "meta", cell.seq_len)
            keys, answered = forward_keys(model, inputs)
    except Exception as error:  # a model that cannot run on meta: skipped, named
        return Measured(spec.id, spec.suite, None, type(error).__name__)
    return Measured(spec.id, spec.suite, keys, answered=answered)


@dataclass(frozen=True)
class Overlap:
    """What a run-wide pool shares among a group of models (in feed order)."""

    models: int
    per_model: int  # keys tuned when each model tunes its own
    pooled: int  # keys first seen in this group's models: what the pool tunes for them
    shares: list[float]  # per model with keys, the share an earlier model had

    @property
    def hits(self) -> int:
        return self.per_model - self.pooled

    @property
    def hit_share(self) -> float:
        return self.hits / self.per_model if self.per_model else 0.0


def overlap(measured: list[Measured]) -> dict[str, Overlap]:
    """Per suite and ``all``: hits of each model's keys among every earlier measured
    model's (whatever its suite: the pool is run-wide)."""
    seen: set[Key] = set()
    groups: dict[str, list[tuple[int, int]]] = {}
    for m in measured:
        if m.keys is None:
            continue
        new = len(m.keys - seen)
        seen |= m.keys
        for group in (m.suite, "all"):
            groups.setdefault(group, []).append((len(m.keys), new))
    return {
        group: Overlap(
            models=len(rows),
            per_model=sum(k for k, _ in rows),
            pooled=sum(n for _, n in rows),
            shares=[(k - n) / k for k, n in rows if k],
        )
        for group, rows in groups.items()
    }


def shown(key: Key) -> str:
    op, tensors, settings = key
    dtypes = {t[1] for t in tensors if t}
    shapes = " ".join("x".join(map(str, t[0])) if t else "-" for t in tensors)
    extra = f" s{settings[0]} p{settings[1]} g{settings[2]}" if op == "convolution" else ""
    return f"{op} {'/'.join(sorted(dtypes))} {shapes}{extra}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["@core"])
    parser.add_argument("--limit", type=int, default=None, help="the first N models only")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per model")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per model")
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    specs = [s for s in select(args.models) if s.suite in ("timm", "hf")][: args.limit]
    started = time.perf_counter()
    measured = []
    for cell in headline_cells(specs):
        t0 = time.perf_counter()
        m = measure_cell(cell, args.timeout)
        measured.append(m)
        if args.verbose:
            what = f"{len(m.keys)} keys" if m.keys is not None else f"skipped {m.skipped}"
            what += f", {m.answered} scalars answered" if m.answered else ""
            print(f"{m.model_id}: {what} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    elapsed = time.perf_counter() - started
    answered = sum(1 for m in measured if m.keys is not None and m.answered)
    skipped = Counter((m.suite, m.skipped) for m in measured if m.keys is None)
    print(
        f"{len(specs)} models of {' '.join(args.models)}; {len(specs) - skipped.total()} "
        f"measured ({answered} of them read a scalar off a meta tensor), "
        f"{skipped.total()} skipped; {elapsed:.0f} s\n"
    )
    print("| suite | models | keys, tuned per model | keys, run-wide pool | pool hits |")
    print("| --- | ---: | ---: | ---: | ---: |")
    result = overlap(measured)
    for group in ("timm", "hf", "all"):
        if (o := result.get(group)) is None:
            continue
        share = (
            f"{o.hit_share:.0%} of pairs; per model median "
            f"{statistics.median(o.shares):.0%}, mean {statistics.mean(o.shares):.0%}"
            if o.shares
            else "-"
        )
        print(f"| {group} | {o.models} | {o.per_model} | {o.pooled} | {share} |")
    if skipped:
        print("\nSkipped: " + ", ".join(f"{s} {e} {n}" for (s, e), n in skipped.most_common()))
    models_of = Counter(k for m in measured if m.keys for k in m.keys)
    print("\n| most shared key | models |\n| --- | ---: |")
    for key, count in models_of.most_common(TOP):
        print(f"| `{shown(key)}` | {count} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
