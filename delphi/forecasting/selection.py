"""Law and recipe selection by backtest, and model averaging (issue 11, items 2 and 3).

A *candidate* is a recipe: a law, its fixed values (a free or pinned floor E) and the Huber
delta. :func:`compare` scores every candidate the same way -- leave-future-out refits on the
same cuts (:func:`delphi.calibration.leave_future_out`), errors on the same (cut, run) pairs,
the nested coverage of their calibrated intervals, and AIC/BIC of the full fit -- so the
choice rests on how each recipe *extrapolated* on this ladder, not on how well it fits it.

``law="auto"`` in :func:`delphi.predict` picks the candidate with the lowest mean
leave-future-out |log error|, each fold's errors weighing :data:`RECENCY` times the previous
fold's (:func:`fold_weights`), and reports the runner-up and the spread between their
forecasts. ``ensemble=True`` averages the candidates' log forecasts with inverse-MSE weights
(Bates & Granger 1969, "The combination of forecasts"; the weights of a combination of
unbiased forecasts whose errors are uncorrelated), and widens the interval by the
between-model spread (the variance of a mixture: the weighted within-model variance plus the
weighted spread of the members around the combined forecast).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from ..errors import (DelphiError, FitError, FitWarning, LadderError, LawError, TargetError, option,
                     user_stacklevel)
from ..fitting import DEFAULT_DELTA, fit
from ..inputs.ladder import Ladder
from ..laws import get_law
from ..core.quantiles import check_level
from ..core.records import positive_number
from ..core.text import level_percent
from .candidates import (ENSEMBLE_RULE, RECENCY, Candidate, default_candidates,
                         parse_candidates)
from .reference import FAMILY, ReferenceClass, load_reference, outside_class
from .calibration import (MIN_FOLDS, calibration_backtest, cut_levels, first_cut_formula,
                          first_cut_points)
from ..inputs.readers import as_ladder
from ..inputs.law_inputs import budget_labels
from ..fitting.diagnostics import attach_identification, refuse_degenerate

__all__ = ["Candidate", "CandidateScore", "Comparison", "compare", "default_candidates",
           "parse_candidates", "fold_weights", "ENSEMBLE_RULE", "RECENCY"]

#: Fewer scored predictions than this make the ranking weak evidence (said in a note).
_FEW = 10
#: Scores within this share of the best are a near tie (said in a note).
TIE = 0.05
#: A member weighing less than this is left out of an ensemble (and the rest renormalised).
MIN_WEIGHT = 0.01

@dataclass(frozen=True)
class CandidateScore:
    """How one candidate did in :func:`compare`."""

    candidate: Candidate
    n_scored: int
    """Leave-future-out predictions scored (the (cut, run) pairs common to every candidate)."""
    mean_abs_error: float | None
    """Mean |log L_pred - log L_obs| over them (~ relative error)."""
    max_abs_error: float | None
    mse: float | None
    """Mean squared log error over them, each fold weighted by :func:`fold_weights` (the
    ensemble weight is 1 / mse)."""
    coverage_before: float | None
    """Nested coverage of the delta-method new-run intervals (all of this candidate's
    calibrated predictions; :func:`delphi.calibration.calibration_backtest`)."""
    coverage_after: float | None
    """Nested coverage of the calibrated new-run intervals."""
    n_calibrated: int
    aic: float | None
    """AIC of the full fit on its fitted points: n ln(RSS/n) + 2k (log residuals, k free
    parameters). Comparable only between candidates fitting the same points."""
    bic: float | None
    """BIC: n ln(RSS/n) + k ln n."""
    n_points: int | None
    params: dict
    warnings: tuple[str, ...] = ()
    error: str | None = None
    """Why the candidate could not be scored (None when it was)."""
    score: float | None = None
    """Mean |log error| with each fold weighted by :func:`fold_weights` (later folds, fitted
    on more budgets, count more): what candidates are ranked by (``mean_abs_error`` when
    None)."""
    reference_error: float | None = None
    """Mean |log error| of this candidate's law in the reference class of public ladders at
    this ladder's number of rungs (each ladder weighing the same; :func:`reference_scores`),
    when the ladder has too few cuts to rank by its own backtest; None otherwise."""
    reference_mse: float | None = None
    """Mean squared log error there (the ensemble weight is 1 / it under the reference rule)."""
    backtest: object = field(default=None, repr=False, compare=False)
    """Its :class:`~delphi.calibration.CalibrationBacktest` (``backtest.errors``: every
    leave-future-out prediction, with ``budget`` to match pairs across candidates)."""

    @property
    def scored(self) -> bool:
        return self.error is None and self.mean_abs_error is not None

    @property
    def rank_key(self) -> float:
        """What candidates are ranked by: :attr:`score`, else :attr:`mean_abs_error`."""
        return self.score if self.score is not None else self.mean_abs_error

    def to_dict(self) -> dict:
        return {**self.candidate.to_dict(), "backtested": self.scored, "n_scored": self.n_scored,
                "mean_abs_error": self.mean_abs_error, "score": self.score,
                "max_abs_error": self.max_abs_error,
                "mse": self.mse, "coverage_before": self.coverage_before,
                "coverage_after": self.coverage_after, "n_calibrated": self.n_calibrated,
                "aic": self.aic, "bic": self.bic, "n_points": self.n_points,
                "params": self.params, "warnings": list(self.warnings), "error": self.error,
                "reference_error": self.reference_error}


@dataclass(frozen=True)
class Comparison:
    """Candidates ranked by leave-future-out |error| (:attr:`CandidateScore.score`; best
    first; unscored ones last)."""

    ladder: str
    scores: list[CandidateScore]
    cuts: list[float]
    """The cuts [FLOPs] every candidate was refitted at."""
    level: float
    notes: list[str] = field(default_factory=list)
    rule: str = "backtest"
    """``"backtest"``: ranked by the ladder's own leave-future-out errors. ``"reference"``:
    the ladder has fewer than 3 cuts to rank on, so candidates are ranked by how their laws
    extrapolated on the public ladders at this many rungs (:func:`reference_scores`)."""
    reference: dict | None = None
    """Under the reference rule: the rungs, rung window and ladders the errors come from."""

    @property
    def ranked(self) -> list[CandidateScore]:
        """The ranked candidates, best first (under the reference rule, those with a
        reference error, by it)."""
        if self.rule == "reference":
            # The reference class scores laws, not floors or deltas: ties between recipes of
            # one law go to the ladder's own backtest, then to the fewest fixed parameters.
            return sorted((s for s in self.scores if s.reference_error is not None),
                          key=lambda s: (s.reference_error, not s.scored,
                                         s.rank_key if s.scored else 0.0,
                                         len(s.candidate.fixed)))
        return [s for s in self.scores if s.scored]

    @property
    def best(self) -> CandidateScore:
        """The candidate with the lowest :attr:`CandidateScore.score` (recency-weighted
        leave-future-out |error|).

        Raises FitError when none could be scored (each one's reason is given)."""
        if not self.ranked:
            why = "; ".join(f"{s.candidate.label}: {s.error}" for s in self.scores)
            raise FitError(f"no candidate law could be ranked on ladder {self.ladder!r}: "
                           f"{why}")
        return self.ranked[0]

    @property
    def best_reason(self) -> str:
        """One sentence saying why :attr:`best` won: the lowest recency-weighted
        leave-future-out score (``rule="backtest"``) or the lowest reference-class error
        (``rule="reference"``, and why the ladder's own backtest could not rank), or that it
        was the only candidate that could be ranked; with the runner-up and its score, how an
        exact tie was broken, and "near tie" when the runner-up scores within :data:`TIE` of
        it. Under the reference rule, a candidate backtested on the ladder but not ranked by
        the reference class (:func:`delphi.reference.outside_class`) is named, with why.

        Raises FitError when no candidate could be ranked (as :attr:`best`)."""
        b, ranked = self.best, self.ranked
        ref = self.reference or {}
        label = b.candidate.label
        if self.rule == "reference":
            key = (lambda s: s.reference_error)
            n_lad = len(ref.get("ladders", []))
            what = (f"the lowest reference-class error ({b.reference_error:.2%}: its law's mean "
                    f"|error| on {n_lad} public ladder(s) in folds fitted on "
                    f"{ref.get('window', '?')} rungs)")
            scored = [s for s in self.scores if s.scored]
            why = (f"this ladder's {len(self.cuts)} leave-future-out cut(s) are fewer than "
                   f"{MIN_FOLDS} to rank on" if len(self.cuts) < MIN_FOLDS else
                   f"only {scored[0].candidate.label if scored else 'one candidate'} could be "
                   f"backtested at this ladder's {len(self.cuts)} cut(s)")
            how = f", ranked by the reference class because {why}"
            # A candidate backtested here but left out of that ranking is named in the
            # reason itself, not only in a note: the winner has no backtest to beat it on.
            out = [s for s in self.scores if s.scored and s.reference_error is None]
            if out:
                skip = ref.get("not_ranked", {})
                how += "; " + "; ".join(
                    f"{s.candidate.label}, backtested here (mean |error| "
                    f"{s.mean_abs_error:.2%}), is not ranked: "
                    + (skip[s.candidate.law] if s.candidate.law in skip else
                       "its law has no errors on the public ladders the others share")
                    for s in out)
        else:
            key = (lambda s: s.rank_key)
            what = (f"the lowest score ({b.rank_key:.2%}: mean leave-future-out |log error| on "
                    f"{b.n_scored} (cut, run) pair(s), each fold weighing {RECENCY:g}x the one "
                    f"before)")
            how = ("" if b.n_scored >= _FEW else
                   f", on only {b.n_scored} prediction(s): weak evidence")
        if len(self.scores) == 1:
            return f"{label} is the only candidate compared; it has {what}{how}"
        if len(ranked) == 1:
            means = "ranked by the reference class" if self.rule == "reference" else \
                "backtested leave-future-out"
            return (f"{label} is the only one of the {len(self.scores)} candidates that could be "
                    f"{means} (the others' reasons are in their rows and the notes); it has "
                    f"{what}{how}")
        ru = ranked[1]
        if key(ru) == key(b):
            if self.rule == "reference" and b.candidate.law == ru.candidate.law:
                broke = ("the ladder's own backtest" if b.scored and ru.scored
                         and b.rank_key < ru.rank_key else
                         "it being backtested and the runner-up not" if b.scored
                         and not ru.scored else "the fewest fixed parameters")
                vs = (f"; tied with {ru.candidate.label} (the reference class scores the law "
                      f"{b.candidate.law}, not its floor or Huber delta), the tie broken by "
                      f"{broke}")
            else:
                vs = (f"; tied with {ru.candidate.label}, the tie broken by the fewest free "
                      f"parameters")
        elif key(ru) <= key(b) * (1 + TIE):
            vs = (f"; a near tie with runner-up {ru.candidate.label} ({key(ru):.2%}, within "
                  f"{TIE:.0%}): weak evidence for either, "
                  f"{option('ensemble=True', '--ensemble')} averages them")
        else:
            vs = f"; runner-up {ru.candidate.label} has {key(ru):.2%}"
        return f"{label} has {what}{how}{vs}"

    def weights(self) -> dict[str, float]:
        """Ensemble weights by label: 1/mse normalised (Bates & Granger 1969), members below
        1% left out and the rest renormalised."""
        ranked = self.ranked
        if not ranked:
            return {}
        mse = [s.reference_mse if self.rule == "reference" else s.mse for s in ranked]
        inv = np.array([1.0 / max(m, 1e-12) for m in mse])
        w = inv / inv.sum()
        keep = w >= MIN_WEIGHT
        w = np.where(keep, w, 0.0)
        w = w / w.sum()
        return {s.candidate.label: float(x) for s, x in zip(ranked, w) if x > 0}

    def to_dict(self) -> dict:
        return {"ladder": self.ladder, "design": "leave-future-out", "level": self.level,
                "rule": self.rule, "reference": self.reference,
                "n_cuts": len(self.cuts),
                "cuts": self.cuts, "candidates": [s.to_dict() for s in self.scores],
                "best": self.best.candidate.label if self.ranked else None,
                "best_reason": self.best_reason if self.ranked else None,
                "weights": self.weights(), "notes": self.notes}

    def report(self) -> str:
        pct = level_percent(self.level)
        if self.cuts:
            at = (f"{len(self.cuts)} cut(s) ({', '.join(f'{c:.3g}' for c in self.cuts[:6])}"
                  f"{', ...' if len(self.cuts) > 6 else ''} FLOPs)")
        else:       # no budget list to show: say why there is none
            few = all((s.error or "").startswith("too few compute budgets") for s in self.scores)
            at = ("0 cuts (too few compute budgets)" if few and self.scores else
                  "0 cuts (none shared by the candidates; see below)")
        lines = [f"compare    ladder {self.ladder}: {len(self.scores)} candidate(s), "
                 f"leave-future-out refits at {at}",
                 f"{'candidate':<26} {'pred.':>5} {'score':>7} {'mean|e|':>8} {'max|e|':>8} "
                 f"{'cover ' + pct + ' before->after':>26} {'AIC':>9} {'BIC':>9} {'pts':>4} "
                 f"{'weight':>6}"]
        w = self.weights()
        # a candidate backtested but not ranked (the reference rule) has no weight to show
        ranked = {s.candidate.label for s in self.ranked}

        def pc(v):
            return "-" if v is None else f"{v:.0%}"
        for s in self.scores:
            if not s.scored:
                ref = (f"; reference class {s.reference_error:.2%}"
                       if s.reference_error is not None else "")
                if s.candidate.label in ranked:
                    # ranked and weighted by the reference class without a backtest of its own
                    # (a weight under MIN_WEIGHT shows as 0.00: ranked, not averaged)
                    lines.append(f"{s.candidate.label[:26]:<26} not backtested, weight "
                                 f"{w.get(s.candidate.label, 0.0):.2f} from the reference class "
                                 f"({s.reference_error:.2%}): {s.error}")
                else:
                    lines.append(f"{s.candidate.label[:26]:<26} not scored: {s.error}{ref}")
                continue
            aic = "-" if s.aic is None else f"{s.aic:9.1f}"
            bic = "-" if s.bic is None else f"{s.bic:9.1f}"
            # no fold had the earlier folds its calibration needs: no coverage to show
            cov = (f"{pc(s.coverage_before)} -> {pc(s.coverage_after)} of {s.n_calibrated}"
                   if s.n_calibrated else "none calibrated")
            lines.append(f"{s.candidate.label[:26]:<26} {s.n_scored:>5} {s.rank_key:>7.2%} "
                         f"{s.mean_abs_error:>8.2%} {s.max_abs_error:>8.2%} {cov:>26} "
                         f"{aic:>9} {bic:>9} {s.n_points or 0:>4} "
                         + (f"{w.get(s.candidate.label, 0.0):>6.2f}"
                            if s.candidate.label in ranked else f"{'-':>6}"))
        shared = set.intersection(*(set(s.warnings) for s in self.ranked)) \
            if len(self.ranked) > 1 else set()
        for x in dict.fromkeys(w for s in self.ranked for w in s.warnings if w in shared):
            lines.append(f"warning    [every candidate] {x}")
        for s in self.ranked:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in s.params.items())
            lines.append(f"params     {s.candidate.label}: {shown}")
            for x in s.warnings:
                if x not in shared:
                    lines.append(f"warning    [{s.candidate.label}] {x}")
        if self.rule == "reference" and self.ranked:
            b, ref = self.best, self.reference or {}
            few = (f"{len(self.cuts)} cut(s) are too few to rank on (fewer than 3)"
                   if len(self.cuts) < 3 else
                   f"only {sum(s.scored for s in self.scores)} candidate could be cut at the "
                   f"{len(self.cuts)} cut(s)")
            lines.append(f"reference  {few}: ranked by the reference class, the mean |error| of each "
                         f"law on {len(ref.get('ladders', []))} public ladders "
                         f"({', '.join(ref.get('ladders', []))}) in folds fitted on "
                         f"{ref.get('window', '?')} rungs (this ladder has "
                         f"{ref.get('n_rungs', '?')}): " + ", ".join(
                             f"{s.candidate.label} {s.reference_error:.2%}"
                             for s in self.ranked))
            lines.append(f"best       {b.candidate.label} (lowest reference-class error)")
        elif self.ranked:
            b = self.best
            lines.append(f"best       {b.candidate.label} (lowest score, {b.rank_key:.2%}: "
                         f"mean leave-future-out |error|, each fold weighing {RECENCY:g}x the "
                         f"one before; pred. = (cut, run) pairs every candidate predicted; "
                         f"coverage over its own calibrated predictions)")
        if self.ranked:
            lines.append(f"why        {self.best_reason}")
        if any(s.scored and not s.n_calibrated for s in self.scores):
            lines.append(f"cover      share of a candidate's calibrated leave-future-out "
                         f"predictions whose observed loss is in its {pct} new-run interval, "
                         f"delta method -> calibrated, of how many; 'none calibrated': no fold "
                         f"had the {MIN_FOLDS} earlier folds a calibrated interval is fitted on")
        lines += [f"note       {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line: the ladder, the rule, the cuts, the best candidate and its score, and
        each ranked candidate's score (:meth:`report` is the full table)."""
        key = ((lambda s: s.reference_error) if self.rule == "reference"
               else (lambda s: s.rank_key))
        ranked = ", ".join(f"{s.candidate.label}: {key(s):.2%}" for s in self.ranked[:6])
        more = f", ... {len(self.ranked) - 6} more" if len(self.ranked) > 6 else ""
        best = repr(self.best.candidate.label) if self.ranked else "None"
        return (f"Comparison(ladder={self.ladder!r}, rule={self.rule!r}, "
                f"cuts={len(self.cuts)}, best={best}, candidates={len(self.scores)} "
                f"({len(self.ranked)} ranked: {ranked}{more}), notes={len(self.notes)})")

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.report())


def fold_weights(budgets) -> np.ndarray:
    """Weights of leave-future-out predictions by the fold that made them, shape (n,), summing
    to 1: a prediction of the fold at ``budgets[i]`` (its cut's budget label, FLOPs) weighs
    RECENCY^-a, a = the number of distinct later folds among ``budgets``. Raises ValueError on
    an empty input."""
    b = np.asarray(budgets, float)
    if b.size == 0:
        raise ValueError("no predictions to weight")
    levels = np.unique(b)
    age = len(levels) - 1 - np.searchsorted(levels, b)
    w = RECENCY ** -age.astype(float)
    return w / w.sum()


def _even(items: list, k: int | None) -> list:
    if k is None or len(items) <= k:
        return items
    keep = np.unique(np.round(np.linspace(0, len(items) - 1, k)).astype(int))
    return [items[i] for i in keep]


def compare(ladder: Ladder, candidates: Sequence[Candidate | str] | None = None, *,
            bounds: Mapping[str, Sequence[float]] | None = None, max_folds: int | None = 12,
            min_budgets: int = 3, level: float = 0.9, seed: int = 0,
            reference=None) -> Comparison:
    """Backtest each candidate recipe on ``ladder`` the same way and rank them.

    Every candidate is refitted leave-future-out at the same cuts (the budgets every
    candidate can be cut at, at most ``max_folds`` of them evenly spaced), warm-started from
    cut to cut. A candidate that would leave fewer than 3 shared cuts (it needs more budgets
    below its first cut than the others) is not ranked, with the reason, when the others
    share more without it. Its errors are scored on the (cut, run) pairs every scored candidate
    predicted (a law of C predicts only the compute frontier, so beside one the others are
    scored there too). Coverage is the nested check of
    :func:`delphi.calibration.calibration_backtest`. AIC and BIC come from the full fit.

    Parameters
    ----------
    candidates: :class:`Candidate` objects or law names; default :func:`default_candidates`.
    bounds: parameter bounds for every fit.
    max_folds, min_budgets: as in :func:`delphi.calibration.leave_future_out`.
    level: interval level for the coverage (default 0.9).
    reference: the reference class (as in :func:`delphi.predict`; default the shipped one).
        When the candidates share fewer than 3 cuts, they are ranked by it instead
        (:func:`reference_scores`; ``Comparison.rule == "reference"``), and the report says so.

    Returns
    -------
    Comparison (``best``, ``ranked``, ``weights()``, ``report()``, ``to_dict()``).

    Raises
    ------
    LadderError: ``ladder`` is not a Ladder or DataFrame; no candidate can be cut on this
        ladder (too few compute budgets) and the reference class cannot rank them, or no
        candidates.
    """
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    if isinstance(candidates, str):
        candidates = parse_candidates(candidates)
    check_level(level, what="level")
    if max_folds is not None and (isinstance(max_folds, bool) or not isinstance(max_folds, int)
                                  or max_folds < 1):
        raise LadderError(f"max_folds must be a whole number >= 1 or None, got {max_folds!r}")
    cands = []
    for c in (candidates if candidates is not None else default_candidates(ladder)):
        if isinstance(c, str):
            c = Candidate(law=c)
        if not isinstance(c, Candidate):
            raise LawError(f"a candidate is a law name or a Candidate, got {c!r}")
        if all(c.label != o.label for o in cands):      # the same recipe once
            cands.append(c)
    if not cands:
        raise LadderError(f"no candidate laws for ladder {ladder.name!r}")
    notes: list[str] = []
    # keyed by label: a candidate's fixed values are a dict, so it is not hashable
    levels: dict[str, list[float]] = {}
    failed: dict[str, str] = {}
    for c in cands:
        try:
            lv = cut_levels(ladder, c.law, fixed=c.fixed, min_budgets=min_budgets)
        except DelphiError as exc:
            failed[c.label] = str(exc)
            continue
        if lv:
            levels[c.label] = lv
        else:
            need = first_cut_points(sum(p.name not in c.fixed for p in get_law(c.law).params))
            rule = first_cut_formula()
            failed[c.label] = (f"too few compute budgets for a leave-future-out cut (needs "
                               f"{min_budgets} budgets and {need} points ({rule}) "
                               f"at or below a cut, and a budget above it)")
    common = sorted(set.intersection(*(set(v) for v in levels.values()))) if levels else []
    dropped: dict[str, tuple[int, int]] = {}
    while len(common) < MIN_FOLDS and len(levels) > 1:
        # A candidate that needs more budgets before its first cut (more free parameters,
        # or a law of C that fits one point per budget) would leave too few shared cuts to
        # rank the others on: it is not ranked, and says why.
        worst = min(levels, key=lambda k: (len(levels[k]), k))
        others = sorted(set.intersection(*(set(v) for k, v in levels.items() if k != worst)))
        if len(others) <= len(common):
            break
        dropped[worst] = (len(levels[worst]), len(common))
        del levels[worst]
        common = others
    cuts = _even(common, max_folds)
    for label, (own, shared) in dropped.items():
        # stated with the count the header gives, so the reasons cannot disagree with it
        failed[label] = (f"it can be cut at {own} budget(s): ranking it would leave "
                         f"{shared} cut(s) shared by every candidate (fewer than {MIN_FOLDS}), "
                         f"where the others are ranked on the {len(cuts)} cut(s) above")
    results: dict[str, tuple] = {}
    if not cuts:
        for label in levels:
            failed.setdefault(label, "the candidates share no leave-future-out cut")
    for c in cands:
        if c.label not in levels or not cuts:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bt = calibration_backtest(ladder, c.law, fixed=c.fixed or None, bounds=bounds,
                                          delta=c.delta, level=level, cuts=cuts, seed=seed)
                full = fit(ladder, c.law, fixed=c.fixed or None, bounds=bounds, delta=c.delta,
                           seed=seed, identify=False)
        except DelphiError as exc:
            failed[c.label] = str(exc)
            continue
        results[c.label] = (bt, full)
    keys = None
    for bt, _ in results.values():
        k = set(zip(bt.errors.budget.tolist(), bt.errors.run.tolist()))
        keys = k if keys is None else keys & k
    if results and not keys:
        notes.append("the candidates predicted no (cut, run) pair in common: each is scored "
                     "on its own predictions")
    scores = []
    for c in cands:
        if c.label in failed:
            scores.append(CandidateScore(candidate=c, n_scored=0, mean_abs_error=None,
                                         max_abs_error=None, mse=None, coverage_before=None,
                                         coverage_after=None, n_calibrated=0, aic=None,
                                         bic=None, n_points=None, params={}, error=failed[c.label]))
            continue
        bt, full = results[c.label]
        e = bt.errors
        sel = np.array([(a, b) in keys for a, b in zip(e.budget.tolist(), e.run.tolist())]) \
            if keys else np.ones(len(e), bool)
        err = np.abs(e.log_error[sel])
        fw = fold_weights(e.budget[sel])
        n, k = full.n_points, full.n_free
        rss = float(np.sum(np.asarray(full.residuals, float) ** 2))
        aic = bic = None
        if n > 0 and rss > 0:
            aic = n * math.log(rss / n) + 2 * k
            bic = n * math.log(rss / n) + k * math.log(n)
        s = bt.summary
        scores.append(CandidateScore(
            candidate=c, n_scored=int(sel.sum()), mean_abs_error=float(err.mean()),
            max_abs_error=float(err.max()), mse=float(np.sum(fw * e.log_error[sel] ** 2)),
            score=float(np.sum(fw * err)),
            coverage_before=s["coverage_before"], coverage_after=s["coverage_after"],
            n_calibrated=s["n_calibrated"], aic=aic, bic=bic, n_points=n,
            params={kk: float(v) for kk, v in full.params.items()},
            warnings=tuple(full.warnings), backtest=bt))
    scored = sorted((s for s in scores if s.scored),
                    key=lambda s: (s.rank_key, len(s.params) - len(s.candidate.fixed)))
    scores = scored + [s for s in scores if not s.scored]
    if scored and scored[0].n_scored < _FEW:
        notes.append(f"the ranking rests on {scored[0].n_scored} leave-future-out "
                     f"prediction(s) from {len(cuts)} cut(s): weak evidence; more compute "
                     f"budgets would strengthen it")
    n_points = {s.n_points for s in scored}
    if len(n_points) > 1:
        notes.append("AIC/BIC compare only candidates fitted to the same points; here they "
                     "fit different numbers of points (a law of C fits the compute frontier)")
    rule, ref_info = "backtest", None
    if len(cuts) < MIN_FOLDS or (len(cands) > 1 and len(scored) < 2):
        # Too few cuts for the ladder's own backtest to rank the candidates on (or only one
        # of them could be cut there): rank by how each law extrapolated on the public
        # ladders at this many rungs.
        try:
            by_law, ref_info = reference_scores(ladder, [c.law for c in cands], reference)
        except DelphiError as exc:
            notes.append(f"the reference class cannot rank the candidates either: {exc}")
            by_law = {}
        if by_law:
            rule = "reference"
            notes = [n for n in notes if not n.startswith("the ranking rests on")]
            ranked_scores = []
            for s in scores:
                if s.candidate.law not in by_law:
                    ranked_scores.append(s)
                    continue
                s = replace(s, reference_error=by_law[s.candidate.law][0],
                            reference_mse=by_law[s.candidate.law][1])
                # Ranked by other ladders' errors: it must at least fit this one as predict
                # would (enough points, not collapsed to a constant) to be chosen.
                s = _full_fit_or_reason(ladder, s, bounds, seed,
                                        results[s.candidate.label][1] if s.scored else None)
                ranked_scores.append(s)
            scores = ranked_scores
            labels_by_law: dict[str, list[str]] = {}
            for s in scores:
                if s.reference_error is not None:
                    labels_by_law.setdefault(s.candidate.law, []).append(s.candidate.label)
            for law_name, labels in labels_by_law.items():
                if len(labels) > 1:
                    notes.append(f"the reference class scores laws, not floors or Huber deltas: "
                                 f"{', '.join(labels)} share {law_name}'s score; the tie goes to "
                                 f"the ladder's own backtest, else to the fewest fixed parameters")
            skipped = (ref_info or {}).get("not_ranked", {})
            for c in cands:
                if c.law in skipped:
                    notes.append(f"candidate {c.label} not ranked by the reference class: "
                                 f"{skipped[c.law]}")
            missing = [c.label for c in cands if c.law not in by_law and c.law not in skipped]
            if missing:
                notes.append(f"candidate(s) {', '.join(missing)} have no errors in the "
                             f"reference class on the ladders the others share: not ranked")
            if scored:
                notes.append(f"the backtest columns are shown, not ranked on: "
                             + (f"{len(cuts)} cut(s), fewer than {MIN_FOLDS}"
                                if len(cuts) < MIN_FOLDS else
                                f"only {scored[0].candidate.label} could be cut at them"))
    if not scored and rule == "backtest":
        if not levels:
            raise LadderError(f"no candidate can be backtested leave-future-out on ladder "
                              f"{ladder.name!r}, and the reference class cannot rank them: "
                              + "; ".join(f"{c}: {w}" for c, w in failed.items()))
    return Comparison(ladder=ladder.name, scores=scores, cuts=[float(c) for c in cuts],
                      level=level, notes=notes, rule=rule, reference=ref_info)


def _full_fit_or_reason(ladder: Ladder, s: "CandidateScore", bounds, seed,
                        full=None) -> "CandidateScore":
    """``s`` with its full fit's parameters and AIC/BIC (``full``: that fit, when compare
    made it), or without its reference error and with the reason when the law cannot fit
    the ladder or collapses to a constant over it (as :func:`delphi.predict` refuses)."""
    c = s.candidate
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if full is None:
                full = fit(ladder, c.law, fixed=c.fixed or None, bounds=bounds, delta=c.delta,
                           seed=seed, identify=False)
            refuse_degenerate(attach_identification(full, profiles=False), allow=False)
    except DelphiError as exc:
        why = f"{s.error}; and " if s.error else ""
        return replace(s, reference_error=None, reference_mse=None,
                       error=f"{why}it cannot be forecast from: {exc}")
    if s.scored:
        return s
    n, k = full.n_points, full.n_free
    rss = float(np.sum(np.asarray(full.residuals, float) ** 2))
    aic = n * math.log(rss / n) + 2 * k if n > 0 and rss > 0 else None
    bic = n * math.log(rss / n) + k * math.log(n) if n > 0 and rss > 0 else None
    return replace(s, params={kk: float(v) for kk, v in full.params.items()}, n_points=n,
                   aic=aic, bic=bic, warnings=tuple(full.warnings))


def reference_scores(ladder: Ladder, laws: Sequence[str], reference=None,
                     ) -> tuple[dict[str, tuple[float, float]], dict]:
    """How each of ``laws`` extrapolated on the public ladders, at about this ladder's number
    of rungs: ``({law: (mean |log error|, mean squared log error)}, info)``.

    From the reference class (:mod:`delphi.reference`; ``reference`` as in
    :func:`delphi.predict`), with this ladder left out when it is one of them: the folds
    fitted on n +- j rungs (n this ladder's compute budgets), j widened from 0 until at least
    2 public ladders have errors of every law (``power-n`` read as ``power``, its form); on
    those common ladders, each ladder's mean error, averaged with every ladder weighing the
    same. ``info``: ``n_rungs``, ``window``, ``ladders`` and ``not_ranked`` ({law: why} for
    a law whose reference errors do not speak for this ladder,
    :func:`delphi.reference.outside_class`: a law of C on a ladder whose compute frontier is
    not compute-optimal). A law with no errors on them is left out of the dict; an empty dict
    when no window has 2 common ladders.

    Raises DelphiError when the reference class cannot be read.
    """
    ref = reference if isinstance(reference, ReferenceClass) else load_reference(reference)
    finals, _ = ladder.final_points()
    n = int(budget_labels(finals.dropna(subset=["flops"])).nunique()) if "flops" in finals else 0
    # A law is ranked by the reference class only on a ladder like those its errors come
    # from: the rule that built the class (a law of C: a compute-optimal frontier).
    skipped = {law: why for law in dict.fromkeys(laws)
               if (why := outside_class(ladder, law)) is not None}
    laws = [law for law in laws if law not in skipped]
    rows = ref.rows[ref.rows["ladder"] != ladder.name]
    names = {law: FAMILY.get(law, law) if FAMILY.get(law, law) in set(rows["law"]) else law
             for law in dict.fromkeys(laws)}
    rows = rows[rows["law"].isin(set(names.values()))]
    if not len(rows):
        return {}, {"n_rungs": n, "window": None, "ladders": [], "not_ranked": skipped}
    nb = rows["n_budgets"].to_numpy(int)
    want = set(names.values())
    for j in range(0, int(max(nb.max(), n)) + 1):
        lo, hi = max(n - j, 1), n + j
        sub = rows[(nb >= lo) & (nb <= hi)]
        per = sub.groupby("ladder")["law"].agg(lambda x: set(x))
        common = sorted(k for k, v in per.items() if want <= v)
        if len(common) >= 2:
            break
    else:
        return {}, {"n_rungs": n, "window": None, "ladders": [], "not_ranked": skipped}
    sub = sub[sub["ladder"].isin(common)]
    lo, hi = int(sub["n_budgets"].min()), int(sub["n_budgets"].max())
    out = {}
    for law, name in names.items():
        mine = sub[sub["law"] == name]
        e = mine.groupby("ladder")["log_error"]
        out[law] = (float(e.apply(lambda x: np.abs(x).mean()).mean()),
                    float(e.apply(lambda x: (x ** 2).mean()).mean()))
    return out, {"n_rungs": n, "window": f"{lo}" if lo == hi else f"{lo}-{hi}",
                 "ladders": common, "not_ranked": skipped}
