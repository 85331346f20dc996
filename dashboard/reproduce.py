"""How to reproduce a recorded cell: the ``zoo-run`` command and a minimal Python snippet.

The snippet builds the model as the cell did (timm by name; HF and user models through
zoo-matrix's catalogue, at the cell's size, batch and sequence length), applies the
cell's precision as its backend does (autocast, or a cast for the XLA routes), compiles
it with the lines the backend's registry entry gives (``runner.backends.registry``) and
makes one call (one training step for train cells).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

import pandas as pd

from runner.backends import registry
from runner.matrix.axes import base_mode, mode_options
from runner.steps import registry as steps

_DTYPES = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}
_DYNAMIC = {"false": "False", "true": "True", "auto": "None"}


def _q(text: str) -> str:
    """A Python string literal in double quotes (the style of the rest of the code)."""
    return json.dumps(text)


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _custom_module(model_id: str) -> str:
    """``custom/<stem>:<Class>`` -> ``<stem>.py:<Class>`` (the file's folder is not recorded)."""
    stem, _, class_name = model_id.removeprefix("custom/").partition(":")
    return f"{stem}.py:{class_name}"


def zoo_run_command(cell: Mapping) -> str:
    """The ``zoo-run`` command that measures this cell again."""
    if cell["suite"] == "custom":
        args = ["zoo-run", "--module", _custom_module(cell["model_id"])]
    else:
        args = ["zoo-run", "--models", cell["model_id"]]
    args += ["--backends", cell["backend"]]
    if cell["mode"] != "none":
        args += ["--modes", cell["mode"]]
    args += ["--dynamic", cell["dynamic"], "--precision", cell["precision"]]
    if cell.get("step") and cell["step"] != "infer":
        args += ["--step", cell["step"]]
    if _present(cell.get("batch_size")):
        args += ["--batch-size", str(int(cell["batch_size"]))]
    if _present(cell.get("seq_len")):
        args += ["--seq-len", str(int(cell["seq_len"]))]
    if cell.get("size") and cell["suite"] == "hf":
        args += ["--size", cell["size"]]
    args += ["--device", cell["device"]]
    return shlex.join(args)


def _input_shapes(cell: Mapping) -> list[list[int]] | None:
    try:
        shapes = json.loads(cell.get("input_shapes") or "null")
    except (TypeError, ValueError):
        return None
    if isinstance(shapes, list) and all(
        isinstance(s, list) and all(isinstance(d, int) for d in s) for s in shapes
    ):
        return shapes
    return None


def _build_lines(cell: Mapping, device: str, batch: int, training: bool) -> list[str]:
    mode = "train" if training else "eval"
    if cell["suite"] == "timm":
        name = cell["model_id"].removeprefix("timm/")
        lines = [
            f"model = timm.create_model({_q(name)}, pretrained=False).{mode}().to({_q(device)})"
        ]
        shapes = _input_shapes(cell)
        if shapes:
            tensors = ", ".join(
                f"torch.randn({', '.join(map(str, s))}, device={_q(device)})" for s in shapes
            )
            lines.append(f"inputs = ({tensors},)")
        else:
            lines.append(
                f"inputs = (torch.randn({batch}, *model.pretrained_cfg['input_size'], "
                f"device={_q(device)}),)"
            )
        return lines
    # Other suites build from configs through zoo-matrix's catalogue (no downloads).
    if cell["suite"] == "custom":
        select = f"select(None, [{_q(_custom_module(cell['model_id']))}])"
        sized = []
    else:
        select = f"select([{_q(cell['model_id'])}])"
        # The cell's size; a full-size model above 1B parameters is cut in depth as the
        # cell's was (the notes say so), unless the run asked for another --max-params.
        sized = [f"spec = replace(spec, size={_q(cell['size'])}, device={_q(device)})"]
    seq = int(cell["seq_len"]) if _present(cell.get("seq_len")) else None
    return [
        f"(spec,) = {select}",
        *sized,
        f"model = spec.build().{mode}().to({_q(device)})",
        f"inputs = spec.example_inputs({batch}, {_q(device)}, {seq})",
    ]


def _compile_lines(cell: Mapping, entry: registry.BackendEntry, autocast: str) -> list[str]:
    mode = cell["mode"]
    base, options = base_mode(mode), mode_options(mode)
    dynamic = cell["dynamic"] != "false"
    lines = []
    if options:
        lines.append("import torch._inductor.config as inductor_config")
        lines += [f"inductor_config.{option} = True" for option in options]
    shapes = (
        ", dynamic_shapes=tuple({d: torch.export.Dim.AUTO for d in range(x.dim())} for x in inputs)"
        if dynamic
        else ""
    )
    text = entry.snippet.format(
        backend=_q(cell["backend"]),
        mode=f", mode={_q(base)}" if base != "none" else "",
        dynamic=_DYNAMIC.get(cell["dynamic"], "None"),
        strict="True" if base == "strict" else "False",
        shapes=shapes,
        configs=', inductor_configs={"max_autotune": True}' if base == "max-autotune" else "",
        precision=autocast,
    )
    return lines + text.splitlines()


def python_snippet(cell: Mapping) -> str:
    """A minimal script: build the model, compile it as the cell did, call it once."""
    device = cell["device"]
    batch = int(cell["batch_size"]) if _present(cell.get("batch_size")) else 2
    training = steps.base(cell.get("step") or steps.INFER) == steps.TRAIN
    entry = registry.get(cell["backend"])
    dtype = _DTYPES.get(cell["precision"])
    casts = entry.treatment == "cast" and dtype is not None
    autocast = (
        f"torch.autocast({_q(device)}, dtype={dtype})"
        if dtype is not None and not casts
        else "contextlib.nullcontext()"
    )
    lines = ["import contextlib", "", "import torch"]
    if cell["suite"] == "timm":
        lines.insert(2, "import timm")
    else:
        lines += ["from dataclasses import replace", "", "from zoo.catalog import select"]
    lines.append("")
    lines += _build_lines(cell, device, batch, training)
    if casts:
        lines += [
            f"# {cell['backend']} cells cast model and inputs (autocast reaches neither JAX "
            "nor an exported program)",
            f"model = model.to({dtype})",
            f"inputs = tuple(x.to({dtype}) if x.is_floating_point() else x for x in inputs)",
        ]
    if cell["precision"] == "fp32" and device == "cuda":
        lines += [
            "# zoo-run measures fp32 on CUDA with TF32 off",
            "torch.backends.cuda.matmul.allow_tf32 = False",
            "torch.backends.cudnn.allow_tf32 = False",
        ]
    if training:
        lines += [
            "optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)",
            "# zoo-run compiles the model with its loss (see runner/steps/train.py for the",
            "# loss of each suite); the mean of the output stands in for it here",
        ]
    lines += _compile_lines(cell, entry, autocast)
    if training:
        lines += [
            "optimizer.zero_grad(set_to_none=True)",
            f"with {autocast}:",
            "    out = compiled(*inputs)",
            "    first = out[0] if isinstance(out, (tuple, list)) else out",
            "    loss = getattr(first, 'logits', first).float().mean()",
            "loss.backward()",
            "optimizer.step()",
            "print('loss', loss.item())",
        ]
    else:
        lines += [
            f"with torch.no_grad(), {autocast}:",
            "    out = compiled(*inputs)",
            "print(type(out).__name__, getattr(out, 'shape', ''))",
        ]
    return "\n".join(lines) + "\n"
