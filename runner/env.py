"""The environment fingerprint: which versions produced a result.

The environment id hashes a fixed list of versions; everything else about the
machine is recorded beside it but left out of the hash, so that two hosts with
the same software and GPU share results.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime

from runner.backends.xla import support as xla_support
from runner.matrix.fingerprint import ABSENT, FIELDS, TORCH_PROCESS, environment_id
from runner.matrix.versions import installed


def _version(distribution: str) -> str:
    return installed(distribution) or ABSENT


def _nvidia_smi() -> list[dict[str, str]]:
    """GPU facts from nvidia-smi, which (unlike torch) creates no CUDA context here."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = "name,uuid,driver_version,memory.total"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        name, uuid, driver, memory_mib = (part.strip() for part in line.split(","))
        gpus.append({"name": name, "uuid": uuid, "driver": driver, "memory_mib": memory_mib})
    return gpus


def _visible(gpus: list[dict[str, str]]) -> list[dict[str, str]]:
    """The GPUs this process may use, honouring CUDA_VISIBLE_DEVICES (indices or UUIDs)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    chosen = []
    for item in (v.strip() for v in visible.split(",") if v.strip()):
        for index, gpu in enumerate(gpus):
            if item == str(index) or gpu["uuid"].startswith(item):
                chosen.append(gpu)
    return chosen


def capture(device: str) -> dict[str, object]:
    """The environment row for a run on ``device`` ("cuda" or "cpu")."""
    import torch

    gpus = _visible(_nvidia_smi()) if device == "cuda" else []
    env: dict[str, object] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "cuda": (torch.version.cuda or ABSENT) if device == "cuda" else ABSENT,
        "gpu": gpus[0]["name"] if gpus else ABSENT,
        "timm": _version("timm"),
        "transformers": _version("transformers"),
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "torchax": _version("torchax"),
        "torch_xla": _version("torch_xla"),
    }
    # The run's own id is its torch stack's; each process kind's cells carry their own.
    env["env_id"] = environment_id(env, TORCH_PROCESS)
    env["fingerprint"] = TORCH_PROCESS
    env["xla_routes"] = xla_support.routes(device)
    cudnn = torch.backends.cudnn.version() if device == "cuda" else None
    env.update(
        {
            "driver": gpus[0]["driver"] if gpus else None,
            "cudnn": str(cudnn) if cudnn else None,
            "gpu_count": len(gpus),
            "gpu_memory_gb": round(int(gpus[0]["memory_mib"]) / 1024, 1) if gpus else None,
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "host": socket.gethostname(),
            "platform": f"{platform.platform()} ({sys.implementation.name})",
            "captured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )
    return env


def gpu_uuids() -> list[str]:
    """UUIDs of the visible GPUs, the keys of per-GPU timing locks."""
    return [gpu["uuid"] for gpu in _visible(_nvidia_smi())]


def fingerprints(env: dict[str, object]) -> dict[str, str]:
    """The environment id of each process kind's cells (``runner.matrix.fingerprint``)."""
    return {kind: environment_id(env, kind) for kind in FIELDS}


def rows(env: dict[str, object]) -> list[dict[str, object]]:
    """The environment rows of a capture: one per fingerprint, the same facts under each
    process kind's id."""
    return [
        {**env, "env_id": env_id, "fingerprint": kind} for kind, env_id in fingerprints(env).items()
    ]
