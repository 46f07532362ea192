"""The target's whole loss curve from the ladder, with a band at each fraction (issue 26).

``delphi predict --curve`` forecasts the loss at every fraction of the target run: a
checkpoint law fitted across the ladder's scales (``chinchilla-ckpt``, L(N, D, h) = E +
A/N^alpha + B/D^beta + F h^gamma, Hoffmann et al. 2022 Eq. 2 with the LR term of the OLMo
ladder, Bhagia et al. 2024) evaluated along the target's planned LR schedule: at step s the
target has seen D(s) = s x batch tokens and its LR ratio is h(s) = lr(s) / peak.

The band. At fraction 1 it is the final forecast's new-run interval (:func:`delphi.predict`,
calibrated as usual), widened where needed to contain the law's own leave-one-size-out error
at the target's tokens per parameter (:func:`size_holdout_errors`, :func:`size_band`): the
compute-based calibration does not see a new size whose compute is inside the ladder's (an
under-trained large target), while the error one size up at the same D/N does. Along the curve
the same relative widths are kept: lower(f) = loss(f) x lower / loss and upper(f) = loss(f) x
upper / loss, i.e. a band of constant width in log loss. This is a documented rule, not a
derived one; its coverage of real runs' checkpoints is measured by
``benchmarks/bench_track.py`` (RESULTS.md, "Issue 26"), in and out of sample.

The run-only error model. A tracked run is also completed from its own checkpoints (the
``annealing`` curve law, Tissue et al. 2024 Eq. 1, with the planned schedule); how far such a
completion is off depends on how much of the run it has seen. :func:`completion_errors`
measures that on the ladder itself, before the target exists: each of the ladder's finished
curves is cut at fractions 0.1..0.9, completed, and the root-mean-square log error of the
final loss is recorded per fraction. ``register`` stores it with the curve, so the weights of
the revised forecast (:mod:`delphi.registry.tracking`) are preregistered too.

Carry-over anchoring. A run that so far lies off its forecast curve tends to end off it too.
How much of the deviation so far carries over to the final loss is measured on the ladder's
own size folds (:func:`size_holdout_errors`: the law fitted without one size predicts that
size's whole curves): at each fraction q of :data:`CARRY_FRACTIONS`, the held-out run's
deviation d (mean ln(observed / forecast) over its checkpoints in the last
:data:`CARRY_WINDOW` of the run, at its first checkpoint at or after q) against its final
error e = ln(actual final / forecast final). :func:`carry_over` regresses e on d through the
origin (rho, clipped to [0, 1]: a partial carry-over, never an amplification or a sign flip)
and records the residual sd (n - 1 degrees of freedom) and the rms of e. The tracker then
anchors the ladder's final forecast: ln L = ln L_ladder + rho d, its sd the ladder's
scaled by sd / rms (the share of the final error the carry-over leaves unexplained, a ratio,
so a target further above the ladder than the folds keeps its wider ladder sd). Never
measured on the target runs.

The early completion and the correlation (both recorded only when asked for:
``predict_curve(early_completion=True, correlated=True)``; see ``benchmarks/RESULTS.md`` for
whether they are on by default). The run-only completion fits the checkpoints from the
curve's start (25% of the run) on, so it needs 6 of them and does not exist at 25%. The
*early* completion fits the same law to every checkpoint after warm-up instead (the early
descent included, which the law describes worse); its error is measured on the ladder's
runs exactly as :func:`completion_errors` measures the other's (``start=0``: from warm-up,
at :data:`EARLY_FRACTIONS`), and the tracker uses it only while the other cannot be fitted.
The anchored ladder forecast and the run-only completion both read the run's own
checkpoints, so their errors may be correlated: on the same size folds, at each carry
fraction, the held-out run's anchored residual e - rho d is set against its run-only
completion's error at the same checkpoint (the completion from 25% on when it can be fitted,
else the early one); ``corr`` = sum(a b) / sqrt(sum a^2 sum b^2) (uncentred, as the rms is),
clipped to [0, 0.95]: never a narrower interval than independence gives. The tracker then
combines the two by the best linear unbiased (generalised least-squares) weights for
correlated estimates instead of the inverse-variance ones (``correlated="weights"``), or keeps
the inverse-variance weights and only gives their combination its variance under the
correlation (``correlated="variance"``: the same revised loss, a wider interval).

Fold weights (recorded only when asked for: ``predict_curve(fold_weights=True)``; off by
default, see ``benchmarks/RESULTS.md``). On the same size folds,
at each carry fraction, the ladder weight that minimises the held-out runs' squared error of
the combination w a + (1 - w) c (a the anchored residual, c the run-only completion's error)
is w = sum(c (c - a)) / sum((a - c)^2), clipped to [0, 1] (:attr:`CarryOver.weight`; the
optimal combination from the sample second moments, Bates & Granger 1969, which the two sds'
precision weights approximate by assuming the errors independent). Measured on 5-30 runs it
jumps between 0 and 1 from one fraction to the next, so the tracker shrinks it towards the
precision weight: w_L = s w + (1 - s) s_R^2 / (s_L^2 + s_R^2), s = :data:`FOLD_WEIGHT_SHARE`,
its interval that of the weighted mean of independent estimates (under ``corr`` when one is
recorded).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..core.quantiles import norm_ppf
from ..errors import (DelphiError, FitWarning, TargetError, TargetInputError, option,
                      user_stacklevel)
from ..fitting.api import MIN_CHECKPOINT_FRACTION, fit as fit_law
from ..inputs.ladder import Ladder
from ..inputs.law_inputs import rows_inputs, run_fraction
from ..inputs.schedules import Schedule, warmup_end
from ..laws import CHECKPOINT_LAWS, get_law
from .forecast import Forecast, predict
from .target import Target, as_target
from .uncertainty import DEFAULT_LEVEL
from ..core.findings import Finding, messages
from ..core.text import level_percent
from .completion_refit import WarmCompletion
from ..inputs.readers import as_ladder
from ..inputs.law_inputs import curve_inputs

__all__ = ["CurvePoint", "CurveForecast", "predict_curve", "completion_errors",
           "completion_run_errors", "rms_completion_errors",
           "size_holdout_errors", "SizeFold", "CarryOver", "carry_over", "run_deviation",
           "CARRY_FRACTIONS", "CARRY_WINDOW", "EARLY_FRACTIONS", "MAX_CORR", "FOLD_WEIGHT_SHARE", "target_schedule",
           "COMPLETION_FRACTIONS", "CURVE_LAW", "DEFAULT_POINTS"]

#: The checkpoint law ``--curve`` fits when none is named.
CURVE_LAW = "chinchilla-ckpt"
#: Curve points by default (evenly spaced in steps from the end of warm-up to the end).
DEFAULT_POINTS = 50
#: Fractions at which :func:`completion_errors` cuts the ladder's runs.
COMPLETION_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: A run needs this many checkpoints to be used by :func:`completion_errors`.
MIN_CHECKPOINTS = 8
#: The band's rule, as ``register`` records it.
BAND_METHOD = "final new-run interval's relative widths carried along the curve"
SIZE_BAND_METHOD = ("final new-run interval's relative widths, widened to contain the law's "
                    "leave-one-size-out errors at the target's tokens per parameter (scaled to "
                    "its distance above the ladder, plus run noise), carried along the curve")
#: :func:`size_holdout_errors` holds out each of the ladder's this many largest sizes in turn.
SIZE_FOLDS = 2
#: ... each fitted on at least this many smaller sizes: the law's N term (E + A / N^alpha)
#: has three parameters, so fewer sizes do not identify it (a fold fitted on two sizes of a
#: ladder drawn from chinchilla-ckpt itself misses its held-out size by 3%, tests).
MIN_FOLD_SIZES = 3
#: Fractions at which the carry-over of a run's deviation is measured on the size folds.
CARRY_FRACTIONS = (0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)
#: The run's deviation so far averages its checkpoints in this last share of the run.
CARRY_WINDOW = 0.1
#: Held-out runs needed at a fraction to estimate the carry-over there.
MIN_CARRY_RUNS = 3
#: Fractions at which the early completion's (from warm-up) error is measured on the ladder.
EARLY_FRACTIONS = (0.25, 0.3, 0.4, 0.5)
#: Share of the size folds' combination weight (:attr:`CarryOver.weight`) in the tracker's
#: ladder weight, the rest the precision weight, with ``fold_weights=True``: chosen on the
#: issue's in-sample heroes among 0, 0.25, 0.5, 0.75, 1 before the out-of-sample replays
#: (``benchmarks/RESULTS.md``, issue 26, 2026-12-03, fold weights).
FOLD_WEIGHT_SHARE = 0.25
#: Upper clip of the anchored/run-only correlation (a correlation of 1 makes the weights
#: undefined; a negative one is clipped to 0).
MAX_CORR = 0.95


@dataclass(frozen=True)
class SizeFold:
    """One leave-one-size-out fold of :func:`size_holdout_errors`."""

    params: float
    """The held-out size N [parameters]."""
    fitted_params: float
    """The largest size the fold was fitted on [parameters]."""
    tokens_per_param: tuple[float, ...]
    """D/N of each held-out finished run, increasing (runs at equal D/N are averaged)."""
    errors: tuple[float, ...]
    """ln(actual final / predicted final) at each of those D/N [log loss]."""
    deviations: tuple[tuple[float, float, float], ...] = ()
    """(fraction q, deviation d, final error e) per held-out run and q of
    :data:`CARRY_FRACTIONS`: d = :func:`run_deviation` of its curve from the fold's forecast
    at its first checkpoint at or after q, e = ln(actual final / forecast final) [log loss]."""
    completion_errors: tuple = ()
    """Aligned with :attr:`deviations`: ln(actual final / the run-only completion at the same
    checkpoint) (from 25% of the run on when it can be fitted, else from warm-up), or None
    when neither can be fitted; empty when not measured."""

    def error_at(self, tokens_per_param: float) -> float:
        """The fold's log error at ``tokens_per_param``: linear in ln(D/N) between the held-out
        runs, the nearest run's error outside them."""
        return float(np.interp(math.log(tokens_per_param), np.log(self.tokens_per_param),
                               self.errors))

    def to_dict(self) -> dict:
        return {"params": self.params, "fitted_params": self.fitted_params,
                "tokens_per_param": list(self.tokens_per_param), "errors": list(self.errors)}


@dataclass(frozen=True)
class CarryOver:
    """How much of a run's deviation from its forecast curve carries over to its final loss,
    at one fraction of the run (:func:`carry_over`)."""

    fraction: float
    rho: float
    """Slope of the final log error on the deviation so far, in [0, 1]."""
    sd: float
    """Residual sd of the final log error after the carry-over (n - 1 degrees of freedom)."""
    rms: float
    """Root mean square of the final log error itself (the sd without carry-over)."""
    n: int
    """Held-out runs it was measured on."""
    window: float = CARRY_WINDOW
    """Share of the run the deviation averages (:func:`run_deviation`)."""
    corr: float | None = None
    """Correlation of the anchored residual e - rho d with the run-only completion's error,
    in [0, :data:`MAX_CORR`]; None when not measured (the tracker then weighs the two as
    independent)."""
    weight: float | None = None
    """The ladder weight that minimises the folds' squared error of the combination
    w a + (1 - w) c (a the anchored residual, c the run-only completion's error), in [0, 1];
    None when not measured (the tracker then weighs by the two sds)."""


def run_deviation(fractions, log_ratios, at: float, window: float = CARRY_WINDOW) -> float | None:
    """The run's deviation from its forecast curve at fraction ``at``: the mean of
    ``log_ratios`` (ln(observed / forecast) per checkpoint, shape (n,)) over the checkpoints
    with fraction in (at - window, at]; None when there is none."""
    f = np.asarray(fractions, float)
    keep = (f <= at + 1e-12) & (f > at - window + 1e-12)
    if not keep.any():
        return None
    return float(np.mean(np.asarray(log_ratios, float)[keep]))


def carry_over(folds, *, fractions=CARRY_FRACTIONS, min_runs: int = MIN_CARRY_RUNS,
               correlated: bool = False, fold_weights: bool = False) -> tuple[CarryOver, ...]:
    """The carry-over at each fraction from the size folds' ``deviations``
    (:func:`size_holdout_errors`), pooled over folds: rho = sum(d e) / sum(d^2) clipped to
    [0, 1] (least squares through the origin), sd = sqrt(sum((e - rho d)^2) / (n - 1)), rms =
    sqrt(mean(e^2)). With ``correlated``, also ``corr`` = sum(a c) / sqrt(sum a^2 sum c^2),
    a = e - rho d, c the run's completion error (:attr:`SizeFold.completion_errors`), over the
    runs with both (at least ``min_runs``; else None), clipped to [0, :data:`MAX_CORR`].
    With ``fold_weights``, also ``weight`` = sum(c (c - a)) / sum((a - c)^2) over the same
    runs, clipped to [0, 1]: the weight of the anchored forecast that minimises the folds'
    sum of squared combined errors (the optimal combination of two forecasts from their
    sample second moments, Bates & Granger 1969; 0.5 when a = c on every run).
    Fractions with fewer than ``min_runs`` runs are left out; empty without deviations."""
    out = []
    for q in fractions:
        pts, comp = [], []
        for f in folds:
            devs = getattr(f, "deviations", ())
            errs = getattr(f, "completion_errors", ()) or (None,) * len(devs)
            for (fq, d, e), c in zip(devs, errs):
                if abs(fq - q) < 1e-9:
                    pts.append((d, e))
                    comp.append(c)
        if len(pts) < min_runs:
            continue
        d, e = np.array(pts, float).T
        dd = float(np.dot(d, d))
        rho = 0.0 if dd <= 0 else min(1.0, max(0.0, float(np.dot(d, e)) / dd))
        res = e - rho * d
        corr, weight = None, None
        both = [(a, c) for a, c in zip(res, comp) if c is not None]
        if (correlated or fold_weights) and len(both) >= min_runs:
            a, c = np.array(both, float).T
            if correlated:
                den = math.sqrt(float(np.dot(a, a)) * float(np.dot(c, c)))
                corr = 0.0 if den <= 0 else min(MAX_CORR, max(0.0, float(np.dot(a, c)) / den))
            if fold_weights:
                den = float(np.dot(a - c, a - c))
                weight = 0.5 if den <= 0 else min(1.0, max(0.0, float(np.dot(c, c - a)) / den))
        out.append(CarryOver(fraction=float(q), rho=rho,
                             sd=max(1e-6, float(np.sqrt(np.dot(res, res) / (len(e) - 1)))),
                             rms=max(1e-6, float(np.sqrt(np.mean(e * e)))), n=int(len(e)),
                             corr=corr, weight=weight))
    return tuple(out)


@dataclass(frozen=True)
class CurvePoint:
    """One point of the forecast curve."""

    fraction: float
    """Share of the target's planned steps done, in (0, 1]."""
    step: int
    """Optimizer step [steps]."""
    tokens: float
    """Tokens seen at that step [tokens]."""
    loss: float
    """Predicted loss there [ladder's unit, e.g. nats/token]."""
    lower: float
    """Lower end of the band (one new run) at ``level``."""
    upper: float
    """Upper end of the band."""

    def to_dict(self) -> dict:
        return {"fraction": self.fraction, "step": self.step, "tokens": self.tokens,
                "loss": self.loss, "lower": self.lower, "upper": self.upper}


@dataclass(frozen=True)
class CurveForecast:
    """A final-loss forecast with the target's whole predicted curve (:func:`predict_curve`).

    Quacks like :class:`~delphi.forecast.Forecast` for :meth:`delphi.Registry.register`
    (``loss``, ``target``, ``fit``, ``interval``...), which then records the curve and band.
    """

    forecast: Forecast
    """The final-loss forecast (its interval is the band at fraction 1)."""
    points: tuple[CurvePoint, ...]
    """The curve, fractions increasing, ending at fraction 1."""
    level: float
    """Nominal coverage of the band."""
    schedule: str
    """The target's LR schedule the curve follows (a :class:`Schedule` spec)."""
    completion_error: tuple[tuple[float, float], ...] = ()
    """(fraction, RMS log error) of completing the ladder's own runs from their checkpoints up
    to that fraction (:func:`completion_errors`); empty when the ladder has too few curves."""
    size_folds: tuple = ()
    """The leave-one-size-out folds the band was widened by (:func:`size_holdout_errors`);
    empty when not measured."""
    carry_over: tuple = ()
    """:class:`CarryOver` per fraction, measured on :attr:`size_folds` (:func:`carry_over`);
    empty when not measured or turned off: the tracker then does not anchor."""
    correlation_use: str = "weights"
    """How the tracker uses :attr:`CarryOver.corr`: ``"weights"`` (the BLUE weights and their
    variance) or ``"variance"`` (inverse-variance weights, their variance under the
    correlation)."""
    fold_weight_share: float | None = None
    """Share of the folds' combination weight (:attr:`CarryOver.weight`) in the tracker's
    ladder weight, the rest the precision weight; None when no fold weight is recorded."""
    early_completion_error: tuple[tuple[float, float], ...] = ()
    """(fraction, RMS log error) of the early completion (from warm-up) on the ladder's runs
    (:func:`completion_errors` with ``start=0``); empty when not measured: the tracker then has
    no run-only completion before 6 checkpoints from the curve's start."""
    band_method: str = BAND_METHOD
    """How the band was made (recorded by ``register``)."""
    curve_findings: tuple[Finding, ...] = field(default=())
    """What making the curve found (how the band was made, a missing completion error), after
    the final forecast's own :attr:`~delphi.forecast.Forecast.findings`."""

    # --- what register() and reports read, from the final forecast
    @property
    def findings(self) -> tuple[Finding, ...]:
        """The final forecast's findings, then the curve's."""
        return tuple(self.forecast.findings) + tuple(self.curve_findings)

    @property
    def notes(self) -> tuple[str, ...]:
        return messages(self.findings, "note")

    @property
    def warnings(self) -> tuple[str, ...]:
        return messages(self.findings, "warning")

    @property
    def loss(self) -> float:
        return self.forecast.loss

    @property
    def target(self) -> Target:
        return self.forecast.target

    @property
    def fit(self):
        return self.forecast.fit

    @property
    def interval(self):
        return self.forecast.interval

    @property
    def lower(self):
        return self.forecast.lower

    @property
    def upper(self):
        return self.forecast.upper

    def __getattr__(self, name):
        # ladder_name, ladder_sha256, metric, unit, extrapolation, warnings, selection...
        if name.startswith("__") or name == "forecast":
            raise AttributeError(name)
        return getattr(self.forecast, name)

    def to_dict(self) -> dict:
        """``predict --curve --json``: the forecast's JSON with ``prediction.curve`` (a list of
        ``{fraction, step, tokens, loss, lower, upper}``), ``prediction.curve_level`` and
        ``prediction.completion_error`` (a list of ``{fraction, rms_log_error}``)."""
        d = self.forecast.to_dict()
        d["prediction"]["curve"] = [p.to_dict() for p in self.points]
        d["prediction"]["curve_level"] = self.level
        d["prediction"]["curve_schedule"] = self.schedule
        d["prediction"]["completion_error"] = [{"fraction": f, "rms_log_error": e}
                                               for f, e in self.completion_error]
        d["notes"], d["warnings"] = list(self.notes), list(self.warnings)
        d["findings"] = [f.to_dict() for f in self.findings]
        return d

    def to_frame(self):
        """The curve as a pandas DataFrame (columns of :class:`CurvePoint`)."""
        import pandas as pd
        return pd.DataFrame([p.to_dict() for p in self.points])

    def report(self) -> str:
        lines = [self.forecast.report(), "",
                 f"curve      {len(self.points)} points along {self.schedule} "
                 f"({level_percent(self.level)} band for one new run)"]
        show = self.points if len(self.points) <= 12 else [
            self.points[i] for i in np.unique(np.linspace(0, len(self.points) - 1, 11)
                                              .round().astype(int))]
        lines.append("           fraction      step        tokens    loss   [lower, upper]")
        for p in show:
            lines.append(f"           {p.fraction:8.3f} {p.step:9d} {p.tokens:13.4g}  "
                         f"{p.loss:.4f} [{p.lower:.4f}, {p.upper:.4f}]")
        if self.completion_error:
            errs = ", ".join(f"{f:g}: {e:.2%}" for f, e in self.completion_error)
            lines.append(f"           run-only completion error on the ladder (RMS, by "
                         f"fraction): {errs}")
        for f in self.curve_findings:
            lines.append(f"{f.severity:<10} {f.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line: the final forecast's (:class:`~delphi.Forecast` repr) and the curve's
        length, level and schedule (:meth:`report` is the full text)."""
        return (f"CurveForecast({repr(self.forecast)[len('Forecast('):-1]}, "
                f"curve={len(self.points)} points, band={level_percent(self.level)}, "
                f"schedule={self.schedule!r})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))


def target_schedule(target: Target, ladder: Ladder | None = None) -> tuple[Schedule, int, float]:
    """The target's planned schedule (peak 1), its steps and batch [tokens].

    Steps: ``target.steps``, else ``tokens / batch_size``. Schedule: ``target.schedule``, else
    the ladder's schedule shape.

    Raises
    ------
    TargetError
        No steps (give --target-steps, or --target-tokens with --target-batch), no batch or
        tokens, or no schedule.
    """
    steps = target.steps
    if steps is None and target.tokens is not None and target.batch_size is not None:
        steps = target.tokens / target.batch_size
    if steps is None:
        raise TargetError(f"a forecast curve needs the target's length in steps: give "
                          f"{option('steps', '--target-steps')} (or "
                          f"{option('tokens', '--target-tokens')} with "
                          f"{option('batch_size', '--target-batch')})")
    steps = int(round(steps))
    if target.batch_size is not None:
        batch = float(target.batch_size)
    elif target.tokens is not None:
        batch = float(target.tokens) / steps
    else:
        raise TargetError(f"a forecast curve needs the target's tokens or batch: give "
                          f"{option('tokens', '--target-tokens')} or "
                          f"{option('batch_size', '--target-batch')}")
    spec = target.schedule or (ladder.schedule if ladder is not None else None)
    if spec is None:
        raise TargetError(f"a forecast curve follows the target's planned LR schedule: give "
                          f"{option('schedule', '--target-schedule')} (e.g. "
                          f"'cosine:warmup=1000,final=0.1')")
    try:
        sched = Schedule.parse(spec, peak_lr=1.0, total_steps=steps)
    except DelphiError as exc:
        raise TargetError(f"target schedule {spec!r}: {exc}") from None
    return sched, steps, batch


def completion_errors(ladder: Ladder, *, fractions=COMPLETION_FRACTIONS, max_runs: int = 12,
                      start: float = MIN_CHECKPOINT_FRACTION, exclude=()
                      ) -> tuple[tuple[float, float], ...]:
    """How far a run-only completion is off, by the share of the run it has seen, measured
    on the ladder's own finished curves.

    Each finished run with at least :data:`MIN_CHECKPOINTS` checkpoints (the ``max_runs``
    largest by parameters, then tokens) is completed from its checkpoints up to each fraction
    in turn, exactly as the tracker completes a run (:class:`WarmCompletion`: the
    ``annealing`` law, Tissue et al. 2024 Eq. 1, fitted to the checkpoints from ``start`` of the
    run on (default 25%, where a forecast curve starts; 0: from the end of warm-up, the early
    completion), refitted warm as the fraction grows); the error is
    ln(actual final / completed). The result per fraction is the root mean square
    over runs (bias included), floored at 1e-4. ``exclude``: runs left out of the root mean
    square (the run being completed, when it is one of the ladder's finished runs).

    Returns
    -------
    ((fraction, rms log error), ...) for fractions where at least 2 runs could be completed;
    empty when none could (a ladder of final losses only).
    """
    return rms_completion_errors(completion_run_errors(
        ladder, fractions=fractions, max_runs=max_runs, start=start), exclude=exclude)


def completion_run_errors(ladder: Ladder, *, fractions=COMPLETION_FRACTIONS,
                          max_runs: int = 12, start: float = MIN_CHECKPOINT_FRACTION
                          ) -> dict[float, dict[str, float]]:
    """The per-run errors behind :func:`completion_errors` (same parameters): fraction ->
    {run: ln(actual final / run-only completion from the checkpoints up to that fraction)},
    for every fraction in ``fractions`` (an empty dict where no run could be completed)."""
    errors: dict[float, dict[str, float]] = {float(f): {} for f in fractions}
    t = ladder.table
    if "step" not in t.columns or not len(t):
        return errors
    agg = {"n": ("step", "size")}
    for c in ("params", "tokens"):
        if c in t.columns:
            agg[c] = (c, "max")
    sizes = t.groupby("run").agg(**agg)
    order = [c for c in ("params", "tokens") if c in sizes.columns]
    sizes = sizes[sizes["n"] >= MIN_CHECKPOINTS]
    runs = (sizes.sort_values(order, ascending=False) if order else sizes).index[:max_runs]
    restarts = getattr(ladder, "restarts", None) or {}
    for run in runs:
        if run in restarts:
            continue
        try:
            rows, _, schedules, _ = curve_inputs(ladder, [run])
        except DelphiError:
            continue
        total = int(schedules[0].total_steps)
        steps = rows["step"].to_numpy(float).astype(np.int64)
        losses = rows["loss"].to_numpy(float)
        if steps.max() < total or not np.all(np.diff(steps) > 0):
            continue                     # not finished, or not one curve in step order
        actual = float(losses[-1])
        wc = WarmCompletion(schedules[0].lrs(),
                            start_step=math.ceil(start * total))
        for f in sorted(errors):
            keep = steps <= math.floor(f * total)
            value = wc.predict(steps[keep], losses[keep])
            if value is not None:
                errors[f][str(run)] = math.log(actual / value)
    return errors


def rms_completion_errors(errors: dict[float, dict[str, float]], *, exclude=()
                          ) -> tuple[tuple[float, float], ...]:
    """((fraction, rms log error), ...) from :func:`completion_run_errors`' errors, the runs
    in ``exclude`` left out: the root mean square (bias included) over at least 2 runs,
    floored at 1e-4; fractions with fewer runs are left out."""
    skip = {str(r) for r in exclude}
    out = []
    for f in errors:
        e = [v for r, v in errors[f].items() if r not in skip]
        if len(e) >= 2:
            out.append((float(f), max(1e-4, float(np.sqrt(np.mean(np.square(e)))))))
    return tuple(out)


def size_holdout_errors(ladder, law: str | None = None, *, folds: int = SIZE_FOLDS,
                        min_sizes: int = MIN_FOLD_SIZES, seed: int = 0
                        ) -> tuple[SizeFold, ...]:
    """The law's own errors one size up, by tokens per parameter (leave one size out).

    For each of the ``folds`` largest model sizes N_k of the ladder that has at least
    ``min_sizes`` smaller sizes, the law is fitted (:func:`delphi.fit`, same defaults as
    :func:`delphi.predict`) on the runs of the smaller sizes only and predicts the final loss of
    each finished run of size N_k; the error is ln(actual / predicted), recorded against the
    run's tokens per parameter D/N (runs at equal D/N averaged). This is the forecast a target
    one size above the ladder faces (a new N at a given D/N), measured on the ladder itself:
    the compute-based calibration of :func:`delphi.predict` does not see it when the target's
    compute is inside the ladder's (an under-trained large target, e.g. 3B at 10 tokens per
    parameter over a ladder up to 1B at 200).

    Parameters
    ----------
    ladder: a ladder with N (``params``) and D (``tokens``) per run, as :func:`predict_curve`.
    law: the law (default ``chinchilla-ckpt``).
    folds, min_sizes: how many of the largest sizes to hold out; the fewest smaller sizes a
        fold is fitted on.
    seed: the fits' seed.

    Returns
    -------
    The folds, largest held-out size first; empty when the ladder has fewer than
    ``min_sizes + 1`` sizes or no ``params`` column, or a fold's fit fails (it is skipped).
    """
    ladder = as_ladder(ladder)
    law_obj = get_law(law or CURVE_LAW)
    t = ladder.table
    if not {"params", "tokens"} <= set(t.columns):
        return ()
    try:
        finals, _ = ladder.final_points()
    except DelphiError:
        return ()
    sizes = np.unique(t["params"].to_numpy(float))
    out = []
    for k in range(len(sizes) - 1, -1, -1):
        if len(out) >= folds or k < min_sizes:
            break
        n_k = sizes[k]
        held = finals[finals["params"].to_numpy(float) == n_k]
        if not len(held):
            continue
        keep = t["params"].to_numpy(float) < n_k
        sub = Ladder(t[keep].drop(columns=["row"], errors="ignore").reset_index(drop=True),
                     name=f"{ladder.name}-below-{n_k:.3g}", metric=ladder.metric,
                     unit=ladder.unit, schedule=ladder.schedule, source=ladder.source)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = fit_law(sub, law_obj, seed=seed)
                pred = np.asarray(f.predict(rows_inputs(law_obj, ladder, held)), float)
        except DelphiError:
            continue
        actual = held["loss"].to_numpy(float)
        ok = np.isfinite(pred) & (pred > 0)
        if not ok.any():
            continue
        tpp = held["tokens"].to_numpy(float)[ok] / n_k
        err = np.log(actual[ok] / pred[ok])
        u, inv = np.unique(np.round(tpp, 6), return_inverse=True)
        mean = np.bincount(inv, weights=err) / np.bincount(inv)
        devs, comps = (_fold_deviations(f, law_obj, ladder, t, held)
                       if "run" in held.columns else ((), ()))
        out.append(SizeFold(params=float(n_k), fitted_params=float(sizes[k - 1]),
                            tokens_per_param=tuple(float(v) for v in u),
                            errors=tuple(float(v) for v in mean), deviations=devs,
                            completion_errors=comps))
    return tuple(out)


def _completer(ladder, run, rows):
    """f(step) -> the run-only completion's final loss from ``rows``' checkpoints up to that
    step, as the tracker makes it (from 25% of the run on, else from warm-up; steps
    increasing between calls), or None when neither can be fitted or the run has no schedule."""
    try:
        _, _, schedules, _ = curve_inputs(ladder, [run])
    except DelphiError:
        return None
    lrs = schedules[0].lrs()
    total = int(schedules[0].total_steps)
    steps = np.minimum(rows["step"].to_numpy(float).astype(np.int64), total)
    losses = rows["loss"].to_numpy(float)
    main = WarmCompletion(lrs, start_step=math.ceil(MIN_CHECKPOINT_FRACTION * total))
    early = WarmCompletion(lrs)

    def at(step):
        keep = steps <= step
        value = main.predict(steps[keep], losses[keep])
        return value if value is not None else early.predict(steps[keep], losses[keep])
    return at


def _fold_deviations(fit, law_obj, ladder, t, held) -> tuple[tuple, tuple]:
    """(q, d, e) of each held-out finished run's curve (see :attr:`SizeFold.deviations`), and
    aligned with them the run-only completion's final log error there
    (:attr:`SizeFold.completion_errors`)."""
    out, comps = [], []
    for run, final in zip(held["run"], held["loss"].to_numpy(float)):
        rows = t[t["run"] == run].sort_values("step") if "step" in t.columns else t.iloc[:0]
        if len(rows) < 2:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = np.asarray(fit.predict(rows_inputs(law_obj, ladder, rows)), float)
        except DelphiError:
            continue
        frac = run_fraction(rows)
        ok = np.isfinite(pred) & (pred > 0) & (frac >= MIN_CHECKPOINT_FRACTION - 1e-12)
        if not ok[-1] or frac[-1] < 1.0 - 1e-9:
            continue
        step = rows["step"].to_numpy(float)[ok] if "step" in rows.columns else None
        frac, ratio = frac[ok], np.log(rows["loss"].to_numpy(float)[ok] / pred[ok])
        e = math.log(float(final) / float(pred[-1]))
        complete = _completer(ladder, run, rows) if step is not None else None
        for q in CARRY_FRACTIONS:
            idx = np.flatnonzero((frac >= q - 1e-12) & (frac < 1.0 - 1e-9))
            if not idx.size:
                continue
            d = run_deviation(frac, ratio, float(frac[idx[0]]))
            if d is not None:
                out.append((float(q), d, e))
                value = None if complete is None else complete(int(step[idx[0]]))
                comps.append(None if value is None else math.log(float(final) / value))
    return tuple(out), tuple(comps)


def size_band(folds, params: float, tokens: float, max_params: float, noise: float,
              level: float) -> tuple[float, float] | None:
    """The log band a target of N = ``params`` and D = ``tokens`` needs from the
    leave-one-size-out errors ``folds`` (:func:`size_holdout_errors`).

    Each fold's error at the target's D/N is scaled to the target's distance above the ladder,
    ln(N / ``max_params``) over the fold's own ln(N_k / N_fitted) (errors grow with the
    extrapolation distance, as the reference-class calibration's q_1 log10 r); the band must
    contain every scaled error, widened by the run noise (sd ``noise`` in log loss) at
    ``level``: (min_k e_k - z sd, max_k e_k + z sd), z the two-sided normal quantile.

    Returns
    -------
    (lower, upper) in log loss relative to the forecast, or None without folds or for a
    target not above the ladder's largest size.
    """
    if not folds or not params > max_params:
        return None
    dist = math.log(params / max_params)
    scaled = [f.error_at(tokens / params) * dist / math.log(f.params / f.fitted_params)
              for f in folds]
    z = float(norm_ppf(0.5 + level / 2)) * max(float(noise or 0.0), 0.0)
    return min(scaled) - z, max(scaled) + z


def predict_curve(ladder, target, law: str | None = None, *, level: float = DEFAULT_LEVEL,
                  points: int = DEFAULT_POINTS, completion: bool = True,
                  completion_runs: int = 12, size_errors=True, carry: bool = True,
                  early_completion: bool = False, correlated: bool | str = False,
                  fold_weights: bool | float = False, seed: int = 0,
                  **options) -> CurveForecast:
    """Forecast the target run's whole loss curve, with a band at each fraction.

    Parameters
    ----------
    ladder: a ladder with checkpoints (``step``, ``loss``, an LR per checkpoint or a schedule
        shape), as :func:`delphi.fit` reads it for a checkpoint law.
    target: the target (a :class:`Target` or dict): N (``params``), its length (``steps``, or
        ``tokens`` and ``batch_size``) and its planned ``schedule`` (a :class:`Schedule` spec,
        e.g. ``"cosine:warmup=1000,final=0.1"``; default the ladder's schedule shape).
    law: a checkpoint law (default ``chinchilla-ckpt``, the one in :data:`CHECKPOINT_LAWS`).
    level: nominal coverage of the band (default 0.9).
    points: curve points, evenly spaced in steps from the curve's start to the last step; it
        starts after warm-up and after the first 25% of the run
        (:data:`delphi.fitting.api.MIN_CHECKPOINT_FRACTION`), as the checkpoint law is fitted
        only on checkpoints past that share of each ladder run (earlier checkpoints are not
        scored by the tracker).
    completion: also measure the run-only completion error on the ladder
        (:func:`completion_errors`, 9 fast fits per run, most warm-started); False skips it.
    completion_runs: the ladder's largest runs used for it (default 12).
    size_errors: widen the band by the law's own leave-one-size-out errors at the target's
        tokens per parameter (:func:`size_holdout_errors`, :func:`size_band`; 2 extra fits):
        True (default) measures them, a tuple of :class:`SizeFold` reuses them (same ladder and
        law), False keeps the final interval's band alone. The band at fraction 1 is then the
        union of the final new-run interval and the size band, so it is never narrower.
    carry: measure the carry-over of a run's deviation on the size folds (:func:`carry_over`;
        no extra fits), so that tracking anchors the ladder's final forecast to the run's
        deviation so far; False records none (the tracker's rule before anchoring).
    early_completion: also measure the early completion's error (from warm-up, at
        :data:`EARLY_FRACTIONS`; :func:`completion_errors` with ``start=0``), so that tracking
        has a run-only completion before 6 checkpoints from the curve's start (module
        docstring).
    correlated: also measure, with the carry-over, the correlation of the anchored ladder
        forecast's and the run-only completion's errors on the size folds
        (:attr:`CarryOver.corr`), so that tracking combines them by the correlated (BLUE)
        weights (True or ``"weights"``), or by the inverse-variance weights with the variance
        their combination has under the correlation (``"variance"``).
    fold_weights: also measure, with the carry-over, the ladder weight that minimises the
        folds' squared error of the combined forecast (:attr:`CarryOver.weight`), so that
        tracking combines the anchored forecast and the run-only completion with that weight
        shrunk towards the precision weight: ladder weight = share x fold weight + (1 -
        share) x s_R^2 / (s_L^2 + s_R^2), share :data:`FOLD_WEIGHT_SHARE` (True) or the
        number given, in [0, 1]; False (default) records none (the sds' weights alone).
        Off by default: it did not hold out of sample (``benchmarks/RESULTS.md``, issue 26,
        2026-12-03, fold weights).
    seed, options: passed to :func:`delphi.predict` (``interval``, ``n_boot``, ``fixed``...).

    Returns
    -------
    CurveForecast; its last point is the final forecast (fraction 1) and its band there the
    forecast's new-run interval.

    Raises
    ------
    TargetError: no steps, batch or schedule for the target; a law that is not a checkpoint
        law (a final-loss law has no curve); ``fold_weights`` not True, False or a share
        in [0, 1], or given with ``carry=False``. LawError, LadderError, FitError: as :func:`delphi.predict`.
    """

    if fold_weights is True:
        share = FOLD_WEIGHT_SHARE
    elif fold_weights is False:
        share = None
    elif (isinstance(fold_weights, (int, float)) and math.isfinite(fold_weights)
          and 0.0 <= fold_weights <= 1.0):
        share = float(fold_weights)
    else:
        raise TargetError(f"fold_weights must be True, False or a share in [0, 1], got "
                          f"{fold_weights!r}")
    if share is not None and not carry:
        # The fold weights are measured with the carry-over: without it none were recorded.
        raise TargetError("fold_weights needs carry=True (CLI: --fold-weights without "
                          "--no-carry-over): the fold weights are measured with the carry-over")
    ladder = as_ladder(ladder)
    target = as_target(target)
    law_obj = get_law(law or CURVE_LAW)
    if law_obj.name not in CHECKPOINT_LAWS:
        raise TargetError(f"law {law_obj.name!r} predicts final losses only; a forecast curve "
                          f"needs a checkpoint law ({', '.join(sorted(CHECKPOINT_LAWS))})")
    if not isinstance(points, int) or isinstance(points, bool) or not 2 <= points <= 10_000:
        raise TargetError(f"curve points must be an integer in 2..10000, got {points!r}")
    sched, steps, batch = target_schedule(target, ladder)
    if target.schedule is None:
        from dataclasses import replace
        target = replace(target, schedule=sched.spec())
    fc = predict(ladder, target, law_obj, level=level, seed=seed, **options)
    if fc.interval is None:
        raise TargetError("a forecast curve needs the final forecast's interval (its band is "
                          "carried along the curve); the forecast has none: "
                          + "; ".join(n for n in fc.notes if "interval" in n)[:300])
    # The curve starts where the law was fitted: after warm-up, and after the first share of
    # each run that checkpoint fits leave out (early descent; fitting.MIN_CHECKPOINT_FRACTION).
    start = max(1, warmup_end(sched.lrs()), math.ceil(MIN_CHECKPOINT_FRACTION * steps))
    grid = np.unique(np.linspace(start, steps, points).round().astype(np.int64))
    h = sched.lr_at(grid)
    x = {}
    base = fc.target
    for c in law_obj.inputs:
        if c == "tokens":
            x[c] = grid * batch
        elif c == "h":
            x[c] = h
        else:
            value = getattr(base, c, None)
            if value is None:
                raise TargetInputError(f"law {law_obj.name!r} needs the target's {c}")
            x[c] = np.full(grid.size, float(value))
    loss = np.asarray(fc.fit.predict(x), dtype=float)
    # The curve ends at the final forecast exactly (the same inputs, predicted once).
    loss[-1] = fc.loss
    lo_ratio, hi_ratio = fc.interval.lower / fc.loss, fc.interval.upper / fc.loss
    found = [Finding.note("curve", f"band: the final new-run interval's relative widths "
                          f"({lo_ratio - 1:+.2%}, {hi_ratio - 1:+.2%}) carried along the curve")]
    folds: tuple = ()
    method = BAND_METHOD
    if size_errors is True:
        folds = size_holdout_errors(ladder, law_obj, seed=seed)
    elif size_errors:
        folds = tuple(size_errors)
    if folds:
        t = ladder.table
        n_t, d_t = getattr(base, "params", None), getattr(base, "tokens", None)
        if d_t is None:
            d_t = steps * batch
        band = None
        if n_t is not None:
            band = size_band(folds, float(n_t), float(d_t), float(t["params"].max()),
                             fc.interval.noise, fc.interval.level)
        if band is not None:
            lo_s, hi_s = math.exp(band[0]), math.exp(band[1])
            desc = "; ".join(f"N {f.params:.3g} from <= {f.fitted_params:.3g}: "
                             f"{f.error_at(float(d_t) / float(n_t)):+.2%}" for f in folds)
            found.append(Finding.note(
                "curve", f"size band: the law's leave-one-size-out errors at the target's "
                f"{float(d_t) / float(n_t):.3g} tokens per parameter ({desc}), scaled to the "
                f"target's distance above the ladder, with run noise: ({lo_s - 1:+.2%}, "
                f"{hi_s - 1:+.2%}); band used ({min(lo_ratio, lo_s) - 1:+.2%}, "
                f"{max(hi_ratio, hi_s) - 1:+.2%})"))
            if lo_s < lo_ratio or hi_s > hi_ratio:
                method = SIZE_BAND_METHOD
            lo_ratio, hi_ratio = min(lo_ratio, lo_s), max(hi_ratio, hi_s)
    pts = tuple(CurvePoint(fraction=float(s / steps), step=int(s), tokens=float(s * batch),
                           loss=float(v), lower=float(v * lo_ratio), upper=float(v * hi_ratio))
                for s, v in zip(grid, loss))
    if not np.all(np.isfinite(loss)) or (loss <= 0).any():
        raise TargetError("the fitted checkpoint law gives a non-finite or non-positive loss "
                          "along the target's curve")
    errs: tuple = ()
    if completion:
        errs = completion_errors(ladder, max_runs=completion_runs)
        if not errs:
            found.append(Finding.warning(
                "curve", "no run-only completion error could be measured on the ladder (too "
                "few finished curves): tracking's revised forecast then stays the ladder's "
                "until the run ends"))
            warnings.warn(found[-1].message, FitWarning, stacklevel=user_stacklevel())
    early: tuple = ()
    if completion and early_completion:
        early = completion_errors(ladder, fractions=EARLY_FRACTIONS, max_runs=completion_runs,
                                  start=0.0)
    if correlated not in (False, True, "weights", "variance"):
        raise TargetError(f"correlated must be False, True, 'weights' or 'variance', got "
                          f"{correlated!r}")
    carried = (carry_over(folds, correlated=bool(correlated), fold_weights=share is not None)
               if carry else ())
    if not any(c.weight is not None for c in carried):
        share = None
    if carried:
        found.append(Finding.note(
            "curve", "carry-over of a run's deviation from the curve to its final loss, on "
            "the size folds (rho, residual sd / rms"
            + (", correlation with the run-only completion" if correlated else "") + "): "
            + ", ".join(f"{c.fraction:g}: {c.rho:.2f}, {c.sd / c.rms:.2f}"
                        + ("" if c.corr is None else f", {c.corr:.2f}")
                        + ("" if c.weight is None else f", weight {c.weight:.2f}")
                        for c in carried)))
    return CurveForecast(forecast=fc, points=pts, level=float(fc.interval.level),
                         schedule=sched.spec(), completion_error=errs, size_folds=folds,
                         carry_over=carried, early_completion_error=early,
                         correlation_use="variance" if correlated == "variance" else "weights",
                         fold_weight_share=share,
                         band_method=method,
                         curve_findings=tuple(found))
