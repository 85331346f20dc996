"""What went wrong in a cell: a status, the phase it failed in, and a signature.

The signature is the exception type and the first meaningful line of its message,
with everything model-specific masked (numbers, shapes, paths, addresses, generated
names), so that the same compiler failure in different models groups together.

Torch is never imported here: a dynamo or CUDA exception can only exist if its module
was already imported by whoever raised it, so the classes are looked up in
``sys.modules``. That keeps this module usable from processes that never load torch.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING

from runner.matrix.phases import COMPILER_PHASES, status_of
from runner.matrix.results import CROWDED, OOM
from runner.matrix.text import truncate

if TYPE_CHECKING:
    from runner.matrix.results import CellResult

DYNAMO_TRACE = "dynamo trace"
AOT = "aot"
INDUCTOR_CODEGEN = "inductor codegen"
RUNTIME = "runtime"

SIGNATURE_CHARS = 300
MESSAGE_CHARS = 2000

# Frames that only exist while dynamo translates bytecode, as opposed to the eval_frame
# wrappers that also sit on the stack when already-compiled code runs.
_DYNAMO_TRACE_FILES = ("torch/_dynamo/convert_frame.py", "torch/_dynamo/symbolic_convert.py")
# Inductor's decompositions run while AOTAutograd traces the graph, not while inductor
# generates code.
_AOT_PATHS = ("torch/_functorch/", "torch/_subclasses/", "torch/_inductor/decomposition.py")
_INDUCTOR_PATHS = ("torch/_inductor/", "/triton/")
_OOM_TEXT = ("out of memory", "can't allocate memory")
GIB = 2**30


def classify(exc: BaseException, phase: str) -> tuple[str, str]:
    """The status and error phase of ``exc``, raised during phase ``phase``
    (``runner.matrix.phases``; an unknown phase raises ValueError).

    For phases that run the compiler the error phase is the compiler stage that failed
    (``dynamo trace``, ``aot``, ``inductor codegen`` or ``runtime``); otherwise it is
    the phase itself.
    """
    status = status_of(phase)
    if is_oom(exc):
        status = OOM
    error_phase = _compiler_stage(exc, phase) if phase in COMPILER_PHASES else phase
    return status, error_phase


def record_failure(result: CellResult, exc: BaseException, phase: str) -> None:
    """Fill ``result``'s error fields from ``exc``, raised during ``phase``."""
    result.status, result.error_phase = classify(exc, phase)
    result.error_type = type(exc).__name__
    result.error_signature = signature(exc)
    result.error_message = truncate(str(exc), MESSAGE_CHARS)
    result.traceback_tail = traceback_tail(exc)


def memory_note(free: int, total: int, own: int) -> str:
    """Who held the device's memory when a cell ran out of it (bytes): ``own`` this
    process's PyTorch allocator, the rest of what is not ``free`` the others (other
    processes, and CUDA contexts, this one's included). Crowded (``CROWDED``) when the
    others held more than this process and more than a quarter of the device."""
    others = max(total - free - own, 0)
    if others > own and others > total / 4:
        return (
            f"{CROWDED}: they held {others / GIB:.1f} of the device's {total / GIB:.1f} GiB, "
            f"this process {own / GIB:.1f} GiB"
        )
    return (
        f"out of memory holding {own / GIB:.1f} of the device's {total / GIB:.1f} GiB "
        f"(other processes and CUDA contexts {others / GIB:.1f} GiB)"
    )


def device_memory_note() -> str | None:
    """``memory_note`` of the CUDA device now, or None where CUDA is not in use."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    try:
        free, total = torch.cuda.mem_get_info()
        return memory_note(free, total, torch.cuda.memory_reserved())
    except Exception:
        return None


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) says a device or host ran out of memory."""
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch else None
    for link in _chain(exc):
        if oom_type is not None and isinstance(link, oom_type):
            return True
        if isinstance(link, MemoryError):
            return True
        if isinstance(link, RuntimeError) and any(t in str(link).lower() for t in _OOM_TEXT):
            return True
    return False


def _compiler_stage(exc: BaseException, phase: str) -> str:
    dynamo_exc = sys.modules.get("torch._dynamo.exc")
    if dynamo_exc is not None and isinstance(exc, dynamo_exc.BackendCompilerFailed):
        return _backend_stage(exc) or phase
    if dynamo_exc is not None and isinstance(exc, dynamo_exc.TorchDynamoException):
        return DYNAMO_TRACE
    if type(exc).__module__.startswith("triton"):
        return INDUCTOR_CODEGEN
    # Dynamo lets a few plain exceptions (AssertionError, data-dependent guards) escape
    # tracing unwrapped; everything else that is not a dynamo exception was raised by
    # code that had already been compiled (or by the eager code between graphs).
    if any(f.endswith(_DYNAMO_TRACE_FILES) for f in _frame_files(exc)):
        return DYNAMO_TRACE
    return RUNTIME


def _backend_stage(exc: BaseException) -> str | None:
    """The stage of a backend failure: the innermost compiler frame on its traceback."""
    inner = getattr(exc, "inner_exception", None) or exc
    if type(inner).__module__.startswith("triton"):
        return INDUCTOR_CODEGEN
    for path in reversed(_frame_files(inner) or _frame_files(exc)):
        if any(p in path for p in _AOT_PATHS):
            return AOT
        if any(p in path for p in _INDUCTOR_PATHS):
            return INDUCTOR_CODEGEN
    return None


def _frame_files(exc: BaseException) -> list[str]:
    return [f.filename.replace("\\", "/") for f in traceback.extract_tb(exc.__traceback__)]


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it wraps (backend failures, causes, contexts)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        link = pending.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        pending += [getattr(link, "inner_exception", None), link.__cause__, link.__context__]


def signature(exc: BaseException) -> str:
    """``"<ExceptionType>: <first meaningful message line>"`` with specifics masked.

    An exception without a message (a bare ``assert`` in the compiler) is named by the
    function that raised it instead.
    """
    prefix = ""
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException):
        # "backend='inductor' raised:" says nothing; what the backend raised does.
        prefix = f"{type(exc).__name__}: "
        exc = inner
    text = f"{prefix}{type(exc).__name__}"
    line = headline(str(exc))
    if line:
        text += f": {normalize_message(line)}"
    elif exc.__traceback__ is not None:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        text += f" in {frame.name} ({os.path.basename(frame.filename)})"
    return truncate(text, SIGNATURE_CHARS)


def headline(message: str) -> str:
    """The first line of ``message`` that says something, on one line.

    Dynamo's messages put the kind of failure first and what happened on the next
    ``Explanation:`` line, which is kept; the ``from user code:`` stack it appends
    is not a message.
    """
    lines = [line.strip() for line in message.splitlines()]
    if "from user code:" in lines:
        lines = lines[: lines.index("from user code:")]
    for index, line in enumerate(lines):
        if re.search(r"[A-Za-z]{2}", line):
            following = next((rest for rest in lines[index + 1 :] if rest), "")
            if following.startswith("Explanation:"):
                line += ": " + following.removeprefix("Explanation:").strip()
            return _drop_fake_tensor_call(line)
    return ""


def _drop_fake_tensor_call(line: str) -> str:
    """Keep what a fake-tensor failure got, not the FX node call that led to it.

    ``Dynamo failed to run FX node with fake tensors: call_function <op>(*(FakeTensor(..)
    ..)): got RuntimeError(...)``: the call is long and model-specific, the error is not.
    """
    match = re.match(r"(.*fake tensors): .*?\): (got .*)", line)
    return f"{match[1]}: {match[2]}" if match else line


_GENERATED_NAME = re.compile(r"__|_\d|\d$|^[LlG]_")


def _mask_generated_name(match: re.Match[str]) -> str:
    quote, name = match[1], match[2]
    return f"{quote}<name>{quote}" if _GENERATED_NAME.search(name) else match[0]


_MASKS = [
    # file paths (absolute, or at least two components deep)
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-+@~]+){2,}[\\/]?"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"torch\.Size\(\[[^\]]*\]\)"), "torch.Size(<shape>)"),
    # shapes and sizes: [64, 3, 224, 224], (4, 8), [s0, 3], (8)
    (
        re.compile(r"[\[(]\s*(?:-?\d+|[suz]\d+)(?:\s*,\s*(?:-?\d+|[suz]\d+))*\s*,?\s*[\])]"),
        "<shape>",
    ),
    # matrix shapes: (4x8 and 16x2)
    (re.compile(r"(?<![\w.])\d+(?:x\d+)+(?!\w)"), "<shape>"),
    # quoted names that a tracer or code generator made up: 'L__self___layer1_0_conv1',
    # 'primals_3', 'buf12', 'triton_poi_fused_add_0' (but not 'conv2d' or 'relu')
    (re.compile(r"(['\"`])([A-Za-z_][\w.]*)\1"), _mask_generated_name),
    # amounts of memory: 20.00 MiB, 1.5 GiB, 4096 bytes
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:[KMGTP]i?B|bytes)(?!\w)"), "<size>"),
    # symbolic sizes (s0, u3) and plain numbers, not the digits inside words (conv2d)
    (re.compile(r"(?<![\w.])[suz]\d+(?!\w)"), "<sym>"),
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w|\.\d)"), "<N>"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(text: str) -> str:
    """``text`` with numbers, shapes, paths, addresses and generated names masked."""
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text.strip()


def traceback_tail(exc: BaseException, limit_chars: int = 4000) -> str:
    """The last ``limit_chars`` characters of the formatted traceback of ``exc``."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit_chars else "..." + text[-limit_chars:]
