"""User models from ``path/to/file.py:ClassName``.

The convention of PyTorch's own benchmark harness: the class is built with no
arguments and ``get_example_inputs()`` returns a tuple of tensors. It may be an
instance method or a static/class method.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from zoo.errors import UsageError
from zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SUITE = "custom"
FORM_HINT = "give it as FILE.py:ClassName, e.g. tests/fixtures/toy_models.py:TinyMLP"
INPUT_SEED = 0

# One module object per file: importing a user's file twice would run its top-level
# code twice and make two distinct classes of the same name.
_modules: dict[Path, ModuleType] = {}


def load_spec(source: str) -> ModelSpec:
    """Validate ``source`` (importing the file) and describe it as a spec."""
    path, class_name = _parse(source)
    _load_class(path, class_name)
    return ModelSpec(
        id=f"{SUITE}/{path.stem}:{class_name}",
        suite=SUITE,
        name=f"{path.stem}:{class_name}",
        family=SUITE,
        task=SUITE,
        source=f"{path}:{class_name}",
    )


def build(spec: ModelSpec) -> torch.nn.Module:
    return _class_of(spec)()


def example_inputs(
    spec: ModelSpec, batch_size: int | None, device: str, seq_len: int | None = None
) -> tuple[Any, ...]:
    """The model's own example inputs on ``device``; ``seq_len`` is ignored.

    An instance method ``get_example_inputs`` is called on a fresh instance, a static or
    class method on the class; torch is seeded first so the inputs repeat.

    ``batch_size`` None keeps the batch the model chose. Otherwise the batch is dim 0
    of the first tensor input, and every tensor input whose dim 0 has that size is
    repeated (then cut) along dim 0 to ``batch_size``; other tensors pass unchanged.
    Anything but a tuple (or list) of tensors is a TypeError naming what is not one.
    """
    import torch

    cls = _class_of(spec)
    torch.manual_seed(INPUT_SEED)
    static = inspect.getattr_static(cls, "get_example_inputs")
    owner = cls if isinstance(static, staticmethod | classmethod) else cls()
    inputs = _checked(spec, owner.get_example_inputs())
    if batch_size is not None:
        inputs = _rebatch(inputs, batch_size)
    return tuple(x.to(device) for x in inputs)


def _checked(spec: ModelSpec, inputs: Any) -> tuple[torch.Tensor, ...]:
    """The inputs as a tuple of tensors, or a TypeError naming what is not one (raised in
    the inputs phase: the cell is a build_error, not the model's eager failure)."""
    import torch

    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    source = f"get_example_inputs() of {spec.source}"
    if not isinstance(inputs, tuple | list):
        raise TypeError(
            f"{source} returned a {type(inputs).__name__}, not a tuple of tensors: "
            "return the forward's inputs as a tuple, e.g. (torch.randn(4, 8),)"
        )
    bad = [
        f"#{index} {type(value).__name__} {_preview(value)}"
        for index, value in enumerate(inputs)
        if not isinstance(value, torch.Tensor)
    ]
    if bad:
        raise TypeError(
            f"{source} returned inputs that are not tensors: {', '.join(bad)}. It must "
            "return a tuple of tensors (make other arguments defaults of forward)"
        )
    return tuple(inputs)


def _preview(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _rebatch(inputs: tuple[Any, ...], batch_size: int) -> tuple[Any, ...]:
    import torch

    batched = [x for x in inputs if isinstance(x, torch.Tensor) and x.dim() > 0]
    if not batched:
        return inputs
    model_batch = batched[0].shape[0]
    if model_batch in (0, batch_size):
        return inputs
    repeats = math.ceil(batch_size / model_batch)

    def resize(x: Any) -> Any:
        if not (isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] == model_batch):
            return x
        return x.repeat(repeats, *([1] * (x.dim() - 1)))[:batch_size]

    return tuple(resize(x) for x in inputs)


def _class_of(spec: ModelSpec) -> type:
    path, class_name = _parse(spec.source or "")
    return _load_class(path, class_name)


def _parse(source: str) -> tuple[Path, str]:
    file_part, sep, class_name = source.rpartition(":")
    if not sep or not file_part.endswith(".py") or not class_name.isidentifier():
        raise UsageError(f"bad model module {source!r}: {FORM_HINT}")
    path = Path(file_part).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"model module file {file_part!r} does not exist (looked at {path})")
    return path, class_name


def _load_class(path: Path, class_name: str) -> type:
    module = _import(path)
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        defined = sorted(
            name
            for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__
        )
        raise UsageError(
            f"{path} has no class {class_name!r}; "
            f"classes defined there: {', '.join(defined) or 'none'}"
        )
    if not callable(getattr(cls, "get_example_inputs", None)):
        raise UsageError(
            f"class {class_name!r} in {path} has no get_example_inputs(); add one that "
            "returns a tuple of input tensors (it may be a staticmethod)"
        )
    return cls


def _import(path: Path) -> ModuleType:
    if path in _modules:
        return _modules[path]
    # A unique name per path: two user files called model.py must not collide with
    # each other or with any installed module.
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    module_name = f"zoo_custom_{digest}_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running so dataclasses and pickling can find the module.
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[module_name]
        raise UsageError(
            f"importing {path} failed: {type(exc).__name__}: {exc}; fix the file so that it imports"
        ) from exc
    _modules[path] = module
    return module
