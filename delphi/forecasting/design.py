"""What a ladder's design lets a law measure: one token count (a fixed-data sweep), the span
of its tokens per parameter, and the default law that follows (:func:`default_law`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import LadderError
from ..inputs.ladder import Ladder
from ..laws import Law, get_law

if TYPE_CHECKING:
    import pandas as pd

    from .target import Target

__all__ = ["SPLIT_SPAN", "ONE_D", "final_nd", "ratio_span", "one_token_count", "ladder_design_notes",
           "default_law"]


#: A ladder whose finished runs' tokens per parameter D/N span less than this factor does not
#: separate N from D: the Chinchilla law's A, alpha and B, beta trade off along its one ray.
SPLIT_SPAN = 2.0


def final_nd(ladder: Ladder) -> pd.DataFrame | None:
    """The ladder's finished runs, one row each, when it has N and D (else None)."""
    if not ladder.has("params", "tokens"):
        return None
    try:
        return ladder.final_points()[0]
    except LadderError:
        return None


def ratio_span(ladder: Ladder) -> tuple[float, float] | None:
    """Lowest and highest D/N over the ladder's finished runs (None without N and D)."""
    points = final_nd(ladder)
    if points is None:
        return None
    ratio = points["tokens"].to_numpy(float) / points["params"].to_numpy(float)
    return float(ratio.min()), float(ratio.max())


#: Token counts within this ratio of each other are one D (a fixed-data size sweep).
ONE_D = 1.01


def one_token_count(ladder: Ladder) -> float | None:
    """The one token count D [tokens] every finished run of ``ladder`` was trained on (all
    within 1% of each other), when the runs differ in N: a fixed-data size sweep, whose
    design measures the loss in N alone. None otherwise (no N and D, one model size, or D
    varied)."""
    points = final_nd(ladder)
    if points is None:
        return None
    d = points["tokens"].to_numpy(float)
    if not len(d) or points["params"].nunique() < 2 or d.max() > ONE_D * d.min():
        return None
    return float(np.median(d))


def ladder_design_notes(ladder: Ladder, law: Law) -> tuple[list[str], list[str]]:
    """What the ladder's design lets ``law`` measure, whatever the target: ``(notes,
    warnings)``. A fixed-data sweep (one D, :func:`one_token_count`) read by a law in N or C
    alone does not measure D's effect (a note); a law in N alone on runs of varied D takes
    D's effect as noise (a warning). Shown by :func:`predict` and ``delphi fit``."""
    law = get_law(law)
    notes: list[str] = []
    warns: list[str] = []
    d = one_token_count(ladder)
    if d is not None and law.inputs in (("params",), ("flops",)):
        # A fixed-data sweep: a law in N (or in C, which is N times 6D here) cannot tell what
        # another D would do.
        notes.append(f"law {law.name!r} in {'N' if law.inputs == ('params',) else 'C'} alone: "
                     f"every run was trained on D = {d:.3g} tokens, so the ladder does not "
                     f"measure D's effect (E holds the loss of infinite N at that D)")
    elif law.inputs == ("params",) and (points := final_nd(ladder)) is not None:
        lo, hi = float(points["tokens"].min()), float(points["tokens"].max())
        warns.append(f"law {law.name!r} reads N alone but the ladder's runs were trained on "
                     f"D = {lo:.3g}..{hi:.3g} tokens: D's effect is taken as noise (a law of N "
                     f"and D, e.g. chinchilla, measures it)")
    return notes, warns


def default_law(ladder: Ladder, target: Target | None = None) -> str:
    """The law :func:`predict` (and ``delphi fit``, ``backtest``, ``register``) fits when
    none is named, from the ladder's design:

    * every run trained on one token count D while N varies (a fixed-data size sweep) and a
      target given by N (or no target): ``power-n``, L(N) = E + A/N^alpha (Kaplan et al. 2020,
      Eq. 1.1 with a floor), because such a ladder cannot measure D's effect;
    * ``chinchilla`` (L = E + A/N^alpha + B/D^beta; Hoffmann et al. 2022, Eq. 2) when the
      target and the ladder give N and D and the ladder's tokens per parameter D/N span at
      least 2x;
    * else ``power`` in C (L = E + A/C^alpha): with D/N (nearly) one value, N and D move
      together and the ladder cannot tell their terms apart, so the split would be arbitrary.
      A target given by N and D is then converted to C with the ladder's FLOP convention.

    ``target=None`` (a fit or backtest with no target): the same rule from the ladder alone.
    """
    one_d = one_token_count(ladder) is not None
    if target is None:
        if ladder.has("params", "tokens"):
            if one_d:
                return "power-n"
            span = ratio_span(ladder)
            if span is None or span[1] >= SPLIT_SPAN * span[0]:
                return "chinchilla"
        return "power"
    if one_d and target.params is not None:
        return "power-n"
    if target.params is not None and target.tokens is not None and ladder.has("params", "tokens"):
        span = ratio_span(ladder)
        if span is None or span[1] >= SPLIT_SPAN * span[0]:
            return "chinchilla"
    return "power"
