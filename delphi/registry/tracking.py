"""Track the big run while it trains (issue 26): score each new checkpoint against the
preregistered curve band, revise the final-loss forecast, raise an alarm.

``delphi track --registry PATH --id ID RUN_LOG`` reads the running run's log (only ``step`` or
``tokens``, and ``loss``; the target's N, D, steps, batch and schedule come from the
registered prediction, made with ``delphi register ... --curve``) and, for each checkpoint not
yet recorded:

1. appends a partial outcome to the registry (the final one at the last step; signed when a
   key is given), under the registry's lock and fsynced before the next checkpoint is read,
   so a killed tracker loses nothing it reported, and tracking again adds no duplicate (a
   checkpoint whose fraction already has an outcome is not appended again). Before the
   first is appended, a log whose first checkpoints (up to 3) are in the median more than
   1.3x off the curve is refused, nothing recorded, unless ``force`` (another unit or metric:
   bits vs nats is 1.44x; :meth:`RunTracker.update`);
2. scores it against the preregistered band at its fraction (z, PIT, inside:
   :func:`delphi.registry.scoring.band_at`);
3. revises the final-loss forecast. The rule (precision weighting of two forecasts of ln L,
   as an inverse-variance weighted mean of independent estimates):

   * the ladder's forecast: mu_L = ln(preregistered loss), sigma_L = ln(upper / lower) /
     (2 z), z = Phi^-1((1 + level) / 2), from the registered final interval, or from the
     band at fraction 1 when that is wider (a band widened by the law's leave-one-size-out
     errors, :func:`delphi.forecasting.target_curve.size_band`);
   * the run's own completion: the ``annealing`` curve law (Tissue et al. 2024, arXiv
     2408.11029, Eq. 1: L = L0 + A S1^-alpha - C S2) fitted to the run's checkpoints from
     the start of the forecast curve on (the ones recorded) under the planned schedule and evaluated at its last step
     (:class:`~delphi.forecasting.completion_refit.WarmCompletion`: each refit warm-started
     from the previous checkpoint's optimum): mu_R; sigma_R the preregistered RMS log error
     of such completions on the ladder's own runs at this fraction
     (``band.completion_error``, interpolated linearly in the fraction towards 1e-4 at
     fraction 1; at the last step the revised forecast is the observed final loss);
   * revised: mu = (mu_L / sigma_L^2 + mu_R / sigma_R^2) / (1 / sigma_L^2 + 1 / sigma_R^2),
     sigma = (1 / sigma_L^2 + 1 / sigma_R^2)^-1/2, interval exp(mu +- z sigma).

   Two options a prediction can be registered with (``predict_curve(early_completion=True,
   correlated=...)``; off by default, see ``benchmarks/RESULTS.md``, issue 26, 2026-12-03):
   the *early* completion (the same law fitted from the end of warm-up, its error measured
   on the ladder the same way, ``band.early_completion_error``) stands in for the run's own
   completion while that one has fewer than 6 checkpoints; and with a correlation r of the
   anchored forecast's and the completion's errors measured on the size folds
   (``band.carry_over[].corr``), the two are combined as correlated estimates: the best
   linear unbiased weights w_L = (s_R^2 - r s_L s_R) / (s_L^2 + s_R^2 - 2 r s_L s_R),
   clipped to [0, 1], sigma^2 = w_L^2 s_L^2 + (1 - w_L)^2 s_R^2 + 2 w_L (1 - w_L) r s_L s_R
   (Aitken's generalised least squares); or (``band.correlation_use = "variance"``) the
   inverse-variance weights with that sigma. Records without these fields revise as above.

   Fold weights (``predict_curve(fold_weights=True)``, off by default; ``band.carry_over[].weight``
   and ``band.fold_weight_share``; :mod:`delphi.forecasting.target_curve`): once the ladder's
   forecast is anchored, its weight is w_L = s w + (1 - s) sigma_R^2 / (sigma_L^2 +
   sigma_R^2), w the weight that minimised the size folds' squared combined error
   (interpolated in the fraction), s the recorded share; mu = w_L mu_L + (1 - w_L) mu_R,
   sigma^2 = w_L^2 sigma_L^2 + (1 - w_L)^2 sigma_R^2 (+ 2 w_L (1 - w_L) r sigma_L sigma_R
   when a correlation r is recorded). Records without them revise as above.

4. counts consecutive checkpoints outside the band: ``patience`` in a row is the alarm.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Callable

import numpy as np
import pandas as pd

from ..errors import DelphiError, LadderError, RegistryError, TargetError, option
from ..forecasting.completion_refit import WarmCompletion
from ..forecasting.target_curve import FOLD_WEIGHT_SHARE, run_deviation
from ..inputs.schedules import Schedule, warmup_end
from .scoring import UNIT_RATIO, predicted_at, score_outcome, unit_mismatch, unit_reason
from .core import Registry
from .schema import ACCURACY_UNIT
from .signing import load_signing_key
from ..core.text import plural
from ..inputs.units import LOSS_RANGE
from ..inputs.ladder import LOSS_LIKE
from ..inputs.runstate import ROWS_FROM_ZERO
from ..inputs.readers.tensorboard import read_scalars
from ..inputs.readers.tabular import read_csv, read_jsonl
from ..inputs.readers import read_table

__all__ = ["Revised", "TrackedCheckpoint", "Tracking", "Reviser", "RunTracker", "revised_history",
           "read_run_log", "track",
           "DEFAULT_PATIENCE", "ALARM_EXIT"]

#: Consecutive out-of-band checkpoints that raise the alarm by default.
DEFAULT_PATIENCE = 3
#: The CLI's exit code when the alarm is raised.
ALARM_EXIT = 3

_STEP_NAMES = ("step", "_step", "trainer/global_step", "global_step", "current_steps")
_TOKEN_NAMES = ("tokens", "throughput/total_tokens", "total_tokens")
_LOSS_NAMES = ("loss", "eval/loss", "val_loss", "eval_loss")


@dataclass(frozen=True)
class Revised:
    """The revised final-loss forecast after a checkpoint."""

    loss: float
    """Revised final loss [the prediction's unit]."""
    lower: float
    """Lower end of its interval, at the registered level."""
    upper: float
    run_only: float | None
    """The run-only completion's final loss (None before it can be fitted)."""
    run_sd: float | None
    """Its preregistered RMS log error at this fraction."""
    ladder_weight: float
    """Weight of the ladder's forecast in ln L, in [0, 1] (1 while there is no completion)."""
    anchored: float | None = None
    """The ladder's final forecast anchored to the run's deviation so far (carry-over), or None
    when the band records no carry-over."""

    def to_dict(self) -> dict:
        d = {"loss": self.loss, "lower": self.lower, "upper": self.upper,
             "run_only": self.run_only, "run_sd": self.run_sd,
             "ladder_weight": self.ladder_weight}
        if self.anchored is not None:       # output of unanchored tracking as before
            d["anchored"] = self.anchored
        return d


@dataclass(frozen=True)
class TrackedCheckpoint:
    """One checkpoint of the tracked run, scored and with the revised forecast."""

    step: int
    fraction: float
    """step / planned steps."""
    loss: float
    """The loss recorded (the registry's outcome, when it was recorded earlier)."""
    predicted: float
    """Preregistered curve's loss at this fraction."""
    lower: float | None
    upper: float | None
    """The band at this fraction (None without a band)."""
    z: float | None
    pit: float | None
    inside: bool | None
    revised: Revised
    outcome_id: str
    recorded: bool
    """True when this call appended the outcome; False when it was there already."""
    streak: int
    """Consecutive out-of-band checkpoints up to this one."""
    alarm: bool
    """The alarm is raised (streak >= patience) at or before this checkpoint."""

    def to_dict(self) -> dict:
        return {"step": self.step, "fraction": self.fraction, "loss": self.loss,
                "predicted": self.predicted, "lower": self.lower, "upper": self.upper,
                "z": self.z, "pit": self.pit, "inside": self.inside,
                "revised": self.revised.to_dict(), "outcome_id": self.outcome_id,
                "recorded": self.recorded, "streak": self.streak, "alarm": self.alarm}

    def line(self) -> str:
        """One line of ``delphi track`` output."""
        band = ("" if self.lower is None else
                f" band [{self.lower:.4f}, {self.upper:.4f}] "
                f"{'inside ' if self.inside else 'OUTSIDE'} z {self.z:+.2f} PIT {self.pit:.3f}")
        r = self.revised
        return (f"step {self.step:>8d} ({self.fraction:6.1%})  loss {self.loss:.4f}  predicted "
                f"{self.predicted:.4f}{band}  revised {r.loss:.4f} [{r.lower:.4f}, "
                f"{r.upper:.4f}]{'' if self.recorded else '  (recorded before)'}"
                f"{'  ALARM' if self.alarm else ''}")


@dataclass(frozen=True)
class Tracking:
    """The result of :func:`track`: every checkpoint scored, and the alarm."""

    id: str
    checkpoints: tuple[TrackedCheckpoint, ...]
    alarm: bool
    """True when ``patience`` consecutive checkpoints fell outside the band."""
    alarm_step: int | None
    """The checkpoint's step where the alarm was raised."""
    patience: int
    n_recorded: int
    """Outcomes appended by this call."""
    notes: tuple[str, ...] = field(default=())

    def __repr__(self) -> str:
        last = self.checkpoints[-1] if self.checkpoints else None
        return (f"Tracking(id={self.id!r}, checkpoints={len(self.checkpoints)}, "
                f"alarm={self.alarm}, alarm_step={self.alarm_step}, last_step="
                f"{last.step if last is not None else None}, n_recorded={self.n_recorded})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))

    def _all_notes(self) -> list[str]:
        """:attr:`notes`, and why the revision is the ladder's alone when it is."""
        out = list(self.notes)
        if self.checkpoints and self.checkpoints[-1].revised is not None \
                and self.checkpoints[-1].revised.run_only is None:
            if self.checkpoints[-1].revised.anchored is not None:
                # the anchored forecast moves with the run's deviation: "does not move the
                # revision" was said of a revision that had moved (2.81 -> 1.15 on a log in
                # another unit)
                out.append("the revised forecast is the ladder's final forecast moved by the "
                           "run's deviation from the curve so far (the carry-over recorded "
                           "with the curve; ladder weight 1): the run's own completion is not "
                           "fitted yet (too few checkpoints from the curve's start, after "
                           "warm-up)")
            else:
                out.append("the revised forecast is the ladder's alone (ladder weight 1): the "
                           "run's own completion is not fitted yet (too few checkpoints from "
                           "the curve's start, after warm-up); a run outside the band raises "
                           "the alarm, it does not move the revision")
        return out

    def to_dict(self) -> dict:
        """``delphi track --json``: ``{"id", "checkpoints": [...], "alarm", ...}``."""
        return {"id": self.id, "checkpoints": [c.to_dict() for c in self.checkpoints],
                "alarm": self.alarm, "alarm_step": self.alarm_step, "patience": self.patience,
                "n_recorded": self.n_recorded, "notes": self._all_notes()}

    def report(self) -> str:
        lines = [c.line() for c in self.checkpoints]
        if self.checkpoints and self.checkpoints[-1].revised is not None:
            r = self.checkpoints[-1].revised
            lines.append(f"revised    final loss {r.loss:.4f} [{r.lower:.4f}, {r.upper:.4f}] "
                         f"(ladder weight {r.ladder_weight:.2f})")
        lines.append(f"recorded   {self.n_recorded} new outcome(s) of {self.id}")
        if self.alarm:
            lines.append(f"ALARM      {self.patience} consecutive checkpoints outside the band "
                         f"(raised at step {self.alarm_step})")
        for n in self._all_notes():
            lines.append(f"note       {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _pick(columns, names) -> str | None:
    for n in names:
        if n in columns:
            return n
    return None


def read_run_log(source, *, format: str | None = None, loss_column: str | None = None,
                 step_column: str | None = None, run: str | None = None,
                 batch_size: float | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The running run's checkpoints: a table with ``step`` and ``loss``, steps increasing.

    Parameters
    ----------
    source: a CSV / JSONL / Parquet file (a W&B history export included), a TensorBoard log
        directory, or a pandas DataFrame.
    format: ``tensorboard`` for a directory (the default for one); else from the suffix.
    loss_column: the column (or TensorBoard tag) holding the loss; default the first of
        :data:`_LOSS_NAMES` (``loss``, ``eval/loss``, ``val_loss``, ``eval_loss``) in the log,
        named in a note when it is not ``loss``.
    step_column: the column holding the step; default ``step`` (or ``_step``, W&B's); a
        ``tokens`` column is divided by ``batch_size`` when there is no step.
    run: the run to read when the log holds several (a ``run`` column).
    batch_size: tokens per step, to turn tokens into steps.

    Returns
    -------
    (table with int ``step`` and float ``loss``, notes): rows without a loss (sparse W&B
    histories log the eval every few steps) are left out, a repeated step keeps its last row.

    Raises
    ------
    LadderError: unreadable source; no loss or step column (the message lists the columns
        found); several runs and no ``run``; a loss that is not a positive number.
    """
    notes: list[str] = []
    if isinstance(source, pd.DataFrame):
        frame = source.copy()
    else:
        path = Path(source)
        if not path.exists():
            raise LadderError(f"run log {str(source)!r}: no such file or directory")
        if path.is_dir() or format == "tensorboard":
            long = read_scalars(path)
            runs = sorted(set(long["dir_name"]))
            if len(runs) > 1:
                if run is None:
                    raise LadderError(f"TensorBoard log {str(source)!r} holds {len(runs)} runs "
                                      f"({', '.join(runs[:8])}); give --run")
                long = long[long["dir_name"] == str(run)]
                run = None
            frame = long.pivot_table(index="step", columns="tag", values="value",
                                     aggfunc="last").reset_index()
            frame.columns = [str(c) for c in frame.columns]
        else:
            reader = {"csv": read_csv, "jsonl": read_jsonl}.get(format or "", read_table)
            frame = reader(path).frame
    cols = list(frame.columns)
    loss = loss_column if loss_column is not None else _pick(cols, _LOSS_NAMES)
    if loss is None or loss not in cols:
        shown = [str(c) for c in cols if str(c) != "row"]
        lossy = [c for c in shown if LOSS_LIKE.search(c)]
        hint = (f"; loss-like: {', '.join(lossy[:5])}" if lossy else "")
        ask = "" if loss_column is not None else "; give --loss-column"
        raise LadderError(f"run log: no loss column {loss_column or 'loss'!r}{ask} (columns: "
                          f"{', '.join(shown[:30])}{' ...' if len(shown) > 30 else ''}){hint}")
    if loss_column is None and loss != "loss":
        # chosen by name, not given: say which (a W&B history has train and eval losses)
        others = [str(c) for c in cols if str(c) not in (loss, "row")
                  and LOSS_LIKE.search(str(c))]
        notes.append(f"loss column {loss!r} (the first of {', '.join(_LOSS_NAMES)} in the log"
                     + (f"; other loss-like columns: {', '.join(others[:5])}" if others else "")
                     + "); --loss-column picks another")
    if "run" in cols and frame["run"].nunique() > 1:
        names = sorted(map(str, frame["run"].unique()))
        if run is None:
            raise LadderError(f"run log holds {len(names)} runs ({', '.join(names[:8])}); "
                              f"give --run")
        frame = frame[frame["run"].astype(str) == str(run)]
        if frame.empty:
            raise LadderError(f"run log: no run {run!r} (runs: {', '.join(names[:8])})")
    step = step_column if step_column is not None else _pick(cols, _STEP_NAMES)
    if step is not None and step not in cols:
        raise LadderError(f"run log: no step column {step!r} (columns: "
                          f"{', '.join(map(str, cols[:30]))})")
    if step is None:
        tok = _pick(cols, _TOKEN_NAMES)
        if tok is None or not batch_size:
            raise LadderError(f"run log: no step column (step, _step) and no tokens column "
                              f"with a known batch; give --step-column (columns: "
                              f"{', '.join(map(str, cols[:30]))})")
        steps = pd.to_numeric(frame[tok], errors="coerce") / float(batch_size)
        notes.append(f"steps from column {tok!r} / the registered batch of {batch_size:g} "
                     f"tokens (the log has no step column)")
    else:
        steps = pd.to_numeric(frame[step], errors="coerce")
    out = pd.DataFrame({"step": steps.to_numpy(float),
                        "loss": pd.to_numeric(frame[loss], errors="coerce").to_numpy(float)})
    raw = frame[loss].reset_index(drop=True)
    # rows named as the ladder readers name them: the source's records from 0, of the whole
    # file even when --run keeps some
    source_row = (frame["row"].to_numpy() if "row" in cols
                  else np.arange(len(frame)))
    # text that is not a number is told apart from an empty loss (a logger's "nan" or "")
    words = raw.notna().to_numpy() & out["loss"].isna().to_numpy() & ~raw.astype(str).str.strip(
        ).str.lower().isin(["", "nan", "none", "null"]).to_numpy()
    if words.any():
        i = int(np.flatnonzero(words)[0])
        notes.append(f"{plural(int(words.sum()), 'log row')} with a loss that is not a number "
                     f"left out (e.g. {raw.iloc[i]!r}{_at_step(out['step'].iloc[i])}, row "
                     f"{int(source_row[i])}; {ROWS_FROM_ZERO})")
    if step is not None:    # the same for a step column ("abc" is not an empty step)
        raw_step = frame[step].reset_index(drop=True)
        step_words = (raw_step.notna().to_numpy() & out["step"].isna().to_numpy()
                      & ~raw_step.astype(str).str.strip().str.lower().isin(
                          ["", "nan", "none", "null"]).to_numpy() & ~words)
        if step_words.any():
            i = int(np.flatnonzero(step_words)[0])
            notes.append(f"{plural(int(step_words.sum()), 'log row')} with a step that is not "
                         f"a number left out (e.g. {raw_step.iloc[i]!r} at row "
                         f"{int(source_row[i])}; {ROWS_FROM_ZERO})")
            words = words | step_words
    missing = out["loss"].isna() | out["step"].isna()
    if (missing & ~words).any():
        notes.append(f"{int((missing & ~words).sum())} log row(s) without a loss or step "
                     f"(empty or NaN) left out")
    if missing.any():
        out = out[~missing]
    if not out["step"].is_monotonic_increasing:
        notes.append("the log's steps are not in order: read in step order")
    name = "" if isinstance(source, pd.DataFrame) else f" {str(source)!r}"
    lo, hi = LOSS_RANGE
    # Every checkpoint is checked before any is recorded: a bad row further down must not
    # leave the registry with half the log in it.
    bad = ~np.isfinite(out["loss"]) | (out["loss"] < lo) | (out["loss"] > hi)
    if bad.any():
        first = out[bad].iloc[0]
        raise LadderError(f"run log{name}: loss {float(first['loss']):.6g} at step "
                          f"{float(first['step']):g} is not a plausible loss ({lo:g}..{hi:g}; "
                          f"{plural(int(bad.sum()), 'row')} like it); nothing was recorded")
    if step is not None:
        # a step column of fractions (epochs, or steps / 1000) was rounded silently
        frac = (out["step"] - out["step"].round()).abs() > 1e-6
        if frac.any():
            first = float(out.loc[frac, "step"].iloc[0])
            notes.append(f"{plural(int(frac.sum()), 'log row')} with a step that is not a whole "
                         f"number (e.g. {first:g}) rounded to whole steps: is column "
                         f"{step!r} counted in optimizer steps?")
    out["step"] = out["step"].round().astype(np.int64)
    early = int((out["step"] < 1).sum())
    if early:
        notes.append(f"{plural(early, 'log row')} at step 0 or below left out")
    out = out[out["step"] >= 1]
    repeated = int(out["step"].duplicated().sum())
    if repeated:
        notes.append(f"{plural(repeated, 'repeated step')} in the log: the last row of each is "
                     f"used")
    out = out.drop_duplicates("step", keep="last").sort_values("step")
    return out.reset_index(drop=True), notes


def _at_step(step: float) -> str:
    """`` at step 600`` for a note, or nothing when the row's step is unknown."""
    return f" at step {step:g}" if math.isfinite(step) else ""


class Reviser:
    """The revised final-loss forecast of a registered curve prediction, checkpoint by
    checkpoint (the rule of the module docstring); pure: writes nothing.

    Parameters
    ----------
    prediction: the registry :class:`~delphi.registry.Entry` of the prediction (a forecast
        curve with a band, a final interval, a target with steps and schedule).

    Raises
    ------
    RegistryError: no curve band or no final interval. TargetError: no steps or schedule.
    """

    def __init__(self, prediction):
        fc, tg = prediction.forecast, prediction.target
        if fc.curve is None or fc.band is None:
            raise RegistryError(f"prediction {prediction.id!r} has no forecast curve with a "
                                f"band: register it with `delphi register LADDER ... --curve` "
                                f"(the curve from the ladder, delphi predict --curve)")
        if fc.interval is None:
            raise RegistryError(f"prediction {prediction.id!r} has no final interval to weigh "
                                f"it by")
        steps = tg.steps
        if steps is None and tg.tokens and tg.batch_size:
            steps = tg.tokens / tg.batch_size
        spec = fc.band.schedule or tg.schedule
        if steps is None or spec is None:
            raise TargetError(f"prediction {prediction.id!r}: its target has no steps or "
                              f"schedule")
        self.total_steps = int(round(steps))
        self.schedule = Schedule.parse(spec, peak_lr=1.0, total_steps=self.total_steps)
        self.start_fraction = fc.curve[0][0]
        iv = fc.interval
        self.z = NormalDist().inv_cdf((1.0 + iv.level) / 2.0)
        self.mu_ladder = math.log(fc.loss)
        self.sd_ladder = math.log(iv.upper / iv.lower) / (2.0 * self.z)
        if fc.curve[-1][0] >= 1.0 and fc.band.level == iv.level:
            # the preregistered band at fraction 1 is the curve forecast's final uncertainty
            # (the interval, widened by the size band when the ladder's errors one size up
            # call for it; target_curve.size_band): never narrower than the interval
            self.sd_ladder = max(self.sd_ladder, math.log(fc.band.upper[-1] / fc.band.lower[-1])
                                 / (2.0 * self.z))
        err = fc.band.completion_error
        self._err_f = np.array([f for f, _ in err] + [1.0]) if err else None
        self._err_s = np.array([e for _, e in err] + [1e-4]) if err else None
        # the run's own completion fits the checkpoints the band covers, the ones recorded
        self._refit = WarmCompletion(
            self.schedule.lrs(), start_step=math.ceil(self.start_fraction * self.total_steps
                                                      - 1e-9))
        early = fc.band.early_completion_error
        # until that one has its 6 checkpoints: the early completion, from warm-up
        self._early = WarmCompletion(self.schedule.lrs()) if early else None
        self._early_f = np.array([f for f, _ in early]) if early else None
        self._early_s = np.array([e for _, e in early]) if early else None
        self._steps: list[int] = []
        self._losses: list[float] = []
        carry = fc.band.carry_over
        if carry:
            self._carry_f = np.array([c.fraction for c in carry])
            self._carry_rho = np.array([c.rho for c in carry])
            self._carry_ratio = np.array([min(1.0, c.sd / c.rms) for c in carry])
            self._carry_window = float(carry[0].window)
            self._curve_f = np.array([f for f, _ in fc.curve])
            self._curve_l = np.array([v for _, v in fc.curve])
            with_corr = [c for c in carry if c.corr is not None]
            self._corr_f = np.array([c.fraction for c in with_corr]) if with_corr else None
            self._corr_r = np.array([c.corr for c in with_corr]) if with_corr else None
            self._corr_weights = fc.band.correlation_use != "variance"
            with_w = [c for c in carry if getattr(c, "weight", None) is not None]
            self._fold_w_f = np.array([c.fraction for c in with_w]) if with_w else None
            self._fold_w = np.array([c.weight for c in with_w]) if with_w else None
            share = getattr(fc.band, "fold_weight_share", None)
            self._fold_share = FOLD_WEIGHT_SHARE if share is None else float(share)
        else:
            self._carry_f = None
            self._corr_f = None
            self._fold_w_f = None
        self._dev_f: list[float] = []       # fraction and ln(observed / curve), from the start
        self._dev_r: list[float] = []

    @property
    def params_(self) -> dict | None:
        """The last run-only completion's parameters ``{"L0", "A", "C", "alpha"}``, or None."""
        return self._refit.params_

    def add(self, step: int, loss: float, *, revise: bool = True) -> Revised | None:
        """Add the checkpoint (steps increasing) and return the revised forecast after it
        (None with ``revise=False``: a checkpoint before the curve starts, neither fitted nor
        scored)."""
        self._steps.append(int(step))
        self._losses.append(float(loss))
        if not revise:
            return None
        if step >= self.total_steps:
            # the run has ended: its final loss is observed, nothing is left to forecast
            return Revised(loss=float(loss), lower=float(loss), upper=float(loss),
                           run_only=float(loss), run_sd=0.0, ladder_weight=0.0)
        fraction = step / self.total_steps
        run = self._refit.predict(self._steps, self._losses)
        err_f, err_s = self._err_f, self._err_s
        if run is None and self._early is not None:
            run = self._early.predict(self._steps, self._losses)
            err_f, err_s = self._early_f, self._early_s
        mu_l, sd_l = self.mu_ladder, self.sd_ladder
        anchored, corr, fold_w = None, None, None
        if self._carry_f is not None:
            self._dev_f.append(fraction)
            # against the curve as the band scores it (linear in the fraction)
            self._dev_r.append(math.log(loss / float(np.interp(fraction, self._curve_f,
                                                               self._curve_l))))
            d = run_deviation(self._dev_f, self._dev_r, fraction, self._carry_window)
            if d is not None:
                mu_l = mu_l + float(np.interp(fraction, self._carry_f, self._carry_rho)) * d
                sd_l = sd_l * float(np.interp(fraction, self._carry_f, self._carry_ratio))
                anchored = math.exp(mu_l)
                if self._corr_f is not None:
                    corr = float(np.interp(fraction, self._corr_f, self._corr_r))
                if self._fold_w_f is not None:
                    fold_w = float(np.interp(fraction, self._fold_w_f, self._fold_w))
        if run is None or err_f is None:
            mu, sd, w_l, sd_r = mu_l, sd_l, 1.0, None
        else:
            sd_r = float(np.interp(fraction, err_f, err_s, left=float(err_s[0])))
            if fold_w is not None:
                # the weight measured on the size folds (their combination's least squares),
                # shrunk towards the precision weight (the fold weight rests on 5-20 runs and
                # jumps between 0 and 1 from one fraction to the next); the variance of that
                # weighted mean under the correlation when one is recorded, else as
                # independent estimates
                w_l = (self._fold_share * fold_w
                       + (1.0 - self._fold_share) * sd_r ** 2 / (sd_l ** 2 + sd_r ** 2))
                mu = w_l * mu_l + (1.0 - w_l) * math.log(run)
                sd = math.sqrt(w_l ** 2 * sd_l ** 2 + (1.0 - w_l) ** 2 * sd_r ** 2
                               + 2.0 * w_l * (1.0 - w_l) * (corr or 0.0) * sd_l * sd_r)
            elif corr is None:
                p_l, p_r = 1.0 / sd_l ** 2, 1.0 / sd_r ** 2
                mu = (p_l * mu_l + p_r * math.log(run)) / (p_l + p_r)
                sd = (p_l + p_r) ** -0.5
                w_l = p_l / (p_l + p_r)
            elif not self._corr_weights:
                # the inverse-variance weights, with their combination's variance under the
                # correlation (the same revised loss, a wider interval)
                w_l = sd_r ** 2 / (sd_l ** 2 + sd_r ** 2)
                mu = w_l * mu_l + (1.0 - w_l) * math.log(run)
                sd = math.sqrt(w_l ** 2 * sd_l ** 2 + (1.0 - w_l) ** 2 * sd_r ** 2
                               + 2.0 * w_l * (1.0 - w_l) * corr * sd_l * sd_r)
            else:
                # best linear unbiased weights of two correlated estimates (Aitken's
                # generalised least squares), clipped to [0, 1]: no extrapolation beyond either
                cov = corr * sd_l * sd_r
                w_l = min(1.0, max(0.0, (sd_r ** 2 - cov) / (sd_l ** 2 + sd_r ** 2 - 2 * cov)))
                mu = w_l * mu_l + (1.0 - w_l) * math.log(run)
                sd = math.sqrt(w_l ** 2 * sd_l ** 2 + (1.0 - w_l) ** 2 * sd_r ** 2
                               + 2.0 * w_l * (1.0 - w_l) * cov)
        return Revised(loss=math.exp(mu), lower=math.exp(mu - self.z * sd),
                       upper=math.exp(mu + self.z * sd), run_only=run, run_sd=sd_r,
                       ladder_weight=float(w_l), anchored=anchored)


def revised_history(prediction, outcomes) -> list[tuple[float, Revised]]:
    """The revised final forecast after each recorded outcome of ``prediction`` (what
    ``delphi track`` printed), recomputed from the registry alone.

    ``outcomes``: ``(fraction, loss)`` pairs (e.g. of the prediction's outcome entries or
    :class:`~delphi.registry.Score` objects), any order; a repeated fraction keeps its last.
    Returns ``[(fraction, Revised), ...]`` in fraction order for the outcomes at or after the
    curve's start. The registry page draws it.
    """
    rev = Reviser(prediction)
    points = sorted({round(float(f), 12): float(v) for f, v in outcomes}.items())
    out = []
    for f, loss in points:
        step = int(round(f * rev.total_steps))
        r = rev.add(step, loss, revise=f >= rev.start_fraction)
        if r is not None:
            out.append((f, r))
    return out


class RunTracker:
    """Stateful tracker of one registered prediction (what :func:`track` drives).

    Parameters
    ----------
    registry: a :class:`~delphi.registry.Registry` or its path.
    id: the prediction's id; it needs a forecast curve with a band (``register --curve``),
        and a target with ``steps`` (or ``tokens`` and ``batch_size``) and ``schedule``.
    patience: consecutive out-of-band checkpoints that raise the alarm (>= 1).
    sign_key: key to sign the appended outcomes with (path or loaded key).
    source: the ``source`` text of appended outcomes (default ``delphi track``).
    force: record the log's checkpoints even when the first ones are more than
        :data:`~delphi.registry.scoring.UNIT_RATIO` (1.3x) above or below the registered
        curve, which :meth:`update` otherwise refuses before recording any (see there).

    Attributes (fitted state)
    -------------------------
    checkpoints_: every checkpoint processed, in order. alarm_, alarm_step_: the alarm.
    completion_: the last run-only completion's parameters, or None.

    Raises
    ------
    RegistryError: no such prediction; one without a curve band or a final interval.
    TargetError: the target has no steps or schedule.
    """

    def __init__(self, registry, id: str, *, patience: int = DEFAULT_PATIENCE, sign_key=None,
                 source: str = "delphi track", force: bool = False):

        if not isinstance(patience, int) or isinstance(patience, bool) or patience < 1:
            raise TargetError(f"patience must be an integer >= 1, got {patience!r}")
        if not isinstance(force, bool):
            raise TargetError(f"force must be True or False, got {force!r}")
        self.force = force
        self.registry = registry if isinstance(registry, Registry) else Registry(registry)
        self.id = str(id)
        self.patience = patience
        self.key = (load_signing_key(sign_key) if isinstance(sign_key, (str, Path))
                    else sign_key)
        self.source = source
        pred = self.registry.get(self.id)
        if pred.kind != "prediction":
            raise RegistryError(f"{self.id!r} is an {pred.kind} entry, not a prediction")
        self.prediction = pred
        self._reviser = Reviser(pred)
        self.total_steps = self._reviser.total_steps
        self.batch_size = pred.target.batch_size
        self.start_fraction = self._reviser.start_fraction
        self.checkpoints_: list[TrackedCheckpoint] = []
        self.alarm_ = False
        self.alarm_step_: int | None = None
        self._streak = 0
        self._recorded: dict[float, tuple[str, float]] = {}
        self.refresh()

    def refresh(self) -> None:
        """Re-read the outcomes already recorded for the prediction (another tracker's)."""
        for e in self.registry.outcomes(self.id):
            self._recorded[round(e.outcome.fraction, 12)] = (e.id, e.outcome.actual)

    def update(self, log: pd.DataFrame, *, on_checkpoint: Callable | None = None,
               stop_on_alarm: bool = False) -> list[TrackedCheckpoint]:
        """Process the log's checkpoints after the last one processed (``step``, ``loss``
        columns, steps increasing, as :func:`read_run_log` gives); returns the new ones.

        Each new checkpoint's outcome is appended (and fsynced) before the next is looked at;
        ``on_checkpoint(checkpoint)`` is called after each. With ``stop_on_alarm`` the
        checkpoint that raises the alarm is the last one processed.

        Raises
        ------
        RegistryError: without ``force``, before anything is appended: (1) before the
            prediction's first outcome from the curve's start is recorded, the log's first
            checkpoints there (up to 3) are in the median more than
            :data:`~delphi.registry.scoring.UNIT_RATIO` (1.3x) above or below the registered
            curve: a log in another unit or metric (bits vs nats: 1.44x) would otherwise fill
            the append-only registry with outcomes that cannot be corrected; (2) the log's
            loss at the planned last step is more than 1.3x off the final prediction (the
            final outcome :meth:`~delphi.registry.Registry.score` would refuse, after the
            earlier checkpoints had been recorded). Both name the log's last step when it runs
            1.5x or more past the planned end (steps in another unit?). Nothing is recorded.
            An error while recording (a registry written by someone else meanwhile, a full
            disk) says how many outcomes this call recorded before it, and up to which step.
        """

        last = self._reviser._steps[-1] if self._reviser._steps else 0
        new = log[log["step"] > last]
        self._check_before_recording(new, log)
        out: list[TrackedCheckpoint] = []
        appended: list[int] = []
        try:
            for step, loss in zip(new["step"].to_numpy(), new["loss"].to_numpy(float)):
                step = int(step)
                if step > self.total_steps:
                    break               # logged past the planned end: the run is over
                fraction = step / self.total_steps
                key = round(fraction, 12)
                known = self._recorded.get(key)
                if known is not None:
                    loss = known[1]
                if fraction < self.start_fraction:
                    self._reviser.add(step, loss, revise=False)
                    continue            # warm-up: before the forecast curve starts
                if known is None:
                    score = self.registry.score(self.id, float(loss), fraction=fraction,
                                                source=f"{self.source} step {step}",
                                                sign_key=self.key, force=self.force)
                    self._recorded[key] = (score.outcome_id, float(loss))
                    appended.append(step)
                    recorded = True
                else:
                    score = score_outcome(self.prediction, outcome_id=known[0],
                                          actual=known[1], fraction=fraction, source=None)
                    recorded = False
                revised = self._reviser.add(step, loss)
                if score.inside is False:
                    self._streak += 1
                else:
                    self._streak = 0
                if self._streak >= self.patience and not self.alarm_:
                    self.alarm_, self.alarm_step_ = True, step
                iv = score.interval
                cp = TrackedCheckpoint(step=step, fraction=fraction, loss=float(loss),
                                       predicted=score.predicted,
                                       lower=None if iv is None else iv.lower,
                                       upper=None if iv is None else iv.upper, z=score.z,
                                       pit=score.pit, inside=score.inside, revised=revised,
                                       outcome_id=score.outcome_id, recorded=recorded,
                                       streak=self._streak, alarm=self.alarm_)
                self.checkpoints_.append(cp)
                out.append(cp)
                if on_checkpoint is not None:
                    on_checkpoint(cp)
                if stop_on_alarm and self.alarm_:
                    break
        except DelphiError as exc:
            if not appended:
                raise
            # the text report is printed at the end: without this, outcomes this call wrote
            # would be in the registry and nowhere in its output
            done = (f"{plural(len(appended), 'outcome')} of {self.id!r} recorded by this call "
                    f"before the error (steps {appended[0]}..{appended[-1]}) stay in the "
                    f"registry; tracking again continues after them")
            try:
                again = type(exc)(f"{exc} ({done})")
            except TypeError:       # an error class with another signature: as it was
                raise exc from None
            raise again from exc
        return out

    def _steps_hint(self, log: pd.DataFrame) -> str:
        """`` The log's steps run to 30000, 7.5x ...`` when the log runs 1.5x or more past the
        planned end (a step column in another unit, or another target), else nothing."""
        last = int(log["step"].max()) if len(log) else 0
        if last < 1.5 * self.total_steps:
            return ""
        return (f" The log's steps run to {last}, {last / self.total_steps:.3g}x the planned "
                f"{self.total_steps} of the registered target: are they counted in another "
                f"unit (micro-batches, samples, tokens), or is the log another run's?")

    def _check_before_recording(self, new: pd.DataFrame, log: pd.DataFrame) -> None:
        """Refuse, before any of it is recorded, a log whose first checkpoints from the curve's
        start are far off the curve, or whose final loss is far off the prediction
        (:meth:`update`'s Raises)."""
        target = self.prediction.target
        if self.force or target.unit == ACCURACY_UNIT:
            return
        total = self.total_steps
        fresh = [(int(s), float(v)) for s, v in zip(new["step"], new["loss"])
                 if self.start_fraction * total - 1e-9 <= s <= total
                 and round(s / total, 12) not in self._recorded]
        if not fresh:
            return
        fc = self.prediction.forecast
        unit = target.unit or "nats/token"
        # tracking has begun once an outcome from the curve's start is recorded: a run
        # leaving its curve after that is for the alarm
        if not any(f >= self.start_fraction - 1e-12 for f in self._recorded):
            first = fresh[:3]
            curve = [predicted_at(fc, s / total, id=self.id, unit=target.unit)
                     for s, _ in first]
            ratio = float(np.median([v / c for (_, v), c in zip(first, curve)]))
            if not 1 / UNIT_RATIO <= ratio <= UNIT_RATIO:
                steps = (f"step {first[0][0]}" if len(first) == 1 else
                         f"steps {first[0][0]}..{first[-1][0]}")
                raise RegistryError(
                    f"run log of {self.id!r} not recorded: its first "
                    f"{plural(len(first), 'checkpoint') if len(first) > 1 else 'checkpoint'} "
                    f"from the curve's start ({steps}: loss "
                    f"{', '.join(f'{v:.4g}' for _, v in first)}; registered curve "
                    f"{', '.join(f'{c:.4g}' for c in curve)}) "
                    f"{'are' if len(first) > 1 else 'is'} {ratio:.3g}x the curve"
                    f"{' in the median' if len(first) > 1 else ''}, "
                    f"{unit_reason(ratio, target.unit)} The prediction is in {unit}. Outcomes "
                    f"once recorded cannot be corrected: give the log in the prediction's unit "
                    f"({option('loss_column=NAME', '--loss-column')} picks the log's column), "
                    f"or, if these are the run's real losses, track with "
                    f"{option('force=True', '--force')}. Nothing was recorded."
                    f"{self._steps_hint(log)}")
        if fresh[-1][0] == total:
            off = unit_mismatch(fresh[-1][1], fc.loss, target.unit)
            if off is not None:
                earlier = len(fresh) - 1
                raise RegistryError(
                    f"final outcome of {self.id!r} not recorded: the log's loss "
                    f"{fresh[-1][1]:g} at step {total} (the planned last step, in {unit}) "
                    f"against a prediction of {fc.loss:.4g}: {off} A final outcome is "
                    f"recorded once and cannot be corrected: give the loss in the "
                    f"prediction's unit, or, if this is the real number, track with "
                    f"{option('force=True', '--force')}. Nothing was recorded"
                    + (f" (nor the log's {plural(earlier, 'earlier checkpoint')})"
                       if earlier else "") + f".{self._steps_hint(log)}")

    @property
    def completion_(self) -> dict | None:
        """The last run-only completion's parameters ``{"L0", "A", "C", "alpha"}``, or None."""
        return self._reviser.params_

    @property
    def finished(self) -> bool:
        """The run reached its planned last step."""
        steps = self._reviser._steps
        return bool(steps) and steps[-1] >= self.total_steps


_UNIT_RATIO = 1.3
"""A tracked run whose out-of-band losses are, in the median, more than this factor above or
below the registered curve gets a note asking whether its log is in another unit or metric
(bits vs nats: 1.44x; bits/byte vs nats/token: ~2-3x). A hint in the output only: the alarm
does not depend on it. (A log whose first checkpoints are that far off is refused before
anything is recorded, :meth:`RunTracker.update`; the note is for a log tracked with
``force``, or a run that leaves its curve by that much later.)"""


def track(registry, id: str, run_log, *, patience: int = DEFAULT_PATIENCE,
          follow: bool = False, interval: float = 60.0, timeout: float | None = None,
          stop_on_alarm: bool | None = None, sign_key=None, format: str | None = None,
          loss_column: str | None = None, step_column: str | None = None,
          run: str | None = None, on_checkpoint: Callable | None = None,
          force: bool = False, sleep: Callable[[float], None] = time.sleep) -> Tracking:
    """Track a registered prediction's run from its log: record, score and revise per
    checkpoint (see the module docstring for the rule), and raise the alarm.

    Parameters
    ----------
    registry: a :class:`~delphi.registry.Registry` or its path.
    id: the prediction's id (registered with its curve: ``delphi register ... --curve``).
    run_log: the run's log (see :func:`read_run_log`) or a DataFrame with step and loss.
    patience: consecutive checkpoints outside the band that raise the alarm (default 3).
    follow: re-read the log every ``interval`` seconds until the run reaches its planned
        last step (or ``timeout`` seconds have passed, or the alarm, with ``stop_on_alarm``,
        the default when following).
    sign_key: sign each appended outcome (a key file or a loaded key).
    format, loss_column, step_column, run: how to read the log (:func:`read_run_log`).
    on_checkpoint: called with each :class:`TrackedCheckpoint` once its outcome is recorded.
    force: record the log even when its first checkpoints from the curve's start are more
        than 1.3x above or below the registered curve (in the median of up to 3), and a final
        loss more than 1.3x off the prediction; both are otherwise refused before anything is
        recorded, as the likely sign of a log in another unit or metric (bits vs nats: 1.44x).
    sleep: the wait between reads (a test passes its own).

    Returns
    -------
    Tracking; ``alarm`` True when ``patience`` consecutive checkpoints left the band.

    Raises
    ------
    RegistryError, TargetError: see :class:`RunTracker`; a log whose first checkpoints are
    far off the curve, without ``force`` (:meth:`RunTracker.update`). LadderError: an
    unreadable log.
    """
    if follow and not (isinstance(interval, (int, float)) and interval > 0):
        raise TargetError(f"interval must be a positive number of seconds, got {interval!r}")
    tracker = RunTracker(registry, id, patience=patience, sign_key=sign_key, force=force)
    stop = follow if stop_on_alarm is None else stop_on_alarm
    notes: list[str] = []
    started = time.monotonic()
    first = True
    while True:
        log, read_notes = read_run_log(run_log, format=format, loss_column=loss_column,
                                       step_column=step_column, run=run,
                                       batch_size=tracker.batch_size)
        if not follow or first:
            # following: the first read's notes only (which loss column was picked, steps
            # from tokens...); later reads repeat them with growing counts
            notes.extend(read_notes)
        first = False
        tracker.update(log, on_checkpoint=on_checkpoint, stop_on_alarm=stop)
        if not follow or tracker.finished or (stop and tracker.alarm_):
            break
        if timeout is not None and time.monotonic() - started >= timeout:
            notes.append(f"stopped after --timeout {timeout:g} s, before the run's end")
            break
        sleep(float(interval))
        tracker.refresh()
    cps = tuple(tracker.checkpoints_)
    past = int((log["step"] > tracker.total_steps).sum())
    if past:
        notes.append(f"{plural(past, 'checkpoint')} past the planned end (step "
                     f"{tracker.total_steps}) not scored: the registered target ends there."
                     f"{tracker._steps_hint(log)}")
    logged = dict(zip(log["step"].tolist(), log["loss"].tolist()))
    changed = [c.step for c in cps if not c.recorded and c.step in logged
               and not math.isclose(c.loss, float(logged[c.step]), rel_tol=1e-9)]
    if changed:
        notes.append(f"the log's loss differs from the outcome recorded before at "
                     f"{plural(len(changed), 'step')} ({', '.join(map(str, changed[:5]))}): the "
                     f"recorded one is kept (outcomes are immutable); is this the same run?")
    far = [c.loss / c.predicted for c in cps if c.inside is False and c.predicted > 0]
    if far and not 1 / _UNIT_RATIO <= float(np.median(far)) <= _UNIT_RATIO:
        unit = getattr(tracker.prediction.target, "unit", None) or "the prediction's unit"
        notes.append(f"the log's losses outside the band are {float(np.median(far)):.3g}x the "
                     f"registered curve (median over {plural(len(far), 'checkpoint')}): is the "
                     f"log in another unit or metric? The prediction is in {unit} (bits and "
                     f"nats differ by 1/ln 2 = 1.44x, bits/byte and nats/token by ~2-3x); "
                     f"--loss-column picks the log's column. Outcomes once recorded stay in "
                     f"the registry")
    if not cps and not past:
        notes.append(f"no checkpoint after the start of the forecast curve (fraction "
                     f"{tracker.start_fraction:.3g}, step "
                     f"{math.ceil(tracker.start_fraction * tracker.total_steps)}) yet")
    return Tracking(id=tracker.id, checkpoints=cps, alarm=tracker.alarm_,
                    alarm_step=tracker.alarm_step_, patience=patience,
                    n_recorded=sum(c.recorded for c in cps), notes=tuple(notes))
