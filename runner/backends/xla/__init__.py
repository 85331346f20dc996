"""The XLA routes: torch modules compiled by XLA through JAX (torchax).

Nothing in this package's ``__init__`` or ``support`` imports jax or torchax: importing
torchax registers a ``jax`` device that breaks torch.compile in the same process, so
only XLA worker processes import ``jax_routes``.
"""
