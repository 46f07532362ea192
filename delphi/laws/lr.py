"""Cross-scale laws with learning-rate-correction terms."""

from __future__ import annotations

import numpy as np

from .base import Inputs, Law, Param
from .chinchilla import CHINCHILLA_COEFFICIENTS, CHINCHILLA_EXPONENTS

__all__ = ["ChinchillaLRLaw", "CHINCHILLA_LR", "ChinchillaCkptLaw", "CHINCHILLA_CKPT"]

# Reference size of the optimal-LR power law (inside typical ladders; see ChinchillaLRLaw).
LOG_N0 = float(np.log(1e8))
LOG_D0 = float(np.log(1e10))

# Keeps log|u| and d log u^2 / du finite where the LR sits exactly on the fitted optimum; the
# term's weight vanishes there, so the value does not matter.
_TINY = 1e-150


class ChinchillaLRLaw(Law):
    """Peak-LR mis-tuning surface around the Chinchilla law.

    L(N, D, eta) = E + A/N^alpha + B/D^beta + K (ln eta - ln eta*(N, D))^2,
    eta*(N, D) = exp(log_eta0) (N / N0)^p (D / D0)^q,  N0 = 1e8 params, D0 = 1e10 tokens.

    The optimum is anchored at a reference size (N0, D0) inside typical ladders, so
    ``log_eta0`` is the log optimal LR there and barely moves with p and q; the Step Law's
    prefactor c = eta0 N0^-p D0^-q follows (:meth:`step_law_constants`).

    The quadratic in log LR is the usual shape of loss-vs-LR sweeps near their optimum (Wortsman
    et al. 2023, arXiv 2309.14322, Fig. 1); the power law for the optimal LR is the Step Law
    form (Li et al. 2025, arXiv 2503.04715, Eq. 6: eta_opt = 1.79 N^-0.713 D^0.307). One surface
    fits whole LR sweeps, mis-tuned runs included, and predicts a run at any peak LR.
    """

    def _u(self, theta, x):
        _, _, log_eta0, p, q = theta
        return (np.log(x["peak_lr"]) - log_eta0 - p * (np.log(x["params"]) - LOG_N0)
                - q * (np.log(x["tokens"]) - LOG_D0))

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        alpha, beta = theta[0], theta[1]
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        u = self._u(theta, x)
        au = np.maximum(np.abs(u), _TINY)
        n = log_n.shape[0]
        logphi = np.stack([np.zeros(n), -alpha * log_n, -beta * log_d, 2 * np.log(au)], axis=1)
        dlogphi = np.zeros((n, 4, 5))
        dlogphi[:, 1, 0] = -log_n
        dlogphi[:, 2, 1] = -log_d
        inv = 2.0 / np.copysign(au, u)  # d log(u^2)/du
        dlogphi[:, 3, 2] = -inv
        dlogphi[:, 3, 3] = -inv * (log_n - LOG_N0)
        dlogphi[:, 3, 4] = -inv * (log_d - LOG_D0)
        return logphi, dlogphi

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        cn, cd = log_n - LOG_N0, log_d - LOG_D0
        u = (np.log(x["peak_lr"])[None, :] - thetas[:, 2:3] - thetas[:, 3:4] * cn[None, :]
             - thetas[:, 4:5] * cd[None, :])
        au = np.maximum(np.abs(u), _TINY)
        b, n = u.shape
        logphi = np.zeros((b, n, 4))
        logphi[:, :, 1] = -thetas[:, 0:1] * log_n[None, :]
        logphi[:, :, 2] = -thetas[:, 1:2] * log_d[None, :]
        logphi[:, :, 3] = 2 * np.log(au)
        dlogphi = np.zeros((b, n, 4, 5))
        dlogphi[:, :, 1, 0] = -log_n[None, :]
        dlogphi[:, :, 2, 1] = -log_d[None, :]
        inv = 2.0 / np.copysign(au, u)
        dlogphi[:, :, 3, 2] = -inv
        dlogphi[:, :, 3, 3] = -inv * cn[None, :]
        dlogphi[:, :, 3, 4] = -inv * cd[None, :]
        return logphi, dlogphi

    def optimal_lr(self, values, params, tokens) -> np.ndarray:
        """eta*(N, D) for fitted ``values``; shape of the broadcast inputs."""
        return np.exp(values["log_eta0"] + values["p"] * (np.log(params) - LOG_N0)
                      + values["q"] * (np.log(tokens) - LOG_D0))

    @staticmethod
    def step_law_constants(values) -> dict[str, float]:
        """(c, p, q) of the Step Law form eta* = c N^p D^q (Li et al. 2025, Eq. 6)."""
        c = np.exp(values["log_eta0"] - values["p"] * LOG_N0 - values["q"] * LOG_D0)
        return {"c": float(c), "p": float(values["p"]), "q": float(values["q"])}


CHINCHILLA_LR = ChinchillaLRLaw(
    name="chinchilla-lr",
    formula="L(N, D, eta) = E + A/N^alpha + B/D^beta + K (ln eta - ln eta*)^2, "
            "eta* = exp(log_eta0) (N/1e8)^p (D/1e10)^q",
    source="Hoffmann et al. 2022 Eq. 2 plus a quadratic in log peak LR around the Step Law "
           "optimum eta*(N, D) (Li et al. 2025, arXiv 2503.04715, Eq. 6)",
    inputs=("params", "tokens", "peak_lr"),
    params=CHINCHILLA_COEFFICIENTS + (
        Param("K", linear=True, doc="curvature of loss in ln(peak LR) [loss unit]"),
    ) + CHINCHILLA_EXPONENTS + (
        Param("log_eta0", linear=False, lower=-25.0, upper=5.0, search=(-11.5, 0.0),
              doc="ln of the optimal peak LR at N0 = 1e8 params, D0 = 1e10 tokens"),
        Param("p", linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.0),
              doc="optimal-LR exponent in N"),
        Param("q", linear=False, lower=-3.0, upper=3.0, search=(-1.0, 1.0),
              doc="optimal-LR exponent in D"),
    ),
    signs=(1, 1, 1, 1),
    floor="E",
    identified_by={"params": ("A", "alpha"), "tokens": ("B", "beta"), "peak_lr": ("K",)},
)


class ChinchillaCkptLaw(Law):
    """Checkpoint-aware Chinchilla law with an LR-annealing term.

    L(N, D, h) = E + A/N^alpha + B/D^beta + F·h^gamma, h = lr_t / peak_lr at the checkpoint.

    D is the tokens seen at the checkpoint. A checkpoint taken before the LR has decayed sits
    above the loss of a run that ends (fully annealed) at the same D; the term F·h^gamma
    carries that gap, so intermediate checkpoints of cosine/WSD runs can be fitted without
    biasing E, A, B, alpha, beta. With gamma = 1 this is the ``E + A/N^alpha + B/D^beta + F h``
    family of AI2's OLMo-ladder code (Bhagia et al. 2024, arXiv 2412.04403); gamma lets the
    gap fall off faster than linearly in h as cosine runs anneal.
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        alpha, beta, gamma = theta
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        with np.errstate(divide="ignore", invalid="ignore"):
            log_h = np.log(x["h"])  # -inf at h = 0 (decayed to zero): the term vanishes
            n = log_n.shape[0]      # (gamma = 0 there gives NaN, which the fit reads as -inf)
            logphi = np.stack([np.zeros(n), -alpha * log_n, -beta * log_d, gamma * log_h],
                              axis=1)
        dlogphi = np.zeros((n, 4, 3))
        dlogphi[:, 1, 0] = -log_n
        dlogphi[:, 2, 1] = -log_d
        dlogphi[:, 3, 2] = log_h
        return logphi, dlogphi

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` at many (alpha, beta, gamma): thetas (G, 3) -> (G, n, 4), by
        broadcasting (no loop over points); equal to :meth:`log_basis` point by point."""
        thetas = np.asarray(thetas, dtype=float)
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        with np.errstate(divide="ignore"):
            log_h = np.log(x["h"])
        out = np.empty((len(thetas), log_n.shape[0], 4))
        out[:, :, 0] = 0.0
        out[:, :, 1] = -thetas[:, 0:1] * log_n[None, :]
        out[:, :, 2] = -thetas[:, 1:2] * log_d[None, :]
        with np.errstate(invalid="ignore"):   # as log_basis: nan at h = 0 with gamma = 0
            out[:, :, 3] = thetas[:, 2:3] * log_h[None, :]
        return out

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """Batched :meth:`log_basis`: the derivative does not depend on theta (shared view)."""
        _, dlogphi = self.log_basis(np.asarray(thetas, dtype=float)[0], x)
        return (self.log_basis_grid(thetas, x),
                np.broadcast_to(dlogphi, (len(thetas),) + dlogphi.shape))


CHINCHILLA_CKPT = ChinchillaCkptLaw(
    name="chinchilla-ckpt",
    formula="L(N, D, h) = E + A/N^alpha + B/D^beta + F * h^gamma,  h = lr / peak_lr",
    source="Hoffmann et al. 2022 Eq. 2 with the LR term of AI2's OLMo-ladder fits "
           "(Bhagia et al. 2024, arXiv 2412.04403)",
    inputs=("params", "tokens", "h"),
    params=CHINCHILLA_COEFFICIENTS + (
        Param("F", linear=True, doc="loss gap of an un-annealed checkpoint at h = 1"),
    ) + CHINCHILLA_EXPONENTS + (
        Param("gamma", linear=False, lower=0.0, upper=10.0, search=(0.0, 4.0),
              doc="exponent of h in the annealing term"),
    ),
    signs=(1, 1, 1, 1),
    floor="E",
    identified_by={"params": ("A", "alpha"), "tokens": ("B", "beta"), "h": ("F", "gamma")},
    nonnegative=("h",),
)
