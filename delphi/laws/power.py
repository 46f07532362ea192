"""Saturating power laws in one input: compute C (``power``) or parameters N (``power-n``)."""

from __future__ import annotations


import numpy as np

from .base import Inputs, Law, Param

__all__ = ["PowerLaw", "POWER", "POWER_N"]


class PowerLaw(Law):
    """L(X) = E + A·X^(-alpha) in the law's one input X, L in the ladder's loss unit.

    ``power``: X = C, training FLOPs (Kaplan et al. 2020, Eq. 1.3, with the irreducible term
    of Henighan et al. 2020); Marin's MoE forecast fits it with E fixed at 1.5.
    ``power-n``: X = N, parameters, for a ladder trained on one token count D (Kaplan et al.
    2020, Eq. 1.1, L(N) = (N_c/N)^alpha_N, with a floor E that then holds D's term too).
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        (alpha,) = theta
        log_c = np.log(x[self.inputs[0]])
        n = log_c.shape[0]
        logphi = np.stack([np.zeros(n), -alpha * log_c], axis=1)
        dlogphi = np.zeros((n, 2, 1))
        dlogphi[:, 1, 0] = -log_c
        return logphi, dlogphi

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        log_c = np.log(x[self.inputs[0]])
        out = np.zeros((len(thetas), log_c.shape[0], 2))
        out[:, :, 1] = -thetas[:, :1] * log_c[None, :]
        return out

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        logphi = self.log_basis_grid(thetas, x)
        _, dlogphi = self.log_basis(thetas[0], x)  # linear in theta: the same for every draw
        return logphi, np.broadcast_to(dlogphi, (len(thetas),) + dlogphi.shape)

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        return self.log_basis_grid(thetas, x)

    def constant_derivative(self, x: Inputs) -> np.ndarray:
        return self.log_basis(np.zeros(1), x)[1]

    def stack_inputs(self, xs) -> tuple[np.ndarray, np.ndarray]:
        """ln X of M problems of n points each, (M, n), and each one's derivative
        (M, n, 2, 1) (see :attr:`delphi.laws.Law.stack_inputs`)."""
        log_c = np.stack([np.log(x[self.inputs[0]]) for x in xs])
        dlogphi = np.zeros(log_c.shape + (2, 1))
        dlogphi[:, :, 1, 0] = -log_c
        return log_c, dlogphi

    def log_basis_stacked(self, thetas: np.ndarray, pre, member: np.ndarray) -> np.ndarray:
        """:meth:`log_basis_grid` with row b on the inputs of problem ``member[b]`` (the
        same arithmetic, element by element): thetas (B, 1) -> (B, n, 2)."""
        out = np.zeros((len(thetas), pre.shape[1], 2))
        out[:, :, 1] = -thetas[:, :1] * pre[member]
        return out


POWER = PowerLaw(
    name="power",
    formula="L(C) = E + A * C^(-alpha)",
    source="Kaplan et al. 2020 (arXiv 2001.08361) Eq. 1.3; Henighan et al. 2020 irreducible term",
    inputs=("flops",),
    params=(
        Param("E", linear=True, doc="irreducible loss [loss unit]"),
        Param("A", linear=True, doc="compute-term scale [loss unit * FLOPs^alpha]"),
        Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.0, 1.5),
              doc="compute exponent [dimensionless]"),
    ),
    signs=(1, 1),
    floor="E",
    identified_by={"flops": ("A", "alpha")},
)


POWER_N = PowerLaw(
    name="power-n",
    formula="L(N) = E + A * N^(-alpha)",
    source="Kaplan et al. 2020 (arXiv 2001.08361) Eq. 1.1, with an irreducible term E",
    inputs=("params",),
    params=(
        Param("E", linear=True, doc="loss at infinite N for the ladder's one token count D "
                                    "(irreducible loss plus D's term) [loss unit]"),
        Param("A", linear=True, doc="parameter-term scale [loss unit * params^alpha]"),
        Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.0, 1.5),
              doc="parameter exponent [dimensionless]"),
    ),
    signs=(1, 1),
    floor="E",
    identified_by={"params": ("A", "alpha")},
)
