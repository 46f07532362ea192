"""Forecasts: fit a ladder, predict a target. The one entry the CLI, notebooks and registry share."""

from __future__ import annotations

import copy
import inspect
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from .. import __version__
from ..core.findings import Finding, messages
from ..errors import (DelphiError, FitError, FitWarning, LadderError, LawError,
                     MissingArgumentError, TargetError, option, user_stacklevel)
from ..fitting import DEFAULT_DELTA, DIVERGENCE_THRESHOLD, Fit, fit
from ..inputs.ladder import (SEQUENCE_LENGTHS, FLOPS_PER_PARAM_TOKEN, FlopsConvention, Ladder,
                     check_target_value)
from ..laws import Law, get_law
from .candidates import ENSEMBLE_RULE, RECENCY, Candidate, default_candidates
from .selection import MIN_WEIGHT, TIE, Comparison, compare
from .target import DESIGN_FACTOR, K_PLAUSIBLE, MAX_FLOOR_POINTS, Target, as_target
from .design import (ONE_D, SPLIT_SPAN, default_law, final_nd, ladder_design_notes,
                     one_token_count, ratio_span)
from .uncertainty import (DEFAULT_LEVEL, MAX_DRAWS, Interval, bootstrap, bootstrap_interval,
                          delta_interval)
from .robustness import check_floor_range, find_off_trend, held_inputs, scan_floor
from .reference import PRIOR_FOLDS, ReferenceClass, blend, load_reference, outside_class
from .calibration import (MAX_FOLDS, CalibrationModel, calibrate, calibrated_interval, lfo_points,
                          log_sd)
from ..inputs.readers import as_ladder
from ..inputs.law_inputs import check_columns, lr_ratio
from ..fitting.diagnostics import (NOISE_FLOOR, attach_identification, refuse_degenerate,
                                   residual_scale)
from ..core.quantiles import check_level, norm_ppf, t_ppf
from ..core.parallel import check_n_jobs
from ..core.text import level_percent

if TYPE_CHECKING:
    import pandas as pd

    from .robustness import FloorScan, OffTrend

__all__ = ["Target", "Forecast", "predict", "default_law", "one_token_count", "FittedLaw",
           "PointForecast", "fit_stage", "point_stage", "interval_stage", "calibration_stage",
           "off_trend_stage", "forecast_from_fit", "calibration_of"]


def _base_inputs(target: Target, law: Law) -> dict[str, list[float]]:
    """The target's N, D, C inputs of ``law`` (LR quantities are resolved after the fit)."""
    return target.inputs(law, skip=("peak_lr", "h"))


def _check_moe_target(target: Target, law: Law, ladder: Ladder) -> None:
    """An MoE ladder counts compute with active parameters (C = 6 N_active D); a target whose
    C would come from its total N is then off by the sparsity factor, silently. Refuse it.

    Raises
    ------
    TargetError: the ladder is MoE, the law reads C, and the target gives N and D but neither
        its active parameters nor its FLOPs.
    """
    if "flops" not in law.inputs or target.flops_source != "6ND" or not ladder.has("active_params"):
        return
    t = ladder.table
    active = t["active_params"].to_numpy(float)
    total = t["params"].to_numpy(float) if "params" in t.columns else active
    if np.all(np.isnan(active)) or np.nanmax(np.abs(active / total - 1)) < 1e-9:
        return  # dense: active = total
    ratio = float(np.nanmedian(total / active))
    raise TargetError(
        f"ladder {ladder.name!r} is a mixture of experts: its compute counts active parameters "
        f"(C = 6 x active x tokens; its runs have {ratio:.3g}x more total than active "
        f"parameters), but the target gives only its total parameters; give "
        f"{option('active_params', '--target-active-params')} or "
        f"{option('flops', '--target-flops')}")


def _in_ladder_convention(target: Target, law: Law, ladder: Ladder,
                          notes: list[str]) -> Target:
    """The target with its C in the ladder's FLOP convention, C = k·6·N·D (k: the ladder's
    median C/(6·N·D), :attr:`Ladder.flops_convention`), and a note saying so.

    A law of C reads the converted C; a law of N and D reads N and D only, so C then sets
    only the extrapolation ratio. A target given by C alone is kept (with a reminder when
    the ladder's k is far from 1); a target giving C, N and D is checked against k.

    Raises
    ------
    TargetError: C, N and D are all given, the law reads C, and C/(6·N·D) is more than 25%
        away from the ladder's k.
    """
    conv = ladder.flops_convention
    reads_c = "flops" in law.inputs
    n = target.active_params or target.params
    if n is None or target.tokens is None:
        if conv is not None and conv.source == "given" and reads_c and abs(conv.median - 1) > 0.1:
            if K_PLAUSIBLE[0] <= conv.median <= K_PLAUSIBLE[1]:
                notes.append(f"the ladder counts compute as C = {conv.median:.3g} x "
                             f"{conv.n_label} (median over {len(conv.k)} runs): the target's C "
                             f"must be counted the same way")
            else:
                # No FLOP convention gives such a k: the ladder's N or D column is what is
                # off (see the ladder's warning), not the way its C is counted.
                notes.append(f"the ladder's C/({conv.n_label}) is {conv.median:.3g} (median over "
                             f"{len(conv.k)} runs), outside every FLOP convention in use "
                             f"({K_PLAUSIBLE[0]:g}..{K_PLAUSIBLE[1]:g}): its N x D accounting "
                             f"is suspect, not its C; law {law.name!r} reads C, so the target's "
                             f"C is used as given")
        return target
    k = conv.median if conv is not None else 1.0
    label = conv.n_label if conv is not None else "6·N·D"
    six_nd = FLOPS_PER_PARAM_TOKEN * n * target.tokens
    if target.flops_source == "given":
        ratio = target.flops / six_nd
        if abs(ratio / k - 1) > 0.25:
            what = "active params" if target.active_params else "params"
            msg = (f"target flops {target.flops:.4g} disagree with the ladder's FLOP convention: "
                   f"k x 6 x {what} x tokens = {k:.3g} x {six_nd:.4g} = {k * six_nd:.4g} "
                   f"(k = the ladder's median C/({label})); the target's C is "
                   f"{ratio:.3g} x 6·N·D")
            if reads_c:
                raise TargetError(f"{msg}; give only N and D (converted with the ladder's k) "
                                  f"or a C counted like the ladder's")
            notes.append(f"{msg}; law {law.name!r} reads N and D, so only the extrapolation "
                         f"ratio uses C")
        return target
    if conv is None or conv.source != "given":
        return target                 # the ladder's C is 6·N·D too (k = 1)
    converted = copy.copy(target)
    object.__setattr__(converted, "flops", k * six_nd)
    object.__setattr__(converted, "flops_source", f"{target.flops_source} x ladder k")
    object.__setattr__(converted, "flops_k", k)
    if abs(k - 1) >= 0.01 or conv.drifting:
        use = ("" if reads_c else f"; law {law.name!r} reads N and D, so C only sets the "
               f"extrapolation ratio")
        spread = (f"for all {len(conv.k)} runs" if conv.high - conv.low <= 1e-3 * k else
                  f"on median over {len(conv.k)} runs, range {conv.low:.4g}..{conv.high:.4g}")
        notes.append(f"target C = {k:.4g} x {label} = {converted.flops:.4g} FLOPs, converted "
                     f"to the ladder's FLOP convention (its C/({label}) is {k:.4g} {spread})"
                     f"{use}")
    return converted


def _times(factor: float) -> str:
    """A factor for a message: ``2,048`` or ``12.5``."""
    return f"{factor:,.0f}" if factor >= 100 else f"{factor:.3g}"


def _design_notes(target: Target, law: Law, result: Fit, ladder: Ladder) -> list[str]:
    """Warnings (for :attr:`Forecast.warnings`) for a target outside the ladder's design: its tokens per parameter D/N (any
    law) or its N (laws of N and D) more than 10x beyond the fitted runs' range. A D/N
    off by a factor near a sequence length says the tokens were counted in sequences.

    Each is also issued as a :class:`~delphi.errors.FitWarning`.
    """
    if target.params is None or target.tokens is None:
        return []
    if {"params", "tokens"} <= set(result.x):
        n_fit = np.asarray(result.x["params"], float)
        d_fit = np.asarray(result.x["tokens"], float)
    elif ladder.has("params", "tokens"):
        t = ladder.table
        t = t[t["run"].isin(set(result.labels))]
        if t.empty:
            return []
        last = t.sort_values("tokens", kind="stable").groupby("run").tail(1)
        n_fit, d_fit = last["params"].to_numpy(float), last["tokens"].to_numpy(float)
    else:
        return []
    out = []
    tpp, lo, hi = target.tokens / target.params, float(np.min(d_fit / n_fit)), float(
        np.max(d_fit / n_fit))
    span = f"{lo:.3g}..{hi:.3g}" if hi > lo * 1.001 else f"{lo:.3g}"
    if tpp * DESIGN_FACTOR < lo or tpp > hi * DESIGN_FACTOR:
        factor = lo / tpp if tpp < lo else tpp / hi
        side = "below" if tpp < lo else "above"
        near = [L for L in SEQUENCE_LENGTHS if abs(factor / L - 1) < 0.2]
        hint = (f"; a factor close to a sequence length of {near[0]}: were the target's tokens "
                f"(or batch) counted in sequences?" if near and side == "below" else
                "; check the target's tokens and parameters")
        out.append(f"outside the ladder's design: the target's tokens per parameter D/N = "
                   f"{tpp:.3g} is {_times(factor)}x {side} the fitted runs' range ({span}){hint}")
    if "params" in law.inputs:
        n, n_lo, n_hi = target.params, float(np.min(n_fit)), float(np.max(n_fit))
        if n > n_hi * DESIGN_FACTOR or n * DESIGN_FACTOR < n_lo:
            factor, side = (n / n_hi, "above the largest") if n > n_hi else (n_lo / n,
                                                                               "below the smallest")
            out.append(f"outside the ladder's design: the target's N = {n:.3g} is "
                       f"{_times(factor)}x {side} N fitted ({n_lo:.3g}..{n_hi:.3g}): law {law.name!r} is "
                       f"extrapolated that far in model size")
    for message in out:
        warnings.warn(message, FitWarning, stacklevel=user_stacklevel())
    return out


def target_inputs(target: Target, law: Law, result: Fit, ladder: Ladder):
    """All inputs of ``law`` at the target, filling LR quantities the target does not give."""
    inputs = _base_inputs(target, law)
    notes: list[str] = []
    if "peak_lr" in law.inputs:
        if target.peak_lr is not None:
            inputs["peak_lr"] = [target.peak_lr]
        else:
            best = float(law.optimal_lr(result.params, target.params, target.tokens))
            inputs["peak_lr"] = [best]
            notes.append(f"target peak LR not given: assumed the fitted optimum "
                         f"eta*(N, D) = {best:.3g}")
    if "h" in law.inputs:
        if target.schedule is not None:
            inputs["h"] = [target.finallr_ratio()]
        else:
            fin, _ = ladder.final_points()
            h = float(np.median(_final_h(ladder, fin)))
            inputs["h"] = [h]
            notes.append(f"target schedule not given: assumed it ends like the ladder's finished "
                         f"runs (final LR ratio h = {h:.3g})")
    return inputs, notes


def _final_h(ladder: Ladder, fin) -> np.ndarray:
    return lr_ratio(ladder, fin.reset_index(drop=True))


@dataclass(frozen=True)
class Forecast:
    """A predicted loss for a target, with the fit and provenance behind it."""

    target: Target
    """What was predicted."""
    loss: float
    """Predicted loss at the target, in the ladder's unit (nats/token by default)."""
    fit: Fit
    """The fit the prediction comes from (check ``fit.converged`` and ``fit.warnings``)."""
    ladder_name: str
    ladder_source: str
    ladder_sha256: str
    """SHA-256 of the canonical data actually fitted."""
    metric: str
    unit: str
    extrapolation: float | None
    """Target compute over the largest fitted run's compute (None when unknown)."""
    findings: tuple[Finding, ...] = field(default=())
    """What the forecast found and assumed, as typed records (:class:`~delphi.core.findings.
    Finding`: code, severity, subject, message), in the order they were made. The text
    report, the JSON (``"findings"``, beside the plain ``"warnings"`` and ``"notes"``),
    figures, the HTML report and the registry all render these; :attr:`warnings` and
    :attr:`notes` are their messages by severity."""
    interval: "Interval | None" = None
    """New-run and expected-loss intervals (None when they cannot be estimated; see notes).
    With parameters fixed (``fit.fixed``, e.g. the floor E) it is conditional on their values:
    their uncertainty is not in it (``conditional_on`` in the JSON, and a note)."""
    off_trend: "OffTrend | None" = None
    """Rungs the other rungs' law misses by several times their scatter, kept in the fit, and
    the forecast without them (:func:`delphi.robustness.find_off_trend`); None when none."""
    floor_scan: "FloorScan | None" = None
    """The forecast across a range of pinned floors (``floor_range``), else None."""
    flops_convention: "FlopsConvention | None" = None
    """The ladder's k = C/(6·N·D) per run, median, spread and drift (``"flops_convention"``
    in the JSON's ladder block); None when the ladder has no N and D."""
    selection: dict | None = None
    """How the law was chosen with ``law="auto"`` or ``ensemble=True``
    (:mod:`delphi.selection`): ``rule`` (auto/ensemble), ``chosen``, ``runner_up`` and its
    forecast and ``spread``, ``candidates`` (label, law, fixed, Huber delta, weight, loss,
    leave-future-out mean |error| and the ``score`` they are ranked by) and the full
    ``comparison``; None for a named law."""

    @property
    def notes(self) -> tuple[str, ...]:
        """Assumptions and choices made on the user's behalf (informational): the messages of
        the ``"note"`` :attr:`findings`."""
        return messages(self.findings, "note")

    @property
    def warnings(self) -> tuple[str, ...]:
        """Reasons to distrust this forecast, separate from :attr:`notes`: a target outside
        the ladder's design (D/N or N more than 10x beyond the fitted runs'), a degenerate fit
        extrapolated on request, a fit that did not converge, more than four orders of
        magnitude of extrapolation, a target below the smallest fitted compute, a target C
        that disagrees with the ladder's FLOP convention: the messages of the ``"warning"``
        :attr:`findings`. Each is also issued as a :class:`~delphi.errors.FitWarning`;
        ``"warnings"`` in the JSON, ``warning`` lines in :meth:`report`. The fit's own
        warnings are in ``fit.warnings``."""
        return messages(self.findings, "warning")

    def with_findings(self, *found: Finding, first: bool = False) -> "Forecast":
        """This forecast with ``found`` added after (or, ``first``, before) its findings."""
        return replace(self, findings=(*found, *self.findings) if first
                       else (*self.findings, *found))

    @property
    def lower(self) -> float | None:
        """Lower end of the new-run interval."""
        return self.interval.lower if self.interval else None

    @property
    def upper(self) -> float | None:
        """Upper end of the new-run interval."""
        return self.interval.upper if self.interval else None

    def to_frame(self):
        """The forecast as a one-row pandas DataFrame (``pd.concat`` several to compare).

        Columns: ``target`` (its name, None when unnamed), ``flops`` [FLOPs], ``params`` (N),
        ``tokens`` (D) (None when not given), ``loss`` and ``unit`` (the ladder's, e.g.
        ``nats/token``), ``metric``, ``lower``/``upper`` (new-run interval),
        ``mean_lower``/``mean_upper`` (expected-loss interval), ``level``, ``method``
        (``delta``, ``bootstrap``, ``calibrated``, ``ensemble``; when there is no interval these
        six are NaN/None and :attr:`notes` say why), ``law`` (``ensemble`` for an ensemble),
        ``extrapolation`` (target compute over the largest fitted run's, NaN when unknown),
        ``ladder``, ``n_warnings`` (:attr:`warnings`) and ``n_fit_warnings``
        (``fit.warnings``).
        """
        import pandas as pd

        t, iv = self.target, self.interval
        ensemble = self.selection is not None and self.selection.get("rule") == "ensemble"
        row = {"target": t.name, "flops": t.flops, "params": t.params, "tokens": t.tokens,
               "loss": self.loss, "unit": self.unit, "metric": self.metric,
               "lower": iv.lower if iv else np.nan, "upper": iv.upper if iv else np.nan,
               "mean_lower": iv.mean_lower if iv else np.nan,
               "mean_upper": iv.mean_upper if iv else np.nan,
               "level": iv.level if iv else np.nan, "method": iv.method if iv else None,
               "law": "ensemble" if ensemble else self.fit.law.name,
               "extrapolation": (self.extrapolation if self.extrapolation is not None
                                 else np.nan),
               "ladder": self.ladder_name, "n_warnings": len(self.warnings),
               "n_fit_warnings": len(self.fit.warnings)}
        return pd.DataFrame([row])

    def to_dict(self) -> dict:
        """The JSON object printed by ``delphi predict --json``."""
        d = self.fit.to_dict()
        ensemble = self.selection is not None and self.selection.get("rule") == "ensemble"
        return {
            # an ensemble's loss is no single law's: its members are in "selection"
            "law": "ensemble" if ensemble else d["law"],
            "params": {} if ensemble else d["params"],
            "target": self.target.to_dict(),
            "prediction": {"loss": self.loss, "metric": self.metric, "unit": self.unit,
                           "extrapolation": self.extrapolation,
                           **(self.interval.to_dict() if self.interval else
                              # the same keys as an interval's (consumers index them)
                              {"lower": None, "upper": None, "mean_lower": None,
                               "mean_upper": None, "level": None, "kind": None,
                               "method": None, "noise": None, "noise_source": None,
                               "n_draws": None, "n_failed": None, "guard": None}),
                           # the interval leaves out the uncertainty of these fixed values
                           "conditional_on": {k: float(v) for k, v in self.fit.fixed.items()}},
            "off_trend": self.off_trend.to_dict() if self.off_trend else None,
            "floor_range": self.floor_scan.to_dict() if self.floor_scan else None,
            "fit": d["fit"],
            "ladder": {"name": self.ladder_name, "source": self.ladder_source,
                       "sha256": self.ladder_sha256,
                       "flops_convention": (self.flops_convention.to_dict()
                                            if self.flops_convention is not None else None)},
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
            "selection": self.selection,
            "delphi_version": __version__,
        }

    def report(self) -> str:
        """Readable multi-line report: the fit, the target and the predicted loss."""
        t = self.target
        what = ", ".join(f"{k} = {v:.4g}" for k, v in
                         (("C", t.flops), ("N", t.params), ("D", t.tokens)) if v is not None)
        lines = [f"ladder     {self.ladder_name} ({self.ladder_source}), metric {self.metric} "
                 f"[{self.unit}]", self.fit.report(), ""]
        lines.append(f"target     {t.name + ': ' if t.name else ''}{what}")
        if self.extrapolation is not None:
            lines.append(f"           {self.extrapolation:.3g}x the largest fitted run's compute")
        # The off-trend and floor-range notes are shown as their own blocks below.
        shown = {x.note() for x in (self.off_trend, self.floor_scan) if x is not None}
        for w in self.warnings:
            lines.append(f"warning    {w}")
        for note in self.notes:
            if note not in shown:
                lines.append(f"note       {note}")
        lines.append(f"prediction {self.loss:.4f} {self.unit}")
        iv = self.interval
        if iv is not None:
            cal = iv.calibration or {}
            base = cal.get("base_method", "")
            label = iv.label()
            pct = level_percent(iv.level)
            # Run noise is in the new-run interval only: its note sits on that line.
            noise = ("run noise is in the reference errors" if base == "none" and not iv.noise
                     else f"run noise {iv.noise:.2%} from {iv.noise_source}")
            lines.append(f"           {pct} interval for one new run  "
                         f"[{iv.lower:.4f}, {iv.upper:.4f}]  ({label}; {noise})")
            lines.append(f"           {pct} interval for the expected loss "
                         f"[{iv.mean_lower:.4f}, {iv.mean_upper:.4f}]  (without run noise)")
            if self.fit.fixed:
                given = ", ".join(f"{k} = {v:g}" for k, v in self.fit.fixed.items())
                lines.append(f"           conditional on {given} (fixed, not fitted)")
        ot = self.off_trend
        if ot is not None:
            for r in ot.rungs:
                lines.append(f"off-trend  {r.run}: {r.describe()}; kept in the fit")
                if len(ot.rungs) > 1 and r.loss_without is not None:
                    lines.append(f"           forecast without it alone {r.loss_without:.4f} "
                                 f"({r.loss_without / ot.loss_with - 1:+.2%})")
            lines.append(f"           forecast {ot.loss_with:.4f} with, {ot.loss_without:.4f} "
                         f"without {'it' if len(ot.rungs) == 1 else 'them'} "
                         f"({ot.change:+.2%})")
            if ot.unresolved_note():
                lines.append(f"           {ot.unresolved_note()}")
        if self.floor_scan is not None:
            lines.extend(self.floor_scan.report_lines())
        if self.selection is not None:
            lines.extend(_selection_lines(self.selection))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line with the key numbers (as :class:`~delphi.fitting.Fit`'s): the loss and
        unit, the new-run interval with its level and method, the law, the target, the
        extrapolation and the counts of warnings and notes. :meth:`report` is the full text;
        the fields hold everything."""
        t, iv = self.target, self.interval
        ensemble = self.selection is not None and self.selection.get("rule") == "ensemble"
        what = ", ".join(f"{k}={v:.3g}" for k, v in
                         (("C", t.flops), ("N", t.params), ("D", t.tokens)) if v is not None)
        band = (f"[{iv.lower:.4g}, {iv.upper:.4g}] ({level_percent(iv.level)} {iv.method})"
                if iv is not None else "None")
        ext = "" if self.extrapolation is None else f", extrapolation={self.extrapolation:.3g}x"
        return (f"Forecast(loss={self.loss:.4g} {self.unit}, interval={band}, "
                f"law={'ensemble' if ensemble else self.fit.law.name!r}, "
                f"target=({t.name + ': ' if t.name else ''}{what}){ext}, "
                f"ladder={self.ladder_name!r}, warnings={len(self.warnings)}, "
                f"notes={len(self.notes)})")

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.report())


def _selection_lines(sel: dict) -> list[str]:
    """The candidates block of a report: one line per candidate of an auto or ensemble
    forecast (label, leave-future-out mean |error|, weight, its forecast)."""
    by_ref = sel.get("chosen_by") == "reference"
    how = "the reference class" if by_ref else "leave-future-out backtest"
    if sel["rule"] == "auto" and sel.get("chosen_by") == "only candidate":
        head = "law: the only candidate that can be evaluated at this target"
    elif sel["rule"] == "auto":
        head = f"law chosen by {how}"
    elif sel.get("members") == 1:
        head = f"no ensemble: one candidate ({sel['chosen']}) could be weighted"
    else:
        head = ("ensemble weighted by inverse "
                + ("reference-class" if by_ref else "leave-future-out") + " MSE")
    lines = [f"selection  {head}:"]
    for c in sel["candidates"]:
        err = "-" if c.get("mean_abs_error") is None else f"{c['mean_abs_error']:.2%}"
        score = "-" if c.get("score") is None else f"{c['score']:.3%}"
        if by_ref:      # the figure the ranking used
            ref = c.get("reference_error")
            score = "-" if ref is None else f"{ref:.3%}"
        loss = "" if c.get("loss") is None else f"  forecast {c['loss']:.4f}"
        if sel["rule"] == "auto":
            mark = "  <- chosen" if c["label"] == sel["chosen"] else ""
            lines.append(f"           {c['label']:<24} score {score:>8}  mean |error| {err:>7}"
                         f"{loss}{mark}")
        else:
            lines.append(f"           {c['label']:<24} score {score:>8}  mean |error| {err:>7}"
                         f"  weight {c['weight']:.2f}{loss}")
    if by_ref:
        lines.append("           (score: the law's mean leave-future-out |error| on the public "
                     "ladders at about this many rungs; what candidates are ranked by)")
    else:
        lines.append(f"           (score: mean leave-future-out |error|, each fold weighing "
                     f"{RECENCY:g}x the one before; what candidates are ranked by)")
    if sel.get("spread") is not None:
        lines.append(f"           runner-up {sel['runner_up']} differs by {sel['spread']:+.2%}")
    return lines


def predict(ladder: Ladder, target: Target | Mapping[str, float] | None = None,
            law: str | Law | None = None, *,
            fixed: Mapping[str, float] | None = None,
            bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
            fit_max_flops: float | None = None, include_unfinished: bool = False,
            divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0,
            interval: str | None = "auto", level: float = DEFAULT_LEVEL, n_boot: int = 200,
            boot_unit: str = "run", n_jobs: int | None = None,
            workers: int | None = None, floor_range: Sequence[float] | None = None,
            floor_points: int = 3, off_trend: bool = True,
            allow_degenerate: bool = False, ensemble: bool = False,
            candidates: Sequence | None = None, reference=None,
            identify: bool = True) -> Forecast:
    """Fit ``law`` to ``ladder`` and predict the loss of ``target``, with an interval.

    Parameters
    ----------
    ladder: the runs.
    target: a :class:`Target` or a dict with ``flops`` [FLOPs] and/or ``params`` and ``tokens``
        (required: None raises :class:`~delphi.errors.MissingArgumentError` showing them). A target given by N and D gets C = k·6·N·D with the ladder's FLOP convention k
        (:attr:`Ladder.flops_convention`; a note and ``flops_source``/``flops_k`` in the
        target's JSON say so); a D/N or (for laws of N and D) an N more than 10x beyond the
        fitted runs' range is warned (:class:`~delphi.errors.FitWarning` and an entry of
        :attr:`Forecast.warnings`).
    law: law name or object; default :func:`default_law` (``power`` when only C is known).
        ``"auto"``: the candidate recipe (law, free or pinned floor, Huber delta) with the
        lowest leave-future-out error on this ladder (:func:`delphi.selection.compare`);
        :attr:`Forecast.selection` reports the choice, the runner-up and the spread between
        their forecasts.
    ensemble: average the candidates' forecasts, weighted by their leave-future-out errors,
        with the interval widened by the between-model spread
        (:func:`predict_selected`); ``law`` must then be None or "auto".
    candidates: the recipes ``auto``/``ensemble`` choose among (:class:`~delphi.selection.
        Candidate` objects or law names); default :func:`delphi.selection.default_candidates`
        with ``fixed`` and ``delta``.
    fixed, bounds, delta, fit_max_flops, include_unfinished, divergence_threshold, seed:
        as in :func:`delphi.fitting.fit`.
    interval: ``"auto"`` (default): ``"calibrated"`` where the ladder's leave-future-out
        refits give at least 3 folds, else ``"reference"``; either widens the bootstrap
        interval (when the ladder has at least 2p + 2 points for p free parameters) or the
        delta method's, with a note saying why, and a fit too small for either still gets
        the reference interval. ``"calibrated"``: the bootstrap or delta interval widened by
        the ladder's own extrapolation errors at the target's ratio r = C_target /
        C_max_fitted, blended with the reference class (:func:`delphi.reference.blend`,
        :func:`delphi.calibration.calibrated_interval`; FitError when the ladder cannot
        support it). ``"reference"``: widened by the reference class alone, the
        leave-future-out errors of the same law on the public ladders at r and about the
        same number of rungs (:mod:`delphi.reference`; ``method: "reference"``).
        ``"bootstrap"`` (resample runs, refit: :func:`delphi.uncertainty.bootstrap`),
        ``"delta"`` (fast, approximate) or None.
    reference: the reference class of other ladders' errors: a
        :class:`~delphi.reference.ReferenceClass` or a path to one
        (:meth:`~delphi.reference.ReferenceClass.to_json`); default the one shipped with
        delphi. The forecast's own ladder, when it is one of the public ladders (by name), is
        left out of it.
    identify: profile the fit's parameters to report those the ladder does not identify
        (as :func:`delphi.fit`'s ``identify``; the default). False skips the profiles (a
        faster fit, as a backtest's folds use); the degeneracy check still runs.
    level: interval level (default 0.9). n_boot, boot_unit: bootstrap settings
        (``boot_unit="budget"`` resamples whole compute budgets).
    n_jobs: joblib workers for the bootstrap (see :mod:`delphi.parallel`); ``workers`` is an
        older alias.
    floor_range: ``(low, high)`` of the law's floor E (ladder unit): instead of one pinned
        value, the forecast and its interval at ``floor_points`` (default 3: the ends and the
        middle; at most :data:`MAX_FLOOR_POINTS`) values across it; the forecast returned is
        at the middle, with :attr:`Forecast.floor_scan` (per value, and the lowest and highest
        forecast or interval end). An interval with E fixed is conditional on E; the range
        shows how much it moves.
    off_trend: test for off-trend rungs (default True; :func:`delphi.robustness.find_off_trend`:
        the law of the other rungs misses it by > 6 standard deviations and > 0.5%). Named rungs stay in
        the fit; :attr:`Forecast.off_trend` gives the forecast without them.

    allow_degenerate: extrapolate a degenerate fit (a law that collapsed to a constant over
        the ladder, :attr:`Fit.degenerate`) instead of refusing; :attr:`Forecast.warnings`
        then says so, and whether the forecast only repeats the ladder's constant level.

    Several targets at once: ``target`` a list of targets, or a dict whose values are
    sequences of one length (a scalar pairs with each element, as in
    :func:`delphi.predict_accuracy`), e.g. ``{"params": [1e9, 3e9], "tokens": [2e10, 6e10]}``.

    The work is a pipeline of stages (:func:`fit_stage` -> :func:`point_stage` ->
    :func:`interval_stage` -> :func:`calibration_stage` -> :func:`off_trend_stage`, put
    together by :func:`forecast_from_fit`); several targets of one law share its fit, its
    bootstrap refits and its leave-future-out calibration.

    Returns
    -------
    Forecast; a list of them, one per target in order, for several targets (each as its own
    call would give it: the same fit, seeds and intervals).

    Raises
    ------
    TargetError: invalid target, or one the law cannot be evaluated at, or (for a law of C)
        a target whose C, N and D disagree with the ladder's FLOP convention by over 25%.
    DegenerateFitError: (an :class:`~delphi.errors.IdentifiabilityError`) the fitted law
        collapsed to a constant over the ladder (its losses show no trend beyond their noise)
        and ``allow_degenerate`` is False.
    LadderError, LawError, FitError: see :func:`delphi.fitting.fit`; also (LawError) a bad
        ``floor_range`` or ``floor_points``, and (FitError) a bad interval setting: an unknown
        ``interval`` or ``boot_unit``, a ``level`` outside (0, 1), ``n_boot`` or ``n_jobs``.
    MissingArgumentError: no ``target`` given.
    """
    if target is None:
        raise MissingArgumentError(
            "predict() needs a target: {'flops': C} [FLOPs], {'params': N, 'tokens': D} "
            "(C = 6ND with the ladder's FLOP convention), or a delphi.Target; "
            "delphi.fit(ladder, law) fits without predicting")
    many = _several_targets(target)
    options = {k: v for k, v in locals().items()
               if k not in ("ladder", "target", "law", "many")}
    forecasts = _forecast(ladder, many if many is not None else [target], law, options)
    unapplied = _unapplied_defaults(ladder, law, fixed)
    if unapplied:
        forecasts = [f.with_findings(Finding.note("other", unapplied)) for f in forecasts]
    return forecasts if many is not None else forecasts[0]


def _unapplied_defaults(ladder, law, fixed) -> str:
    """A note when the ladder's manifest names ``[predict]`` defaults (a law, fixed
    parameters) that this call did not use ("" otherwise): the command line applies them, so
    without it the API and ``delphi predict NAME`` give different forecasts."""
    defaults = getattr(ladder, "predict_defaults", None) or {}
    name = law if isinstance(law, str) or law is None else getattr(law, "name", None)
    missing = {}
    if defaults.get("law") and name is None:
        missing["law"] = defaults["law"]
    given = dict(fixed or {})
    absent = {k: v for k, v in defaults.get("fixed", {}).items() if k not in given}
    if absent:
        missing["fixed"] = absent
    if not missing:
        return ""
    shown = ", ".join(f"{k}={v!r}" for k, v in missing.items())
    return (f"the manifest of ladder {getattr(ladder, 'name', '?')!r} sets defaults this call "
            f"did not use: {shown}; `delphi predict` applies them, so pass them here for its "
            f"forecast")


def _several_targets(target) -> list | None:
    """The targets of a list of targets, or of a dict whose values are sequences of one
    length (scalars repeated); None for one target. TargetError for sequences of different
    lengths or an empty list."""
    if isinstance(target, (list, tuple)):
        if not target:
            raise TargetError("an empty list of targets: give at least one")
        return list(target)
    if not isinstance(target, dict):
        return None

    def seq(v):
        # a 0-d array (a value out of numpy arithmetic) is one number; a pandas Series or
        # Index is a sequence like a list (duck-typed: pandas is not needed here)
        if isinstance(v, np.ndarray):
            return v.ndim > 0
        return (isinstance(v, (list, tuple)) or (hasattr(v, "to_numpy") and hasattr(v, "__len__"))
                ) and not isinstance(v, str)

    target = {k: (v.to_numpy() if seq(v) and hasattr(v, "to_numpy") else
                  (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v))
              for k, v in target.items()}
    lengths = {k: len(v) for k, v in target.items() if seq(v)}
    if not lengths:
        return None
    if set(lengths.values()) == {0}:
        raise TargetError(f"no target: {', '.join(lengths)} "
                          f"{'is an empty list' if len(lengths) == 1 else 'are empty lists'}")
    if len(set(lengths.values())) > 1 or 0 in lengths.values():
        raise TargetError(f"several targets need sequences of one length; got "
                          f"{', '.join(f'{k}: {n}' for k, n in lengths.items())}")
    n = next(iter(lengths.values()))
    return [{k: (v[i] if k in lengths else v) for k, v in target.items()} for i in range(n)]


# ------------------------------------------------------------------ the forecast pipeline
# predict = resolve the law -> fit_stage (once per law, shared by every target) ->
# point_stage -> interval_stage -> calibration_stage -> off_trend_stage -> Forecast.
# compare, backtest, calibration and the selection paths compose these stages; none calls
# back up into predict.

@dataclass(frozen=True)
class FittedLaw:
    """Stage 1 of a forecast: a law fitted to a ladder, shared by every target of that law."""

    ladder: Ladder
    """The ladder as read (all its runs; :attr:`fit_max_flops` says which were fitted)."""
    law: Law
    fit: Fit
    """The fit (profiled when ``identify``; the degeneracy test always run)."""
    degenerate: str | None
    """The degenerate-fit finding when ``allow_degenerate`` let a collapsed law through."""
    bounds: Mapping[str, Sequence[float]] | None = None
    delta: float = DEFAULT_DELTA
    seed: int = 0
    fit_max_flops: float | None = None
    """The compute [FLOPs] the fit was cut at (None: every finished run)."""
    shared: dict = field(default_factory=dict, compare=False, repr=False)
    """Work every target of this fit shares, made once: bootstrap refits by (draws, unit,
    seed), and the ladder's leave-future-out calibration."""

    @property
    def fitted_ladder(self) -> Ladder:
        """The runs the fit saw (the ladder cut at :attr:`fit_max_flops`)."""
        if self.fit_max_flops is None:
            return self.ladder
        return self.ladder.select(max_flops=self.fit_max_flops)


def fit_stage(ladder: Ladder, law: str | Law, *, fixed: Mapping[str, float] | None = None,
              bounds: Mapping[str, Sequence[float]] | None = None,
              delta: float = DEFAULT_DELTA, fit_max_flops: float | None = None,
              include_unfinished: bool = False,
              divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0,
              identify: bool = True, allow_degenerate: bool = False) -> FittedLaw:
    """Stage 1: fit ``law`` to ``ladder`` (:func:`delphi.fitting.fit`) and refuse a
    degenerate fit unless ``allow_degenerate``.

    Raises
    ------
    DegenerateFitError: the law collapsed to a constant and ``allow_degenerate`` is False.
    LadderError, LawError, FitError: as :func:`delphi.fitting.fit`.
    """
    law = get_law(law)
    result = fit(ladder, law, fixed=fixed, bounds=bounds, delta=delta,
                 fit_max_flops=fit_max_flops, include_unfinished=include_unfinished,
                 divergence_threshold=divergence_threshold, seed=seed, identify=identify)
    if not identify:
        # Nested fits (backtests, selection): the degeneracy test without the profiles.
        result = attach_identification(result, profiles=False)
    degenerate = refuse_degenerate(result, allow=allow_degenerate)  # raises unless allowed
    return FittedLaw(ladder=ladder, law=law, fit=result, degenerate=degenerate, bounds=bounds,
                     delta=delta, seed=seed, fit_max_flops=fit_max_flops)


@dataclass(frozen=True)
class PointForecast:
    """Stage 2 of a forecast: the law's value at one target, and what was assumed."""

    target: Target
    """The target, its C in the ladder's FLOP convention."""
    inputs: dict
    """The law's inputs at the target (each a one-element list), LR quantities filled in."""
    loss: float
    """Predicted loss [the ladder's unit, e.g. nats/token]."""
    extrapolation: float | None
    """r = C_target / C_max_fitted (None when the target's compute is unknown)."""
    findings: tuple[Finding, ...]


def point_stage(fitted: FittedLaw, target: Target | Mapping[str, float], *,
                interval_wanted: bool = True, floor_hint: bool = True) -> PointForecast:
    """Stage 2: the target in the ladder's FLOP convention, the law's inputs there, the
    predicted loss, the extrapolation ratio, and the findings about the target and design
    (each warning also issued as a :class:`~delphi.errors.FitWarning`).

    ``interval_wanted`` words the fixed-parameter note ("the interval is conditional...");
    ``floor_hint`` adds the hint that a floor range shows how a pinned floor moves the
    forecast (off inside a floor scan).

    Raises
    ------
    TargetError: a target the law cannot be evaluated at, an MoE target given only by its
        total N, or a target C that disagrees with the ladder's convention (law of C).
    """
    ladder, law, result = fitted.ladder, fitted.law, fitted.fit
    target = as_target(target)
    _base_inputs(target, law)
    _check_moe_target(target, law, ladder)
    found: list[Finding] = []
    convention: list[str] = []
    target = _in_ladder_convention(target, law, ladder, convention)
    for n in convention:
        # A C that disagrees with the ladder's convention (law of N and D) is a warning.
        found.append(Finding("target-convention",
                             "warning" if n.startswith("target flops ") else "note", n, "target"))
    if (target.flops_source or "").startswith("6ND") and target.active_params is None \
            and not ladder.has("params") and not ladder.has("active_params"):
        # Nothing in the ladder says whether N counts every parameter: for a mixture of
        # experts a total N would put C off by the sparsity factor.
        found.append(Finding.note(
            "target-convention", f"the target's C = 6 x N x D = {target.flops:.4g} FLOPs from "
            f"its N and D; the ladder gives compute only, so nothing checks N's convention: "
            f"for a mixture of experts N must be the active parameters "
            f"({option('active_params', '--target-active-params')}), or give "
            f"{option('flops', '--target-flops')}", "target"))
    inputs, assumed = target_inputs(target, law, result, ladder)
    found += [Finding.note("other", n, "target") for n in assumed]
    loss = float(result.predict(inputs)[0])
    if fitted.degenerate:
        const = result.identification.constant
        same = abs(loss / const - 1) < 1e-3
        found.append(Finding.warning(
            "degenerate", f"{fitted.degenerate}; the forecast {loss:.4f} "
            + ("only repeats the ladder's constant level" if same else
               f"is {loss / const - 1:+.2%} from the ladder's constant level {const:.4f}, a "
               f"difference the ladder does not support")))
    conv = ladder.flops_convention
    if conv is not None and conv.drifting and target.flops_k is not None and "flops" in inputs:
        # k is not one number for this ladder: show what the largest rung's k would give.
        k_top = conv.k[-1]
        alt = float(result.predict({**inputs, "flops": [target.flops / target.flops_k * k_top]})[0])
        found.append(Finding.note(
            "flops-drift", f"the ladder's C/({conv.n_label}) drifts {conv.drift:+.0%} across "
            f"rungs: with the largest rung's k = {k_top:.4g} instead of {target.flops_k:.4g} "
            f"the forecast would be {alt:.4f} ({alt / loss - 1:+.2%})", "target"))
    # _design_notes issues its own FitWarnings (stacklevel at the user's call)
    found += [Finding.warning("outside-design", w, "target")
              for w in _design_notes(target, law, result, ladder)]
    d = one_token_count(ladder)
    design_notes, design_warns = ladder_design_notes(ladder, law)
    found += [Finding.note("ladder-design", n) for n in design_notes]
    found += [Finding.warning("ladder-design", w) for w in design_warns]
    if d is not None and law.inputs in (("params",), ("flops",)):
        if target.tokens is not None and not d / ONE_D <= target.tokens <= d * ONE_D:
            reads = ("the loss at the ladder's D, not the target's" if law.inputs == ("params",)
                     else "the target's extra or missing tokens as compute")
            found.append(Finding.warning(
                "target-tokens", f"the target's D = {target.tokens:.3g} tokens differs from "
                f"the ladder's one token count {d:.3g}: law {law.name!r} predicts {reads} (the "
                f"ladder cannot measure D's effect)", "target"))
    if "flops" in law.inputs and target.params is not None and target.tokens is not None:
        span = ratio_span(ladder)
        if span is not None and span[1] < SPLIT_SPAN * span[0]:
            ratios = (f"are {span[0]:.3g} for every run" if span[1] <= 1.001 * span[0] else
                      f"span only {span[0]:.3g}..{span[1]:.3g}")
            found.append(Finding.note(
                "law-in-c", f"law {law.name!r} in C, not chinchilla in N and D: the ladder's "
                f"tokens per parameter D/N {ratios}, which does not separate N from D; the "
                f"target's N and D enter through its C", "target"))
    largest, smallest = result.extra.get("max_flops"), result.extra.get("min_flops")
    extrapolation = target.flops / largest if (largest and target.flops) else None
    n_max = result.extra.get("max_params")
    if extrapolation is None and law.inputs == ("params",) and target.params and n_max:
        # A law in N on a fixed-data sweep: C = 6ND is proportional to N, so r in N is r in C.
        extrapolation = target.params / n_max
        found.append(Finding.note(
            "ratio-from-n", f"the target's compute is not given: its extrapolation ratio is "
            f"N / N_max = {extrapolation:.3g} (at one D, C grows as N)", "target"))
    if extrapolation is not None and extrapolation > 1e4:
        # a ladder in PFLOPs or PF-days beside a target in FLOPs looks like this: below 1e12
        # FLOPs (a 1M-parameter model on 170k tokens) no language model was trained
        units = (f"; the largest fitted run has only {largest:.3g} FLOPs, less than any "
                 f"language-model training run: is the ladder's compute in other units "
                 f"(PFLOPs = 1e15 FLOPs, PF-days = 8.64e19) than the target's?"
                 if largest and largest < 1e12 else "")
        found.append(Finding.warning(
            "far-extrapolation", f"the target is {extrapolation:.3g}x the largest fitted run's "
            f"compute: more than four orders of magnitude of extrapolation{units}", "target"))
    if smallest and target.flops and target.flops < smallest:
        found.append(Finding.warning(
            "below-smallest", f"the target's compute {target.flops:.3g} is below the smallest "
            f"fitted run ({smallest:.3g}): the law is extrapolated downwards", "target"))
    if result.fixed:
        given = ", ".join(f"{k} = {v:g}" for k, v in result.fixed.items())
        scan = (f"; a floor range, {option('floor_range', '--floor LO:HI')}, shows how the "
                f"forecast moves with {law.floor}"
                if law.floor in result.fixed and floor_hint else "")
        what = "the interval is" if interval_wanted else "the forecast is"
        one = len(result.fixed) == 1
        found.append(Finding.note(
            "fixed-parameters", f"{given} fixed (not fitted): {what} conditional on "
            f"{'this value' if one else 'these values'} and leaves out "
            f"{'its' if one else 'their'} uncertainty{scan}", ", ".join(result.fixed)))
    if not result.converged:
        found.append(Finding.warning("not-converged",
                                     "THE FIT DID NOT CONVERGE: do not trust this prediction"))
    return PointForecast(target=target, inputs=inputs, loss=loss, extrapolation=extrapolation,
                         findings=tuple(found))


def interval_stage(fitted: FittedLaw, point: PointForecast, *, method: str | None = "auto",
                   level: float = DEFAULT_LEVEL, n_boot: int = 200, boot_unit: str = "run",
                   n_jobs: int | None = None) -> tuple[Interval | None, list[Finding]]:
    """Stage 3: the fit's own interval at the target -- bootstrap (enough runs for the free
    parameters) or delta method -- before any calibration; ``method`` as
    :func:`delphi.predict`'s ``interval`` (``calibrated``/``reference``/``auto`` make the base
    interval those widen). Returns (interval or None, findings saying how or why not).

    Raises
    ------
    FitError: a bad setting, or a named method (``bootstrap``, ``delta``) that cannot be made.
    """
    notes: list[str] = []
    band = _interval(fitted.fit, point.inputs, method, level, n_boot, boot_unit, fitted.seed,
                     n_jobs, notes, shared=fitted.shared)
    return band, [Finding.note("no-interval" if n.startswith("no interval") else "interval", n,
                               "interval") for n in notes]


def calibration_stage(fitted: FittedLaw, point: PointForecast, band: Interval | None,
                      found: Sequence[Finding], *, method: str | None = "auto",
                      level: float = DEFAULT_LEVEL, calibration=None,
                      reference=None) -> tuple[Interval | None, list[Finding]]:
    """Stage 4: ``band`` widened by extrapolation errors at the target's ratio r (the
    ladder's own leave-future-out errors blended with the reference class, or the reference
    class alone; :func:`delphi.calibration.calibrated_interval`, :mod:`delphi.reference`), for
    ``method`` ``auto``, ``calibrated`` or ``reference``; other methods pass ``band`` through.
    ``calibration``: a calibration model already fitted on this ladder and law (e.g. by
    :func:`delphi.selection.compare`'s refits). ``found``: the findings so far (stage 3's
    ``no-interval`` finding is reworded when the reference class supplies the interval).

    Raises
    ------
    FitError: ``method="calibrated"`` and the ladder cannot calibrate itself, or
        ``"reference"`` and the reference class has no model for this law.
    """
    found = list(found)
    if method == "calibrated" and band is None:
        why = next((f.message for f in reversed(found) if f.code == "no-interval"),
                   "no interval")
        ask = option('interval="reference"', "--interval reference")
        raise FitError(f"no calibrated interval: it widens a bootstrap or delta-method "
                       f"interval, and there is none here ({why}); {ask} gives the "
                       f"reference-class interval, from the public ladders' errors")
    if method not in ("auto", "calibrated", "reference"):
        return band, found
    notes = [f.message for f in found]
    n_before = len(notes)
    band = _calibrate(band, point.loss, point.extrapolation, fitted.fitted_ladder, fitted.law,
                      fitted.fit, fitted.bounds, fitted.delta, fitted.seed, notes,
                      method=method, level=level, model=calibration, reference=reference,
                      shared=fitted.shared)
    # _calibrate rewords earlier no-interval notes in place and appends its own
    out = [replace(f, message=m) if m != f.message else f for f, m in zip(found, notes)]
    for n in notes[n_before:]:
        out.append(Finding.note("no-interval" if n.startswith("no interval") else "interval",
                                n, "interval"))
    if band is not None:
        # a no-interval finding about the fit alone stays a note, not a missing interval
        out = [replace(f, code="interval") if f.code == "no-interval"
               and f.message.startswith("no interval from the fit alone") else f for f in out]
    return band, out


def off_trend_stage(fitted: FittedLaw, point: PointForecast):
    """Stage 5: off-trend rungs the other rungs' law misses, and the forecast without them
    (:func:`delphi.robustness.find_off_trend`); None when there are none."""
    # Non-monotone pairs compare runs that share D (a law of N alone) and any swept
    # hyperparameter (held_inputs); the deleted-residual test needs none of it.
    return find_off_trend(fitted.fit, point.inputs, bounds=fitted.bounds, seed=fitted.seed,
                          held=held_inputs(fitted.ladder, fitted.fit))


def forecast_from_fit(fitted: FittedLaw, target: Target | Mapping[str, float], *,
                      interval: str | None = "auto", level: float = DEFAULT_LEVEL,
                      n_boot: int = 200, boot_unit: str = "run", n_jobs: int | None = None,
                      off_trend: bool = True, calibration=None, reference=None,
                      floor_hint: bool = True) -> Forecast:
    """Stages 2-5 for one target on a fit already made (:func:`fit_stage`), assembled into a
    :class:`Forecast`: what :func:`delphi.predict` does per target, so several targets (and
    compare's candidates) share one fit. Settings as in :func:`delphi.predict`.

    Raises
    ------
    TargetError, FitError: as :func:`point_stage`, :func:`interval_stage` and
        :func:`calibration_stage`.
    """
    ladder, result = fitted.ladder, fitted.fit
    wanted = interval not in (None, "none")
    point = point_stage(fitted, target, interval_wanted=wanted, floor_hint=floor_hint)
    band, made = interval_stage(fitted, point, method=interval, level=level, n_boot=n_boot,
                                boot_unit=boot_unit, n_jobs=n_jobs)
    band, found = calibration_stage(fitted, point, band, [*point.findings, *made],
                                    method=interval, level=level, calibration=calibration,
                                    reference=reference)
    if result.fixed and band is None and wanted:
        found = [replace(f, message=f.message.replace("the interval is", "the forecast is", 1))
                 if f.code == "fixed-parameters" else f for f in found]
    rungs = off_trend_stage(fitted, point) if off_trend else None
    if rungs is not None:
        found.append(Finding.note("off-trend", rungs.note(),
                                  ", ".join(r.run for r in rungs.rungs)))
    for f in found:
        if f.severity == "warning" and f.code != "outside-design":   # warned there already
            warnings.warn(f.message, FitWarning, stacklevel=user_stacklevel())
    return Forecast(target=point.target, loss=point.loss, fit=result, ladder_name=ladder.name,
                    ladder_source=ladder.source, ladder_sha256=result.extra["sha256"],
                    metric=ladder.metric, unit=ladder.unit, extrapolation=point.extrapolation,
                    findings=tuple(found), interval=band, off_trend=rungs,
                    flops_convention=ladder.flops_convention)


def _options(given: Mapping) -> dict:
    """:func:`predict`'s keyword settings: its defaults (read from its signature, the one
    place they are written) updated by ``given``; ``workers`` folds into ``n_jobs``."""
    defaults = {k: p.default for k, p in inspect.signature(predict).parameters.items()
                if p.kind is p.KEYWORD_ONLY}
    unknown = set(given) - set(defaults)
    if unknown:
        raise TypeError(f"unknown forecast setting(s) {sorted(unknown)}")
    out = {**defaults, **given}
    workers = out.pop("workers")
    if out["n_jobs"] is None:
        out["n_jobs"] = workers
    return out


def _forecast(ladder: Ladder, targets: Sequence, law: str | Law | None, options: Mapping, *,
              calibration=None, floor_hint: bool = True) -> list[Forecast]:
    """The forecasts of ``targets`` (each a Target or dict), in order, with :func:`predict`'s
    keyword settings ``options`` (those not given take predict's defaults): the law resolved
    per target, each law fitted once (:func:`fit_stage`) and shared by its targets
    (:func:`forecast_from_fit`; ``calibration``: a calibration model already fitted, as
    :func:`compare`'s refits give); ``auto``/``ensemble`` through :func:`predict_selected`, a
    floor range through :func:`delphi.robustness.scan_floor` (``floor_hint`` off inside it)."""
    o = _options(options)
    if o["interval"] not in (None, "none"):
        check_level(o["level"])         # before the fit, not after it
    fixed, ensemble, candidates = o["fixed"], o["ensemble"], o["candidates"]
    floor_range, floor_points = o["floor_range"], o["floor_points"]
    allow_degenerate, identify = o["allow_degenerate"], o["identify"]
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    targets = [as_target(t) for t in targets]
    selecting = ensemble or (isinstance(law, str) and law == "auto")
    if selecting and ensemble and law not in (None, "auto"):
        auto = option("law='auto'", "--law auto")
        raise TargetError(f"an ensemble averages candidate laws: give {auto} or no law, not "
                          f"{getattr(law, 'name', law)!r} (name the candidates with "
                          f"{option('candidates=[...]', '--laws')})")
    if not selecting and candidates is not None:
        auto = option("law='auto'", "--law auto")
        raise TargetError(f"candidates are for {auto} or ensemble=True")
    fit_settings = {k: o[k] for k in ("bounds", "delta", "fit_max_flops", "include_unfinished",
                                      "divergence_threshold", "seed")}
    per_target = {k: o[k] for k in ("interval", "level", "n_boot", "boot_unit", "n_jobs",
                                    "off_trend", "reference")}
    if selecting:
        return [predict_selected(ladder, t, ensemble=ensemble, candidates=candidates,
                                 fixed=fixed, floor_range=floor_range,
                                 allow_degenerate=allow_degenerate, **fit_settings,
                                 **per_target) for t in targets]
    laws = [get_law(law or default_law(ladder, t)) for t in targets]
    for t, lw in zip(targets, laws):
        # The ladder before the target: a law the ladder cannot be fitted with is told before
        # a target input it would need (asking for the input first is a detour).
        check_columns(ladder, lw)
        _base_inputs(t, lw)  # fail on a missing input before spending time on the fit
        _check_moe_target(t, lw, ladder)
    if floor_range is not None:
        check_floor_range(floor_range)
        # Each value is a whole forecast: a million of them would run for days.
        if (isinstance(floor_points, int) and not isinstance(floor_points, bool)
                and floor_points > MAX_FLOOR_POINTS):
            raise LawError(f"a floor range is scanned at 2 to {MAX_FLOOR_POINTS} values "
                           f"(floor_points), got {floor_points:,}; each value is a forecast")
        out = []
        for t, lw in zip(targets, laws):
            def one(pinned, t=t, lw=lw):
                return _forecast(ladder, [t], lw, {**options, "fixed": pinned,
                                                   "floor_range": None},
                                 floor_hint=False)[0]
            out.append(scan_floor(one, lw, floor_range, floor_points, fixed))
        return out
    fits: dict[str, FittedLaw] = {}
    out = []
    for t, lw in zip(targets, laws):
        if lw.name not in fits:
            fits[lw.name] = fit_stage(ladder, lw, fixed=fixed, identify=identify,
                                      allow_degenerate=allow_degenerate, **fit_settings)
        out.append(forecast_from_fit(fits[lw.name], t, calibration=calibration,
                                     floor_hint=floor_hint, **per_target))
    return out


def _calibrate(band, loss: float, ratio: float | None, ladder: Ladder, law: Law, result: Fit,
               bounds, delta, seed, notes: list[str], method: str, level: float, model=None,
               reference=None, shared: dict | None = None):
    """``band`` (None when the fit gives no interval) widened by extrapolation errors at the
    target's ratio: the ladder's own (:mod:`delphi.calibration`, when its leave-future-out
    refits give at least 3 folds) blended with the reference class (:mod:`delphi.reference`),
    or the reference class alone (``method="reference"``, or ``"auto"`` when the ladder
    cannot calibrate itself). ``method="calibrated"`` raises FitError when the ladder cannot.
    ``model``: a calibration already fitted on this ladder and law
    (:func:`delphi.selection.compare`'s refits). Returns the interval, or ``band`` with a note
    saying why it was not widened."""

    if ratio is None:
        why = "the target's compute is unknown, so its extrapolation ratio is too"
        if method == "calibrated":
            raise FitError(f"no calibrated interval: {why}")
        if band is not None:
            notes.append(f"{band.method} interval, not calibrated: {why}")
        return band
    largest, smallest = result.extra.get("max_flops"), result.extra.get("min_flops")
    if largest and smallest and 0 < ratio * largest < smallest:
        # Below the smallest fitted run the law is extrapolated downwards, where no error was
        # ever measured: taken as uncertain as extrapolating upwards by the same factor, not
        # the in-sample floor (a target 1e6x below the ladder got +-0.2%: h111's F2).
        down = smallest / (ratio * largest)
        notes.append(f"the target is {down:.3g}x below the smallest fitted run's compute: "
                     f"extrapolation errors are measured upwards only, so the interval takes "
                     f"the downward distance as an upward one (r = {down:.3g}), an assumption")
        ratio = down
    why = None
    if method == "reference":
        why = option('interval="reference"', "--interval reference") + " asked for"
    elif band is None:
        why = "the fit gives no interval to calibrate"
    elif model is None:
        shared = {} if shared is None else shared
        if "calibration" not in shared:      # once per fit, whatever the number of targets
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")   # the fold fits' warnings are the folds'
                    made, _ = calibrate(ladder, law, fixed=result.fixed or None,
                                        bounds=bounds, delta=delta, max_folds=MAX_FOLDS,
                                        seed=seed)
                shared["calibration"] = (made, None)
            except DelphiError as exc:
                shared["calibration"] = (None, str(exc))
        model, why = shared["calibration"]
    if why is not None and method == "calibrated":
        ask = option('interval="reference"', "--interval reference")
        raise FitError(f"no calibrated interval: {why}; {ask} gives the reference-class "
                       f"interval, from the public ladders' errors")
    ref, ref_why = _reference_model(reference, ladder, law, result, level)
    if method == "reference" and ref is None:
        raise FitError(f"no reference-class interval: {ref_why}")
    if why is None:                 # the ladder's own calibration, blended
        used = blend(model, ref, level) if ref is not None else model
        cal = calibrated_interval(band, loss, used, ratio)
        info = cal.calibration
        own_f = model.small_sample_factor(level)
        own_s = float(model.sigma(ratio))
        how = (f", blended {used.weight:.2f} : {1 - used.weight:.2f} with the reference class's "
               f"{float(ref.sigma(ratio)):.2%} (the reference counts as {PRIOR_FOLDS} folds, "
               f"in place of a small-sample widening) to {info['sigma_used']:.2%}"
               if ref is not None else
               f", widened {own_f:.3g}x for {model.n_folds} fold(s) (Student t) to "
               f"{own_f * own_s:.2%}")
        notes.append(f"interval calibrated on the ladder's own extrapolation errors: "
                     f"sigma(r) = {model.sigma_0:.2%} + {model.k:.2%} log10 r from "
                     f"{model.n_errors} leave-future-out prediction(s) in {model.n_folds} "
                     f"fold(s); at r = {ratio:.3g}, sigma(r) = {own_s:.2%}{how}, combined with "
                     f"the {band.method} interval's parameter and run-noise spread")
        if ref is None:
            notes.append(f"not blended with the reference class: {ref_why}")
        elif (outside := outside_class(ladder, law)) is not None:
            notes.append(f"reference class: {outside}")
        if ratio > model.max_ratio:
            notes.append(f"the target's extrapolation ratio {ratio:.3g} is beyond the largest "
                         f"the calibration saw ({model.max_ratio:.3g}): sigma(r) is "
                         f"extrapolated linearly in log10 r")
        return cal
    if ref is None:
        if band is None:
            for i, n in enumerate(notes):
                if n.startswith("no interval: "):
                    notes[i] = f"{n}; and no reference-class interval: {ref_why}"
            return None
        notes.append(f"{band.method} interval, not calibrated: {why}; no reference-class "
                     f"interval either: {ref_why}")
        return band
    if band is not None:
        cal = calibrated_interval(band, loss, ref, ratio)
    else:
        # No interval of the fit's own: its residual scale (from 1 or 2 dof, too rough to
        # rest an interval on) still enters as run noise, since it can only widen the
        # reference interval, never narrow it. An sd estimated from nu dof enters a
        # prediction interval through Student's t with nu dof, as the delta method's does.
        from dataclasses import replace
        q = 0.5 + level / 2
        z = float(norm_ppf(q))
        rough = (residual_scale(result) * float(t_ppf(q, result.dof)) / z
                 if result.dof >= 1 else 0.0)
        cal = calibrated_interval(_point_interval(loss, level, run_sd=rough, dof=result.dof),
                                  loss, ref, ratio)
        # The expected loss: the reference spread alone (the rough noise was added to widen
        # the new-run interval, not measured, so it is not subtracted here).
        s = float(ref.sigma(ratio))
        cal = replace(cal, mean_lower=loss * math.exp(-z * s), mean_upper=loss * math.exp(z * s))
    half = float(ref.q_0 + ref.q_1 * math.log10(max(ratio, 1.0)))
    if band is None:
        for i, n in enumerate(notes):      # the fit's interval is missing, not the forecast's
            if n.startswith("no interval: "):
                notes[i] = "no interval from the fit alone: " + n[len("no interval: "):]
    elif method != "reference":
        notes.append(f"not calibrated on the ladder's own errors: {why}")
    notes.append(f"interval from the reference class (method 'reference'): {ref.describe()}; "
                 f"at r = {ratio:.3g} that is +-{half:.2%}"
                 + (f", combined with the {band.method} interval's parameter and run-noise "
                    f"spread" if band is not None else " (the fit gives no interval of its own)"))
    notes.extend(f"reference class: {n}" for n in ref.notes)
    if ratio < 1:
        notes.append(f"the target is below the largest fitted run (r = {ratio:.3g}): the "
                     f"reference class measures extrapolation upwards only, so its interval "
                     f"here is its floor at r = 1")
    if ref.n_errors * (1 - level) < 1:
        # n errors cannot show a quantile rarer than 1/n: the reference spread stops growing
        # with the level, and the expected-loss interval (no run noise) rests on it alone
        notes.append(f"at level {level:g} the quantile of {ref.n_errors} reference errors is "
                     f"about their largest: {ref.n_errors} errors show nothing rarer than 1 in "
                     f"{ref.n_errors}, so above level {1 - 1 / ref.n_errors:.3g} the "
                     f"reference spread stops growing with the level; the intervals, the "
                     f"expected-loss one most (no run noise widens it), are likely too narrow "
                     f"at this level")
    if ratio > ref.max_ratio:
        notes.append(f"the target's extrapolation ratio {ratio:.3g} is beyond the largest in "
                     f"the reference class ({ref.max_ratio:.3g}): its error line is "
                     f"extrapolated linearly in log10 r")
    return cal


def _point_interval(loss: float, level: float, run_sd: float = 0.0, dof: int = 0):
    """A zero-width interval at ``loss`` with run noise ``run_sd`` [sd of log loss]: the base
    a reference interval widens when the fit has no interval of its own (no parameter
    spread to add; ``run_sd`` the fit's rough residual scale from ``dof`` dof, or 0)."""
    source = (f"the fit's residual scale from {dof} dof, times t/z for {dof} dof (rough; it "
              f"can only widen the reference interval)" if run_sd > 0 else
              "none: the reference errors include run-to-run noise")
    return Interval(lower=loss, upper=loss, mean_lower=loss, mean_upper=loss, level=level,
                    method="none", noise=float(run_sd), noise_source=source)


def _n_rungs(ladder: Ladder, law: Law, result: Fit) -> int | None:
    """Compute budgets (rungs) among the runs ``result`` fitted, as leave-future-out counts
    them (None when the ladder has no compute)."""
    try:
        _, pts, _, b_pts, _, _ = lfo_points(ladder, law)
    except DelphiError:
        return None
    fitted = {lbl.split("@")[0] for lbl in result.labels}
    sel = pts["run"].astype(str).isin(fitted).to_numpy()
    return int(len(np.unique(b_pts[sel]))) if sel.any() else None


def _reference_model(reference, ladder: Ladder, law: Law, result: Fit, level: float):
    """(reference model, None) for this forecast, or (None, why not)."""
    # A reference class the caller names must load (its error is theirs to see); a failure
    # of the shipped one, or a law it cannot model, leaves the interval unwidened, noted.
    if reference is not None and not isinstance(reference, (ReferenceClass, str, os.PathLike)):
        raise TypeError(f"reference must be a ReferenceClass or a path to one, got "
                        f"{type(reference).__name__}")
    ref = reference if isinstance(reference, ReferenceClass) else (
        load_reference(reference) if reference is not None else None)
    try:
        ref = ref if ref is not None else load_reference()
        exclude = (ladder.name,) if ladder.name in ref.ladders else ()
        model = ref.model(law.name, _n_rungs(ladder, law, result), level, exclude=exclude,
                          fit_sd=residual_scale(result), fit_dof=result.dof)
    except DelphiError as exc:
        return None, str(exc)
    outside = outside_class(ladder, law)
    if outside is not None:
        # The rule compare ranks by: kept (dropping it would only narrow the interval), said.
        model = replace(model, notes=(*model.notes, (
            f"{outside}; so the reference interval may understate this forecast's error "
            f"(compare does not rank law {law.name!r} by the reference class here)")))
    return model, None


def _interval(result: Fit, inputs, method, level, n_boot, unit, seed, n_jobs, notes,
              shared: dict | None = None):

    if method is None or method == "none":
        return None
    start = len(notes)    # the notes of this interval's making, dropped if it fails
    if method not in ("auto", "bootstrap", "delta", "calibrated", "reference"):
        raise FitError(f"unknown interval method {method!r}; use auto, calibrated, reference, "
                       f"bootstrap, delta or none")
    asked = method
    if method in ("calibrated", "reference"):
        method = "auto"      # the base interval the calibration widens
    # Bad settings are errors, not a silently missing interval.
    check_level(level)
    if not (isinstance(n_boot, int) and 20 <= n_boot <= MAX_DRAWS):
        raise FitError(f"{option('n_boot', '--n-boot')} must be 20 to {MAX_DRAWS:,} bootstrap "
                       f"draws, got {n_boot!r}")
    if not (isinstance(seed, int) and seed >= 0):
        raise FitError(f"seed must be a non-negative integer, got {seed!r}")
    if unit not in ("run", "budget"):
        # Raised by the bootstrap too, but caught below as "no interval": a typo is an error.
        raise FitError(f"unknown bootstrap unit {unit!r} (boot_unit); use 'run' or 'budget'")
    check_n_jobs(n_jobs)
    enough = result.n_points >= 2 * result.n_free + 2
    if method == "auto":
        method = "bootstrap" if enough else "delta"
        if method == "delta":
            notes.append(f"too few runs ({result.n_points}) to bootstrap {result.n_free} free "
                         f"parameters: delta-method interval")
    elif method == "bootstrap" and not enough:
        notes.append(f"bootstrap with only {result.n_points} runs for {result.n_free} free "
                     f"parameters: resamples repeat runs, so the interval is too narrow")
    if 3 <= result.dof < 5:
        notes.append(f"the interval rests on {result.dof} residual degrees of freedom: its "
                     f"noise estimate is rough")
    exact = ""
    if method == "bootstrap" and residual_scale(result) < NOISE_FLOOR:
        # Every resample of an exactly fitted ladder gives the same law: a zero-width
        # interval. The delta method at the floored noise is not.
        method = "delta"
        exact = (f"the law fits the ladder exactly (residual scale {residual_scale(result):.2g}"
                 f" < {NOISE_FLOOR:g}): bootstrap resamples would all agree")
    try:
        if method == "delta":
            band = delta_interval(result, inputs, level=level)
            if exact:   # said only once the delta interval exists
                notes.append(f"{exact}, so the interval is the delta method's with the noise "
                             f"floored at {NOISE_FLOOR:g}")
            return band
        shared = {} if shared is None else shared
        key = ("bootstrap", n_boot, unit, seed)
        if key not in shared:     # the refits do not depend on the target: once per fit
            shared[key] = bootstrap(result, n=n_boot, unit=unit, seed=seed, n_jobs=n_jobs)
        draws = shared[key]
        notes.extend(draws.warnings)
        if draws.n_failed:
            notes.append(f"{draws.n_failed} of {n_boot} bootstrap draws failed to refit and "
                         f"were left out")
        return bootstrap_interval(result, draws, inputs, level=level, seed=seed)
    except FitError as exc:
        if asked in ("bootstrap", "delta"):
            # One rule for every method named by the user: one that cannot be made is an
            # error, as --interval calibrated is; only auto falls back.
            auto = option('interval="auto"', "--interval auto")
            why = str(exc).removesuffix("; no delta-method interval")
            raise FitError(f"no {asked} interval: {why}{f'; and {exact}' if exact else ''}; "
                           f"the default, {auto}, gives the reference-class interval, from "
                           f"the public ladders' errors") from exc
        # "delta-method interval" then "no interval" would contradict: keep only the reason.
        del notes[start:]
        notes.append(f"no interval: {exc}" + (f"; and {exact}, so no bootstrap interval "
                                               f"either" if exact else ""))
        return None


# ---------------------------------------------------------- law="auto" and ensembles
def calibration_of(score: "CandidateScore | None"):
    """The calibration model of a compared candidate's leave-future-out errors (None when it
    has fewer than 3 folds: :func:`delphi.predict` then calibrates, or falls back, itself)."""
    if score is None or score.backtest is None:
        return None
    try:
        return CalibrationModel.fit(score.backtest.errors)
    except DelphiError:
        return None


def _feeds(target, law: str) -> bool:
    """Whether ``target`` gives every input of ``law`` (its peak LR and final LR ratio are
    filled in by :func:`delphi.predict` when missing)."""
    return all(getattr(target, c, None) is not None for c in get_law(law).inputs
               if c not in ("peak_lr", "h"))


def predict_selected(ladder: Ladder, target, *, ensemble: bool = False,
                     candidates: Sequence[Candidate | str] | None = None,
                     comparison: Comparison | None = None, max_folds: int | None = 12,
                     **settings):
    """:func:`delphi.predict` with ``law="auto"`` or ``ensemble=True`` (called from it).

    ``auto``: the forecast of the best candidate of :func:`compare`, with
    :attr:`Forecast.selection` giving the choice, the runner-up, their forecasts and the
    spread between them. ``ensemble``: the members' log forecasts averaged with
    :meth:`Comparison.weights`; the new-run interval is centred on it with the mixture sd,
    sqrt(sum w_i sd_i^2 + sum w_i (ln L_i - ln L)^2), sd_i each member's log half-width / z.
    Each member's (and the chosen law's) calibrated interval uses the calibration model of
    its leave-future-out errors in the comparison (the same cuts for every candidate), not a
    second leave-future-out pass.

    Raises
    ------
    FitError: no candidate could be backtested, or (ensemble) none could predict the target.
    TargetError, LadderError: as :func:`delphi.predict`.
    """

    if settings.get("floor_range") is not None:
        auto = option("law='auto'", "--law auto")
        raise TargetError(f"a floor range ({option('floor_range=...', '--floor LO:HI')}) scans "
                          f"one law; it does not combine with {auto} or "
                          f"{option('ensemble=True', '--ensemble')} "
                          f"(pin floors as candidates instead, "
                          f"{option('candidates=[...]', '--floors free,1.5')})")
    settings.pop("floor_range", None)
    base_fixed = dict(settings.pop("fixed", None) or {})
    base_delta = settings.pop("delta", DEFAULT_DELTA)
    target = as_target(target)
    skipped_notes: list[str] = []
    if candidates is None:
        everything = default_candidates(ladder, fixed=base_fixed, delta=base_delta)
        candidates = [c for c in everything if _feeds(target, c.law)]
        left = [c for c in everything if not _feeds(target, c.law)]
        if left:
            # Name what each skipped law reads that the target does not give.
            flag = {"flops": option("target.flops", "--target-flops"),
                    "params": option("target.params", "--target-params"),
                    "tokens": option("target.tokens", "--target-tokens")}
            missing = sorted({col for c in left for col in get_law(c.law).inputs
                              if col in flag and getattr(target, col, None) is None})
            what = " or ".join(flag[m] for m in missing) or "its inputs"
            if "flops" in missing:      # C also comes from N and D (C = 6ND)
                what += f", or {flag['params']} with {flag['tokens']}"
            skipped_notes.append(
                f"candidate(s) {', '.join(c.label for c in left)} not considered: the target "
                f"gives no {' or '.join(missing) or 'inputs they read'} (give {what} to compare "
                f"them too)")
        if not candidates:
            raise TargetError(f"no default candidate law can be evaluated at this target: give "
                              f"its parameters and tokens, or name the candidates "
                              f"({option('laws', '--laws')})")
        if base_fixed:
            pinned = ", ".join(f"{k} = {v:g}" for k, v in base_fixed.items())
            floors = option("candidates=[...]", f"--floors free,{base_fixed.get('E', 'VALUE')}")
            skipped_notes.append(f"every candidate keeps {pinned} fixed (the manifest's or "
                                 f"the command's); {floors} compares a free floor too")
    else:
        candidates = [Candidate(law=c, fixed={k: v for k, v in base_fixed.items()
                                              if k in get_law(c).param_names},
                                delta=base_delta)
                      if isinstance(c, str) else c for c in candidates]
        for c in candidates:
            if not _feeds(target, c.law):
                # a candidate neither the ladder nor the target can feed: the ladder is
                # told first, as for a named law
                check_columns(ladder, get_law(c.law))
                target.inputs(get_law(c.law), skip=("peak_lr", "h"))   # TargetError naming it
    if comparison is None:
        fitted = (ladder.select(max_flops=settings["fit_max_flops"])
                  if settings.get("fit_max_flops") is not None else ladder)
        try:
            comparison = compare(fitted, candidates, bounds=settings.get("bounds"),
                                 max_folds=max_folds, level=settings.get("level", 0.9),
                                 seed=settings.get("seed", 0),
                                 reference=settings.get("reference"))
        except LadderError as exc:
            raise LadderError(f"{exc}; name a law instead ({option('law=...', '--law')})") \
                from None
    best = comparison.best
    by_label = {s.candidate.label: s for s in comparison.ranked}
    # ranked by the reference class without a backtest of its own is not "not ranked"
    skipped_notes += [f"candidate {s.candidate.label} "
                      + ("not backtested on this ladder (ranked by the reference class): "
                         if s.candidate.label in by_label else "not ranked: ") + s.error
                      for s in comparison.scores if not s.scored]

    def one(c: Candidate, **over):
        # The comparison's refits already calibrate this candidate: no second pass.
        return _forecast(ladder, [target], c.law, {**settings, **over,
                                                   "fixed": dict(c.fixed) or None,
                                                   "delta": c.delta},
                         calibration=calibration_of(by_label.get(c.label)))[0]

    table = comparison.to_dict()
    if not ensemble:
        chosen = one(best.candidate)
        extra_warn: list[str] = []
        sel = {"rule": "auto", "chosen_by": comparison.rule,
               "chosen": best.candidate.label, "runner_up": None,
               "runner_up_loss": None, "spread": None, "candidates": [], "comparison": table}
        if len(comparison.scores) == 1:
            # Nothing to choose between: say why this is the law, not "chosen by backtest".
            notes = [f"law {best.candidate.label}: the only candidate that can be evaluated at "
                     f"this target" + ("" if skipped_notes else " (the only one for this "
                                         "ladder's design)")]
            sel["chosen_by"] = "only candidate"
        elif comparison.rule == "reference":
            ref = comparison.reference or {}
            notes = [f"law chosen by the reference class: {best.candidate.label} (mean |error| "
                     f"{best.reference_error:.2%} on {len(ref.get('ladders', []))} public "
                     f"ladders in folds fitted on {ref.get('window')} rungs; this ladder's "
                     f"{len(comparison.cuts)} leave-future-out cut(s) cannot rank the "
                     f"candidates)"]
        else:
            notes = [f"law chosen by leave-future-out backtest: {best.candidate.label} (score "
                     f"{best.rank_key:.2%}, mean |error| {best.mean_abs_error:.2%} on "
                     f"{best.n_scored} prediction(s))"]

        def key(sc):
            return sc.reference_error if comparison.rule == "reference" else sc.rank_key

        def err(sc):
            return sc.reference_error if comparison.rule == "reference" else sc.mean_abs_error
        if len(comparison.ranked) > 1:
            ru = comparison.ranked[1]
            if key(ru) <= key(best) * (1 + TIE):
                same = (comparison.rule == "reference"
                        and best.candidate.law == ru.candidate.law)
                notes.append(f"near tie: {best.candidate.label} and {ru.candidate.label} score "
                             f"{key(best):.3%} and {key(ru):.3%} (within "
                             f"{TIE:.0%}); the choice between them is weak evidence "
                             + ("(the reference class scores the law, not its floor or delta: "
                                "the tie went to the ladder's own backtest, else the fewest "
                                "fixed parameters; " if same else "(")
                             + f"{option('ensemble=True', '--ensemble')} averages them)")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    other = one(ru.candidate, interval=None, off_trend=False)
                    sel.update(runner_up=ru.candidate.label, runner_up_loss=other.loss,
                               spread=other.loss / chosen.loss - 1)
                    notes.append(f"runner-up {ru.candidate.label} (mean |error| "
                                 f"{err(ru):.2%}) forecasts {other.loss:.4f} "
                                 f"({other.loss / chosen.loss - 1:+.2%})")
                    iv = chosen.interval
                    if iv is not None and not iv.lower <= other.loss <= iv.upper:
                        extra_warn.append(
                            f"the runner-up law {ru.candidate.label} forecasts {other.loss:.4f}, "
                            f"outside the chosen law's interval [{iv.lower:.4f}, "
                            f"{iv.upper:.4f}]: the choice of law matters more than the interval "
                            f"says ({option('ensemble=True', '--ensemble')} widens it by the "
                            f"spread between laws)")
                except DelphiError as exc:
                    sel.update(runner_up=ru.candidate.label)
                    notes.append(f"runner-up {ru.candidate.label} cannot forecast the target: "
                                 f"{exc}")
        sel["candidates"] = [{**s.candidate.to_dict(), "weight": 1.0 if s is best else 0.0,
                              "mean_abs_error": s.mean_abs_error, "score": s.score,
                              "reference_error": s.reference_error,
                              "loss": chosen.loss if s is best else (
                                  sel["runner_up_loss"] if s.candidate.label == sel["runner_up"]
                                  else None)}
                             for s in comparison.ranked]
        for w in extra_warn:
            warnings.warn(w, FitWarning, stacklevel=user_stacklevel())
        return replace(chosen, selection=sel, findings=(
            *(Finding.note("selection", n) for n in notes + skipped_notes), *chosen.findings,
            *(Finding.warning("selection", w) for w in extra_warn)))

    weights = comparison.weights()
    members, skipped = [], []
    for label, w in weights.items():
        c = by_label[label].candidate
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                members.append((c, w, one(c)))
        except DelphiError as exc:
            skipped.append(f"{label}: {exc}")
    if not members:
        raise FitError("no ensemble member could forecast the target: " + "; ".join(skipped))
    total = sum(w for _, w, _ in members)
    members = [(c, w / total, f) for c, w, f in members]
    if len(members) == 1:
        # One member is one law's forecast: say so rather than call it an ensemble.
        c, _, f = members[0]
        others = skipped + [f"{sc.candidate.label} not ranked: {sc.error}"
                            for sc in comparison.scores if sc.candidate.label not in weights]
        one_notes = [f"no ensemble: only {c.label} could be weighted and forecast the target, "
                     f"so the forecast is that law's alone"
                     + (f" (the others: {'; '.join(others)})" if others else "")] + skipped_notes
        sel = {"rule": "ensemble", "chosen_by": comparison.rule, "chosen": c.label,
               "members": 1, "weighting": ENSEMBLE_RULE, "between_model_sd": 0.0,
               "runner_up": None, "runner_up_loss": None, "spread": None,
               "candidates": [{**c.to_dict(), "weight": 1.0, "loss": f.loss,
                               "mean_abs_error": by_label[c.label].mean_abs_error,
                               "score": by_label[c.label].score,
                               "reference_error": by_label[c.label].reference_error}],
               "comparison": table}
        return replace(f, selection=sel).with_findings(
            *(Finding.note("selection", n) for n in one_notes), first=True)
    log_l = sum(w * math.log(f.loss) for _, w, f in members)
    loss = math.exp(log_l)
    spread2 = sum(w * (math.log(f.loss) - log_l) ** 2 for _, w, f in members)
    top = max(members, key=lambda m: m[1])[2]
    band = None
    notes = [f"ensemble of {len(members)} candidates weighted by inverse "
             + ("reference-class" if comparison.rule == "reference" else "leave-future-out")
             + " MSE (Bates & Granger 1969): " + ", ".join(f"{c.label} {w:.2f} -> {f.loss:.4f}"
                                                         for c, w, f in members)]
    if len(members) > 1:
        notes.append(f"the interval mixes the members' intervals (weighted) and the spread "
                     f"between their forecasts (sd {math.sqrt(spread2):.2%} of log loss)")
    low = [lab for lab in by_label if lab not in weights]
    if low:
        notes.append(f"candidate(s) {', '.join(low)} left out of the ensemble: weight below "
                     f"{MIN_WEIGHT:.0%}")
    notes += [f"ensemble member left out: {s}" for s in skipped] + skipped_notes
    notes.append(f"the fit shown is the largest-weight member's "
                 f"({max(members, key=lambda m: m[1])[0].label}); the forecast is the "
                 f"ensemble's, not that law's")
    if all(f.interval is not None for _, _, f in members):
        lvl = members[0][2].interval.level
        z = float(norm_ppf(0.5 + lvl / 2))
        sd_new = math.sqrt(sum(w * log_sd(f.interval) ** 2 for _, w, f in members) + spread2)
        sd_mean = math.sqrt(sum(w * log_sd(f.interval, False) ** 2 for _, w, f in members)
                            + spread2)
        t = top.interval
        band = Interval(lower=loss * math.exp(-z * sd_new), upper=loss * math.exp(z * sd_new),
                        mean_lower=loss * math.exp(-z * sd_mean),
                        mean_upper=loss * math.exp(z * sd_mean), level=lvl, method="ensemble",
                        noise=t.noise, noise_source=t.noise_source,
                        calibration={"members": {c.label: f.interval.method
                                                 for c, _, f in members},
                                     "between_model_sd": math.sqrt(spread2)})
    elif settings.get("interval") not in (None, "none"):
        notes.append("no ensemble interval: a member has none (see its notes)")
    sel = {"rule": "ensemble", "chosen_by": comparison.rule, "chosen": "ensemble",
           "members": len(members), "weighting": ENSEMBLE_RULE,
           "between_model_sd": math.sqrt(spread2), "runner_up": None, "runner_up_loss": None,
           "spread": None,
           "candidates": [{**c.to_dict(), "weight": w, "loss": f.loss,
                           "mean_abs_error": by_label[c.label].mean_abs_error,
                           "score": by_label[c.label].score,
                           "reference_error": by_label[c.label].reference_error}
                          for c, w, f in members],
           "comparison": table}
    warns = {x.message: x for _, _, f in members for x in f.findings
             if x.severity == "warning"}
    # The off-trend block compares one law's forecasts: the largest member's, in its notes.
    return replace(top, loss=loss, interval=band, selection=sel, off_trend=None, findings=(
        *(Finding.note("selection", n) for n in notes),
        *(x for x in top.findings if x.severity == "note"), *warns.values()))
