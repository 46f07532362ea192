"""Helpers shared by the typed result records."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = ["jsonable"]


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
