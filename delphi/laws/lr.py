"""Cross-scale laws with learning-rate-correction terms."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Inputs, Law, Param
from .chinchilla import CHINCHILLA_COEFFICIENTS, CHINCHILLA_EXPONENTS

__all__ = ["ChinchillaLRLaw", "CHINCHILLA_LR", "ChinchillaCkptLaw", "CHINCHILLA_CKPT", "LRFormLaw",
           "lr_form", "CHINCHILLA_LR_ASYM", "CHINCHILLA_LR_QUARTIC", "CHINCHILLA_LR_WIDTH",
           "CHINCHILLA_LR_MULT", "CHINCHILLA_LR_COMPUTE", "CHINCHILLA_LR_ND",
           "CHINCHILLA_LR_ASYM_ND", "LR_FORMS"]

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

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        return self.log_basis_grid(thetas, x)

    def constant_derivative(self, x: Inputs) -> np.ndarray:
        return self.log_basis(np.zeros(len(self.nonlinear_names)), x)[1]


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


# --------------------------------------------------------------------------------------------
# Issue 11, item 4: other forms of the mis-tuning term, compared by backtest on the (Mis)Fitting
# sweeps (benchmarks/bench_lr_forms.py; table in benchmarks/RESULTS.md).

#: Transition width, in ln(LR), of the one-sided quadratics of the asymmetric form: a smooth
#: step (a logistic of u / w) instead of an indicator keeps both basis functions positive and
#: the surface smooth, so the variable-projection search and BFGS see no kink; 0.05 is 5% in
#: LR, far inside the factor-2 spacing of real sweeps, so the surface is piecewise quadratic.
ASYM_WIDTH = 0.05

_LR_TERMS = {"sym": ("K",), "asym": ("K_lo", "K_hi"), "quartic": ("K", "K4")}


@dataclass(frozen=True)
class LRFormLaw(Law):
    """A Chinchilla law with a peak-LR mis-tuning term of a chosen form.

    L(N, D, eta) = E + A/N^alpha + B (N/N0)^g / D^beta + w(N, D) * S(u),
    u = ln eta - ln eta*(N, D),  N0 = 1e8 params, D0 = 1e10 tokens.

    Optimum eta*(N, D) (``optimum``):
      ``steplaw``  eta0 (N/N0)^p (D/D0)^q (Li et al. 2025, arXiv 2503.04715, Eq. 6);
      ``compute``  eta0 (C/C0)^p, C = 6ND, C0 = 6 N0 D0 (DeepSeek LLM, arXiv 2401.02954, Eq. 1:
                   eta_opt = 0.3118 C^-0.125, a power of compute only);
      ``curved``   eta0 exp(p ln(N/N0) + p2 ln^2(N/N0)) (D/D0)^q: ln eta* curving in ln N, as the
                   optimal LR does beyond a few hundred million parameters (On the Nonlinearity
                   of Learning Rate Scaling for LLM Training, arXiv 2606.29158).
    Shape S(u) (``shape``), every coefficient linear and >= 0:
      ``sym``      K u^2 (today's ``chinchilla-lr``; Wortsman et al. 2023, arXiv 2309.14322);
      ``asym``     K_lo u^2 sigma(-u/w) + K_hi u^2 sigma(u/w), w = :data:`ASYM_WIDTH`: separate
                   curvature below and above the optimum;
      ``quartic``  K u^2 + K4 u^4: steeper than a parabola far from the optimum.
    Width w(N, D): 1, times (N/N0)^s if ``width_n``, (D/D0)^r if ``width_d``, and (D/D0)^-beta
      if ``width_data`` (the mis-tuning cost multiplies the data term: a mis-tuned LR wastes
      tokens, so its cost shrinks as the data term does).
    ``interaction``: frees g, the data-term coefficient B (N/N0)^g (g = 0 otherwise, fixed out of
      the law): the loss gained from more tokens grows with model size, the N x D interaction of
      Kaplan et al. 2020 (arXiv 2001.08361, Eq. 1.5) in a form linear in its coefficients.

    Inputs: params N [parameters], tokens D, peak_lr eta (dimensionless), each shape (n,).
    The coefficients are linear (solved exactly during the search), the exponents and ln eta0
    non-linear (searched); :meth:`log_basis_batch` is the one vectorised implementation.
    """

    optimum: str = "steplaw"
    shape: str = "sym"
    width_n: bool = False
    width_d: bool = False
    width_data: bool = False
    interaction: bool = False

    def _eval(self, thetas: np.ndarray, x: Inputs, grad: bool = True):
        """(logphi (B, n, k), dlogphi (B, n, k, m) or None) at thetas (B, m)."""
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        log_n, log_d = np.log(x["params"]), np.log(x["tokens"])
        cn, cd = log_n - LOG_N0, log_d - LOG_D0
        b, m, n = thetas.shape[0], thetas.shape[1], log_n.shape[0]

        def col(i):
            return thetas[:, i:i + 1]

        alpha, beta, log_eta0, p = col(0), col(1), col(2), col(3)
        du = np.zeros((n, m))  # du/dtheta: u is linear in theta
        du[:, 2] = -1.0
        u = np.log(x["peak_lr"])[None, :] - log_eta0
        if self.optimum == "compute":
            u = u - p * (cn + cd)[None, :]
            du[:, 3] = -(cn + cd)
            i = 4
        else:
            u = u - p * cn[None, :] - col(4) * cd[None, :]
            du[:, 3], du[:, 4] = -cn, -cd
            i = 5
            if self.optimum == "curved":
                u = u - col(5) * (cn ** 2)[None, :]
                du[:, 5] = -cn ** 2
                i = 6
        logw = np.zeros((b, n))
        dlogw = np.zeros((n, m))
        if self.width_n:
            logw = logw + col(i) * cn[None, :]
            dlogw[:, i] = cn
            i += 1
        if self.width_d:
            logw = logw + col(i) * cd[None, :]
            dlogw[:, i] = cd
            i += 1
        if self.width_data:
            logw = logw - beta * cd[None, :]
            dlogw[:, 1] = -cd
        au = np.maximum(np.abs(u), _TINY)
        l2 = 2 * np.log(au)
        inv = 1.0 / np.copysign(au, u)  # d ln|u| / du
        if self.shape == "sym":
            ls, ds = [l2], [2 * inv]
        elif self.shape == "quartic":
            ls, ds = [l2, 2 * l2], [2 * inv, 4 * inv]
        else:
            sp_lo = np.logaddexp(0.0, u / ASYM_WIDTH)   # -ln sigma(-u/w)
            sp_hi = np.logaddexp(0.0, -u / ASYM_WIDTH)  # -ln sigma(u/w)
            ls = [l2 - sp_lo, l2 - sp_hi]
            ds = [2 * inv - np.exp(-sp_hi) / ASYM_WIDTH, 2 * inv + np.exp(-sp_lo) / ASYM_WIDTH]
        k = 3 + len(ls)
        logphi = np.empty((b, n, k))
        logphi[:, :, 0] = 0.0
        logphi[:, :, 1] = -alpha * log_n[None, :]
        logphi[:, :, 2] = -beta * log_d[None, :]
        if self.interaction:
            logphi[:, :, 2] += col(i) * cn[None, :]
        for j, term in enumerate(ls):
            logphi[:, :, 3 + j] = term + logw
        if not grad:
            return logphi, None
        dlogphi = np.zeros((b, n, k, m))
        dlogphi[:, :, 1, 0] = -log_n[None, :]
        dlogphi[:, :, 2, 1] = -log_d[None, :]
        if self.interaction:
            dlogphi[:, :, 2, i] = cn[None, :]
        for j, d in enumerate(ds):
            dlogphi[:, :, 3 + j, :] = d[:, :, None] * du[None] + dlogw[None]
        return logphi, dlogphi

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        logphi, dlogphi = self._eval(theta, x)
        return logphi[0], dlogphi[0]

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        return self._eval(thetas, x, grad=False)[0]

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        return self._eval(thetas, x)

    def optimal_lr(self, values, params, tokens) -> np.ndarray:
        """eta*(N, D) for fitted ``values`` (the vertex, u = 0); shape of the broadcast inputs."""
        cn, cd = np.log(params) - LOG_N0, np.log(tokens) - LOG_D0
        if self.optimum == "compute":
            return np.exp(values["log_eta0"] + values["p"] * (cn + cd))
        out = values["log_eta0"] + values["p"] * cn + values["q"] * cd
        if self.optimum == "curved":
            out = out + values["p2"] * cn ** 2
        return np.exp(out)


_LR_TERM_DOCS = {
    "K": "curvature of loss in ln(peak LR) [loss unit]",
    "K_lo": "curvature of loss in ln(peak LR) below the optimum (LR too low) [loss unit]",
    "K_hi": "curvature of loss in ln(peak LR) above the optimum (LR too high) [loss unit]",
    "K4": "quartic coefficient of loss in ln(peak LR) [loss unit]",
}


def lr_form(name: str, *, optimum: str = "steplaw", shape: str = "sym", width_n: bool = False,
             width_d: bool = False, width_data: bool = False, interaction: bool = False,
             formula: str, source: str) -> LRFormLaw:
    lin = tuple(Param(k, linear=True, doc=_LR_TERM_DOCS[k]) for k in _LR_TERMS[shape])
    nl = (Param("log_eta0", linear=False, lower=-25.0, upper=5.0, search=(-11.5, 0.0),
                doc="ln of the optimal peak LR at N0 = 1e8 params, D0 = 1e10 tokens"),)
    if optimum == "compute":
        nl += (Param("p", linear=False, lower=-3.0, upper=3.0, search=(-1.0, 0.5),
                     doc="optimal-LR exponent in compute C = 6ND"),)
    else:
        nl += (Param("p", linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.0),
                     doc="optimal-LR exponent in N"),
               Param("q", linear=False, lower=-3.0, upper=3.0, search=(-1.0, 1.0),
                     doc="optimal-LR exponent in D"))
    if optimum == "curved":
        nl += (Param("p2", linear=False, lower=-3.0, upper=3.0, search=(-1.0, 1.0),
                     doc="curvature of ln(optimal LR) in ln(N/N0)"),)
    if width_n:
        nl += (Param("s", linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.5),
                     doc="exponent of N in the mis-tuning width"),)
    if width_d:
        nl += (Param("r", linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.5),
                     doc="exponent of D in the mis-tuning width"),)
    if interaction:
        nl += (Param("g", linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.5),
                     doc="exponent of N/N0 in the data-term coefficient (N x D interaction)"),)
    identified = {"params": ("A", "alpha"), "tokens": ("B", "beta"),
                  "peak_lr": tuple(p.name for p in lin)}
    return LRFormLaw(
        name=name, formula=formula, source=source, inputs=("params", "tokens", "peak_lr"),
        params=CHINCHILLA_COEFFICIENTS + lin + CHINCHILLA_EXPONENTS + nl,
        signs=(1,) * (3 + len(lin)), floor="E", identified_by=identified,
        optimum=optimum, shape=shape, width_n=width_n, width_d=width_d,
        width_data=width_data, interaction=interaction,
        # seven or more searched parameters: a denser quasi-random search for the same basin
        # whatever the seed
        search_points=8192 if len(nl) + 2 >= 7 else 4096)


_BASE = "E + A/N^alpha + B/D^beta"
_STEP = "eta* = exp(log_eta0) (N/1e8)^p (D/1e10)^q"
CHINCHILLA_LR_ASYM = lr_form(
    "chinchilla-lr-asym", shape="asym",
    formula=f"L = {_BASE} + K_lo u^2 sigma(-u/0.05) + K_hi u^2 sigma(u/0.05), "
            f"u = ln eta - ln eta*, {_STEP}",
    source="chinchilla-lr with separate curvature below/above the optimal LR")
CHINCHILLA_LR_QUARTIC = lr_form(
    "chinchilla-lr-quartic", shape="quartic",
    formula=f"L = {_BASE} + K u^2 + K4 u^4, u = ln eta - ln eta*, {_STEP}",
    source="chinchilla-lr with a quartic term (steeper far from the optimum)")
CHINCHILLA_LR_WIDTH = lr_form(
    "chinchilla-lr-width", width_n=True, width_d=True,
    formula=f"L = {_BASE} + K (N/1e8)^s (D/1e10)^r u^2, u = ln eta - ln eta*, {_STEP}",
    source="chinchilla-lr with a mis-tuning width that scales with N and D")
CHINCHILLA_LR_MULT = lr_form(
    "chinchilla-lr-mult", width_data=True,
    formula=f"L = {_BASE} + K (D/1e10)^-beta u^2, u = ln eta - ln eta*, {_STEP}",
    source="chinchilla-lr with the mis-tuning term multiplying the data term")
CHINCHILLA_LR_COMPUTE = lr_form(
    "chinchilla-lr-compute", optimum="compute",
    formula=f"L = {_BASE} + K u^2, u = ln eta - ln eta*, "
            f"eta* = exp(log_eta0) (6ND / 6e18)^p",
    source="Hoffmann et al. 2022 Eq. 2 plus a quadratic in log peak LR around the DeepSeek "
           "optimum eta* = c C^p (DeepSeek LLM 2024, arXiv 2401.02954, Eq. 1)")
CHINCHILLA_LR_ND = lr_form(
    "chinchilla-lr-nd", interaction=True,
    formula=f"L = E + A/N^alpha + B (N/1e8)^g / D^beta + K u^2, u = ln eta - ln eta*, {_STEP}",
    source="chinchilla-lr with an N x D interaction in the data term (Kaplan et al. 2020, "
           "arXiv 2001.08361, Eq. 1.5, in a form linear in its coefficients)")
CHINCHILLA_LR_ASYM_ND = lr_form(
    "chinchilla-lr-asym-nd", optimum="curved", shape="asym", interaction=True,
    formula="L = E + A/N^alpha + B (N/1e8)^g / D^beta + K_lo u^2 sigma(-u/0.05) "
            "+ K_hi u^2 sigma(u/0.05), u = ln eta - ln eta*, "
            "ln eta* = log_eta0 + p ln(N/1e8) + p2 ln^2(N/1e8) + q ln(D/1e10)",
    source="the form chosen by backtest on the (Mis)Fitting sweeps (issue 11, item 4): "
           "Hoffmann et al. 2022 Eq. 2 with an N x D interaction in the data term (Kaplan et al. "
           "2020, arXiv 2001.08361), an asymmetric quadratic in log peak LR and the Step Law "
           "optimum (Li et al. 2025, arXiv 2503.04715) curved in ln N (arXiv 2606.29158)")
"""``chinchilla-lr-asym-nd``: the mis-tuning form chosen by evidence (issue 11, item 4).

Formula (see :class:`LRFormLaw`, ``optimum="curved"``, ``shape="asym"``, ``interaction``)::

    L = E + A/N^alpha + B (N/N0)^g / D^beta + K_lo u^2 sigma(-u/w) + K_hi u^2 sigma(u/w)
    u = ln eta - ln eta*,  ln eta* = log_eta0 + p ln(N/N0) + p2 ln^2(N/N0) + q ln(D/D0)

N0 = 1e8 params, D0 = 1e10 tokens, w = 0.05. On the (Mis)Fitting sweeps (arXiv 2502.18969;
``benchmarks/bench_lr_forms.py``, mean / max |rel. error| of final loss at each run's own peak
LR; LOSO = leave one of the 10 sizes out)::

    form                     fit <= 200M -> 300M/400M   fit <= 100M -> 200M-400M   LOSO
    chinchilla-lr            0.71% / 2.31%              1.17% / 6.72%              0.93%
    chinchilla-lr-asym       0.61% / 1.49%              0.85% / 6.59%              0.95%
    asym + nd (no curve)     0.54% / 1.34%              0.58% / 3.99%              0.96%
    chinchilla-lr-asym-nd    0.44% / 1.10%              0.71% / 3.43%              0.94%

Most of the gain is the N x D interaction (g ~ 0.11: larger models gain more from more tokens,
which the additive Chinchilla form cannot say); the asymmetric term fits K_lo ~ 4 K_hi there
(too low an LR costs more than too high, in ln LR, over those sweeps' range). The curved optimum
helps the first split only (without it, 0.54% there but 0.58% on the second split): a sign of how
far one split can be trusted. Seeds 0 and 7 reach the same optimum. It has 12 free parameters: on a ladder without LR sweeps across sizes and
token counts, prefer ``chinchilla-lr``.
"""

#: The alternative mis-tuning forms, registered next to ``chinchilla-lr`` (none is a default).
LR_FORMS = (CHINCHILLA_LR_ASYM, CHINCHILLA_LR_QUARTIC, CHINCHILLA_LR_WIDTH, CHINCHILLA_LR_MULT,
            CHINCHILLA_LR_COMPUTE, CHINCHILLA_LR_ND, CHINCHILLA_LR_ASYM_ND)
