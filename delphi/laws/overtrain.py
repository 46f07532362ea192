"""The over-training law of Gadre et al. 2024: loss in compute and tokens-per-parameter."""

from __future__ import annotations

import numpy as np

from .base import Inputs, Law, Param

__all__ = ["OvertrainLaw", "OVERTRAIN"]


class OvertrainLaw(Law):
    """L(C, M) = E + (a M^eta + b M^-eta) C^-eta, C = 6ND [FLOPs], M = D/N (tokens per param).

    Gadre et al. 2024 (arXiv 2403.08540), Eq. 4: a reparameterised Chinchilla law whose
    exponents are tied (alpha = beta = eta), so that the compute exponent does not change with
    the over-training multiplier M.
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        (eta,) = theta
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        log_c = np.log(6.0) + log_n + log_d
        log_m = log_d - log_n
        n = log_n.shape[0]
        logphi = np.stack([np.zeros(n), eta * (log_m - log_c), -eta * (log_m + log_c)], axis=1)
        dlogphi = np.zeros((n, 3, 1))
        dlogphi[:, 1, 0] = log_m - log_c
        dlogphi[:, 2, 0] = -(log_m + log_c)
        return logphi, dlogphi


OVERTRAIN = OvertrainLaw(
    name="overtrain",
    formula="L(C, M) = E + (a M^eta + b M^-eta) C^-eta,  C = 6ND, M = D/N",
    source="Gadre et al. 2024, 'Language models scale reliably with over-training and on "
           "downstream tasks' (arXiv 2403.08540) Eq. 4",
    inputs=("params", "tokens"),
    params=(
        Param("E", linear=True, doc="irreducible loss [loss unit]"),
        Param("a", linear=True, doc="scale of the M^eta term"),
        Param("b", linear=True, doc="scale of the M^-eta term"),
        Param("eta", linear=False, lower=0.0, upper=3.0, search=(0.0, 1.0),
              doc="shared scaling exponent"),
    ),
    signs=(1, 1, 1),
    floor="E",
    identified_by={"params": ("a", "b", "eta"), "tokens": ("a", "b", "eta")},
)
