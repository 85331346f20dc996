"""How to reproduce a recorded cell: the ``zoo-run`` command and a minimal Python snippet."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

import pandas as pd

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


def python_snippet(cell: Mapping) -> str:
    """A minimal script: build the model, compile it as the cell did, call it once."""
    device = cell["device"]
    batch = int(cell["batch_size"]) if _present(cell.get("batch_size")) else 2
    lines = ["import torch"]
    if cell["suite"] == "timm":
        name = cell["model_id"].removeprefix("timm/")
        lines[0:0] = ["import timm"]
        lines += [
            "",
            f"model = timm.create_model({_q(name)}, pretrained=False).eval().to({_q(device)})",
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
    else:
        # Other suites build from configs through zoo-matrix's catalogue (no downloads).
        lines[0:0] = ["from zoo.catalog import select"]
        if cell["suite"] == "custom":
            select = f"select(None, [{_q(_custom_module(cell['model_id']))}])"
        else:
            select = f"select([{_q(cell['model_id'])}])"
        lines += [
            "",
            f"(spec,) = {select}",
            f"model = spec.build().eval().to({_q(device)})",
            f"inputs = spec.example_inputs({batch}, {_q(device)})",
        ]
    if cell["precision"] == "fp32" and device == "cuda":
        lines += [
            "# zoo-run measures fp32 on CUDA with TF32 off",
            "torch.backends.cuda.matmul.allow_tf32 = False",
            "torch.backends.cudnn.allow_tf32 = False",
        ]
    options = [f"backend={_q(cell['backend'])}"]
    if cell["mode"] != "none":
        options.append(f"mode={_q(cell['mode'])}")
    options.append(f"dynamic={_DYNAMIC.get(cell['dynamic'], 'None')}")
    lines.append(f"compiled = torch.compile(model, {', '.join(options)})")
    context = "torch.no_grad()"
    if cell["precision"] in _DTYPES:
        context += f", torch.autocast({_q(device)}, dtype={_DTYPES[cell['precision']]})"
    lines += [
        f"with {context}:",
        "    out = compiled(*inputs)",
        "print(type(out).__name__, getattr(out, 'shape', ''))",
    ]
    return "\n".join(lines) + "\n"
