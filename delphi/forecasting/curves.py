"""Loss curves under LR schedules: schedule features per checkpoint, and completing a run.

``delphi complete`` fits a curve law (:mod:`delphi.laws.curves`) to the checkpoints a run has
so far and evaluates it at the end of the run's planned schedule: an unfinished rung (such as
Marin's d2048 MoE rung, which crashed at 80%) still yields a final-loss estimate, with an
interval from the run-only completion error model the tracker uses
(:func:`delphi.forecasting.target_curve.completion_errors`: the ladder's other finished runs
cut at the same share of their schedule and completed; see :func:`complete`).
"""

from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import (DelphiError, FitError, FitWarning, LadderError, MissingArgumentError,
                     option, user_stacklevel)
from ..fitting import DEFAULT_DELTA, Fit, fit_arrays
from ..fitting.engine import fit_arrays_many
from ..inputs.ladder import Ladder, restart_fix, span
from ..laws import Law, get_law
from ..inputs.law_inputs import ANNEALING_MOMENTUM, curve_inputs, run_schedule
from ..inputs.schedules import Schedule, features, warmup_end
from ..inputs.readers import as_ladder
from ..core.parallel import check_n_jobs, map_jobs, one_blas_thread, progress, runs_serially
from ..core.quantiles import norm_ppf
from ..core.text import level_percent
from .target_curve import COMPLETION_FRACTIONS, completion_run_errors, rms_completion_errors
from .uncertainty import DEFAULT_LEVEL

__all__ = ["run_schedule", "curve_inputs", "complete", "complete_many", "Completion",
           "decay_seen", "ANNEALING_MOMENTUM", "DECAY_SHARE_MIN", "INTERVAL_METHOD"]

#: A completion is warned about when the fitted checkpoints have seen less than this share of
#: the LR decay still to come (see :func:`decay_seen`). Measured on every OLMo ladder run and
#: every (Mis)Fitting run cut at 30..80% of its schedule: below half of the decay seen, the
#: median miss of the final loss was above 1% (up to several percent); from half on, below.
DECAY_SHARE_MIN = 0.5
#: How a completion's interval is made (the tracker's run-only completion error model).
INTERVAL_METHOD = ("run-only completion errors on the ladder's other finished runs: "
                   "ln L +/- z x their RMS log error at the share of the run fitted "
                   "(delphi.forecasting.target_curve.completion_errors)")


@dataclass(frozen=True)
class Completion:
    """A run's predicted final loss from its checkpoints so far, with its interval
    (``delphi complete``)."""

    run: str
    """Run id."""
    loss: float
    """Predicted loss at the end of the planned schedule [ladder's loss unit]."""
    total_steps: int
    """Planned length of the run [steps]."""
    fitted_upto_step: int
    """Last checkpoint step used in the fit."""
    n_checkpoints: int
    """Checkpoints fitted."""
    schedule: str
    """The schedule evaluated (e.g. ``cosine:warmup=50,final=0.1`` or ``logged``)."""
    fit: Fit
    """The curve-law fit."""
    actual: float | None = None
    """The run's observed final loss, when the ladder has it (for checking)."""
    notes: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    """What makes the prediction unreliable (also raised as :class:`~delphi.FitWarning`):
    e.g. a decay response not identified by the checkpoints so far."""
    decay_share: float | None = None
    """Share of the LR decay still to come that the fitted checkpoints have seen
    (:func:`decay_seen`); None when the schedule does not decay further."""
    n_warmup_excluded: int = 0
    """Warm-up checkpoints (LR still rising) left out of the fit, over all runs fitted."""
    lower: float | None = None
    """Lower end of the ``level`` interval for the final loss [ladder's loss unit]; None when
    the ladder has too few other finished runs to measure the completion error at this share
    of the run (a note says why)."""
    upper: float | None = None
    """Upper end of the interval (None with ``lower``)."""
    level: float = DEFAULT_LEVEL
    """The interval's central coverage."""
    rms_log_error: float | None = None
    """The interval's log-loss sd: the RMS of ln(actual final / completed) of the ladder's other
    finished runs cut at the same share of their run (:func:`completion_errors
    <delphi.forecasting.target_curve.completion_errors>`), interpolated in the share."""
    n_error_runs: int = 0
    """Runs that RMS is measured on (at the nearest measured share below the run's)."""

    @property
    def rel_error(self) -> float | None:
        """(actual - predicted) / predicted, when the actual final loss is known."""
        return None if self.actual is None else (self.actual - self.loss) / self.loss

    def to_dict(self) -> dict:
        d = self.fit.to_dict()
        return {"run": self.run, "law": d["law"], "params": d["params"],
                "prediction": {"loss": self.loss, "at_step": self.total_steps,
                               "lower": self.lower, "upper": self.upper, "level": self.level,
                               "rms_log_error": self.rms_log_error,
                               "n_error_runs": self.n_error_runs,
                               "method": INTERVAL_METHOD if self.lower is not None else None},
                "fitted_upto_step": self.fitted_upto_step, "n_checkpoints": self.n_checkpoints,
                "schedule": self.schedule, "actual": self.actual, "rel_error": self.rel_error,
                "warmup_excluded": self.n_warmup_excluded, "decay_share": self.decay_share,
                "fit": d["fit"], "warnings": list(self.warnings), "notes": list(self.notes)}

    def report(self) -> str:
        lines = [f"run        {self.run}: {self.n_checkpoints} checkpoints up to step "
                 f"{self.fitted_upto_step} of {self.total_steps} ({self.schedule})",
                 self.fit.report()]
        for warning in self.warnings:
            lines.append(f"warning    {warning}")
        for note in self.notes:
            lines.append(f"note       {note}")
        if self.lower is not None:
            lines.append(f"prediction {self.loss:.4f} [{self.lower:.4f}, {self.upper:.4f}] "
                         f"({level_percent(self.level)}) at step {self.total_steps}")
            lines.append(f"           interval from the run-only completion errors of "
                         f"{self.n_error_runs} other finished run(s) of the ladder cut at the "
                         f"same share of their run (RMS log error {self.rms_log_error:.2%})")
        else:
            lines.append(f"prediction {self.loss:.4f} at step {self.total_steps} (no interval: "
                         f"see the notes)")
        if self.actual is not None:
            lines.append(f"actual     {self.actual:.4f} (relative error {self.rel_error:+.2%})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line: the run, the predicted final loss and step, the checkpoints fitted, the
        law, the actual loss when known and the count of warnings (:meth:`report` is the
        full text)."""
        act = "" if self.actual is None else f", actual={self.actual:.4g} ({self.rel_error:+.2%})"
        return (f"Completion(run={self.run!r}, loss={self.loss:.4g} at step {self.total_steps}, "
                f"law={self.fit.law.name!r}, n_checkpoints={self.n_checkpoints} up to step "
                f"{self.fitted_upto_step}{act}, warnings={len(self.warnings)})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))


def complete(ladder: Ladder, run: str | None = None, law: str | Law = "annealing", *,
             upto_fraction: float | None = None, upto_step: int | None = None,
             min_step_fraction: float = 0.0, siblings: bool = False, keep_warmup: bool = False,
             fixed=None, bounds=None, delta: float = DEFAULT_DELTA, seed: int = 0,
             level: float = DEFAULT_LEVEL) -> Completion:
    """Predict a run's final loss from its checkpoints and its planned LR schedule, with an
    interval.

    Parameters
    ----------
    ladder: a ladder with per-checkpoint rows (``step``, ``loss``) and either a schedule shape
        (``ladder.schedule`` with ``peak_lr``, ``total_steps``) or a logged ``lr``.
    run: the run to complete (required: None raises
        :class:`~delphi.errors.MissingArgumentError` naming the ladder's runs).
    law: a curve law: ``annealing`` (default; Tissue et al. 2024: four parameters, fast) or
        ``multipower`` (Luo et al. 2025: seven parameters; needs long, well-sampled curves).
    upto_fraction, upto_step: fit only checkpoints up to this share of the planned run / step
        (to backtest a completion on a finished run); default all checkpoints.
    min_step_fraction: drop checkpoints before this share of their own run (early transients).
    siblings: also fit the checkpoints, up to the same step, of the ladder's other runs of the
        same model (same ``params``) and peak LR. A curve law's parameters are meant to be
        shared across schedules of one model and peak LR (Tissue et al. 2024; Luo et al. 2025)
        and nothing past the cut-off step is used. Off by default: on the short (Mis)Fitting
        runs the shared annealing law fits the siblings' early steps poorly and completions
        got worse (median error 8% vs 1.2% at 50% of the run).
    keep_warmup: also fit the warm-up checkpoints, taken while the LR is still rising to its
        peak (before :func:`delphi.schedules.warmup_end`). Off by default: both laws describe
        the loss after warm-up (their annealing terms start at the peak), and the fast early
        drop of the first checkpoints otherwise sets the forward-area exponent. A note says
        how many were left out.
    fixed, bounds, delta, seed: as in :func:`delphi.fitting.fit_arrays`.
    level: central coverage of the interval, in (0, 1) (default 0.9).

    The interval is the tracker's run-only error model (:mod:`delphi.forecasting.target_curve`,
    :func:`~delphi.forecasting.target_curve.completion_errors`): each of the ladder's other
    finished runs (the 12 largest with at least 8 checkpoints) is cut at 10%, 20%, ..., 90% of
    its schedule, and fitted whole (100%: the law's in-sample miss of its final loss), and
    completed from its own checkpoints after warm-up (and after ``min_step_fraction``) with the
    ``annealing`` law; the root mean square of ln(actual final / completed) at each cut (bias
    included; at least 2 runs) is interpolated linearly at the share of this run fitted
    (``fitted_upto_step / total_steps``; at the end of the run the measured 100% error, never
    an assumed zero), and the interval is ``loss * exp(+/- z * rms)``, z the normal quantile of
    ``(1 + level) / 2``. No random step: the same ladder gives the same interval. None
    (``lower`` and ``upper``), with a note, below the first share where 2 runs could be
    completed or when the ladder has no other finished curves.

    Returns
    -------
    Completion; ``actual`` holds the run's last checkpoint loss when it reached the planned end.

    Raises
    ------
    LadderError: unknown run, no schedule, no steps; a resumed run (its step goes back in file
        order, :attr:`delphi.Ladder.restarts`). FitError: too few checkpoints to fit.
    MissingArgumentError: no ``run`` given. FitError: a ``level`` outside (0, 1).
    """
    if run is None:
        runs = as_ladder(ladder).runs
        raise MissingArgumentError(
            f"complete() needs a run: one of the ladder's {len(runs)} runs ("
            f"{', '.join(map(repr, runs[:5]))}{', ...' if len(runs) > 5 else ''}); "
            f"delphi.complete_many(ladder) completes every run")
    level = _check_level(level)
    ladder = as_ladder(ladder)
    request, state = _setup(ladder, run, law, upto_fraction=upto_fraction,
                            upto_step=upto_step, min_step_fraction=min_step_fraction,
                            siblings=siblings, keep_warmup=keep_warmup, fixed=fixed,
                            bounds=bounds, delta=delta, seed=seed)
    errors = completion_error_table(ladder, min_step_fraction)
    return _finish(state, fit_arrays(**request), errors=errors, level=level)


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise FitError(f"interval level must be in (0, 1), got {level!r}")
    return float(level)


#: Shares at which a completion's interval is measured: the tracker's cuts, and the whole run
#: (the law's own miss of the final loss it was fitted to: the end is not error-free when the
#: law does not pass through it, e.g. ``annealing`` on a ``chinchilla-ckpt`` ladder, ~1%).
TABLE_FRACTIONS = tuple(COMPLETION_FRACTIONS) + (1.0,)

# The error table per ladder object and start (a table refits ~12 runs x 9 cuts, ~0.1 s):
# kept while the ladder lives, and only for the same table object.
_ERROR_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def completion_error_table(ladder: Ladder, min_step_fraction: float = 0.0
                           ) -> dict[float, dict[str, float]]:
    """The run-only completion errors a completion's interval is read from:
    :func:`~delphi.forecasting.target_curve.completion_run_errors` of ``ladder`` at
    :data:`TABLE_FRACTIONS` (:data:`~delphi.forecasting.target_curve.COMPLETION_FRACTIONS`
    and 1: every checkpoint fitted, the in-sample miss of the final loss), fitted from the end of
    warm-up (or from ``min_step_fraction`` of the run), i.e. fraction -> {run: ln(actual final
    / completed)}. Computed once per ladder object (and table) and start; warnings about the
    other runs' curves are not repeated (a run whose curve cannot be completed is left out)."""
    try:
        memo = _ERROR_TABLES.setdefault(ladder, {})
    except TypeError:       # not weak-referenceable: no memo
        memo = {}
    key = (id(ladder.table), float(min_step_fraction))
    hit = memo.get(key)
    if hit is not None and hit[0] is ladder.table:
        return hit[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = completion_run_errors(ladder, fractions=TABLE_FRACTIONS,
                                      start=float(min_step_fraction))
    memo[key] = (ladder.table, table)
    return table


def _interval(errors: dict, run: str, share: float, loss: float, level: float
              ) -> tuple[float | None, float | None, float | None, int, str | None]:
    """(lower, upper, rms log error, runs, note or None) of a completion of ``run`` from
    ``share`` of its schedule: the RMS over the ladder's other finished runs (``run`` left
    out: a backtest of a finished run does not see its own error), interpolated linearly in
    the share between the measured shares (:data:`TABLE_FRACTIONS`, 1 included: at the end of
    the run the error is the law's measured in-sample miss of the final loss, not zero), held
    at the last measured share beyond it."""
    rms = rms_completion_errors(errors, exclude=(run,))
    if not rms:
        return None, None, None, 0, (
            "no interval: the ladder has fewer than 2 other finished runs (8 or more "
            "checkpoints, a schedule) whose own completions measure the error")
    fr = [f for f, _ in rms]
    if share < fr[0] - 1e-9:
        return None, None, None, 0, (
            f"no interval: the ladder's other runs could be completed from {fr[0]:.0%} of "
            f"their run on, not from {share:.0%} (the error this early is not measured)")
    # np.interp holds the last measured RMS past it: never a floor that was not measured.
    sd = float(np.interp(share, fr, [e for _, e in rms]))
    below = max(f for f in fr if f <= share + 1e-9)
    n = sum(r != run for r in errors[below])
    z = float(norm_ppf(0.5 + level / 2))
    return loss * math.exp(-z * sd), loss * math.exp(z * sd), sd, n, None


def _setup(ladder, run, law, *, upto_fraction, upto_step, min_step_fraction, siblings,
           keep_warmup, fixed, bounds, delta, seed, by_run=None) -> tuple[dict, tuple]:
    """:func:`complete` up to its fit: the keyword arguments of the curve law's
    :func:`~delphi.fitting.fit_arrays`, and the state :func:`_finish` needs. ``by_run``:
    run -> positions of its rows in the ladder's table, found once for many runs (the rows
    are those ``table[table["run"] == run]`` selects)."""
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    law = get_law(law)
    run = str(run)
    own_rows = None
    if by_run is not None:
        own_rows = ladder.table.take(by_run[run]) if run in by_run else ladder.table.iloc[:0]
    if own_rows is not None and own_rows.empty or own_rows is None and not (
            ladder.table["run"] == run).any():   # vectorised: complete_many asks per run
        known = ladder.runs
        raise LadderError(f"unknown run {run!r} in ladder {ladder.name!r}; runs: "
                          f"{', '.join(known[:10])}{' ...' if len(known) > 10 else ''}")
    restarts = getattr(ladder, "restarts", None) or {}
    if run in restarts:
        gone = (getattr(ladder, "superseded", None) or {}).get(run)
        raise LadderError(_restart_message(run, restarts[run])
                          + (f"; its superseded rows: {span(gone)}" if gone else ""))
    if own_rows is None:
        own_rows = ladder.table[ladder.table["run"] == run]
    if len(own_rows) < 2:
        # One row is a final point, not a loss curve: no curve law can be fitted to it.
        at = own_rows.iloc[0]
        where = f"row {at['row']}" + (f", step {at['step']:g}" if "step" in own_rows.columns
                                       and pd.notna(at["step"]) else "")
        raise LadderError(f"run {run!r} has a single checkpoint ({where}): completing a run "
                          f"fits a loss curve through its checkpoints, so it needs several "
                          f"(with their steps); for one final loss per run use a final-loss "
                          f"law (delphi predict / delphi fit)")
    group = [run]
    resumed = []
    if siblings:
        for r in _siblings(ladder, run):
            if r != run:
                (resumed if r in restarts else group).append(r)
    rows, x, schedules, notes = curve_inputs(ladder, group, own=None if by_run is None
                                             else {run: own_rows})
    if resumed:
        notes.append(f"sibling run(s) left out, resumed with their step going back (not one "
                     f"loss curve): {', '.join(resumed[:6])}{' ...' if len(resumed) > 6 else ''}")
    sched = schedules[0]
    total = int(sched.total_steps)
    limit = total
    if upto_fraction is not None:
        if not 0 < upto_fraction <= 1:
            raise LadderError(f"{option('upto_fraction', '--upto-fraction')} must be in "
                              f"(0, 1], got {upto_fraction}")
        limit = min(limit, int(math.floor(upto_fraction * total)))
    if upto_step is not None:
        limit = min(limit, int(upto_step))
    steps = rows["step"].to_numpy()
    groups = rows["_group"].to_numpy()
    own_total = np.array([schedules[g].total_steps for g in groups], dtype=float)
    use = (steps <= limit) & (steps >= min_step_fraction * own_total)
    # Warm-up: checkpoints before the step where each run's LR reaches its peak.
    starts = np.array([warmup_end(sc) for sc in schedules])
    in_warmup = steps < starts[groups]
    warm = use & in_warmup
    n_warm = 0 if keep_warmup else int(warm.sum())
    if n_warm:
        use &= ~warm
        notes.append(f"{n_warm} warm-up checkpoint(s) left out (before step {starts[0]}, where "
                     f"the LR reaches its peak); "
                     f"{option('keep_warmup=True', '--keep-warmup')} fits them")
    if not use.any():
        raise FitError(f"run {run!r}: no checkpoints at or before step {limit}"
                       + (f" after warm-up (it ends at step {starts[0]}); "
                          f"{option('keep_warmup=True', '--keep-warmup')} fits warm-up "
                          f"checkpoints" if n_warm else ""))
    sub = {k: (v[use] if isinstance(v, np.ndarray) and k != "_lrs" else v) for k, v in x.items()}
    # Columns as arrays, rows selected by numpy (the same values as rows.loc[use, ...]).
    request = dict(law=law, x=sub, y=rows["loss"].to_numpy(float)[use],
                   labels=[f"{run}@{int(s)}" for s in steps[use]],
                   fixed=fixed, bounds=bounds, delta=delta, seed=seed)
    state = (run, law, rows, x, schedules, notes, sched, total, limit, use, in_warmup, n_warm)
    return request, state


def _finish(state: tuple, result: Fit, *, errors: dict, level: float) -> Completion:
    """The completion from :func:`_setup`'s state and the curve law's fit, with its interval
    from the error table ``errors`` (:func:`completion_error_table`)."""
    run, law, rows, x, schedules, notes, sched, total, limit, use, in_warmup, n_warm = state
    end = features(sched, np.array([total]), momentum=ANNEALING_MOMENTUM)
    target = {"S1": end["S1"], "S2": end["S2"], "h": end["h"], "step": np.array([float(total)]),
              "_group": np.array([0]), "_lrs": x["_lrs"]}
    loss = float(result.predict(target)[0])
    # Columns as arrays, rows selected by numpy (the same values as rows.loc[...]).
    mine = rows["run"].to_numpy() == run
    steps, h = rows["step"].to_numpy(), rows["h"].to_numpy(float)
    last = np.flatnonzero(mine)[-1]
    actual = float(rows["loss"].to_numpy()[last]) if int(steps[last]) >= total else None
    spec = sched.spec() if isinstance(sched, Schedule) else "logged"
    if actual is not None and limit >= total:
        notes.append("the run already reached its planned end; the fit includes its final loss")
    decay_term = {"annealing": "C", "multipower": "B"}.get(law.name)
    h_last = float(h[use & mine][-1]) if (use & mine).any() else 1.0
    if decay_term in result.at_bound and float(end["h"][0]) < 0.9 * h_last:
        notes.append(f"the LR-decay term vanished ({decay_term} = 0): the checkpoints so far show "
                     f"no annealing response, so the loss drop from the decay still to come "
                     f"(lr/peak {h_last:.2f} -> {float(end['h'][0]):.2f}) is missing from the "
                     f"prediction, which is then too high")
    # A kept warm-up checkpoint's LR is below the peak too, but says nothing about the decay.
    seen = decay_seen(h[use & ~in_warmup], sched)
    warns = []
    if seen is not None and seen[0] < DECAY_SHARE_MIN:
        share, h_seen, h_end, half = seen
        warns.append(
            f"the LR-decay response is not identified by these checkpoints: the LR has come "
            f"down only to {h_seen:.2f} of its peak, {share:.0%} of the way to its final "
            f"{h_end:.2f}, so the loss drop from the decay still to come is extrapolated from the "
            f"start of the decay (on the OLMo and (Mis)Fitting ladders such "
            f"completions missed the final loss by a median 1-2.5%, some by far more, in "
            f"either direction); completing from "
            f"step {half} on (half of the decay seen) is typically within 1%"
            + ("; the multi-power law (--law multipower) extrapolated the decay better there "
               "(median miss 0.4-1.5% with 20-50% of the decay seen)"
               if law.name == "annealing" else ""))
        for w in warns:
            warnings.warn(f"run {run!r}: {w}", FitWarning, stacklevel=user_stacklevel())
    used_runs = sorted(set(rows["run"].to_numpy()[use]) - {run})
    if used_runs:
        notes.append(f"fitted together with {len(used_runs)} sibling run(s) of the same model and "
                     f"peak LR, up to the same step: {', '.join(used_runs[:6])}"
                     f"{' ...' if len(used_runs) > 6 else ''}")
    fitted_upto = int(steps[use & mine].max()) if (use & mine).any() else int(steps[use].max())
    # The error table measures one completion: the annealing law on a run's own checkpoints
    # after warm-up. Another law, siblings or warm-up checkpoints complete differently (the
    # multi-power law misses by a fraction of annealing's; siblings' misses were 4x the
    # borrowed interval's: h120's F26/F27), so they get no interval rather than a borrowed one.
    other = [what for what, on in (
        (f"the {law.name} law", law.name != "annealing"),
        ("sibling runs", bool(used_runs)),
        ("warm-up checkpoints", bool((use & in_warmup).any()))) if on]
    if other:
        lower = upper = sd = None
        n_err = 0
        notes.append(f"no interval: the ladder's completion errors are measured for the "
                     f"annealing law on each run's own checkpoints after warm-up; this "
                     f"completion uses {' and '.join(other)}, whose errors are not measured")
    else:
        lower, upper, sd, n_err, why = _interval(errors, run, min(1.0, fitted_upto / total),
                                                 loss, level)
        if why:
            notes.append(why)
    return Completion(run=run, loss=loss, total_steps=total, fitted_upto_step=int(
        steps[use].max()), n_checkpoints=int(use.sum()), schedule=spec, fit=result,
        actual=actual, notes=tuple(notes), warnings=tuple(warns),
        decay_share=None if seen is None else seen[0], n_warmup_excluded=n_warm,
        lower=lower, upper=upper, level=level, rms_log_error=sd, n_error_runs=n_err)


def decay_seen(h_fitted, schedule) -> tuple[float, float, float, int] | None:
    """How much of the LR decay still to come the fitted checkpoints have seen.

    A curve law learns its decay response (C in the annealing law, B, C, beta, gamma in the
    multi-power law) from checkpoints whose LR has come down from its peak; the loss drop from
    the rest of the decay is then an extrapolation. The share seen is
    ``(1 - h_seen) / (1 - h_end)``, with ``h = lr / peak`` (``h_seen`` the lowest among the
    fitted checkpoints, of every run fitted; ``h_end`` at the end of the schedule).

    Parameters
    ----------
    h_fitted: lr / peak of the fitted checkpoints after warm-up, shape (n,).
    schedule: the completed run's schedule (:class:`Schedule` or :class:`LoggedSchedule`).

    Returns
    -------
    (share, h_seen, h_end, half_step), share clipped to [0, 1] and ``half_step`` the first
    step where the run's own LR has come half way down; None when the schedule does not decay
    below the lowest LR fitted (nothing to extrapolate) or ``h_fitted`` is empty.
    """
    h = np.asarray(h_fitted, dtype=float)
    if h.size == 0:
        return None
    lrs = schedule.lrs() / schedule.peak_lr
    h_end = float(lrs[-1])
    h_seen = float(min(h.min(), 1.0))
    if h_end >= 1.0 or h_end >= h_seen * 0.999:          # no decay to come
        return None
    share = float(np.clip((1.0 - h_seen) / (1.0 - h_end), 0.0, 1.0))
    after = np.arange(1, lrs.size + 1) >= warmup_end(lrs)
    half = np.flatnonzero(after & (lrs <= 1.0 - 0.5 * (1.0 - h_end)))
    return share, h_seen, h_end, int(half[0]) + 1 if half.size else int(lrs.size)


def _restart_message(run: str, restarts: list) -> str:
    listed = "; ".join(r.describe() for r in restarts[:3])
    more = f"; and {len(restarts) - 3} more" if len(restarts) > 3 else ""
    return (f"run {run!r} was resumed: its step goes back {len(restarts)} time(s) in file "
            f"order ({listed}{more}). Sorted by step its segments interleave, so a curve "
            f"law would fit one curve through two runs and blame the misfit on the LR "
            f"schedule. {restart_fix(restarts)}")


def _complete_job(item: tuple) -> tuple[str, Completion | str]:
    """One run of :func:`complete_many` (module level: pickled for process/Dask workers),
    with the error table computed once for all runs."""
    ladder, run, law, options, errors, level = item
    try:
        request, state = _setup(ladder, run, law, **options)
        return run, _finish(state, fit_arrays(**request), errors=errors, level=level)
    except DelphiError as exc:
        return run, f"{type(exc).__name__}: {exc}"


def complete_many(ladder: Ladder, runs=None, law: str | Law = "annealing", *,
                  n_jobs: int | None = None, upto_fraction: float | None = None,
                  upto_step: int | None = None, min_step_fraction: float = 0.0,
                  siblings: bool = False, keep_warmup: bool = False, fixed=None, bounds=None,
                  delta: float = DEFAULT_DELTA, seed: int = 0, level: float = DEFAULT_LEVEL,
                  show_progress: bool | None = None) -> list[tuple[str, Completion | str]]:
    """Complete many runs (:func:`complete` on each), serially or in parallel, in run order.

    Each run is fitted on its own (with its siblings when ``siblings``), exactly as
    :func:`complete` would, with the same ``seed``: the results do not depend on ``n_jobs``
    or the joblib backend. A run that cannot be completed (too few checkpoints, no schedule,
    an unknown run...) does not stop the others: its entry holds the error message instead.
    Jobs run through :func:`delphi.parallel.map_jobs` (joblib; BLAS pinned to one thread per
    job; a progress bar on a terminal for batches that take more than ~2 s). Laws:
    ``annealing`` (Tissue et al. 2024, arXiv 2408.11029, Eq. 1) or ``multipower`` (Luo et
    al. 2025, arXiv 2503.12811, Sec. 3).

    Parameters
    ----------
    ladder: a ladder with per-checkpoint rows (see :func:`complete`).
    runs: run ids to complete, shape (r,); default every run of the ladder.
    law: a curve law name or object, as in :func:`complete`.
    n_jobs: joblib's convention: None (the active ``joblib.parallel_config``, else serial),
        1 serial, -1 every core; a Dask backend runs the jobs on its cluster.
    upto_fraction, upto_step, min_step_fraction, siblings, keep_warmup, fixed, bounds, delta,
        seed, level: as in :func:`complete`, the same for every run (the interval's error
        table is measured once for the ladder).
    show_progress: force the progress bar on or off (default: on a terminal, unless quiet).

    Returns
    -------
    list of (run, Completion or str), one per run in ``runs`` order: the completion, or the
    one-line error message (``"FitError: ..."``) of a run that could not be completed.

    Raises
    ------
    LawError: unknown law (it applies to every run). FitError: a bad ``n_jobs``.
    FitError: a ``level`` outside (0, 1).
    """
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    law = get_law(law)
    n_jobs = check_n_jobs(n_jobs)
    level = _check_level(level)
    runs = list(ladder.runs) if runs is None else [str(r) for r in runs]
    options = dict(upto_fraction=upto_fraction, upto_step=upto_step,
                   min_step_fraction=min_step_fraction, siblings=siblings,
                   keep_warmup=keep_warmup, fixed=fixed,
                   bounds=bounds, delta=delta, seed=seed)
    errors = completion_error_table(ladder, min_step_fraction)
    if len(runs) > 1 and runs_serially(n_jobs):
        with one_blas_thread():     # as map_jobs runs its serial jobs
            return _complete_serial(ladder, runs, law, options, show_progress, errors, level)
    items = [(ladder, run, law, options, errors, level) for run in runs]
    return map_jobs(_complete_job, items, n_jobs=n_jobs, desc=f"complete ({law.name})",
                    show_progress=show_progress, unit="run")


def _complete_serial(ladder: Ladder, runs: list[str], law: Law, options: dict,
                     show_progress: bool | None, errors: dict, level: float
                     ) -> list[tuple[str, Completion | str]]:
    """:func:`complete_many` in this process: every run set up, then their fits by
    :func:`~delphi.fitting.engine.fit_arrays_many` (the global searches of runs with as many
    checkpoints share their batched BFGS), then each completion finished; the same results,
    bit for bit, as :func:`complete` run by run."""
    out: dict[int, Completion | str] = {}
    requests, states = [], []
    ladder = as_ladder(ladder)
    by_run = ladder.table.groupby("run", sort=False).indices
    for i, run in enumerate(runs):
        try:
            request, state = _setup(ladder, run, law, **options, by_run=by_run)
        except DelphiError as exc:
            out[i] = f"{type(exc).__name__}: {exc}"
            continue
        requests.append(request)
        states.append((i, state))
    fits = iter(progress(iter(fit_arrays_many(requests)), len(requests),
                         f"complete ({law.name})", show=show_progress, unit="run"))
    for (i, state), result in zip(states, fits):
        try:
            if isinstance(result, DelphiError):
                raise result
            out[i] = _finish(state, result, errors=errors, level=level)
        except DelphiError as exc:
            out[i] = f"{type(exc).__name__}: {exc}"
    return [(run, out[i]) for i, run in enumerate(runs)]


def _siblings(ladder: Ladder, run: str) -> list[str]:
    """Runs of the same model (params) and peak LR as ``run``, with steps."""
    t = ladder.table
    keys = [c for c in ("params", "peak_lr") if c in t.columns]
    if not keys or "step" not in t.columns:
        return []
    mine = t.loc[t["run"] == run, keys].iloc[0]
    same = (t[keys] == mine).all(axis=1)
    return sorted(t.loc[same, "run"].unique())
