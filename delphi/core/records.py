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
    """``value`` as a positive finite float, else ``error(f"{message}, got {value!r}")``.
    A bool is not a number here (``True`` would be read as 1), nor is an integer beyond
    float64 (``10**400``)."""
    if isinstance(value, (bool, np.bool_)):
        raise error(f"{message}, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise error(f"{message}, got {_short(value)}") from None
    if not (math.isfinite(v) and v > 0):
        raise error(f"{message}, got {value!r}")
    return v


def _short(value: Any) -> str:
    # A 400-digit integer is not worth quoting whole (and past 4,300 digits repr refuses).
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:45]}... ({len(text)} characters)"
