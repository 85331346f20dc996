"""The timm suite: every model that ``timm.list_models()`` knows.

Listing reads timm's registry (entrypoints and pretrained configs) and builds
nothing; ``timm`` and ``torch`` are imported inside the functions so that
importing ``zoo`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoo.errors import UsageError
from zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SUITE = "timm"
TASK = "image-classification"

# timm's own default when a model has no pretrained config (timm.data.resolve_data_config).
# Every model of timm 1.0.29 has one; older or third-party registrations may not.
FALLBACK_INPUT_SIZE = (3, 224, 224)

# Used when the caller leaves the batch to the model: small enough for a CPU, large
# enough that halving it for the dynamic-shape probe still leaves a batch of 4.
DEFAULT_BATCH_SIZE = 8

INPUT_SEED = 0


def list_specs() -> list[ModelSpec]:
    """Every timm model (deprecated aliases excluded, as timm does), in timm's order."""
    import timm

    return [_spec(name) for name in timm.list_models()]


def spec_for(name: str) -> ModelSpec:
    """The spec of one timm model by bare name (``resnet50``), without listing them all."""
    import timm

    # list_models with the name as its filter applies timm's own listing rules
    # (no deprecated aliases, no pretrained tags) to just this name.
    if timm.list_models(name) != [name]:
        raise UsageError(f"timm has no model {name!r}; zoo-list --models 'timm/*' shows them all")
    return _spec(name)


def _spec(name: str) -> ModelSpec:
    from timm.models import get_pretrained_cfg, model_entrypoint

    # register_model files a model under the last component of its entrypoint's module,
    # so this is the registry's own family without reaching into its private dicts.
    family = model_entrypoint(name).__module__.rsplit(".", 1)[-1]
    cfg = get_pretrained_cfg(name)
    input_size = tuple(cfg.input_size) if cfg is not None else FALLBACK_INPUT_SIZE
    return ModelSpec(
        id=f"{SUITE}/{name}",
        suite=SUITE,
        name=name,
        family=family,
        task=TASK,
        input_size=input_size,
    )


def build(spec: ModelSpec) -> torch.nn.Module:
    import timm

    return timm.create_model(spec.name, pretrained=False)


def example_inputs(
    spec: ModelSpec, batch_size: int | None, device: str, seq_len: int | None = None
) -> tuple[torch.Tensor, ...]:
    """One image batch; ``seq_len`` means nothing to an image model and is ignored."""
    import torch

    batch = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    input_size = spec.input_size or FALLBACK_INPUT_SIZE
    # Drawn on the CPU from a private generator so every device sees the same values and
    # the global RNG (model init) is left alone.
    generator = torch.Generator().manual_seed(INPUT_SEED)
    images = torch.randn((batch, *input_size), generator=generator)
    return (images.to(device),)
