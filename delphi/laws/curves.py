"""Loss-curve laws for one model size: the loss at every step of a run under its LR schedule.

Their inputs come from the run's schedule (:func:`delphi.schedules.features`): ``S1`` the
summed LR up to the step (the "forward area", warmup included) and ``S2`` the annealing area
with momentum. The multi-power law also reads the whole per-step LR sequence of each run,
passed as context (``_lrs``: one array per run, ``_group``: each row's run index, ``step``).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict

import numpy as np

from ..errors import LawError
from ..inputs.schedules import (GROUP_RATIO, MultiPowerGroups, multipower_groups,
                                multipower_ld_grid)
from .base import Inputs, Law, Param

__all__ = ["AnnealingLaw", "MultiPowerLaw", "ANNEALING", "MULTIPOWER"]

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

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` at many alphas: thetas (G, 1) -> (G, n, 3), by broadcasting."""
        log_s1 = np.log(x["S1"])
        with np.errstate(divide="ignore"):
            log_s2 = np.log(x["S2"])
        out = np.empty((len(thetas), log_s1.shape[0], 3))
        out[:, :, 0] = 0.0
        out[:, :, 1] = -np.asarray(thetas, dtype=float)[:, :1] * log_s1[None, :]
        out[:, :, 2] = log_s2[None, :]
        return out

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """Batched :meth:`log_basis`: the derivative does not depend on alpha (shared view)."""
        _, dlogphi = self.log_basis(np.asarray(thetas, dtype=float)[0], x)
        return (self.log_basis_grid(thetas, x),
                np.broadcast_to(dlogphi, (len(thetas),) + dlogphi.shape))

    def log_basis_values(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        return self.log_basis_grid(thetas, x)

    def constant_derivative(self, x: Inputs) -> np.ndarray:
        return self.log_basis(np.zeros(len(self.nonlinear_names)), x)[1]

    def stack_inputs(self, xs) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """ln S1 and ln S2 of M problems of n points each, (M, n) each, and each one's
        derivative (M, n, 3, 1) (see :attr:`delphi.laws.Law.stack_inputs`)."""
        log_s1 = np.stack([np.log(x["S1"]) for x in xs])
        with np.errstate(divide="ignore"):
            log_s2 = np.stack([np.log(x["S2"]) for x in xs])
        d = np.stack([self.log_basis(np.zeros(1), x)[1] for x in xs])
        return (log_s1, log_s2), d

    def log_basis_stacked(self, thetas: np.ndarray, pre, member: np.ndarray) -> np.ndarray:
        """:meth:`log_basis_grid` with row b on the inputs of problem ``member[b]`` (the
        same arithmetic, element by element): thetas (B, 1) -> (B, n, 3)."""
        log_s1, log_s2 = pre
        ls1 = log_s1[member]
        out = np.empty(ls1.shape + (3,))
        out[:, :, 0] = 0.0
        out[:, :, 1] = -np.asarray(thetas, dtype=float)[:, :1] * ls1
        out[:, :, 2] = log_s2[member]
        return out


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
    LD is summed over per-checkpoint groups of drops (:func:`delphi.schedules.multipower_groups`,
    relative error ~1e-4), built once per set of inputs and evaluated for all checkpoints of
    all runs, and in the search for a whole block of parameter points, by broadcasting.
    """

    def log_basis(self, theta: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        alpha, c, beta, gamma = (float(v) for v in theta)
        if not all(math.isfinite(v) for v in (c, beta, gamma)) or c < 0 or beta < 0:
            raise LawError(f"multi-power parameters need finite C >= 0, beta >= 0 and gamma; "
                           f"got C={c!r}, beta={beta!r}, gamma={gamma!r}")
        log_s1 = np.log(x["S1"])
        n = log_s1.shape[0]
        ld, grad = multipower_ld_grid(_groups(x), c, beta, gamma)
        pos = ld > 0
        with np.errstate(divide="ignore"):
            log_ld = np.where(pos, np.log(np.where(pos, ld, 1.0)), -np.inf)
        logphi = np.stack([np.zeros(n), -alpha * log_s1, log_ld], axis=1)
        dlogphi = np.zeros((n, 3, 4))
        dlogphi[:, 1, 0] = -log_s1
        dlogphi[:, 2, 1:] = np.where(pos[:, None], grad / np.where(pos, ld, 1.0)[:, None], 0.0)
        return logphi, dlogphi

    def approximate_inputs(self, x: Inputs, ratio: float | None = None) -> Inputs | None:
        """The inputs ``x`` with coarser groups of LR drops (``ratio``, default
        :data:`APPROX_GROUP_RATIO`), for a cheaper, approximate evaluation of the law in the
        intermediate steps of a fit (e.g. the subsample of a two-level search), never for its
        final objective; not used by the fitting engine yet (issue 26, seventh pass:
        benchmarks/probe_multipower_cases.py ``--approx-first-level``). None when ``x``
        already is approximate.

        The groups are :func:`delphi.schedules.multipower_groups`'s at the larger ratio: the
        same midpoint rule for Luo et al. 2025's LD sum (arXiv 2503.12811, Sec. 3, Eq. (MPL))
        over wider bands of distance from each checkpoint, the nearest ``~1/(r - 1)`` drops
        still single exact terms. Error (checked, not proven: tests/test_multipower_approx.py
        asserts 3e-3 at ratio 1.25 and 1e-2 at 1.5 on cosine, linear, WSD and 1-sqrt WSD runs
        of 1,500 steps over the search range; LD is 0 at the same rows, e.g. everywhere
        under a constant LR):
        LD's largest relative difference from the law's own groups (ratio 1.08) at six
        parameter points on 2,000-3,000-step runs was 1.7e-4 to 1.2e-3 at ratio 1.25
        (40,267 groups instead of 96,216 on a 2,000-step cosine run logged at every step to
        80%), 7.8e-4 to 4.2e-3 at ratio 1.5 (25,079).
        """
        if x.get("_group_ratio") is not None:
            return None
        out = dict(x)
        out["_group_ratio"] = APPROX_GROUP_RATIO if ratio is None else float(ratio)
        return out

    def row_cost(self, x: Inputs) -> float:
        """Groups of LR drops per checkpoint (~60 for a 2,000-step run): the law sums one
        term per group at every row."""
        n = np.asarray(x["step"]).shape[0]
        return max(1.0, _groups(x).drop.size / max(n, 1))

    def log_basis_grid(self, thetas: np.ndarray, x: Inputs) -> np.ndarray:
        """``log phi`` for a block of points: thetas (G, 4) -> (G, n, 3), no loop over points
        (blocks of points bounded in memory); equal to :meth:`log_basis` point by point."""
        thetas = np.asarray(thetas, dtype=float)
        log_s1 = np.log(x["S1"])
        n = log_s1.shape[0]
        groups = _groups(x)
        out = np.zeros((len(thetas), n, 3))
        out[:, :, 1] = -thetas[:, :1] * log_s1[None, :]
        block = max(1, _SCREEN_BLOCK_ELEMENTS // max(1, groups.drop.size))
        for a in range(0, len(thetas), block):
            t = thetas[a:a + block]
            ld, _ = multipower_ld_grid(groups, t[:, 1], t[:, 2], t[:, 3], grad=False)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[a:a + block, :, 2] = np.where(ld > 0, np.log(np.where(ld > 0, ld, 1.0)),
                                                  -np.inf)
        return out

    def log_basis_batch(self, thetas: np.ndarray, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """``log phi`` and its derivative at a batch of points: thetas (B, 4) ->
        ((B, n, 3), (B, n, 3, 4)), vectorised; equal to :meth:`log_basis` point by point."""
        thetas = np.asarray(thetas, dtype=float)
        log_s1 = np.log(x["S1"])
        n, b = log_s1.shape[0], len(thetas)
        groups = _groups(x)
        logphi = np.zeros((b, n, 3))
        dlogphi = np.zeros((b, n, 3, 4))
        logphi[:, :, 1] = -thetas[:, :1] * log_s1[None, :]
        dlogphi[:, :, 1, 0] = -log_s1[None, :]
        block = max(1, _GRID_ELEMENTS // max(1, 4 * groups.drop.size))
        for a in range(0, b, block):
            t = thetas[a:a + block]
            ld, grad = multipower_ld_grid(groups, t[:, 1], t[:, 2], t[:, 3])
            pos = ld > 0
            safe = np.where(pos, ld, 1.0)
            with np.errstate(divide="ignore"):
                logphi[a:a + block, :, 2] = np.where(pos, np.log(safe), -np.inf)
            dlogphi[a:a + block, :, 2, 1:] = np.where(pos[..., None], grad / safe[..., None],
                                                      0.0)
        return logphi, dlogphi


#: Group ratio of :meth:`MultiPowerLaw.approximate_inputs` (the law's own is
#: :data:`delphi.schedules.GROUP_RATIO`, 1.08).
APPROX_GROUP_RATIO = 1.25

# Groups of LR drops of recent inputs, keyed by a digest of (steps, run index, LRs): a fit
# evaluates the law hundreds of times on the same inputs.
_GROUP_CACHE: OrderedDict[bytes, MultiPowerGroups] = OrderedDict()
_GROUP_CACHE_SIZE = 8
# Float64 elements of one (points x groups) block in MultiPowerLaw.log_basis_batch (x 4 with
# the derivatives)
_GRID_ELEMENTS = 1 << 21
# ... and in log_basis_grid (the screen: hundreds of points without derivatives). Blocks of
# 2^21 were fresh 16 MB buffers per block, faulted in page by page and streamed through memory;
# blocks of 2^18 reuse multipower_ld_grid's kept buffers and stay in cache: the screen of
# benchmarks/bench_curves.py's multi-power case (380 points on 15,852 groups) 82 -> 39 ms
# (2026-12-03), the same numbers bit for bit (each point's arithmetic does not depend on
# which points share its block).
_SCREEN_BLOCK_ELEMENTS = 1 << 18


# The last inputs seen, by identity (the fitting engine passes the same arrays every call):
# (step, _group, _lrs list, its elements) -> groups. Holding the objects keeps their ids unique.
_LAST: list = [None]


def _groups(x: Inputs) -> MultiPowerGroups:
    """Per-checkpoint drop groups of the inputs ``x`` (``step``, ``_group``, ``_lrs``), cached
    (inputs are not to be modified in place between calls)."""
    ratio = x.get("_group_ratio")
    ratio = GROUP_RATIO if ratio is None else float(ratio)
    objs = (x["step"], x["_group"], x["_lrs"], tuple(x["_lrs"]))
    last = _LAST[0]
    if last is not None and last[3] == ratio and len(last[0]) == len(objs[3]) and all(
            a is b for a, b in zip(last[0], objs[3])) and all(
            a is b for a, b in zip(last[1], objs[:3])):
        return last[2]
    steps = np.asarray(x["step"], dtype=float).astype(np.int64)
    group = np.asarray(x["_group"]).astype(np.int64)
    lrs = [np.ascontiguousarray(r.lrs() if hasattr(r, "lrs") and callable(r.lrs) else r,
                                dtype=float) for r in x["_lrs"]]
    h = hashlib.blake2b(digest_size=20)
    h.update(np.float64(ratio).tobytes())
    h.update(np.ascontiguousarray(steps).tobytes())
    h.update(np.ascontiguousarray(group).tobytes())
    for r in lrs:
        h.update(np.int64(r.size).tobytes())
        h.update(r.tobytes())
    key = h.digest()
    hit = _GROUP_CACHE.get(key)
    if hit is None:
        hit = multipower_groups(lrs, steps, group, ratio=ratio)
        _GROUP_CACHE[key] = hit
        while len(_GROUP_CACHE) > _GROUP_CACHE_SIZE:
            _GROUP_CACHE.popitem(last=False)
    _LAST[0] = (objs[3], objs[:3], hit, ratio)
    return hit


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
