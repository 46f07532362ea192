"""isoFLOP analysis: compute-optimal model size and tokens from a ladder (Hoffmann et al. 2022,
Approaches 1 and 2).

**Approach 2** (:func:`isoflop_analysis`): runs are grouped by compute budget
(:func:`group_budgets`); within each budget the final loss is fitted against ``u = ln N``
(and, separately, against ``ln D``) and the minimiser is the budget's optimum N*(C), D*(C).
Power laws N* = G C^a and D* = G' C^b are then fitted across budgets by (weighted) least
squares in log space (:func:`fit_power_law`). Hoffmann et al. 2022 (arXiv 2203.15556) §3.2
fit a parabola; a cubic and Porian et al.'s Akima interpolation are also offered:

* ``"parabola"``: least-squares ``L = a u^2 + b u + c``, vertex ``u* = -b / 2a``
  (Hoffmann et al. 2022, Approach 2);
* ``"cubic"``: least-squares cubic, its local minimum inside the sampled range;
* ``"akima"``: an Akima spline through ``(ln N, ln L)`` evaluated on ``25 (n - 1)`` points,
  its argmin (Porian et al. 2024, arXiv 2406.19146, §2 and their code
  ``formll/resolving-scaling-law-discrepancies``); a minimum on the end of the grid is an
  edge, not an estimate.

A parabola is biased when the sampled sizes are off-centre around the optimum or span a
wide range where the loss is not quadratic in ``ln N`` (Open-Athena, *scaling-law-analysis*:
"off-center sampling" and "sampling range" experiments). Every budget is therefore flagged
when its sampled minimum is the smallest or largest size (``edge``), when the vertex falls
outside the sampled range (``outside``: the budget is left out of the power-law fit), when the
vertex is outside the central half of the sampled ``ln N`` range (``off-centre``) or when
fewer than half as many sizes lie on one side of the vertex as on the other (``asymmetric``).

The design of the grid is checked too (see :func:`isoflop_analysis`): a polynomial budget whose
sizes reach beyond 8x of its vertex is flagged ``wide``, with an estimate of the vertex's bias
from a refit on the sizes within 8x (empirical; :func:`isoflop_analysis` says why not a model
curve); a sampling centre (geometric mean of N) whose ratio to the vertex changes by more
than 2x across budgets is warned as drift, with the exponent from samples trimmed to be
balanced around each vertex; 3 or more equal losses in a budget are flagged ``tied`` (tied or
quantised losses); runs sharing N in a budget are ``duplicates``, every run of the group named.
A ladder of one budget gives that budget's vertex and interval; the power laws need at least
2 budgets and are omitted, with a note.

Each budget's vertex carries a bootstrap interval (seeded, bit-reproducible): ``"resample"``
draws the budget's points with replacement; ``"noise"`` adds Gaussian noise of a given
standard deviation to every loss (Porian et al.'s "seed noise", 0.002 nats on RefinedWeb and
0.01 on OpenWebText2 in their ``configs.py``). With ``center="median"`` and ``weighted=True``
the power law is fitted to the bootstrap medians with weights ``1 / sd^2`` of ``ln N*``, as in
Porian et al.'s ``bs_median_weighted`` fits (sd floored at 0.33 of the budget's mean spacing
in ``ln N`` and inflated by ``draws / valid draws``, as in their code).

**Approach 1** (:func:`envelope_analysis`): the lower envelope of the loss curves over every
run's checkpoints. At log-spaced FLOP values each run's loss curve is interpolated linearly in
``(ln C, ln L)``; the run with the lowest loss at C gives N*(C) and D*(C), and power laws are
fitted to those minimisers (Hoffmann et al. 2022, §3.1).
"""

from __future__ import annotations

from ._common import BOOTSTRAPS, FLAGS, METHODS
from .budgets import Budget, group_budgets
from .power_law import PowerLaw, fit_power_law
from .approach2 import BudgetOptimum, IsoflopResult, isoflop_analysis, isoflop_table
from .approach1 import EnvelopePoint, EnvelopeResult, envelope_analysis

__all__ = [
    "Budget",
    "BudgetOptimum",
    "PowerLaw",
    "IsoflopResult",
    "EnvelopePoint",
    "EnvelopeResult",
    "group_budgets",
    "fit_power_law",
    "isoflop_analysis",
    "isoflop_table",
    "envelope_analysis",
    "METHODS",
    "BOOTSTRAPS",
    "FLAGS",
]
