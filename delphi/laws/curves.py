"""Loss-curve laws for one model size: the loss at every step of a run under its LR schedule.

Their inputs come from the run's schedule (:func:`delphi.schedules.features`): ``S1`` the
summed LR up to the step (the "forward area", warmup included) and ``S2`` the annealing area
with momentum. The multi-power law also reads the whole per-step LR sequence of each run,
passed as context (``_lrs``: one array per run, ``_group``: each row's run index, ``step``).
"""

from __future__ import annotations

import numpy as np

from ..schedules import multipower_ld
from .base import Inputs, Law, Param

__all__ = ["AnnealingLaw", "MultiPowerLaw", "ANNEALING", "MULTIPOWER"]

# multipower_ld groups LR drops far from each checkpoint; 200 groups keep its relative error
# near 1e-4 (see delphi.schedules) at a small fraction of the exact cost.
_LD_TERMS = 200


class AnnealingLaw(Law):
    """L(s) = L0 + A·S1^(-alpha) - C·S2 (Tissue et al. 2024, arXiv 2408.11029, Eq. 1/3).

    S1 and S2 in LR x steps; L in the ladder's loss unit.
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        (alpha,) = theta
        log_s1 = np.log(x["S1"])
        n = log_s1.shape[0]
        with np.errstate(divide="ignore"):
            log_s2 = np.log(x["S2"])  # -inf before any decay: the term is absent there
        logphi = np.stack([np.zeros(n), -alpha * log_s1, log_s2], axis=1)
        dlogphi = np.zeros((n, 3, 1))
        dlogphi[:, 1, 0] = -log_s1
        return logphi, dlogphi


ANNEALING = AnnealingLaw(
    name="annealing",
    formula="L(s) = L0 + A * S1^(-alpha) - C * S2",
    source="Tissue et al. 2024, 'Scaling Law with Learning Rate Annealing' (arXiv 2408.11029) "
           "Eq. 1, S2 with momentum 0.999",
    inputs=("S1", "S2"),
    params=(
        Param("L0", linear=True, doc="loss floor of the run [loss unit]"),
        Param("A", linear=True, doc="scale of the forward-area term"),
        Param("C", linear=True, doc="loss reduction per unit annealing area"),
        Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.0, 2.0),
              doc="forward-area exponent"),
    ),
    signs=(1, 1, -1),
    floor="L0",
    identified_by={"S1": ("A", "alpha")},
    nonnegative=("S2",),
)


class MultiPowerLaw(Law):
    """L(t) = L0 + A·(S1(t) + S_W)^(-alpha) - B·LD(t) (Luo et al. 2025, arXiv 2503.12811, Sec. 3).

    LD(t) = sum_k (eta_{k-1} - eta_k) G(eta_k^(-gamma) S_k(t)), G(x) = 1 - (C x + 1)^(-beta);
    ``S1`` here already includes the warmup area S_W (see :func:`delphi.schedules.features`).
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        alpha, c, beta, gamma = theta
        log_s1 = np.log(x["S1"])
        n = log_s1.shape[0]
        ld = np.zeros(n)
        grad = np.zeros((n, 3))
        steps = np.asarray(x["step"]).astype(np.int64)
        for g, lrs in enumerate(x["_lrs"]):
            rows = np.flatnonzero(x["_group"] == g)
            if rows.size:
                res = multipower_ld(lrs, steps[rows], c, beta, gamma, max_terms=_LD_TERMS)
                ld[rows], grad[rows] = res.ld, res.grad
        pos = ld > 0
        with np.errstate(divide="ignore"):
            log_ld = np.where(pos, np.log(np.where(pos, ld, 1.0)), -np.inf)
        logphi = np.stack([np.zeros(n), -alpha * log_s1, log_ld], axis=1)
        dlogphi = np.zeros((n, 3, 4))
        dlogphi[:, 1, 0] = -log_s1
        dlogphi[:, 2, 1:] = np.where(pos[:, None], grad / np.where(pos, ld, 1.0)[:, None], 0.0)
        return logphi, dlogphi


MULTIPOWER = MultiPowerLaw(
    name="multipower",
    formula="L(t) = L0 + A * (S1(t) + S_W)^(-alpha) - B * LD(t), "
            "LD(t) = sum_k (eta_{k-1} - eta_k) (1 - (C eta_k^-gamma S_k(t) + 1)^-beta)",
    source="Luo et al. 2025, 'A Multi-Power Law for Loss Curve Prediction Across Learning Rate "
           "Schedules' (arXiv 2503.12811), Sec. 3",
    inputs=("S1", "step"),
    params=(
        Param("L0", linear=True, doc="loss floor of the run [loss unit]"),
        Param("A", linear=True, doc="scale of the forward-area term"),
        Param("B", linear=True, doc="scale of the loss reduction from LR decay"),
        Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.05, 2.0),
              doc="forward-area exponent"),
        Param("C", linear=False, lower=1e-6, upper=1e6, search=(1e-2, 1e2), log_search=True,
              doc="scale inside the saturation G"),
        Param("beta", linear=False, lower=1e-3, upper=10.0, search=(0.05, 3.0),
              doc="saturation exponent of G"),
        Param("gamma", linear=False, lower=0.0, upper=3.0, search=(0.0, 1.5),
              doc="LR exponent inside G"),
    ),
    signs=(1, 1, -1),
    floor="L0",
    identified_by={"S1": ("A", "alpha")},
    search_points=512,
)
