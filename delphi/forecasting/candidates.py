"""The recipes law selection chooses among (:class:`Candidate`: a law, its fixed parameters and
Huber delta), the ones tried by default for a ladder's design, and how their leave-future-out
errors are weighted (:data:`RECENCY`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .design import SPLIT_SPAN, one_token_count, ratio_span
from ..errors import LawError
from ..fitting import DEFAULT_DELTA
from ..fitting.engine import DELTA_RANGE
from ..inputs.ladder import Ladder
from ..laws import get_law
from ..core.records import positive_number

__all__ = ["Candidate", "parse_candidates", "default_candidates", "RECENCY", "ENSEMBLE_RULE"]

#: Each leave-future-out fold's errors weigh this many times those of the fold before it when
#: candidates are ranked and weighted: a later fold was fitted on more budgets, like the
#: full-ladder forecast, and tells more about it than an early fold fitted on the first few.
#: Chosen among 1 (uniform), 1.4, 2, 4 and 16 on the public ladders' nested backtest
#: (benchmarks/RESULTS.md, issue 11): 4 gave the lowest pooled error of the honest auto.
RECENCY = 4.0
#: How :func:`delphi.predict` weights an ensemble's members (recorded with the forecast).
ENSEMBLE_RULE = (f"inverse-MSE weights of the leave-future-out log errors on common (cut, run) "
                 f"pairs, each fold weighing {RECENCY:g}x the one before (Bates & Granger "
                 f"1969); mixture variance for the interval")


@dataclass(frozen=True)
class Candidate:
    """One recipe: a law, the parameters it fixes (e.g. a pinned floor ``{"E": 1.5}``), and
    its Huber delta (on log residuals)."""

    law: str
    fixed: Mapping[str, float] = field(default_factory=dict)
    delta: float = DEFAULT_DELTA

    def __post_init__(self) -> None:
        if not isinstance(self.law, str):
            raise LawError(f"a candidate's law is a law name, got {self.law!r}")
        get_law(self.law)                 # LawError naming the known laws
        d = self.delta
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not (
                math.isfinite(d) and DELTA_RANGE[0] <= d <= DELTA_RANGE[1]):
            raise LawError(f"candidate {self.law!r}: Huber delta (on log residuals) must be "
                           f"in {DELTA_RANGE[0]:g}..{DELTA_RANGE[1]:g}, got {d!r}")

    @property
    def label(self) -> str:
        """``chinchilla``, ``power E=1.5``, ``chinchilla delta=0.01``..."""
        parts = [self.law] + [f"{k}={v:g}" for k, v in sorted(self.fixed.items())]
        if self.delta != DEFAULT_DELTA:
            parts.append(f"delta={self.delta:g}")
        return " ".join(parts)

    def to_dict(self) -> dict:
        return {"label": self.label, "law": self.law,
                "fixed": {k: float(v) for k, v in self.fixed.items()},
                "huber_delta": float(self.delta)}


def parse_candidates(laws: str | Sequence[str], floors: str | Sequence | None = None,
                     deltas: str | Sequence | None = None,
                     fixed: Mapping[str, float] | None = None) -> list[Candidate]:
    """Candidates from lists: every law x floor x delta.

    Parameters
    ----------
    laws: law names, a list or comma-separated (``"power,chinchilla"``).
    floors: ``"free"`` or values of the floor E [loss unit], a list or comma-separated
        (``"free,1.5"``); default free (or ``fixed``'s E when it has one).
    deltas: Huber deltas, a list or comma-separated; default :data:`DEFAULT_DELTA`.
    fixed: other parameters every candidate fixes.

    Raises
    ------
    LawError: an unknown law, a floor or delta that is not a positive number (the item is
        named), or an empty list.
    """
    def items(v):
        if v is None:
            return []
        out = v.split(",") if isinstance(v, str) else list(v)
        return [x.strip() if isinstance(x, str) else x for x in out]

    names = items(laws)
    if not names or any(n == "" for n in names):
        raise LawError(f"candidate laws: an empty list or an empty item in {laws!r} (give "
                       f"names separated by commas, e.g. --laws power,chinchilla)")
    for n in names:
        get_law(n)          # LawError naming the law and the known ones
    base = dict(fixed or {})
    floor_list: list = items(floors) or ([base.pop("E")] if "E" in base else ["free"])
    base.pop("E", None)
    delta_list = items(deltas) or [DEFAULT_DELTA]

    def number(x, what):
        return positive_number(x, f"candidate {what} must be a positive finite number",
                               LawError)

    out = []
    for n in names:
        law = get_law(n)
        for f in floor_list:
            fx = dict(base)
            if not (isinstance(f, str) and f.lower() == "free"):
                if law.floor is None:
                    raise LawError(f"law {n!r} has no floor to pin (floor {f!r})")
                fx[law.floor] = number(f, "floor")
            for d in delta_list:
                c = Candidate(law=law.name, fixed=fx, delta=number(d, "Huber delta"))
                if c not in out:
                    out.append(c)
    return out


def default_candidates(ladder: Ladder, fixed: Mapping[str, float] | None = None,
                       delta: float = DEFAULT_DELTA) -> list[Candidate]:
    """The recipes :func:`compare` and ``law="auto"`` try when none are named: ``power``
    (a ladder with compute); ``power-n`` (every run at one token count D, N varied: a
    fixed-data sweep, which cannot measure D); ``chinchilla`` and ``overtrain`` (with N and D
    whose D/N spans at least 2x, so N and D can be told apart, and D not one value);
    ``chinchilla-lr`` (a peak-LR column with more than one value at some model size: LR
    sweeps). Each with the given ``fixed`` values
    (e.g. a manifest's pinned floor) and ``delta``."""
    names = []
    if ladder.has("flops") or ladder.has("params", "tokens"):
        names.append("power")
    one_d = one_token_count(ladder) is not None
    if one_d:
        names.append("power-n")     # one D: N alone; chinchilla's B, beta are not identified
    span = ratio_span(ladder)
    if not one_d and span is not None and span[1] >= SPLIT_SPAN * span[0]:
        names += ["chinchilla", "overtrain"]
        if ladder.has("peak_lr"):
            t = ladder.table.dropna(subset=["peak_lr"])
            if len(t) and (t.groupby("params")["peak_lr"].nunique() > 1).any():
                names.append("chinchilla-lr")
    out = []
    for n in names:
        law = get_law(n)
        fx = {k: v for k, v in (fixed or {}).items() if k in law.param_names}
        out.append(Candidate(law=n, fixed=fx, delta=delta))
    return out
