"""Installed package versions, read from metadata only (importing nothing)."""

from __future__ import annotations

import re
from importlib import metadata


def installed(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def major_minor(text: str) -> tuple[int, int]:
    """``"2.11.0+cu130"`` -> (2, 11); (0, 0) for text without a version."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
