"""Constants and text helpers shared by the isoFLOP approaches."""

from __future__ import annotations

import math

import numpy as np

from ...core.quantiles import check_level as _check
from ...core.records import jsonable


#: Per-budget curve fits of :func:`isoflop_analysis`.
METHODS = ("parabola", "cubic", "akima")
#: Bootstrap schemes for the per-budget vertex.
BOOTSTRAPS = ("resample", "noise", "none")
#: Flags a budget can carry (see the module docstring).
FLAGS = ("edge", "outside", "off-centre", "asymmetric", "no-minimum", "too few sizes",
         "unstable", "wide", "tied", "duplicates")
#: Flags that leave a budget out of the power-law fit.
EXCLUDING = ("outside", "no-minimum", "too few sizes")

MIN_SIZES = {"parabola": 3, "cubic": 4, "akima": 3}
AKIMA_REFINE = 25                 # grid points per sampled interval (Porian et al.'s code)
CENTRAL = (0.25, 0.75)            # vertex position in the sampled ln N range: central half
ASYMMETRY = 0.5                   # fewer than half as many sizes on one side: asymmetric
SD_FLOOR_FACTOR = 0.33            # Porian et al.'s min_std_factor
MAX_LISTED = 6
WIDE = 8.0                        # sizes beyond 8x of the vertex: too wide for a polynomial
DRIFT = 2.0                       # centre/vertex ratio changing > 2x across budgets: drift
TIE_MIN = 3                       # this many equal losses in a budget: tied or quantised


# ------------------------------------------------------------------------------- helpers
as_jsonable = jsonable


def fmt_g(value: float, digits: int = 4) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def count_of(n: int, noun: str) -> str:
    """``"1 size"``, ``"3 sizes"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def interval_text(iv: tuple[float, float] | None, digits: int = 3) -> str:
    return "" if iv is None else f"[{fmt_g(iv[0], digits)}, {fmt_g(iv[1], digits)}]"


def listed_names(kind: str, items: list[str], limit: int = 12) -> list[str]:
    """Report lines ``"kind       item"``, at most ``limit`` of them plus a count of the rest
    (``to_dict`` keeps them all)."""
    lines = [f"{kind:<10} {item}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"{kind:<10} ... and {len(items) - limit} more (see --json)")
    return lines


def check_level(level: float) -> float:
    return _check(float(level))


def percentiles(values: np.ndarray, level: float) -> tuple[float, float] | None:
    values = values[np.isfinite(values)]
    if values.size < 2:
        return None
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
