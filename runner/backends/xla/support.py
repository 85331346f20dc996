"""Which XLA routes can run here, read from installed package metadata only.

Nothing here imports jax, torchax or torch_xla: importing torchax registers a ``jax``
device that breaks torch.compile in the same process, so the parent of a run and its
torch workers may only look at version numbers. An XLA worker that finds a route
available still imports it for real, and a failing import makes its cells
``unsupported`` with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import metadata

from runner.matrix.versions import installed as version
from runner.matrix.versions import major_minor

XLA = "xla"
XLA_EXPORT = "xla_export"
TORCH_XLA = "torch_xla"
XLA_BACKENDS = (XLA, XLA_EXPORT, TORCH_XLA)
# torchax versions known not to import on newer torch (torchax 0.0.13 imports on
# torch 2.11 and 2.12, not on 2.13 or later): the newest torch (major, minor) each takes.
TORCHAX_NEWEST_TORCH = {"0.0.13": (2, 12)}
# torch_xla dropped CUDA: deprecated in 2.8, removed in 2.9.
TORCH_XLA_LAST_CUDA = (2, 8)


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """What an XLA worker starts with: JAX must not take the GPU's memory at its first
    use, as torch shares the GPU in the process."""
    return {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def jax_platforms() -> list[str]:
    """The platforms the installed jax packages provide, as far as their names tell:
    ``cpu`` with jaxlib, ``cuda`` with a CUDA plugin (``jax-cuda13-plugin``...)."""
    platforms = ["cpu"] if version("jaxlib") else []
    names = {
        (dist.metadata["Name"] or "").lower().replace("_", "-") for dist in metadata.distributions()
    }
    if any(re.fullmatch(r"jax-cuda\d+-plugin", name) for name in names):
        platforms.append("cuda")
    return platforms


def unavailable_reason(backend: str, device: str) -> str | None:
    """Why ``backend`` cannot run on ``device`` here, or ``None`` if it may."""
    torch_version = version("torch") or "absent"
    if backend == TORCH_XLA:
        torch_xla = version("torch_xla")
        if torch_xla is None:
            return "torch_xla not installed"
        if device == "cuda" and major_minor(torch_xla) > TORCH_XLA_LAST_CUDA:
            return f"no CUDA support since torch_xla 2.9 (torch_xla {torch_xla} is installed)"
        if major_minor(torch_xla) != major_minor(torch_version):
            wanted = ".".join(map(str, major_minor(torch_xla)))
            return f"torch_xla {torch_xla} needs torch {wanted}, this is torch {torch_version}"
        return None
    torchax = version("torchax")
    if torchax is None:
        return "torchax not installed"
    if version("jax") is None or version("jaxlib") is None:
        return "jax not installed (torchax needs jax and jaxlib)"
    newest = TORCHAX_NEWEST_TORCH.get(torchax)
    if newest is not None and major_minor(torch_version) > newest:
        return f"torchax does not import on torch {torch_version} (torchax {torchax})"
    # Whether jax reaches the GPU is known only once it is imported: the XLA worker
    # checks its backend.
    return None


def routes(device: str) -> str:
    """What the environment row records: each XLA route, ``available (...)`` or
    ``unsupported: reason``, as JSON."""
    described = {}
    for backend in XLA_BACKENDS:
        reason = unavailable_reason(backend, device)
        if reason is not None:
            described[backend] = f"unsupported: {reason}"
        elif backend == TORCH_XLA:
            described[backend] = f"available (torch_xla {version('torch_xla')})"
        else:
            described[backend] = (
                f"available (torchax {version('torchax')}, jax {version('jax')}, "
                f"jax platforms {'+'.join(jax_platforms())})"
            )
    return json.dumps(described)
