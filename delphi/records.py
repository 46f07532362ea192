"""Helpers shared by the typed result records."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = ["jsonable", "positive_number"]


def jsonable(value: Any) -> Any:
    """Plain Python values for JSON: numpy scalars unwrapped, NaN/inf -> None, recursively."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    return value


def positive_number(value: Any, message: str, error: type[Exception]) -> float:
    """``value`` as a positive finite float, else ``error(f"{message}, got {value!r}")``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise error(f"{message}, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise error(f"{message}, got {value!r}")
    return v
