"""The model zoo: which models exist, how to build them and feed them."""

from zoo.catalog import list_all, select
from zoo.errors import UsageError
from zoo.spec import ModelSpec

__all__ = ["ModelSpec", "UsageError", "list_all", "select"]
