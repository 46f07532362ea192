"""The Chinchilla parametric loss in parameters and tokens."""

from __future__ import annotations

import numpy as np

from .base import Inputs, Law, Param

__all__ = ["ChinchillaLaw", "CHINCHILLA", "CHINCHILLA_COEFFICIENTS", "CHINCHILLA_EXPONENTS"]


def _dlogphi(log_n: np.ndarray, log_d: np.ndarray) -> np.ndarray:
    """d log phi / d(alpha, beta), (n, 3, 2): constant in theta (the law is log-linear)."""
    out = np.zeros((log_n.shape[0], 3, 2))
    out[:, 1, 0] = -log_n
    out[:, 2, 1] = -log_d
    return out


class ChinchillaLaw(Law):
    """L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al. 2022, Eq. 2; Approach 3).

    N in parameters, D in tokens, L in the ladder's loss unit.
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        alpha, beta = theta
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        n = log_n.shape[0]
        logphi = np.stack([np.zeros(n), -alpha * log_n, -beta * log_d], axis=1)
        return logphi, _dlogphi(log_n, log_d)

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        out = np.zeros((len(thetas), log_n.shape[0], 3))
        out[:, :, 1] = -thetas[:, :1] * log_n[None, :]
        out[:, :, 2] = -thetas[:, 1:2] * log_d[None, :]
        return out

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        logphi = self.log_basis_grid(thetas, x)
        # Linear in theta: the derivative is the same for every draw (log_basis's).
        dlogphi = self.constant_derivative(x)
        return logphi, np.broadcast_to(dlogphi, (len(thetas),) + dlogphi.shape)

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        return self.log_basis_grid(thetas, x)

    def constant_derivative(self, x: Inputs) -> np.ndarray:
        return _dlogphi(np.log(x["params"]), np.log(x["tokens"]))

    def stack_inputs(self, xs) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """ln N and ln D of M problems of n points each, (M, n) each, and each one's
        derivative (M, n, 3, 2) (see :attr:`delphi.laws.Law.stack_inputs`)."""
        log_n = np.stack([np.log(x["params"]) for x in xs])
        log_d = np.stack([np.log(x["tokens"]) for x in xs])
        return (log_n, log_d), np.stack([_dlogphi(a, b) for a, b in zip(log_n, log_d)])

    def log_basis_stacked(self, thetas: np.ndarray, pre, member: np.ndarray) -> np.ndarray:
        """:meth:`log_basis_grid` with row b on the inputs of problem ``member[b]`` (the
        same arithmetic, element by element): thetas (B, 2) -> (B, n, 3)."""
        log_n, log_d = pre
        out = np.zeros((len(thetas), log_n.shape[1], 3))
        out[:, :, 1] = -thetas[:, :1] * log_n[member]
        out[:, :, 2] = -thetas[:, 1:2] * log_d[member]
        return out


#: E, A, B of the Chinchilla law, shared by the laws that extend it (linear parameters first).
CHINCHILLA_COEFFICIENTS = (
    Param("E", linear=True, doc="irreducible loss [loss unit]"),
    Param("A", linear=True, doc="parameter-term scale [loss unit * params^alpha]"),
    Param("B", linear=True, doc="data-term scale [loss unit * tokens^beta]"),
)
#: alpha, beta of the Chinchilla law.
CHINCHILLA_EXPONENTS = (
    Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.0, 2.0),
          doc="parameter exponent [dimensionless]"),
    Param("beta", linear=False, lower=0.0, upper=5.0, search=(0.0, 2.0),
          doc="token exponent [dimensionless]"),
)

CHINCHILLA = ChinchillaLaw(
    name="chinchilla",
    formula="L(N, D) = E + A / N^alpha + B / D^beta",
    source="Hoffmann et al. 2022 (arXiv 2203.15556) Eq. 2, Approach 3; "
           "fit as in Besiroglu et al. 2024 (arXiv 2404.10102)",
    inputs=("params", "tokens"),
    params=CHINCHILLA_COEFFICIENTS + CHINCHILLA_EXPONENTS,
    signs=(1, 1, 1),
    floor="E",
    identified_by={"params": ("A", "alpha"), "tokens": ("B", "beta")},
)
