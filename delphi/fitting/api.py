"""Fitting a law to a ladder: point selection, diverged-run exclusion, provenance."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import (DelphiError, FitError, FitWarning, LadderError, NotFittedError, TargetError,
                     user_stacklevel)
from ..core.text import plural
from ..inputs.ladder import RUN_COLUMN_HINT, Exclusion, Ladder, percent
from ..laws import CHECKPOINT_LAWS, Law, get_law
from ..inputs.law_inputs import law_points
from .engine import DEFAULT_DELTA, fit_arrays
from .result import Fit
from ..inputs.readers import as_ladder, load_ladder
from .diagnostics import attach_identification

__all__ = ["fit", "ScalingLawFitter", "DIVERGENCE_THRESHOLD", "MIN_CHECKPOINT_FRACTION",
           "SCREEN_MAX_SHARE", "SCREEN_MIN_RUNS", "screen_cap"]

#: A run whose final loss sits more than this far above the fitted trend (log residual,
#: about 10%) is treated as diverged, excluded and reported.
DIVERGENCE_THRESHOLD = 0.10
# ... and only when it also stands out from the ladder's own scatter by this many robust sigmas.
_DIVERGENCE_SIGMAS = 6.0
# On a ladder of at most this many points, a run at an edge (smallest or largest C, N or D)
# can bend a free law through itself: the trend screen then judges the edge runs too, on a
# fit without them (see _culprit).
_EDGE_CHECK_POINTS = 50

#: Each outlier screen of :func:`fit` (runs far above one with no more of every input; runs
#: far off the fitted trend) excludes at most this share of the points screened, and always
#: up to ``SCREEN_MIN_RUNS``: one that would exclude more stops, excludes nothing for that
#: reason and says so in a warning naming the runs. So many runs out of line at once is
#: a unit, a column or a law that does not fit the ladder (or the screen's own yardstick
#: being off), not a few diverged runs; dropping them would hide it behind a confident fit.
SCREEN_MAX_SHARE = 0.20
SCREEN_MIN_RUNS = 2


def screen_cap(n: int) -> int:
    """The most runs the outlier screens may exclude from ``n`` points:
    ``max(SCREEN_MIN_RUNS, floor(SCREEN_MAX_SHARE * n))`` (5 of 29, 2 of 6)."""
    return max(SCREEN_MIN_RUNS, int(SCREEN_MAX_SHARE * n))


#: Checkpoint laws skip the first quarter of each run: warmup and the initial rapid descent,
#: which the Chinchilla form (a law of well-trained models) does not describe.
MIN_CHECKPOINT_FRACTION = 0.25


def _most_diverged(fit: Fit, threshold: float) -> int | None:
    """The point furthest from the trend, on either side, if it is an outlier: more than
    ``threshold`` (log residual) off the fit and far outside the ladder's scatter, with enough
    points left. Above the trend it has diverged; far below, it is usually in another unit
    (bits per byte in a nats ladder) or from another setup: either way not the same law."""
    if len(fit.y) - 1 < fit.n_free + 1:
        return None
    off = np.abs(fit.residuals)
    sigma = 1.4826 * float(np.median(np.abs(fit.residuals - np.median(fit.residuals))))
    i = int(np.argmax(off))
    if off[i] > threshold and off[i] > _DIVERGENCE_SIGMAS * sigma:
        return i
    return None


def _outlier_reason(fit: Fit, i: int) -> str:
    return _trend_reason(float(fit.y[i]), -float(fit.residuals[i]))


def _trend_reason(loss: float, log_ratio: float) -> str:
    """The reason of a trend exclusion: ``log_ratio`` is log(observed / predicted)."""
    ratio = math.expm1(min(log_ratio, 700.0))  # L_obs / L_pred - 1
    if ratio > 0:
        return (f"diverged: loss {loss:.4g} is {percent(ratio)} above the trend of the other "
                f"runs; not fitted")
    return (f"far below the trend: loss {loss:.4g} is {percent(-ratio)} below what the other "
            f"runs predict (another unit, such as bits per byte in a nats ladder, or another "
            f"setup?); not fitted")


def _off_trend(judge: Fit, rows: pd.DataFrame, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``(r, far)`` for the runs ``rows`` against the trend of ``judge`` (fitted without them):
    their log(observed / predicted), and whether each is an outlier by :func:`_most_diverged`'s
    rule (more than ``threshold`` off and outside the fitted runs' scatter); shape (k,)."""
    with np.errstate(all="ignore"):
        pred = judge.predict({c: rows[c].to_numpy(float) for c in judge.law.inputs})
        r = np.log(rows["loss"].to_numpy(float)) - np.log(pred)
    res = judge.residuals
    sigma = 1.4826 * float(np.median(np.abs(res - np.median(res))))
    far = (np.abs(r) > threshold) & (np.abs(r) > _DIVERGENCE_SIGMAS * sigma)
    return r, far


def _dominated(pts: pd.DataFrame, law: Law, threshold: float) -> dict[int, str]:
    """Runs whose loss is far above that of a run with no more of every input.

    Every final-loss law here falls with each of its inputs (more compute, parameters or
    tokens never raise the loss), so a run whose loss exceeds, by more than ``threshold``
    (log ratio), the loss of a run that had at most its N, D or C has diverged, whatever the
    fitted trend: this needs no fit, so several diverged runs cannot mask each other.

    ``pts`` has one row per run (``run``, ``loss`` and the law's inputs); returns
    ``{position in pts: reason}`` in increasing position. For each run the comparison is with
    the lowest-loss run (first in table order on ties) among the others having every input at
    most its own (x 1 + 1e-9). Sub-quadratic: O(n log n) for one input (sort and running
    minimum), O(n log^2 n) for two (a dominance sweep, see :func:`_lowest_below`); other
    cases compare in blocks of rows. :func:`fit` applies it through :func:`screen_dominated`
    (capped), and keeps no flag whose yardstick is itself off the trend.
    """
    idx, ref = _dominance_pairs(pts, law, threshold)
    return _dominance_reasons(pts, law, idx, ref)


def _dominance_pairs(pts: pd.DataFrame, law: Law,
                     threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``(flagged, reference)``: the positions in ``pts`` :func:`_dominated` flags, increasing,
    and for each the position of the run it is compared with; both shape (k,), int."""
    none = np.zeros(0, dtype=np.int64)
    cols = [c for c in law.inputs if c in ("flops", "params", "tokens")]
    if not cols or len(cols) != len(law.inputs):
        return none, none
    x = pts[cols].to_numpy(float)
    y = np.log(pts["loss"].to_numpy(float))
    n = len(pts)
    if n < 2:
        return none, none
    if threshold >= 0 and x.shape[1] <= 2:
        # The lowest run in the region includes the run itself; when that is the run, every
        # other run there is at least as low, so it cannot be flagged for threshold >= 0.
        j = _lowest_below(x, y)
        j[j == np.arange(n)] = -1
    else:
        j = _lowest_below_blocks(x, y)
    has = j >= 0
    flagged = np.zeros(n, dtype=bool)
    flagged[has] = y[has] - y[j[has]] > threshold
    if n - int(flagged.sum()) < 2:
        return none, none
    idx = np.flatnonzero(flagged)
    return idx, j[idx].astype(np.int64)


def _dominance_reasons(pts: pd.DataFrame, law: Law, idx: np.ndarray,
                       ref: np.ndarray) -> dict[int, str]:
    """``{position: reason}`` for the flagged runs ``idx`` compared with the runs ``ref``."""
    if not len(idx):
        return {}
    cols = [c for c in law.inputs if c in ("flops", "params", "tokens")]
    y = np.log(pts["loss"].to_numpy(float))
    runs = pts["run"].to_numpy(dtype=object)[ref].tolist()
    losses = np.exp(y[idx]).tolist()
    excess = (np.exp(y[idx] - y[ref]) - 1).tolist()
    inputs = " or ".join(cols)
    return {int(i): (f"diverged or mis-tuned: loss {loss:.4g} is {percent(up)} above that of run "
                     f"{run!r}, which had no more {inputs}; not fitted")
            for i, loss, up, run in zip(idx, losses, excess, runs)}


def screen_dominated(pts: pd.DataFrame, law: Law, threshold: float, cap: int
                      ) -> tuple[dict[int, str], dict[int, int], list[int]]:
    """The dominance screen of :func:`fit`: :func:`_dominated`, capped.

    Returns ``(reasons, witness, refused)``: ``{position in pts: reason}`` of the runs to
    exclude; ``{position: position of the run it was compared with}`` for every flagged run
    (refused ones included); and, when more than ``cap`` runs are flagged
    (:data:`SCREEN_MAX_SHARE`), their positions (then none is excluded, ``reasons`` is empty).
    :func:`fit` then makes sure no flag rests on a run that is itself off the trend.
    """
    idx, ref = _dominance_pairs(pts, law, threshold)
    witness = {int(i): int(j) for i, j in zip(idx, ref)}
    if len(idx) > cap:
        return {}, witness, idx.tolist()
    return _dominance_reasons(pts, law, idx, ref), witness, []


def _screen_checkpoint_runs(pts: pd.DataFrame, threshold: float
                            ) -> tuple[pd.DataFrame, list[Exclusion], list[str]]:
    """The dominance screen of :func:`fit` for a checkpoint law, on each run's final checkpoint.

    The final-loss screen (:func:`_dominated`) compares runs by N, D (or C); a checkpoint law
    also reads h = lr / peak_lr, and its loss never falls as h grows (F, gamma >= 0: less
    annealing never lowers the loss). So a run whose final checkpoint's loss is more than
    ``threshold`` (log ratio) above the final checkpoints of at least two other runs with no
    more N, no more D and no lower h (two, so that one run far below the others cannot make
    the runs above it look diverged) has diverged, been mis-tuned or been logged in another
    unit (bits for nats); all its checkpoints are left out. Capped as the other screens
    (:func:`screen_cap` of the number of runs).

    ``pts``: the checkpoints to fit (``run``, ``params``, ``tokens``, ``h``, ``loss``; one row
    each). Returns ``(kept checkpoints, exclusions, refused)``: ``refused`` names the runs it
    would have excluded when there were more than the cap (then none is).
    """
    if not len(pts) or not {"params", "tokens", "h"} <= set(pts.columns):
        return pts, [], []
    order = "step" if "step" in pts.columns and pts["step"].notna().all() else "tokens"
    finals = (pts.sort_values(order, kind="mergesort").groupby("run", sort=False).tail(1)
              .sort_index())
    if len(finals) < 2:
        return pts, [], []
    h = finals["h"].to_numpy(float)
    with np.errstate(divide="ignore"):
        # 1/h, so that "no more of every input" means no lower h (h = 0: fully annealed).
        more_annealed = np.where(h > 0, 1.0 / np.maximum(h, 1e-300), np.inf)
    x = np.column_stack([finals["params"].to_numpy(float), finals["tokens"].to_numpy(float),
                         more_annealed])
    y = np.log(finals["loss"].to_numpy(float))
    if not (np.isfinite(x[:, :2]).all() and np.isfinite(y).all() and (h >= 0).all()):
        return pts, [], []
    j = _lowest_below_blocks(x, y)
    # Far above at least two such runs: one run far below the trend (another unit, a lower
    # eval set) would otherwise make the runs above it look diverged; without the final-loss
    # path's trend screen to judge it, a second witness does (see _judge_witnesses).
    n_far = np.zeros(len(y), dtype=np.int64)
    upper = x * (1 + 1e-9)
    step = max(1, (1 << 22) // max(3 * len(y), 1))
    for start in range(0, len(y), step):
        rows = np.arange(start, min(len(y), start + step))
        below = np.all(x[None, :, :] <= upper[rows, None, :], axis=2)
        below[np.arange(len(rows)), rows] = False
        n_far[rows] = (below & (y[rows, None] - y[None, :] > threshold)).sum(axis=1)
    flagged = (j >= 0) & (n_far >= 2)
    if len(y) - int(flagged.sum()) < 2 or not flagged.any():
        return pts, [], []
    idx = np.flatnonzero(flagged)
    runs = finals["run"].to_numpy(dtype=object)
    if len(idx) > screen_cap(len(y)):
        return pts, [], runs[idx].tolist()
    out = []
    for i in idx:
        k = int(j[i])
        out.append(Exclusion(runs[i], (
            f"diverged or mis-tuned: final loss {math.exp(y[i]):.4g} is "
            f"{percent(math.expm1(y[i] - y[k]))} above that of run {runs[k]!r} (and more than "
            f"{percent(math.expm1(threshold), 1)} above {plural(int(n_far[i]) - 1, 'other run')}), "
            f"which had no more params or tokens and no lower h = lr / peak_lr at its final "
            f"checkpoint (another unit, such as bits for nats?); none of its checkpoints "
            f"fitted")))
    return pts[~pts["run"].isin(runs[idx])].reset_index(drop=True), out, []


def _judge_witnesses(refit, work: pd.DataFrame, fit_pts: pd.DataFrame, dom: Mapping[int, str],
                     witness: Mapping[int, int], refused: Sequence[int], threshold: float
                     ) -> tuple[dict[str, str], set[str]]:
    """Check the runs the dominance flags rest on (their witnesses) against the trend of the
    other runs. Returns ``(low, cleared)``: ``{run: reason}`` of witnesses far below that
    trend (to exclude: the flags resting on them then go), and the flagged runs the trend
    clears, their witness sitting further below it than they sit above it (the pair says the
    witness is low, not that the run diverged).

    The trend leaves out the witness and (when their flags stand) the flagged runs: a fit
    keeping a low witness bends towards it where it has leverage (the smallest or largest
    runs), or, one run against a few, settles far from the law, and would blame the others for
    its drop. ``refit(table) -> Fit``; ``dom``: the flags standing, ``{position in work:
    reason}``; ``witness``: ``{flagged position: witness position}``; ``refused``: positions
    flagged beyond the cap (then the three witnesses most flags rest on are checked one by one,
    each left out of a fit of all the others).
    """
    run_of = work["run"].to_numpy(dtype=object)
    if dom:
        names = {run_of[witness[i]] for i in dom}
        groups = [names]
    elif refused:
        counts: dict[int, int] = {}
        for i in refused:
            counts[witness[i]] = counts.get(witness[i], 0) + 1
        top = sorted(counts, key=lambda j: (-counts[j], j))[:3]
        groups = [{run_of[j]} for j in top]
    else:
        return {}, set()
    low: dict[str, str] = {}
    judges: list[Fit] = []
    for names in groups:
        try:
            judge = refit(fit_pts[~fit_pts["run"].isin(names)])
        except DelphiError:             # too few runs left to judge: the flags stand
            continue
        judges.append(judge)
        rows = work[work["run"].isin(names)]
        r, far = _off_trend(judge, rows, threshold)
        low.update({run: _trend_reason(loss, lr) for run, loss, lr, f
                    in zip(rows["run"], rows["loss"].to_numpy(float), r, far) if f and lr < 0})
    if low or not dom or not judges:
        return low, set()
    i = np.fromiter(dom.keys(), dtype=np.int64)
    j = np.array([witness[k] for k in dom], dtype=np.int64)
    r, _ = _off_trend(judges[0], work.iloc[np.concatenate([i, j])], threshold)
    above, below = r[:len(i)], -r[len(i):]
    return {}, set(run_of[i[below >= above]])      # NaN compares False: the flag stands


def _loss_rank(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rank, by_rank)``: each point's position when sorted by loss, ties by position, and
    the inverse permutation, both shape (n,)."""
    by_rank = np.argsort(y, kind="stable")
    rank = np.empty_like(by_rank)
    rank[by_rank] = np.arange(len(y))
    return rank, by_rank


def _lowest_below(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """For each point i, the index of the lowest ``y`` (first index on ties) among all points
    j, i included, with ``x[j] <= x[i] * (1 + 1e-9)`` in every column; shape (n,).

    ``x`` has shape (n, 1) or (n, 2). One column: sort by it and take a running minimum of the
    loss rank. Two columns: sort by the first; a prefix of that order splits into O(log n)
    aligned blocks (as in a Fenwick tree); at each block size, the points are sorted by the
    second column within their block with a running minimum of the rank, and each point's
    query in a block is a binary search. O(n log^2 n) time, O(n) memory.
    """
    n = len(y)
    rank, by_rank = _loss_rank(y)
    upper = x * (1 + 1e-9)
    order = np.argsort(x[:, 0], kind="stable")
    first = x[order, 0]
    k = np.searchsorted(first, upper[:, 0], side="right")     # prefix [0, k) in that order
    if x.shape[1] == 1:
        return by_rank[np.minimum.accumulate(rank[order])[k - 1]]
    # Second column as integers: b_j <= upper_i  <=>  below[j] < limit[i].
    second = np.sort(x[:, 1])
    below = np.searchsorted(second, x[order, 1], side="left").astype(np.int64)
    limit = np.searchsorted(second, upper[:, 1], side="right").astype(np.int64)
    r = rank[order].astype(np.int64)
    best = np.full(n, n, dtype=np.int64)
    positions = np.arange(n, dtype=np.int64)
    width = np.int64(n + 1)
    level = 0
    while (1 << level) <= n:
        use = ((k >> level) & 1).astype(bool)
        if use.any():
            block = positions >> level
            keys = block * width + below
            sort = np.argsort(keys)      # ties (same block and value) may come in any order
            keys = keys[sort]
            n_blocks = int(block[-1]) + 1
            # Running minimum that restarts at each block: earlier blocks carry larger offsets.
            acc = np.minimum.accumulate((n_blocks - block[sort]) * np.int64(n) + r[sort])
            q_block = (k[use] >> level) - 1
            query = q_block * width + limit[use]
            by_query = np.argsort(query)        # sorted queries search far faster
            at = np.empty(len(query), dtype=np.int64)
            at[by_query] = np.searchsorted(keys, query[by_query], side="left") - 1
            ok = at >= 0
            ok[ok] = keys[at[ok]] // width == q_block[ok]
            cand = np.full(len(at), n, dtype=np.int64)
            cand[ok] = acc[at[ok]] - (n_blocks - q_block[ok]) * np.int64(n)
            best[use] = np.minimum(best[use], cand)
        level += 1
    return by_rank[best]


def _lowest_below_blocks(x: np.ndarray, y: np.ndarray, *, cells: int = 1 << 22) -> np.ndarray:
    """As :func:`_lowest_below` but excluding each point itself, by direct comparison in
    blocks of rows (O(n^2) time, O(cells) memory); -1 where no other point qualifies."""
    n = len(y)
    upper = x * (1 + 1e-9)
    out = np.full(n, -1, dtype=np.int64)
    step = max(1, cells // max(n * x.shape[1], 1))
    for start in range(0, n, step):
        rows = np.arange(start, min(n, start + step))
        smaller = np.all(x[None, :, :] <= upper[rows, None, :], axis=2)
        smaller[np.arange(len(rows)), rows] = False
        masked = np.where(smaller, y[None, :], np.inf)
        j = np.argmin(masked, axis=1)
        out[rows] = np.where(smaller.any(axis=1), j, -1)
    return out


# Runs whose compute agrees within this factor share a budget (an isoFLOP design).
BUDGET_TOLERANCE = 1.05
# Hyperparameter columns that tell repeated seeds (all equal) from a sweep at one size and
# budget; ``lr`` (the logged LR) only stands in when there is no ``peak_lr``.
HPARAM_COLUMNS = ("peak_lr", "learning_rate", "batch_size", "warmup", "warmup_steps",
                   "weight_decay", "beta1", "beta2", "optimizer", "schedule")


def _hparam_keys(rows: pd.DataFrame) -> tuple[list[str], dict[str, list]]:
    """(hyperparameter columns present, one hashable key per row of each), values rounded to
    6 significant digits so float noise in a logged value does not split a config."""
    cols = [c for c in HPARAM_COLUMNS if c in rows.columns]
    if "peak_lr" not in cols and "lr" in rows.columns:
        cols.insert(0, "lr")

    def key(v):
        if isinstance(v, (float, np.floating)) and math.isnan(v):
            return None
        if isinstance(v, (int, float, np.integer, np.floating)):
            return float(f"{float(v):.6g}")
        return str(v)

    return cols, {c: [key(v) for v in rows[c].tolist()] for c in cols}


def _budgets(pts: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
    """``pts`` sorted by compute with its budget ids 1, 2, ... in ``_budget`` (a budget ends
    at the first run above its first run's FLOPs x BUDGET_TOLERANCE), and which budgets hold
    several runs of one configuration, one int8 per budget (None when the ladder has neither
    ``params`` nor ``seed``): 1 for runs of one model size (every run has its N, within 5%),
    2 for runs without N that differ only in ``seed`` (distinct seeds, equal hyperparameters),
    0 otherwise."""
    order = pts.sort_values("flops", kind="mergesort")
    c = order["flops"].to_numpy(float)
    ids = np.empty(len(c), dtype=np.int64)
    budget, start = 0, 0
    while start < len(c):   # one step per budget: it ends at the first run > its first x 1.05
        end = int(np.searchsorted(c, c[start] * BUDGET_TOLERANCE, side="right"))
        budget += 1
        ids[start:end] = budget
        start = end
    order = order.assign(_budget=ids)
    has_n, has_seed = "params" in order.columns, "seed" in order.columns
    if not (has_n or has_seed):
        return order, ids, None
    sizes = pd.Series(ids).groupby(ids).size().to_numpy()
    kind = np.zeros(budget, dtype=np.int8)
    known = np.zeros(budget, dtype=bool)
    if has_n:
        # Only an isoFLOP budget (several model sizes at one compute) has a frontier: runs of
        # one size at one compute are repeated seeds, and keeping the luckiest of them would
        # bias the law low and hide the noise. Those budgets keep every run.
        n = pd.Series(order["params"].to_numpy(float))
        known = n.notna().groupby(ids).all().to_numpy()
        span = (n.groupby(ids).max() / n.groupby(ids).min()).to_numpy()
        kind[(sizes > 1) & known & (span <= BUDGET_TOLERANCE)] = 1
    if has_seed:
        # Without N the runs of a budget cannot be told to be of different sizes; runs that
        # differ in seed and in nothing else the ladder records are seeds of one run.
        seed = order["seed"].reset_index(drop=True)
        distinct = ((seed.groupby(ids).nunique(dropna=True) == sizes).to_numpy()
                    & seed.notna().groupby(ids).all().to_numpy())
        cols, keys = _hparam_keys(order)
        equal = np.ones(budget, dtype=bool)
        for col in cols:
            equal &= (pd.Series(keys[col], dtype=object).groupby(ids)
                      .agg(lambda v: len(set(v)) <= 1).to_numpy(bool))
        kind[(sizes > 1) & ~known & distinct & equal] = 2
    return order, ids, kind


def compute_frontier(pts: pd.DataFrame) -> tuple[pd.DataFrame, list[Exclusion], list[str]]:
    """For a compute-only law: the lowest-loss run of each compute budget.

    A power law in C describes the compute-optimal frontier; the other runs of an isoFLOP
    budget sit above it by design (too large or too small for their compute) and would be
    mistaken for diverged runs. A budget of one model size (sizes within 5%) is not an
    isoFLOP sweep: when its runs share every hyperparameter column the ladder has
    (``peak_lr``, ``batch_size``, ...; ``lr`` without ``peak_lr``) they are repeated seeds and
    all are kept; when those differ it is a hyperparameter sweep, and only the runs of the
    best configuration (that of the lowest-loss run) are kept, the others excluded as
    mis-tuned, and the note says so. Without N (no ``params``) the runs of a budget that
    differ in ``seed`` (distinct, none missing) and in no hyperparameter column are repeated
    seeds too, all kept; other runs of a budget without N are taken as an isoFLOP sweep, and
    the note says that the ladder could not tell sizes from seeds.

    Returns (kept points, exclusions, notes).
    """
    order, ids, seeds = _budgets(pts)
    c, budget = order["flops"].to_numpy(float), int(ids.max(initial=0))
    notes: list[str] = []
    if seeds is not None:
        sweep_out: list[Exclusion] = []
        n_seed = n_sweep = n_by_seed = 0
        swept: set[str] = set()
        seed_budgets = np.flatnonzero(seeds)
        if len(seed_budgets):
            # Budgets are consecutive blocks of the sorted rows: each one-size budget is read
            # from arrays (one pass over the rows for all of them), not selected from the frame.
            bounds = np.flatnonzero(np.diff(ids, prepend=0, append=budget + 1))
            cols, keys = _hparam_keys(order)
            loss = order["loss"].to_numpy(float)
            run_ids, flops = order["run"].tolist(), c.tolist()
            keep_all = np.ones(len(order), bool)
            new_ids = ids.copy()
            next_id = 1
            for b in seed_budgets:
                lo, hi = int(bounds[b]), int(bounds[b + 1])
                varying = [col for col in cols if len(set(keys[col][lo:hi])) > 1]
                configs = [tuple(keys[col][i] for col in varying) for i in range(lo, hi)]
                keep = np.ones(hi - lo, bool)
                if varying:
                    # A sweep at one size: the best configuration's runs (its seeds) stand for
                    # the size; the mis-tuned ones would pull the law up.
                    best_cfg = configs[int(np.argmin(loss[lo:hi]))]
                    keep = np.array([k == best_cfg for k in configs])
                    n_sweep += 1
                    swept.update(varying)
                    won = ", ".join(f"{col}={v:g}" if isinstance(v, float) else f"{col}={v}"
                                    for col, v in zip(varying, best_cfg))
                    sweep_out += [Exclusion(run_ids[i], f"hyperparameter sweep: not the best "
                                            f"{'/'.join(varying)} of its model size and compute "
                                            f"budget (~{flops[i]:.3g} FLOPs; {won} has the lowest "
                                            f"loss)")
                                  for i in range(lo, hi) if not keep[i - lo]]
                if keep.sum() > 1:
                    n_seed += int(seeds[b] == 1)
                    n_by_seed += int(seeds[b] == 2)
                # Each kept run its own (negative) group, so the frontier step keeps them all.
                kept = lo + np.flatnonzero(keep)
                new_ids[kept] = -np.arange(next_id, next_id + len(kept))
                next_id += len(kept)
                keep_all[lo:hi] = keep
            order = order.assign(_budget=new_ids)
            if not keep_all.all():
                order = order.drop(index=order.index[~keep_all])
        notes += _one_size_notes(order, n_seed, n_sweep, swept, len(sweep_out), n_by_seed)
    else:
        sweep_out = []
    return _frontier_of(pts, order, sweep_out, notes)


def _one_size_notes(order: pd.DataFrame, n_seed: int, n_sweep: int, swept: set[str],
                    n_out: int, n_by_seed: int = 0) -> list[str]:
    """compute_frontier's notes on its one-configuration budgets (seeds kept, sweeps' best
    kept; ``n_by_seed`` budgets without N told to be seeds by their ``seed`` column)."""
    notes = []
    if n_by_seed:
        notes.append(f"{n_by_seed} compute budget(s) hold runs without a model size (N) that "
                     f"differ only in seed: taken as repeated seeds, not an isoFLOP sweep; all "
                     f"their runs are fitted")
    if n_seed:
        known = any(c in order.columns for c in HPARAM_COLUMNS + ("lr",))
        notes.append(f"{n_seed} compute budget(s) hold runs of one model size "
                     + ("with equal hyperparameters" if known else
                        "and the ladder has no hyperparameter column (peak_lr, "
                        "batch_size...) to tell seeds from a sweep")
                     + ": taken as repeated seeds, not an isoFLOP sweep; all their runs "
                       "are fitted")
    if n_sweep:
        notes.append(f"{n_sweep} compute budget(s) hold runs of one model size that differ "
                     f"in {', '.join(c for c in HPARAM_COLUMNS + ('lr',) if c in swept)} (a "
                     f"hyperparameter sweep, not seeds): each keeps its best-tuned run(s) "
                     f"(lowest loss), {n_out} mis-tuned run(s) excluded")
    return notes


def _frontier_of(pts: pd.DataFrame, order: pd.DataFrame, sweep_out: list[Exclusion],
                 notes: list[str]) -> tuple[pd.DataFrame, list[Exclusion], list[str]]:
    """compute_frontier's last step: the lowest-loss run of each ``_budget`` group of
    ``order`` (one-size budgets' kept runs are groups of their own), the rest excluded."""
    best = order.loc[order.groupby("_budget")["loss"].idxmin()]
    others = order.drop(index=best.index)
    if others.empty:
        if not sweep_out:
            return pts, [], notes
        return best.drop(columns="_budget").reset_index(drop=True), sweep_out, notes
    reasons: dict[str, str] = {}      # one string per distinct budget text, shared
    excluded = [Exclusion(r, reasons.setdefault(f"{c:.3g}", f"isoFLOP point: not the lowest loss "
                                                           f"of its compute budget (~{c:.3g} FLOPs)"))
                for r, c in zip(others["run"].tolist(), others["flops"].tolist())]
    n_budgets = int(best["_budget"].gt(0).sum())
    unsized = int(others["params"].isna().sum()) if "params" in others.columns else len(others)
    if unsized < len(others):
        notes = notes + [
            f"{len(others) - unsized} run(s) share a compute budget with a lower-loss run of "
            f"another size (an isoFLOP sweep); a power law in C is fitted to the compute-optimal "
            f"frontier ({n_budgets} budgets of the sweep), the rest are excluded (use chinchilla "
            f"to fit every run)"]
    if unsized:
        # Nothing says these are other sizes rather than seeds: the frontier is the reading
        # that holds for an isoFLOP export (their usual source), so it is kept, and said.
        seeds = ("their seed column does not tell them apart (a seed repeats or is missing "
                 "within a budget, or a hyperparameter differs)" if "seed" in others.columns
                 else "the ladder has no seed column")
        notes = notes + [
            f"{unsized} run(s) share a compute budget with a lower-loss run, and without a model "
            f"size (params) nothing tells an isoFLOP sweep from repeated seeds ({seeds}): taken "
            f"as an isoFLOP sweep, a power law in C is fitted to the lowest loss of each of the "
            f"{n_budgets} budgets and the rest are excluded; if they are repeated seeds, give each "
            f"run its seed (distinct within a budget) or its params and tokens, and all are fitted"]
    return (best.drop(columns="_budget").reset_index(drop=True), sweep_out + excluded, notes)


def fit(ladder: Ladder, law: str | Law | None = None, *, fixed: Mapping[str, float] | None = None,
        bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
        fit_max_flops: float | None = None, include_unfinished: bool = False,
        divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0,
        min_checkpoint_fraction: float = MIN_CHECKPOINT_FRACTION,
        warm_start: Mapping[str, float] | None = None, identify: bool = True) -> Fit:
    """Fit a law to a ladder: one point per finished run, or every checkpoint for a checkpoint
    law (``chinchilla-ckpt``).

    Parameters
    ----------
    ladder: the runs (see :class:`~delphi.ladder.Ladder`).
    law: law name or object (``power``: reads ``flops``; ``chinchilla``: ``params``, ``tokens``).
        Required: None (the default, there so that a call without one gets a useful message)
        raises :class:`~delphi.errors.MissingArgumentError` listing the laws.
    fixed, bounds, delta, seed: as in :func:`~delphi.fitting.fit_arrays`.
    fit_max_flops: fit only runs whose compute is at most this many FLOPs.
    include_unfinished: also fit the last checkpoint of runs stopped early (biased low-compute
        points: off by default, and reported when excluded).
    divergence_threshold: runs more than this log ratio (about 10%) above a run with no more
        of every input, or this log residual off the trend of a robust fit (and far outside
        the ladder's scatter), are excluded as diverged (below the trend: as another unit or
        setup) and the law refitted; ``None`` disables both screens. The screens are robust to
        the runs they screen: no exclusion rests on a run that is itself excluded or further
        off the trend than the run excluded, and a screen that would exclude more than
        :data:`SCREEN_MAX_SHARE` of the points (:func:`screen_cap`) excludes none for that
        reason and says so (a :class:`~delphi.errors.FitWarning`, also in :attr:`Fit.warnings`).
        A checkpoint law gets the first screen on each run's final checkpoint, h included
        (:func:`_screen_checkpoint_runs`: a run flagged loses all its checkpoints), not the
        trend screen.
    min_checkpoint_fraction: checkpoint laws skip checkpoints in this first share of each run.
    warm_start: parameter values of a fit of the same law to more of this ladder (a backtest
        fold's full-data fit): skip the global search and refine from there (see
        :func:`~delphi.fitting.fit_arrays`).
    identify: profile the free exponents and floor, list strongly correlated pairs and test
        for a degenerate (constant) fit (:func:`delphi.fitting.diagnostics.identify`, a few
        local refits); the result is :attr:`Fit.identification`, its findings are also in
        :attr:`Fit.warnings` and issued as :class:`~delphi.errors.FitWarning`. Skipped for a
        warm-started refit (a fold of a fit already checked).

    Returns
    -------
    Fit, whose ``exclusions`` list every run left out and why, and whose ``extra`` holds the
    ladder's name, source, metric, unit and the sha256 of the fitted points.

    Raises
    ------
    LadderError: the ladder lacks a column the law reads, or has no finished run, or all its
        rows have one run name (a missing run column: one point to fit).
    LawError, FitError, IdentifiabilityError: see :func:`~delphi.fitting.fit_arrays`.
    MissingArgumentError: no ``law`` given.
    """
    law = get_law(law, needed_by="fit")
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    whole = ladder                  # before fit_max_flops: one run name there is the user's
    excluded: list[Exclusion] = list(ladder.exclusions)
    if fit_max_flops is not None:
        ladder = ladder.select(max_flops=fit_max_flops)
        excluded = list(ladder.exclusions)
    pts, dropped = law_points(ladder, law, include_unfinished, min_checkpoint_fraction,
                              per_checkpoint=law.name in CHECKPOINT_LAWS)
    excluded += dropped
    _refuse_one_run(whole, pts, law, len(law.param_names) - len(fixed or {}))
    notes: list[str] = []
    if include_unfinished and "fraction" in pts.columns:
        partial = pts[pts["fraction"].notna() & (pts["fraction"] < 1)]
        if len(partial) and law.name not in CHECKPOINT_LAWS:
            notes.append(f"included {len(partial)} unfinished run(s) at their last checkpoint "
                         f"({', '.join(partial['run'][:5])}): their losses are above what the "
                         f"finished runs would reach")
    screen = divergence_threshold is not None and math.isfinite(divergence_threshold)
    # Checkpoint laws: a diverged run is caught by its own rising loss (final_points) ...
    trend = screen and law.name not in CHECKPOINT_LAWS
    ckpt_refused: list[str] = []
    n_runs = pts["run"].nunique()
    if screen and law.name in CHECKPOINT_LAWS:
        # ... and a run far above one with no more N, D and no lower h, at their final
        # checkpoints: a run logged in bits, or mis-tuned, does not rise, it sits high.
        pts, ckpt_out, ckpt_refused = _screen_checkpoint_runs(pts, divergence_threshold)
        excluded += ckpt_out
    pending: list[Exclusion] = []       # this pass's frontier and dominance exclusions
    fitted: dict[tuple, Fit] = {}

    def run(table):
        key = tuple(table["run"].tolist()) if law.name not in CHECKPOINT_LAWS else None
        if key in fitted:
            return fitted[key]
        x = {c: table[c].to_numpy(float) for c in law.inputs}
        labels = table["run"].tolist()
        if law.name in CHECKPOINT_LAWS and "step" in table.columns:
            labels = [f"{r}@{s:g}" for r, s in zip(table["run"], table["step"])]
        try:
            result = fit_arrays(law, x, table["loss"].to_numpy(float), labels=labels,
                                fixed=fixed, bounds=bounds, delta=delta, seed=seed,
                                warm_start=warm_start)
        except FitError as exc:
            so_far = excluded + pending
            if not so_far or "cannot fit" not in str(exc):
                raise
            why = "; ".join(f"{e.run}: {e.reason}" for e in so_far[:4])
            more = f" (+{len(so_far) - 4} more)" if len(so_far) > 4 else ""
            raise type(exc)(f"{exc}; {len(so_far)} exclusion(s): {why}{more}") from None
        if key is not None:
            fitted[key] = result
        return result

    # The screens run again until none rests on a run excluded or cleared: the compute
    # frontier and the dominance screen compare runs with each other, so a run far below the
    # trend must stay neither the yardstick of its budget nor that of the runs above it.
    base = pts
    off: dict[str, str] = {}            # run -> reason: excluded by the trend screen
    cleared: set[str] = set()           # flagged by dominance, but its witness is to blame
    refused_trend: list[str] = []
    cap = n_screened = 0
    while True:
        work = base[~base["run"].isin(off)] if off else base
        frontier_out: list[Exclusion] = []
        frontier_notes: list[str] = []
        if law.inputs == ("flops",):
            work, frontier_out, frontier_notes = compute_frontier(work)
        if not n_screened:
            n_screened = len(work)
            cap = screen_cap(n_screened)
        dom, witness, dom_refused = ((screen_dominated(work, law, divergence_threshold, cap))
                                     if screen else ({}, {}, []))
        if cleared:
            dom = {i: why for i, why in dom.items() if work["run"].iloc[i] not in cleared}
        pending = frontier_out + [Exclusion(work["run"].iloc[i], why) for i, why in dom.items()]
        fit_pts = work.drop(index=work.index[list(dom)])
        result = run(fit_pts)
        if not trend or refused_trend:
            break
        fit_pts, result, new, refused = _screen_trend(
            result, fit_pts, run, divergence_threshold, cap - len(off))
        if refused:                     # stop: no trend exclusion at all, said below
            refused_trend, off = [*off, *refused], {}
            continue
        off.update(new)
        leaned = {work["run"].iloc[j] for j in witness.values()}
        if frontier_out:                # a budget's lowest run stood for its other runs
            flops_of = dict(zip(base["run"], base["flops"].to_numpy(float)))
            budgets = np.array([flops_of[e.run] for e in frontier_out])
            leaned |= {r for r in new if np.any(np.abs(np.log(budgets / flops_of[r]))
                                                <= math.log(BUDGET_TOLERANCE))}
        if leaned & set(new):
            continue
        if not witness:
            break
        low, clear = _judge_witnesses(run, work, fit_pts, dom, witness, dom_refused,
                                      divergence_threshold)
        if low and len(off) + len(low) <= cap:
            off.update(low)             # and the flags resting on them go with them
            continue
        if not clear:
            break
        cleared |= clear
    pts = fit_pts.reset_index(drop=True)
    excluded += pending + [Exclusion(r, why) for r, why in off.items()]
    notes += frontier_notes
    if ckpt_refused:
        dom_names, cap, n_screened = ckpt_refused, screen_cap(n_runs), n_runs
        inputs = "params or tokens and no lower h = lr / peak_lr (final checkpoints)"
    else:
        dom_names = work["run"].iloc[dom_refused].tolist()
        inputs = " or ".join(c for c in law.inputs if c in ("flops", "params", "tokens"))
    screen_warnings = _screen_warnings(inputs, divergence_threshold, cap, n_screened,
                                       dom_names, refused_trend)
    for message in screen_warnings:
        warnings.warn(message, FitWarning, stacklevel=user_stacklevel())
    extra = {"ladder": ladder.name, "source": ladder.source, "metric": ladder.metric,
             "unit": ladder.unit, "sha256": ladder.fingerprint(pts),
             "max_flops": float(pts["flops"].max()) if "flops" in pts else None,
             "min_flops": float(pts["flops"].min()) if "flops" in pts else None,
             "max_params": (float(pts["params"].max()) if "params" in pts
                            and pts["params"].notna().all() else None),
             "notes": notes}
    ladder_warnings = tuple(ladder.warnings)
    result = replace(result, exclusions=tuple(excluded), extra=extra,
                     warnings=ladder_warnings + result.warnings + tuple(screen_warnings))
    if identify and warm_start is None:
        result = attach_identification(result)
    return result


def _screen_trend(result: Fit, pts: pd.DataFrame, refit, threshold: float, budget: int
                  ) -> tuple[pd.DataFrame, Fit, dict[str, str], list[str]]:
    """The trend screen of :func:`fit`: exclude the runs far off the fitted trend, worst first.

    ``result`` is ``refit(pts)``; at most ``budget`` runs are excluded (which one at each step:
    :func:`_culprit`). Returns ``(pts, result, excluded, refused)``: the points kept and their fit,
    ``{run: reason}`` in the order excluded, and, when more than ``budget`` runs would go, the
    ones it had found (then nothing is excluded and ``pts``, ``result`` are those given).
    """
    start_pts, start_result = pts, result
    out: dict[str, str] = {}
    # One at a time, worst first: several diverged runs can drag a first fit so far that
    # the good runs look off-trend, and removing the worst lets the fit recover.
    while (i := _most_diverged(result, threshold)) is not None:
        k, why = _culprit(result, pts, i, refit, threshold)
        if len(out) >= budget:
            return start_pts, start_result, {}, [*out, result.labels[k]]
        out[result.labels[k]] = why
        pts = pts.drop(index=pts.index[k])
        result = refit(pts)
    if out:
        # Each exclusion must hold against the final trend, fitted without it (and without
        # the others): one decided on a fit that a later-excluded run had dragged is undone.
        gone = start_pts[start_pts["run"].isin(out)]
        r, far = _off_trend(result, gone, threshold)
        back = set(gone["run"][np.isfinite(r) & ~far])     # no verdict (NaN): it stays out
        if back:
            out = {r: why for r, why in out.items() if r not in back}
            pts = start_pts[~start_pts["run"].isin(out)]
            result = refit(pts)
    return pts, result, out, []


def _culprit(result: Fit, pts: pd.DataFrame, i: int, refit, threshold: float
             ) -> tuple[int, str]:
    """``(position, reason)`` of the run to exclude when ``result``'s worst point ``i`` is an
    outlier: ``i``, or on a small ladder (up to :data:`_EDGE_CHECK_POINTS` points) a run at an
    edge (the smallest or largest compute, N or D) that the trend of the other runs misses by
    more. A free law bends towards an off run with leverage, passes through it and blames its
    neighbour; so ``i`` and the edge runs are all left out of one fit (``refit(table)``), and
    the one it misses most is the culprit."""
    cols = [c for c in ("flops", "params", "tokens") if c in result.x]
    edges = {int(f(np.asarray(result.x[c], float))) for c in cols for f in (np.argmin, np.argmax)}
    if result.n_points <= _EDGE_CHECK_POINTS and edges - {i}:
        suspects = sorted(edges | {i})
        try:
            judge = refit(pts.drop(index=pts.index[suspects]))
        except DelphiError:             # too few runs left to judge: the fit's own verdict
            judge = None
        if judge is not None:
            r, far = _off_trend(judge, pts.iloc[suspects], threshold)
            k = int(np.argmax(np.where(np.isfinite(r), np.abs(r), -np.inf)))
            if suspects[k] != i and far[k]:
                return suspects[k], _trend_reason(float(pts["loss"].iloc[suspects[k]]), r[k])
    return i, _outlier_reason(result, i)


def _refuse_one_run(ladder: Ladder, pts: pd.DataFrame, law: Law, n_free: int) -> None:
    """Raise LadderError when every row of ``ladder`` has one run name, so that its rows are
    read as that run's checkpoints and the fit gets one point for ``n_free`` (> 1) free
    parameters: a ladder of several runs whose run column is missing (or holds one value,
    e.g. the experiment's name). Checkpoint laws fit every checkpoint and are left to their
    own checks."""
    if law.name in CHECKPOINT_LAWS or len(pts) > 1 or len(ladder) < 2 or n_free <= 1:
        return      # (a ladder of several runs cut to one by fit_max_flops is not this)
    runs = ladder.runs
    if len(runs) != 1:
        return
    t = ladder.table
    spread = [f"{c} {t[c].min():.3g}..{t[c].max():.3g}" for c in ("params", "tokens", "flops")
              if c in t.columns and t[c].nunique() > 1]
    raise LadderError(
        f"ladder {ladder.name!r}: all {len(t)} rows have run {runs[0]!r}, so they are read as "
        f"the checkpoints of one run and the fit has 1 point"
        f"{' (' + ', '.join(spread) + ')' if spread else ''}; a ladder is several runs: is the "
        f"run column missing? The column {RUN_COLUMN_HINT}")


def _listed(names: Sequence[str], at_most: int = 5) -> str:
    shown = ", ".join(map(str, names[:at_most]))
    return shown + (f", ... (+{len(names) - at_most} more)" if len(names) > at_most else "")


def _screen_warnings(inputs: str, threshold: float | None, cap: int, n: int,
                     dom_refused: list[str], trend_refused: list[str]) -> list[str]:
    """The warnings of a stopped screen: what it would have excluded (run names), and why it
    did not; ``inputs`` says what the dominance screen compared ("params or tokens")."""
    if not dom_refused and not trend_refused:
        return []
    rule = (f"more than the outlier screens exclude (at most {cap} of the {n} runs: "
            f"{SCREEN_MAX_SHARE:.0%}, or {SCREEN_MIN_RUNS} on a smaller ladder), so none is "
            f"excluded for it: so many runs out of line point at a unit, a column or a law that "
            f"does not fit the ladder rather than at diverged runs; check them, and leave out by "
            f"hand the runs that did diverge")
    out = []
    if dom_refused:
        names = dom_refused
        out.append(f"the outlier screens stop: {len(names)} runs would be excluded as diverged "
                   f"or mis-tuned, each more than {percent(math.expm1(threshold), 1)} above a run "
                   f"with no more {inputs} ({_listed(names)}); that is {rule}")
    if trend_refused:
        out.append(f"the outlier screens stop: more than {cap} runs would be excluded as "
                   f"diverged or far off the trend ({_listed(trend_refused)}); that is {rule}")
    return out


class ScalingLawFitter:
    """scikit-learn-style estimator over :func:`fit`.

    Follows scikit-learn's estimator conventions by duck typing (scikit-learn is not a
    dependency): configuration goes in ``__init__`` and is stored unchanged;
    :meth:`get_params`/:meth:`set_params` read and change it (so ``sklearn.base.clone`` and
    grid searches work); :meth:`fit` returns ``self`` with the fitted state in ``fit_`` (the
    :class:`Fit`), ``params_`` and ``exclusions_``; :meth:`predict` evaluates the law at new
    inputs and :meth:`score` is the R^2 of log loss.

    Example
    -------
    >>> est = ScalingLawFitter("chinchilla", fixed={"E": 1.8}).fit(ladder)   # doctest: +SKIP
    >>> est.predict({"params": [7e10], "tokens": [1.4e12]})                  # doctest: +SKIP
    >>> ScalingLawFitter("power").fit(ladder).predict([1e21, 1e22])          # doctest: +SKIP
    """

    def __init__(self, law: str | Law = "chinchilla", *, fixed: Mapping[str, float] | None = None,
                 bounds: Mapping[str, Sequence[float]] | None = None,
                 delta: float = DEFAULT_DELTA, fit_max_flops: float | None = None,
                 include_unfinished: bool = False,
                 divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0) -> None:
        # Stored as given, validated by fit: scikit-learn's clone and set_params rely on it.
        self.law = law
        self.fixed = fixed
        self.bounds = bounds
        self.delta = delta
        self.fit_max_flops = fit_max_flops
        self.include_unfinished = include_unfinished
        self.divergence_threshold = divergence_threshold
        self.seed = seed

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        """The ``__init__`` arguments, sorted (as scikit-learn lists them)."""
        import inspect
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep: bool = True) -> dict:
        """The estimator's configuration: ``{argument of __init__: value}``.

        ``deep``: also list the parameters of a nested value that has ``get_params`` (as
        ``name__sub``), as scikit-learn does; no argument here has one today.
        """
        out = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params) -> "ScalingLawFitter":
        """Set configuration arguments (``est.set_params(law="power", seed=1)``); returns self.

        The fitted state is kept until the next :meth:`fit`, as in scikit-learn.

        Raises
        ------
        ValueError: a name that is not an argument of ``__init__`` (the message names it and
            the valid ones, as scikit-learn's does).
        """
        valid = self._param_names()
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for estimator {self!r}. "
                                 f"Valid parameters are: {valid!r}.")
            if sub:
                nested = getattr(self, name)
                if not hasattr(nested, "set_params"):
                    raise ValueError(f"Invalid parameter {key!r} for estimator {self!r}: "
                                     f"{name} = {nested!r} has no parameters to set")
                nested.set_params(**{sub: value})
            else:
                setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        import inspect
        sig = inspect.signature(type(self).__init__)
        shown = []
        for name in self._param_names():
            value, default = getattr(self, name), sig.parameters[name].default
            if name == "law" or value is not default and value != default:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def __sklearn_tags__(self):
        """The estimator's tags, read by scikit-learn >= 1.6 only (cross-validation, clone
        checks): a regressor, ``y`` optional (a ladder carries its losses)."""
        from sklearn.utils import InputTags, RegressorTags, Tags, TargetTags
        return Tags(estimator_type="regressor", target_tags=TargetTags(required=False),
                    regressor_tags=RegressorTags(), input_tags=InputTags())

    # ------------------------------------------------------------------ fitting
    def fit(self, ladder, y=None) -> "ScalingLawFitter":
        """Fit the law; returns self.

        Parameters
        ----------
        ladder: a :class:`~delphi.ladder.Ladder`, or a DataFrame of runs as
            :func:`~delphi.load_ladder` reads it (``y`` None). Or, with ``y``, the law's inputs
            as in :meth:`predict` (one row per finished run) and
        y: their final losses, shape (n,) (scikit-learn's ``fit(X, y)``; runs are named by the
            DataFrame's index, else ``row 0``, ``row 1``...).

        Raises as :func:`delphi.fitting.fit`; TargetError for ``X``/``y`` as in :meth:`score`.
        """
        if y is not None:
            ladder = self._ladder_from_xy(ladder, y)
        self.fit_ = fit(ladder, self.law, fixed=self.fixed, bounds=self.bounds, delta=self.delta,
                        fit_max_flops=self.fit_max_flops,
                        include_unfinished=self.include_unfinished,
                        divergence_threshold=self.divergence_threshold, seed=self.seed)
        self.params_ = dict(self.fit_.params)
        self.exclusions_ = list(self.fit_.exclusions)
        return self

    def _final_points(self, ladder) -> tuple[pd.DataFrame, np.ndarray]:
        """A ladder's (or a DataFrame of runs') final points and losses, for ``score(X)``."""

        if get_law(self.law).name in CHECKPOINT_LAWS:
            raise TargetError(f"law {self.law!r} is fitted to whole training curves: score it "
                              f"with score(X, y) on the inputs it reads")
        points, _ = as_ladder(ladder).final_points(include_unfinished=self.include_unfinished)
        return points, points["loss"].to_numpy(float)

    def _ladder_from_xy(self, X, y) -> Ladder:
        law = get_law(self.law)
        if law.name in CHECKPOINT_LAWS:
            raise TargetError(f"law {law.name!r} is fitted to whole training curves: pass a "
                              f"ladder (runs with step, lr...), not fit(X, y)")
        x = _law_inputs(law, X)
        losses = _losses(y, len(next(iter(x.values()))))
        names = None
        if isinstance(X, pd.DataFrame) and X.index.is_unique:
            names = [str(i) for i in X.index]
        if names is None or len(set(names)) != len(names):
            names = [f"row {i}" for i in range(len(losses))]
        frame = pd.DataFrame({"run": names, **{c: v for c, v in x.items()
                                               if not c.startswith("_")}, "loss": losses})
        return load_ladder(frame)

    # ------------------------------------------------------------------ using the fit
    def _fitted(self) -> Fit:
        if not hasattr(self, "fit_"):
            # Also an AttributeError, as scikit-learn's NotFittedError is (hasattr() relies on it)
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call "
                                 f"fit(ladder) first")
        return self.fit_

    def predict(self, X) -> np.ndarray:
        """Predicted loss (the ladder's unit) at inputs ``X`` -> shape (n,).

        ``X``: a dict of the law's inputs (column -> values, shape (n,) or scalars), a pandas
        DataFrame with the law's input columns (others ignored), or, when the law reads a single
        input (``power``: ``flops`` in FLOPs), a 1-D array, list or Series of it (or an (n, 1)
        array). Inputs are in the ladder's units: ``params`` in parameters, ``tokens`` in
        tokens, ``flops`` in FLOPs.

        Raises
        ------
        NotFittedError: not fitted yet (also an AttributeError, as in scikit-learn).
        TargetError: a missing input column (named), inputs of different lengths, an array
            given for a law of several inputs, a value that is not a positive finite number
            (column and row named), or a prediction outside the law's domain.
        """
        result = self._fitted()
        return result.predict(_law_inputs(result.law, X))

    def score(self, X, y=None, sample_weight=None) -> float:
        """R^2 of log loss: ``1 - sum w (log y - log yhat)^2 / sum w (log y - ybar)^2`` with
        ``yhat = predict(X)`` and ``ybar`` the (weighted) mean of ``log y``.

        The coefficient of determination, which scikit-learn regressors return from
        ``score`` (higher is better, 1 is perfect, 0 is no better than a constant), taken on
        the log scale the fit minimises its residuals on: a loss 1% off costs the same at
        any scale.

        Parameters
        ----------
        X: inputs as in :meth:`predict`, n rows; or, with ``y`` None, what :meth:`fit` takes
            (a Ladder or a DataFrame of runs): its finished runs' final losses are scored, so
            ``cross_val_score(est, ladder.table)`` works as ``fit(ladder)`` does.
        y: observed losses, shape (n,), positive.
        sample_weight: optional non-negative weights, shape (n,).

        Raises
        ------
        TargetError: as in :meth:`predict`; ``y`` or ``sample_weight`` of another length than
            ``X`` or with a bad value (its position named); fewer than 2 points, or losses all
            equal (R^2 is undefined there: its denominator is 0).
        """
        result = self._fitted()
        if y is None:
            X, y = self._final_points(X)
        x = _law_inputs(result.law, X)
        n = len(next(iter(x.values())))
        log_y = np.log(_losses(y, n))
        w = np.ones(n) if sample_weight is None else _weights(sample_weight, n)
        if n < 2 or np.count_nonzero(w) < 2:
            raise TargetError(f"R^2 needs at least 2 points with weight > 0, got "
                              f"{np.count_nonzero(w)}")
        log_pred = np.log(result.predict(x))
        mean = float(np.sum(w * log_y) / np.sum(w))
        total = float(np.sum(w * (log_y - mean) ** 2))
        if total == 0.0:
            raise TargetError(f"R^2 is undefined: all {n} losses are equal ({np.exp(mean):.6g}), "
                              f"so there is no variance to explain")
        return 1.0 - float(np.sum(w * (log_y - log_pred) ** 2)) / total


def _law_inputs(law: Law, X) -> dict[str, np.ndarray]:
    """``X`` (dict, DataFrame, or 1-D array for a law of one input) as ``{input: (n,) array}``,
    checked: every input present, numeric, 1-D, one length, positive and finite (where the law
    allows zero, non-negative). Keys starting with ``_`` (context some laws read) pass as is."""
    names = law.inputs
    reads = f"law {law.name!r} reads {', '.join(names)}"
    if isinstance(X, pd.DataFrame) or isinstance(X, Mapping):
        have = list(X.columns) if isinstance(X, pd.DataFrame) else list(X)
        missing = [c for c in names if c not in have]
        if missing:
            kind = "DataFrame" if isinstance(X, pd.DataFrame) else "dict"
            found = ", ".join(map(str, have[:12])) + (" ..." if len(have) > 12 else "")
            raise TargetError(f"{reads}: the {kind} has no {', '.join(map(repr, missing))} "
                              f"column (columns found: {found or 'none'})")
        raw = {c: (X[c].to_numpy() if isinstance(X, pd.DataFrame) else X[c]) for c in names}
        extra = {k: v for k, v in X.items() if isinstance(k, str) and k.startswith("_")} \
            if isinstance(X, Mapping) else {}
    else:
        try:
            arr = np.asarray(X, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TargetError(f"{reads}: cannot read the inputs as numbers ({exc})") from None
        if len(names) != 1:
            raise TargetError(f"{reads}: pass a dict or DataFrame with these columns, not an "
                              f"array of shape {arr.shape} (columns by name, so they cannot be "
                              f"swapped)")
        if arr.ndim == 2 and arr.shape[1] == 1:     # scikit-learn's column vector
            arr = arr[:, 0]
        raw, extra = {names[0]: arr}, {}
    out: dict[str, np.ndarray] = {}
    for c, v in raw.items():
        try:
            a = np.asarray(v, dtype=float)
        except (TypeError, ValueError) as exc:
            raise TargetError(f"input {c!r}: not numbers ({exc})") from None
        if a.ndim > 1:
            raise TargetError(f"input {c!r} has shape {a.shape}; expected one value per row, "
                              f"shape (n,)")
        out[c] = a
    lengths = {c: a.size for c, a in out.items() if a.ndim == 1}
    if len(set(lengths.values())) > 1:
        raise TargetError("inputs of different lengths: "
                          + ", ".join(f"{c} {k}" for c, k in lengths.items()))
    n = next(iter(lengths.values()), 1)
    for c, a in out.items():
        a = np.broadcast_to(a, (n,)) if a.ndim == 0 else a
        bad = ~np.isfinite(a) | ((a < 0) if c in law.nonnegative else (a <= 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            need = "a finite number >= 0" if c in law.nonnegative else "a positive finite number"
            raise TargetError(f"input {c!r} row {i} is {a[i]:g}: {need} is needed "
                              f"({int(bad.sum())} such row(s))")
        out[c] = a
    return {**out, **extra}


def _losses(y, n: int) -> np.ndarray:
    """Observed losses ``y`` as shape (n,), positive and finite; TargetError naming the row."""
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"y: the losses are not numbers ({exc})") from None
    if arr.ndim != 1 or arr.size != n:
        raise TargetError(f"y has shape {arr.shape}; the inputs have {n} row(s): expected ({n},)")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TargetError(f"y row {i} is {arr[i]:g}: a loss must be a positive finite number "
                          f"(R^2 and fits use log loss)")
    return arr


def _weights(w, n: int) -> np.ndarray:
    arr = np.asarray(w, dtype=float)
    if arr.ndim != 1 or arr.size != n:
        raise TargetError(f"sample_weight has shape {arr.shape}; expected ({n},)")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TargetError(f"sample_weight row {i} is {arr[i]:g}: weights must be finite and >= 0")
    return arr
