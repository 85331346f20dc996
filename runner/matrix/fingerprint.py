"""Environment fingerprints: which versions can change a cell, hashed into its env id.

A torch.compile cell depends on the torch stack and the model libraries; an XLA cell
also on jax, jaxlib, torchax and torch_xla. Each process kind hashes its own list, so
that installing torchax (or a new jax) does not re-key the torch.compile cells of the
same machine and torch. Changing a list changes env ids and cell keys: do it only with
a schema migration that re-keys the stored rows (``runner.store.schema``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

TORCH_PROCESS = "torch"
XLA_PROCESS = "xla"
PROCESS_KINDS = (TORCH_PROCESS, XLA_PROCESS)

TORCH_STACK = ("python", "torch", "triton", "cuda", "gpu", "timm", "transformers")
# The XLA list is the one every cell hashed before fingerprints had kinds, so the ids
# (and keys) of XLA cells did not move when the torch cells' did.
XLA_STACK = (*TORCH_STACK, "jax", "jaxlib", "torchax", "torch_xla")
FIELDS = {TORCH_PROCESS: TORCH_STACK, XLA_PROCESS: XLA_STACK}
ABSENT = "absent"


def environment_id(versions: Mapping[str, object], kind: str) -> str:
    """A short stable hash of the versions a cell of process ``kind`` depends on."""
    values = [str(versions.get(name, ABSENT)) for name in FIELDS[kind]]
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]
