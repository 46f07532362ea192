"""The target's whole loss curve from the ladder, with a band at each fraction (issue 26).

``delphi predict --curve`` forecasts the loss at every fraction of the target run: a
checkpoint law fitted across the ladder's scales (``chinchilla-ckpt``, L(N, D, h) = E +
A/N^alpha + B/D^beta + F h^gamma, Hoffmann et al. 2022 Eq. 2 with the LR term of the OLMo
ladder, Bhagia et al. 2024) evaluated along the target's planned LR schedule: at step s the
target has seen D(s) = s x batch tokens and its LR ratio is h(s) = lr(s) / peak.

The band. At fraction 1 it is the final forecast's new-run interval (:func:`delphi.predict`,
calibrated as usual). Along the curve the same relative widths are kept: lower(f) =
loss(f) x lower / loss and upper(f) = loss(f) x upper / loss, i.e. a band of constant width in
log loss. This is a documented rule, not a derived one; its coverage of real runs' checkpoints
is measured by ``benchmarks/bench_track.py`` (RESULTS.md, "Issue 26").

The run-only error model. A tracked run is also completed from its own checkpoints (the
``annealing`` curve law, Tissue et al. 2024 Eq. 1, with the planned schedule); how far such a
completion is off depends on how much of the run it has seen. :func:`completion_errors`
measures that on the ladder itself, before the target exists: each of the ladder's finished
curves is cut at fractions 0.1..0.9, completed, and the root-mean-square log error of the
final loss is recorded per fraction. ``register`` stores it with the curve, so the weights of
the revised forecast (:mod:`delphi.registry.tracking`) are preregistered too.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import DelphiError, FitWarning, TargetError, option, user_stacklevel
from ..fitting.api import MIN_CHECKPOINT_FRACTION
from ..inputs.ladder import Ladder
from ..inputs.schedules import Schedule, warmup_end
from ..laws import CHECKPOINT_LAWS, get_law
from .forecast import Forecast, predict
from .target import Target, as_target
from .uncertainty import DEFAULT_LEVEL
from ..core.findings import Finding, messages
from .completion_refit import WarmCompletion
from ..inputs.readers import as_ladder
from ..inputs.law_inputs import curve_inputs

__all__ = ["CurvePoint", "CurveForecast", "predict_curve", "completion_errors",
           "target_schedule", "COMPLETION_FRACTIONS", "CURVE_LAW", "DEFAULT_POINTS"]

#: The checkpoint law ``--curve`` fits when none is named.
CURVE_LAW = "chinchilla-ckpt"
#: Curve points by default (evenly spaced in steps from the end of warm-up to the end).
DEFAULT_POINTS = 50
#: Fractions at which :func:`completion_errors` cuts the ladder's runs.
COMPLETION_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: A run needs this many checkpoints to be used by :func:`completion_errors`.
MIN_CHECKPOINTS = 8


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
                 f"({100 * self.level:.4g}% band for one new run)"]
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


def completion_errors(ladder: Ladder, *, fractions=COMPLETION_FRACTIONS, max_runs: int = 12
                      ) -> tuple[tuple[float, float], ...]:
    """How far a run-only completion is off, by the share of the run it has seen, measured
    on the ladder's own finished curves.

    Each finished run with at least :data:`MIN_CHECKPOINTS` checkpoints (the ``max_runs``
    largest by parameters, then tokens) is completed from its checkpoints up to each fraction
    in turn, exactly as the tracker completes a run (:class:`WarmCompletion`: the
    ``annealing`` law, Tissue et al. 2024 Eq. 1, fitted to the checkpoints from 25% of the run
    on, where a forecast curve starts, refitted warm as the fraction grows); the error is
    ln(actual final / completed). The result per fraction is the root mean square
    over runs (bias included), floored at 1e-4.

    Returns
    -------
    ((fraction, rms log error), ...) for fractions where at least 2 runs could be completed;
    empty when none could (a ladder of final losses only).
    """

    t = ladder.table
    if "step" not in t.columns or not len(t):
        return ()
    agg = {"n": ("step", "size")}
    for c in ("params", "tokens"):
        if c in t.columns:
            agg[c] = (c, "max")
    sizes = t.groupby("run").agg(**agg)
    order = [c for c in ("params", "tokens") if c in sizes.columns]
    sizes = sizes[sizes["n"] >= MIN_CHECKPOINTS]
    runs = (sizes.sort_values(order, ascending=False) if order else sizes).index[:max_runs]
    restarts = getattr(ladder, "restarts", None) or {}
    errors = {f: [] for f in fractions}
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
                            start_step=math.ceil(MIN_CHECKPOINT_FRACTION * total))
        for f in sorted(fractions):
            keep = steps <= math.floor(f * total)
            value = wc.predict(steps[keep], losses[keep])
            if value is not None:
                errors[f].append(math.log(actual / value))
    out = []
    for f in fractions:
        e = errors[f]
        if len(e) >= 2:
            out.append((float(f), max(1e-4, float(np.sqrt(np.mean(np.square(e)))))))
    return tuple(out)


def predict_curve(ladder, target, law: str | None = None, *, level: float = DEFAULT_LEVEL,
                  points: int = DEFAULT_POINTS, completion: bool = True,
                  completion_runs: int = 12, seed: int = 0, **options) -> CurveForecast:
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
    seed, options: passed to :func:`delphi.predict` (``interval``, ``n_boot``, ``fixed``...).

    Returns
    -------
    CurveForecast; its last point is the final forecast (fraction 1) and its band there the
    forecast's new-run interval.

    Raises
    ------
    TargetError: no steps, batch or schedule for the target; a law that is not a checkpoint
        law (a final-loss law has no curve). LawError, LadderError, FitError: as
        :func:`delphi.predict`.
    """

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
                raise TargetError(f"law {law_obj.name!r} needs the target's {c}")
            x[c] = np.full(grid.size, float(value))
    loss = np.asarray(fc.fit.predict(x), dtype=float)
    # The curve ends at the final forecast exactly (the same inputs, predicted once).
    loss[-1] = fc.loss
    lo_ratio, hi_ratio = fc.interval.lower / fc.loss, fc.interval.upper / fc.loss
    pts = tuple(CurvePoint(fraction=float(s / steps), step=int(s), tokens=float(s * batch),
                           loss=float(v), lower=float(v * lo_ratio), upper=float(v * hi_ratio))
                for s, v in zip(grid, loss))
    found = [Finding.note("curve", f"band: the final new-run interval's relative widths "
                          f"({lo_ratio - 1:+.2%}, {hi_ratio - 1:+.2%}) carried along the curve")]
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
    return CurveForecast(forecast=fc, points=pts, level=float(fc.interval.level),
                         schedule=sched.spec(), completion_error=errs,
                         curve_findings=tuple(found))
