"""The fitting objective: summed Huber loss on log residuals, with its exact gradient.

Objective (Hoffmann et al. 2022, Sec. D.2; Besiroglu et al. 2024, Eq. 3):

    J = sum_i Huber_delta( log L_pred(x_i) - log L_obs_i ),

summed, not averaged: averaging shrinks the gradient by 1/n and L-BFGS's absolute gradient
tolerance then stops it early, one reason the original Chinchilla fit was off (Besiroglu
et al. 2024, Sec. 3). Huber follows ``scipy.special.huber``: r^2/2 for |r| <= delta, else
delta(|r| - delta/2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..laws.base import Inputs, Law

__all__ = ["huber", "Problem"]

# Returned for parameters where the law's prediction is not positive (a signed law whose
# negative terms dominate): finite so that L-BFGS-B's line search backs off instead of failing.
_INFEASIBLE = 1e30


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Elementwise Huber loss of residuals ``r`` (same convention as ``scipy.special.huber``)."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


@dataclass
class Problem:
    """One fitting problem: a law, its data and which parameters are free.

    The internal vector ``z`` holds ``log c_j`` for the free linear coefficients (in law order)
    followed by the free non-linear parameters. Fixed values are held in natural units.
    """

    law: Law
    x: Inputs
    log_y: np.ndarray
    delta: float
    free: tuple[str, ...]
    fixed: dict[str, float]

    def __post_init__(self) -> None:
        law = self.law
        self.lin_names = law.linear_names
        self.nl_names = law.nonlinear_names
        self.signs = np.asarray(law.signs, dtype=float)
        self.free_lin = [i for i, n in enumerate(self.lin_names) if n in self.free]
        self.free_nl = [i for i, n in enumerate(self.nl_names) if n in self.free]
        with np.errstate(divide="ignore"):
            self.gamma_fixed = np.array(
                [np.log(self.fixed[n]) if n in self.fixed else 0.0 for n in self.lin_names])
        self.theta_fixed = np.array([self.fixed.get(n, 0.0) for n in self.nl_names], dtype=float)
        self.n_free = len(self.free_lin) + len(self.free_nl)

    # ------------------------------------------------------------------ vector <-> values
    def unpack(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gamma = self.gamma_fixed.copy()
        theta = self.theta_fixed.copy()
        k = len(self.free_lin)
        gamma[self.free_lin] = z[:k]
        theta[self.free_nl] = z[k:]
        return gamma, theta

    def pack(self, values: dict[str, float]) -> np.ndarray:
        with np.errstate(divide="ignore"):
            lin = [np.log(values[self.lin_names[i]]) for i in self.free_lin]
        return np.array(lin + [values[self.nl_names[i]] for i in self.free_nl], dtype=float)

    def values(self, z: np.ndarray) -> dict[str, float]:
        gamma, theta = self.unpack(z)
        out = {n: float(np.exp(g)) for n, g in zip(self.lin_names, gamma)}
        out.update({n: float(t) for n, t in zip(self.nl_names, theta)})
        return out

    # ------------------------------------------------------------------ evaluation
    def residuals_and_jacobian(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Log residuals r (n,), their Jacobian dr/dz (n, p), and whether all are finite."""
        gamma, theta = self.unpack(z)
        logphi, dlogphi = self.law.log_basis(theta, self.x)
        # A vanished term (log phi = -inf) may carry an infinite derivative; its weight is 0.
        dlogphi = np.where(np.isfinite(dlogphi), dlogphi, 0.0)
        terms = gamma[None, :] + logphi
        terms = np.where(np.isfinite(terms), terms, -np.inf)
        m = terms.max(axis=1)
        m = np.where(np.isfinite(m), m, 0.0)
        e = self.signs[None, :] * np.exp(terms - m[:, None])
        s = e.sum(axis=1)
        if not np.all(s > 0):
            return np.full_like(self.log_y, np.inf), np.zeros((len(s), self.n_free)), False
        r = m + np.log(s) - self.log_y
        w = e / s[:, None]  # d log L / d gamma_j (signed softmax weights)
        jac_lin = w[:, self.free_lin]
        jac_nl = np.einsum("nk,nkm->nm", w, dlogphi)[:, self.free_nl]
        return r, np.concatenate([jac_lin, jac_nl], axis=1), True

    def objective(self, z: np.ndarray) -> float:
        """Summed Huber objective J(z) in the scipy convention."""
        r, _, ok = self.residuals_and_jacobian(z)
        return float(np.sum(huber(r, self.delta))) if ok else np.inf

    def scaled_objective_and_grad(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """J/delta and its gradient: the same optimum, with values O(n |r|) for the optimiser."""
        r, jac, ok = self.residuals_and_jacobian(z)
        if not ok:
            return _INFEASIBLE, np.zeros_like(z)
        d = self.delta
        a = np.abs(r)
        f = np.where(a <= d, 0.5 * r * r / d, a - 0.5 * d).sum()
        psi = np.clip(r / d, -1.0, 1.0)
        return float(f), psi @ jac
