"""Building with the Hugging Face Hub out of reach."""

from __future__ import annotations

import contextlib

import huggingface_hub


@contextlib.contextmanager
def offline():
    """The Hugging Face Hub unreachable, whatever the environment says: a default config
    that fetches another from the Hub (EdgeTAM's backbone) fails instead of downloading.
    huggingface_hub and transformers read this flag at every request."""
    saved = huggingface_hub.constants.HF_HUB_OFFLINE
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    except OSError as exc:
        raise RuntimeError(
            f"the default config needs files from the Hugging Face Hub, and zoo-matrix "
            f"downloads nothing: {exc}"
        ) from exc
    finally:
        huggingface_hub.constants.HF_HUB_OFFLINE = saved
