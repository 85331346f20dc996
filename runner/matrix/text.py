"""Text kept from models and compilers: bounded, the same way everywhere."""

from __future__ import annotations


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
