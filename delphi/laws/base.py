"""Laws as data: named parameters, which are linear, the formula and its gradient.

Every law delphi fits has the *separable* form

    L(x) = sum_j  s_j * c_j * phi_j(x; theta),        c_j >= 0,  s_j in {+1, -1}

with linear coefficients ``c_j`` (E, A, B, ...) and non-linear parameters ``theta``
(exponents, offsets). A law supplies ``log phi_j`` and its derivative in ``theta``; the one
fitting engine (:mod:`delphi.fitting`) serves every law: for fixed ``theta`` the model is
linear in ``c`` (variable projection, Golub & Pereyra 1973), so it searches ``theta`` densely
and solves for ``c`` exactly, then refines all parameters together with analytic gradients.
Writing ``c_j = exp(gamma_j)`` and evaluating log L with a signed log-sum-exp is the
parameterisation of Besiroglu et al. 2024 (arXiv 2404.10102, Sec. 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..errors import LawError, TargetError

__all__ = ["Param", "Law", "Inputs"]

#: The law's inputs: ladder column name -> 1-D float array of shape (n,).
Inputs = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Param:
    """One named parameter of a law.

    Attributes
    ----------
    name:
        The field's name for it (``E``, ``A``, ``alpha``...).
    linear:
        True for a coefficient ``c_j`` of a term (solved exactly during the search).
    lower, upper:
        Default bounds in natural units (a coefficient's lower bound is >= 0).
    search:
        For non-linear parameters, the range searched densely before refinement.
    log_search:
        Search that range log-uniformly (for positive scale-like parameters).
    doc:
        What the parameter means, with units.
    """

    name: str
    linear: bool
    lower: float = 0.0
    upper: float = math.inf
    search: tuple[float, float] | None = None
    log_search: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Law:
    """A scaling law: formula, parameters and gradient, as data for the fitting engine.

    Subclasses implement :meth:`log_basis`. ``params`` lists the linear coefficients first,
    one per term and in term order, then the non-linear parameters.

    Attributes
    ----------
    name: CLI/API name (``power``, ``chinchilla``...).
    formula: the formula in plain text.
    source: paper and equation the law comes from.
    inputs: ladder columns the law reads, e.g. ``("params", "tokens")``.
    params: the parameters (see :class:`Param`).
    signs: sign ``s_j`` of each term (+1 adds to the loss, -1 subtracts).
    floor: name of the constant term (the irreducible loss ``E``), if any.
    identified_by: input -> parameters that need that input to vary to be identifiable.
    nonnegative: inputs that may be 0 (e.g. the annealing area S2 before any decay).
    search_points: quasi-random search size for three or more free non-linear parameters
        (smaller for laws that are expensive to evaluate).
    """

    name: str
    formula: str
    source: str
    inputs: tuple[str, ...]
    params: tuple[Param, ...]
    signs: tuple[int, ...]
    floor: str | None = None
    identified_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    nonnegative: tuple[str, ...] = ()
    search_points: int = 4096

    def __post_init__(self) -> None:
        linear = [p for p in self.params if p.linear]
        if self.params[: len(linear)] != tuple(linear):
            raise LawError(f"law {self.name!r}: linear parameters must come first")
        if len(self.signs) != len(linear):
            raise LawError(f"law {self.name!r}: one sign per linear term is needed")

    # ------------------------------------------------------------------ structure
    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def linear_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.linear)

    @property
    def nonlinear_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if not p.linear)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise LawError(f"law {self.name!r} has no parameter {name!r}; "
                       f"its parameters are {', '.join(self.param_names)}")

    # ------------------------------------------------------------------ the formula
    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """``log phi_j(x; theta)`` and its derivative in ``theta``.

        Parameters
        ----------
        theta: shape (m,), the non-linear parameters in :attr:`nonlinear_names` order.
        x: the inputs, each of shape (n,).

        Returns
        -------
        (logphi, dlogphi): shapes (n, k) and (n, k, m).
        """
        raise NotImplementedError

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` at many non-linear parameter vectors: thetas (G, m) -> (G, n, k).

        The global search calls this; laws override it with a vectorised version.
        """
        return np.stack([self.log_basis(t, x)[0] for t in thetas])

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """``log phi`` and its derivative at many parameter vectors, for batched refits.

        thetas (B, m) -> (logphi (B, n, k), dlogphi (B, n, k, m)). The default loops over
        :meth:`log_basis`; laws whose derivative does not depend on ``theta`` override it.
        """
        pairs = [self.log_basis(t, x) for t in thetas]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` alone at many parameter vectors: thetas (B, m) -> (B, n, k), the
        first part of :meth:`log_basis_batch` (laws with a :meth:`constant_derivative`
        override it to skip the derivative)."""
        return self.log_basis_batch(thetas, x)[0]

    def constant_derivative(self, x: Inputs) -> np.ndarray | None:
        """``d log phi / d theta``, shape (n, k, m), when it does not depend on ``theta``
        (the law's log basis is linear in its non-linear parameters): the derivative
        :meth:`log_basis_batch` returns for every row. None (the default) when it depends on
        ``theta``. Batched refits take it once per problem instead of once per evaluation,
        with :meth:`log_basis_values`: a subclass that changes the law's basis overrides the
        three methods together."""
        return None

    #: ``stack_inputs(xs) -> (pre, dlogphi (M, n, k, m))`` and ``log_basis_stacked(thetas (B,
    #: m), pre, member (B,)) -> logphi (B, n, k)``: :meth:`log_basis_batch` for rows of M
    #: problems of the same size at once (``member[b]``: the problem of row b), where the
    #: derivative does not depend on ``theta``; None for a law that has no such form.
    stack_inputs = None

    def row_cost(self, x: Inputs) -> float:
        """Cost of evaluating the law at one row of ``x``, in units of a closed-form law's row
        (1.0 here). The fitting engine searches a problem of ``n * row_cost`` units or more on a
        subsample first (:func:`delphi.fitting.engine.global_search`)."""
        return 1.0

    def check_inputs(self, x: Inputs, *, what: str = "target") -> dict[str, np.ndarray]:
        """Validate and convert the inputs the law needs.

        Raises
        ------
        TargetError
            ``x`` is not a mapping; an input is missing, not numbers, non-finite or not
            positive; inputs of different lengths (a scalar goes with any length).
        """
        if not isinstance(x, Mapping):
            raise TargetError(f"law {self.name!r} takes its {what} inputs as a mapping of "
                              f"{', '.join(self.inputs)} to values, got {type(x).__name__}")
        out, scalars = {}, set()
        for name in self.inputs:
            if name not in x or x[name] is None:
                raise TargetError(f"law {self.name!r} needs {name!r} for the {what} "
                                  f"(it reads {', '.join(self.inputs)})")
            try:
                arr = np.asarray(x[name], dtype=float)
            except (TypeError, ValueError, OverflowError):
                raise TargetError(f"{what} {name} must be numbers, got "
                                  f"{x[name]!r:.60}") from None
            if arr.ndim == 0:
                scalars.add(name)
                arr = arr.reshape(1)
            if name in self.nonnegative:
                bad, need = ~np.isfinite(arr) | (arr < 0), "a finite number >= 0"
            else:
                bad, need = ~np.isfinite(arr) | (arr <= 0), "a positive finite number"
            if bad.any():
                raise TargetError(f"{what} {name} must be {need}, got {float(arr[bad][0]):g}")
            out[name] = arr
        sizes = {a.size for k, a in out.items() if k not in scalars}
        if len(sizes) > 1 or any(a.ndim != 1 for a in out.values()):
            raise TargetError(f"{what} inputs of law {self.name!r} must be one value per point, "
                              f"all of one length (or a scalar): got "
                              + ", ".join(f"{k} {np.shape(x[k])}" for k in out))
        if sizes and scalars:      # a scalar stands for every point
            n = sizes.pop()
            out = {k: (np.full(n, a[0]) if k in scalars else a) for k, a in out.items()}
        for name, value in x.items():  # context the law reads as is (e.g. LR schedules)
            if isinstance(name, str) and name.startswith("_"):
                out[name] = value
        return out

    def log_predict(self, values: Mapping[str, float], x: Inputs) -> np.ndarray:
        """log L(x) for parameter ``values`` (name -> natural value), shape (n,).

        Computed as a signed log-sum-exp so that extreme inputs do not overflow.

        Raises
        ------
        TargetError
            The prediction is not positive (negative terms dominate): outside the law's domain.
        """
        x = self.check_inputs(x)
        theta = np.array([values[n] for n in self.nonlinear_names], dtype=float)
        logphi, _ = self.log_basis(theta, x)
        with np.errstate(divide="ignore"):
            gamma = np.log(np.array([values[n] for n in self.linear_names], dtype=float))
        log_pred, ok = signed_logsumexp(gamma[None, :] + logphi, np.asarray(self.signs))
        if not ok.all():
            raise TargetError(f"law {self.name!r} predicts a non-positive loss there")
        return log_pred

    def predict(self, values: Mapping[str, float], x: Inputs) -> np.ndarray:
        """L(x) in the ladder's loss unit, shape (n,). See :meth:`log_predict`."""
        return np.exp(self.log_predict(values, x))

    def describe(self) -> str:
        """One paragraph: name, formula, parameters and source."""
        params = "; ".join(f"{p.name}: {p.doc}" for p in self.params)
        return f"{self.name}: {self.formula}\n  {params}\n  source: {self.source}"


def signed_logsumexp(z: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(sum_j s_j exp(z_ij)) along axis 1, and a mask of rows where the sum is > 0.

    Terms with ``z = -inf`` (a zero coefficient) contribute nothing.
    """
    finite = np.where(np.isfinite(z), z, -np.inf)
    m = np.max(finite, axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(signs[None, :] * np.exp(finite - m[:, None]), axis=1)
    ok = s > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = m + np.log(np.where(ok, s, 1.0))
    return np.where(ok, out, np.nan), ok
