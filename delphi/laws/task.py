"""Task laws: from a loss to a benchmark accuracy (Bhagia et al. 2024, arXiv 2412.04403).

Two laws, both in the engine's separable form ``sum_j c_j phi_j(x; theta)`` with
coefficients ``c_j >= 0`` and box bounds (:mod:`delphi.laws.base`), so the one fitting
engine (:func:`delphi.fitting.fit_arrays`) fits them like any loss law: Huber on log
residuals, here of the accuracy.

``task-sigmoid`` (step 2 of the two-step method)
    The paper's Eq. 2, ``Acc(L) = a / (1 + exp(-k (L - L0))) + b`` with ``a <= 0``, written
    with the two asymptotes as the linear coefficients::

        Acc(L) = U * sigmoid(-k (L - L0)) + C * sigmoid(k (L - L0)),     k >= 0

    Because ``sigmoid(z) + sigmoid(-z) = 1`` this is ``C + (U - C) sigmoid(-k (L - L0))``,
    the paper's form with ``b = U`` and ``a = C - U``. ``C`` is the accuracy at very high loss
    (L -> inf) and ``U`` the accuracy at very low loss (L -> -inf), so the task's bounds are
    *box bounds* on the two coefficients: ``C`` lies in [chance, 1] (fitting code bounds it
    below by the task's chance level, :func:`sigmoid_law` ``chance``, or pins it there) and
    ``U`` in [chance, 1], so the curve stays between chance and 1, as the issue's "bounded by
    the task's chance level and 1" asks. The reference code bounds ``a`` in [-1, 0] and ``b``
    in [0, 1], leaving the lower asymptote ``a + b`` free, and adds a helper point
    (L = 0, Acc = 1). The chance level is per task, so the law is built per task by
    :func:`sigmoid_law`.
    Inputs: ``task_loss`` (bits per byte of the correct answer, or any loss, e.g. the C4
    loss in nats for the baseline); output: accuracy as a fraction in (0, 1].

``task-onestep`` (the one-step baseline, the paper's Sec. 4.3 "single step")
    Accuracy directly from N and D through a sigmoid of a Chinchilla power law::

        Acc(N, D) = U * sigmoid(-z) + C * sigmoid(z),
        z = E + A * (N / 1e9)^-alpha + B * (D / 1e11)^-beta

    ``z`` plays ``k (L - L0)``: the sigmoid's scale and offset are absorbed in A, B and E
    (E may be negative). N and D are measured in units of 1e9 parameters and 1e11 tokens so
    that A and B are O(1) (the reference code's ``combined_fit`` uses raw N, D and
    unbounded coefficients). Same asymptotes and bounds as ``task-sigmoid``.

The task-loss law of step 1 is the Chinchilla form on the task's bits per byte (the paper's
Eq. 1, ``L(N, D) = E + A/N^alpha + B/D^beta``, all parameters >= 0, Huber loss): the
existing ``chinchilla`` law (:data:`delphi.laws.CHINCHILLA`); any law of
:data:`delphi.laws.LAWS` reading params/tokens or flops can stand in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import LawError
from .base import Inputs, Law, Param

__all__ = ["SigmoidLaw", "OneStepLaw", "sigmoid_law", "onestep_law", "TASK_SIGMOID",
           "TASK_ONESTEP", "TASK_LAWS", "N_REF", "D_REF"]

#: Reference scales of the one-step law: N in units of 1e9 parameters, D of 1e11 tokens.
N_REF, D_REF = 1e9, 1e11

_SOURCE = ("Bhagia et al. 2024, 'Establishing Task Scaling Laws via Compute-Efficient Model "
           "Ladders' (arXiv 2412.04403)")


def _sigmoid_basis(z: np.ndarray, dz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log phi and d log phi for the two asymptote terms, from z (..., n) and dz (..., n, m).

    phi_U = sigmoid(-z), phi_C = sigmoid(z); d log sigmoid(-z)/dz = -sigmoid(z) and
    d log sigmoid(z)/dz = sigmoid(-z).
    """
    log_u = -np.logaddexp(0.0, z)
    log_c = -np.logaddexp(0.0, -z)
    s = np.exp(log_c)          # sigmoid(z), overflow-free
    logphi = np.stack([log_u, log_c], axis=-1)
    # Written into one array: the products of stacking -s dz and (1 - s) dz, element by
    # element, without the intermediate stacks.
    dlogphi = np.empty(dz.shape[:-1] + (2, dz.shape[-1]))
    np.multiply((-s)[..., None], dz, out=dlogphi[..., 0, :])
    np.multiply((1.0 - s)[..., None], dz, out=dlogphi[..., 1, :])
    return logphi, dlogphi


def _check_chance(chance: float) -> float:
    chance = float(chance)
    if not (math.isfinite(chance) and 0 <= chance < 1):
        raise LawError(f"a task's chance level is a fraction in [0, 1), got {chance!r}")
    return chance


@dataclass(frozen=True)
class SigmoidLaw(Law):
    """Acc(L) = U sigmoid(-k (L - L0)) + C sigmoid(k (L - L0)) (see the module docstring).

    Attributes
    ----------
    chance: the task's chance level (a fraction); fitting code bounds ``C`` below by it (or
        fixes ``C`` at it).
    """

    chance: float = 0.0

    def _z(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """z (G, n) and dz/dtheta (G, n, 2) for thetas (G, 2) = (k, L0)."""
        loss = np.asarray(x["task_loss"], dtype=float)
        k, l0 = thetas[:, :1], thetas[:, 1:2]
        diff = loss[None, :] - l0
        z = k * diff
        dz = np.stack([diff, np.broadcast_to(-k, diff.shape)], axis=-1)
        return z, dz

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        z, dz = self._z(np.asarray(theta, dtype=float)[None, :], x)
        logphi, dlogphi = _sigmoid_basis(z[0], dz[0])
        return logphi, dlogphi

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        z, _ = self._z(np.asarray(thetas, dtype=float), x)
        return np.stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)], axis=-1)

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        z, dz = self._z(np.asarray(thetas, dtype=float), x)
        return _sigmoid_basis(z, dz)

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` alone (B, n, 2): :meth:`log_basis_batch`'s first part, bit for bit (the
        same expressions), without the derivative (the objective alone needs none)."""
        return self.log_basis_grid(thetas, x)


@dataclass(frozen=True)
class OneStepLaw(Law):
    """Acc(N, D) = U sigmoid(-z) + C sigmoid(z), z = E + A n^-alpha + B d^-beta with
    n = N / 1e9, d = D / 1e11 (see the module docstring)."""

    chance: float = 0.0

    def _z(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """z (G, n) and dz/dtheta (G, n, 5) for thetas (G, 5) = (E, A, B, alpha, beta)."""
        ln = np.log(np.asarray(x["params"], dtype=float) / N_REF)[None, :]
        ld = np.log(np.asarray(x["tokens"], dtype=float) / D_REF)[None, :]
        e, a, b, alpha, beta = (thetas[:, i:i + 1] for i in range(5))
        pn = np.exp(-alpha * ln)
        pd_ = np.exp(-beta * ld)
        z = e + a * pn + b * pd_
        dz = np.stack([np.ones_like(z), np.broadcast_to(pn, z.shape),
                       np.broadcast_to(pd_, z.shape), -a * pn * ln, -b * pd_ * ld], axis=-1)
        return z, dz

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        z, dz = self._z(np.asarray(theta, dtype=float)[None, :], x)
        return _sigmoid_basis(z[0], dz[0])

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        z, _ = self._z(np.asarray(thetas, dtype=float), x)
        return np.stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)], axis=-1)

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        z, dz = self._z(np.asarray(thetas, dtype=float), x)
        return _sigmoid_basis(z, dz)

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` alone (B, n, 2): :meth:`log_basis_batch`'s first part, bit for bit (the
        same expressions), without the derivative (the objective alone needs none)."""
        return self.log_basis_grid(thetas, x)


def _asymptotes(chance: float) -> tuple[Param, Param]:
    return (
        Param("U", linear=True, lower=max(chance, 1e-6), upper=1.0,
              doc="accuracy at very low loss (L -> -inf), in [chance, 1] [fraction]"),
        Param("C", linear=True, lower=0.0, upper=1.0,
              doc=f"accuracy at very high loss (L -> inf); bounded below by the task's chance "
                  f"level ({chance:g}) when fitted [fraction]"),
    )


def sigmoid_law(chance: float = 0.0) -> SigmoidLaw:
    """The step-2 law of a task whose chance level is ``chance`` (a fraction in [0, 1)).

    ``U`` is bounded to [chance, 1]; bound ``C`` below by ``chance`` when fitting
    (``bounds={"C": (law.chance, 1)}``, what :func:`delphi.accuracy.predict_accuracy` does)
    or pin it there (``fixed={"C": law.chance}``).

    Raises
    ------
    LawError: ``chance`` outside [0, 1).
    """
    chance = _check_chance(chance)
    return SigmoidLaw(
        name="task-sigmoid",
        formula="Acc(L) = U / (1 + exp(k (L - L0))) + C / (1 + exp(-k (L - L0))); "
                f"chance ({chance:g}) <= C, U <= 1",
        source=f"{_SOURCE}, Eq. 2 (step 2; a = C - U, b = U)",
        inputs=("task_loss",),
        params=_asymptotes(chance) + (
            Param("k", linear=False, lower=0.0, upper=200.0, search=(0.3, 60.0),
                  log_search=True, doc="steepness [1 / loss unit]"),
            Param("L0", linear=False, lower=0.0, upper=20.0, search=(0.0, 6.0),
                  doc="loss at the sigmoid's midpoint [loss unit]"),
        ),
        signs=(1, 1),
        floor=None,
        identified_by={"task_loss": ("k", "L0")},
        nonnegative=("task_loss",),
        chance=chance,
    )


def onestep_law(chance: float = 0.0) -> OneStepLaw:
    """The one-step baseline law of a task whose chance level is ``chance``.

    Raises
    ------
    LawError: ``chance`` outside [0, 1).
    """
    chance = _check_chance(chance)
    return OneStepLaw(
        name="task-onestep",
        formula="Acc(N, D) = U / (1 + exp(z)) + C / (1 + exp(-z)), "
                "z = E + A (N/1e9)^-alpha + B (D/1e11)^-beta; "
                f"chance ({chance:g}) <= C, U <= 1",
        source=f"{_SOURCE}, Sec. 4.3 single-step prediction (reference code: combined_fit)",
        inputs=("params", "tokens"),
        params=_asymptotes(chance) + (
            Param("E", linear=False, lower=-50.0, upper=50.0, search=(-10.0, 10.0),
                  doc="offset of z (absorbs the sigmoid's midpoint) [dimensionless]"),
            Param("A", linear=False, lower=0.0, upper=1e6, search=(1e-3, 1e2), log_search=True,
                  doc="parameter-term scale at N = 1e9 [dimensionless]"),
            Param("B", linear=False, lower=0.0, upper=1e6, search=(1e-3, 1e2), log_search=True,
                  doc="data-term scale at D = 1e11 [dimensionless]"),
            Param("alpha", linear=False, lower=0.0, upper=5.0, search=(0.0, 1.5),
                  doc="parameter exponent [dimensionless]"),
            Param("beta", linear=False, lower=0.0, upper=5.0, search=(0.0, 1.5),
                  doc="token exponent [dimensionless]"),
        ),
        signs=(1, 1),
        floor=None,
        identified_by={"params": ("A", "alpha"), "tokens": ("B", "beta")},
        chance=chance,
    )


#: The registered (generic, chance 0) forms; fitting code builds one per task.
TASK_SIGMOID = sigmoid_law(0.0)
TASK_ONESTEP = onestep_law(0.0)
#: Accuracy laws by name (not in :data:`delphi.laws.LAWS`: they predict an accuracy, not a
#: loss, and ``delphi predict`` cannot use them).
TASK_LAWS: dict[str, Law] = {TASK_SIGMOID.name: TASK_SIGMOID, TASK_ONESTEP.name: TASK_ONESTEP}
