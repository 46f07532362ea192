"""Hyperparameter laws: power laws for the optimal peak LR and batch size."""

from __future__ import annotations

import numpy as np

from .base import Inputs, Law, Param

__all__ = ["MonomialLaw", "DEEPSEEK_LR", "DEEPSEEK_BATCH", "STEPLAW_LR", "STEPLAW_BATCH"]


class MonomialLaw(Law):
    """y = c * prod_i x_i^(p_i): one term, no floor. Fitted with the same engine (Huber on log y,
    so a robust log-log regression). ``params`` are ``c`` then one exponent per input."""

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        logs = np.stack([np.log(x[name]) for name in self.inputs], axis=1)  # (n, m)
        logphi = (logs @ theta)[:, None]
        return logphi, logs[:, None, :]

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        logs = np.stack([np.log(x[name]) for name in self.inputs], axis=1)
        return (thetas @ logs.T)[:, :, None]


def _monomial(name, quantity, inputs, exps, source, doc_c):
    symbols = {"flops": "C", "params": "N", "tokens": "D"}
    formula = f"{quantity} = c * " + " * ".join(f"{symbols[i]}^{e}" for i, e in zip(inputs, exps))
    return MonomialLaw(
        name=name, formula=formula, source=source, inputs=tuple(inputs),
        params=(Param("c", linear=True, doc=doc_c),) + tuple(
            Param(e, linear=False, lower=-3.0, upper=3.0, search=(-1.5, 1.5),
                  doc=f"exponent of {symbols[i]}") for i, e in zip(inputs, exps)),
        signs=(1,), floor=None,
        identified_by={i: (e,) for i, e in zip(inputs, exps)})


DEEPSEEK_LR = _monomial(
    "deepseek-lr", "eta_opt", ["flops"], ["p"],
    "DeepSeek LLM 2024 (arXiv 2401.02954) Eq. 1: eta_opt = 0.3118 C^-0.125", "LR prefactor")
DEEPSEEK_BATCH = _monomial(
    "deepseek-batch", "B_opt", ["flops"], ["p"],
    "DeepSeek LLM 2024 (arXiv 2401.02954) Eq. 1: B_opt = 0.2920 C^0.3271 (tokens)",
    "batch prefactor [tokens]")
STEPLAW_LR = _monomial(
    "steplaw-lr", "eta_opt", ["params", "tokens"], ["p", "q"],
    "Li et al. 2025 Step Law (arXiv 2503.04715) Eq. 6: eta_opt = 1.79 N^-0.713 D^0.307",
    "LR prefactor")
STEPLAW_BATCH = _monomial(
    "steplaw-batch", "B_opt", ["tokens"], ["q"],
    "Li et al. 2025 Step Law (arXiv 2503.04715) Eq. 7: B_opt = 0.58 D^0.571 (tokens)",
    "batch prefactor [tokens]")
