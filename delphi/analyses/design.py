"""Which run to train next, and what a proposed ladder is worth before it is trained.

:func:`suggest_runs` ranks candidate runs (N, D, and the peak LR of an LR-aware law) by how
much adding each one would narrow the target forecast's **calibrated (or reference) new-run
interval** per FLOP it costs; :func:`score_design` gives the expected interval width at the
target of a whole proposed ladder under a stated prior law.

**What the width is made of.** delphi's default interval (:func:`delphi.predict`,
:func:`delphi.calibration.calibrated_interval`) is, in log loss,

    sd^2 = (f sigma(r))^2 + param_sd^2 + run_sd^2,    width = L (e^{z sd} - e^{-z sd})

with sigma(r) = sigma_0 + k log10 r the extrapolation error at r = C_target / C_max_fitted
(the ladder's own leave-future-out calibration blended with the reference class, or the
reference class alone), f its small-sample factor, param_sd the spread of the fit's
parameters at the target (bootstrap or delta method), run_sd the run-to-run noise, L the
forecast and z the normal quantile of the level. A new run changes two of the terms: a run
above the largest fitted compute lowers r (so sigma(r)), and any run adds information about
the parameters (so param_sd). The calibration model itself and the run noise are held fixed
(a new run would add a fold to the calibration: that cannot be known before its loss is).

**How param_sd after a candidate is computed** (``method``):

* ``"fisher"`` (default, fast): the linearised (Gauss-Newton) information of the fit, M =
  J'J with J the Jacobian of the fitted runs' log predictions in the engine's coordinates
  (log c for coefficients, exponents as they are; each run counts once, its noise is the
  same), and g the gradient of the target's log prediction. The candidate adds its row j:
  var' = g (M + j j')^-1 g' (Sherman & Morrison 1950), and param_sd' = param_sd
  sqrt(var' / var). This is the D-/c-optimal design criterion of optimal experimental design
  (Atkinson & Donev 1992, ch. 10; Fedorov 1972), here for one linear combination (the
  target's log loss), i.e. c-optimality.
* ``"refit"`` (slow, the check of the fast one): refits over bootstrap draws. Draw b counts
  every fitted run w_b ~ Poisson(1) times (the Poisson bootstrap, Hanley & MacGibbon 2006)
  and adds the candidate, counted v_b ~ Poisson(1) times, at its predicted loss times
  exp(run_sd e_b) (e_b a stratified normal quantile); each draw is refined from the fit by
  :func:`delphi.fitting.refit.refine_batch`. The same draws without the candidate give the
  spread before (common random numbers), and param_sd' = param_sd x spread after / spread
  before, the spread being the percentile half-width of the log predictions at ``level``.

``tests/test_design.py`` checks on a simulated ladder with known truth that the two rank
candidates alike and that the top suggestion is the run a brute-force refit study says
shrinks the interval most.

**What is ranked** (``criterion``):

* ``"width"`` (default): the reduction of the calibrated (or reference) new-run interval's
  width, all three terms above, per FLOP of the run.
* ``"spread"``: the reduction of the spread of the bootstrap forecasts at the target alone,
  per FLOP: the width of the interval +-z param_sd around the forecast, L (e^{z param_sd} -
  e^{-z param_sd}) [loss unit], before and after the candidate (param_sd after it by
  ``method``, as above). The extrapolation term f sigma(r) and the run noise are left out.
  It can rank differently from ``"width"`` because, in the width, a run that lowers r gains
  through f sigma(r), which is most of the width at large r, while a fall of param_sd counts
  only as much as param_sd's share of the quadrature sum; ``"spread"`` instead ranks runs by
  the information they add about the target's log loss, whether or not they are above the
  largest fitted compute. Among runs that leave r unchanged the two rank alike (the width is
  increasing in param_sd at fixed r). Why it might help: the calibration sigma(r) is refitted
  once the picked runs' losses are known (``suggest`` holds it fixed), so the gain the width
  criterion expects from a lower r is partly taken back on real ladders
  (``benchmarks/RESULTS.md``, "Issue 25"), whereas the fit's own spread is what a new run
  is known to shrink. It did not earn the default: chosen leave one ladder out on five
  selection ladders (``benchmarks/bench_design.py --variants width spread --selection
  --choose``), ``"width"`` won on 8 of 9 ladders, and on the four study ladders ``"spread"``
  stopped at lower compute and gave wider intervals (``benchmarks/RESULTS.md``, "Issue 25:
  pick criteria, chosen out of sample").

The widths before and after reported for every candidate are the calibrated interval's under
either criterion; with ``"spread"`` each suggestion also carries the spread after it.

**Greedy batches.** ``n=K`` picks K runs one at a time, each the best per FLOP given the
ones before (added to M, or to the refits at their predicted loss), while the batch's total
cost stays within ``budget``; greedy selection is the usual approximation to the batch
design problem (Fedorov 1972's sequential construction).

**Which parameter.** Each suggestion names what it mostly reduces: ``"extrapolation"``
when lowering r removes more variance than the parameter term does, else the free parameter
whose standard error falls most, relatively (Fisher).

**Scoring a design** (:func:`score_design`): the prior law's parameters (a fit of another
ladder, or published values) give each proposed run's expected loss; param_sd is the
linearised spread of a fit of that design at the target (``"fisher"``), or the spread of
refits of ``n_boot`` simulated ladders, each run's loss the prior's times exp(noise)
(``"refit"``, a parametric bootstrap, Efron & Tibshirani 1993 ch. 6). With no losses there
is no calibration of the design's own: its sigma(r) is the reference class's
(:mod:`delphi.reference`) for the law at the design's number of compute budgets.
"""

from __future__ import annotations

import difflib
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.records import jsonable, positive_number
from ..core.text import level_percent, plural
from ..errors import (DelphiError, FitError, LadderError, LawError, MissingArgumentError,
                     TargetError, option)
from ..fitting import Fit
from ..fitting.objective import Problem
from ..fitting.refit import refine_batch
from ..inputs.ladder import MAGNITUDES, FLOPS_PER_PARAM_TOKEN, Ladder, budget_labels
from ..inputs.runstate import ROWS_FROM_ZERO
from ..laws import Law, get_law
from ..inputs.readers import as_ladder
from ..inputs.readers._common import read_file
from ..inputs.readers.tabular import format_of
from ..forecasting.uncertainty import DEFAULT_LEVEL, run_noise
from ..forecasting.target import as_target
from ..forecasting.reference import load_reference, ReferenceClass
from ..forecasting.forecast import Target, predict, target_inputs
from ..fitting.engine import internal_bounds, prepare

__all__ = ["CandidateRun", "RunSuggestion", "Suggestions", "DesignScore", "suggest_runs",
           "score_design", "read_candidates", "candidate_grid", "METHODS", "CRITERIA",
           "DEFAULT_NOISE", "MIN_REFIT"]

#: How param_sd after a candidate is computed (see the module docstring).
METHODS = ("fisher", "refit")
#: What :func:`suggest_runs` ranks candidates by (see the module docstring): the calibrated
#: interval's width (default) or the bootstrap forecasts' spread at the target.
CRITERIA = ("width", "spread")
#: Run-to-run noise [sd of log loss] :func:`score_design` assumes for a prior given as bare
#: parameters when no ``noise`` is given: about the residual scale of the public ladders'
#: Chinchilla fits (Epoch's 0.5%, Porian's 0.3-1%).
DEFAULT_NOISE = 0.005
# Noise strata of a refit candidate (its loss = prediction x exp(run_sd x quantile)).
_STRATA = 8
#: Fewest refit draws per candidate (``n_refit``, CLI ``--n-refit``): one per noise stratum of
#: the candidate's added loss (draw b takes stratum b mod 8), so every stratum is drawn.
MIN_REFIT = _STRATA
# Compute levels of the default grid: a factor 2 apart, at most this many.
_MAX_LEVELS = 14
# Tokens per parameter of the default grid at each level.
_RATIOS = 5
# A candidate's given FLOPs may differ from k 6 N D by this share.
_FLOPS_RTOL = 0.25


# ------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class CandidateRun:
    """A run that could be trained next (no loss yet)."""

    params: float | None
    """N, parameters (None for a candidate given by its compute alone, for a law of C)."""
    tokens: float | None
    """D, training tokens (None with ``params``)."""
    flops: float
    """Its cost C [FLOPs], in the ladder's FLOP convention (k x 6 N D unless given)."""
    peak_lr: float | None = None
    """Peak learning rate (read by LR-aware laws; default the fitted optimum)."""
    name: str = ""
    """A label: the candidate file's ``run``/``name`` column, else ``N..-D..``."""
    row: int | None = None
    """Its row in the candidates file, counted from 0 as the ladder readers count (row 0 is
    the first data row: line 2 of a CSV); None for the grid."""

    def to_dict(self) -> dict:
        return jsonable({"name": self.name, "params": self.params, "tokens": self.tokens,
                         "flops": self.flops, "peak_lr": self.peak_lr})


@dataclass(frozen=True)
class RunSuggestion:
    """One candidate, with the expected interval width at the target after adding it."""

    run: CandidateRun
    """The candidate."""
    width_before: float
    """Expected new-run interval width at the target before it [loss unit]: the current
    forecast's, or, in a greedy batch, after the picks before it."""
    width_after: float
    """Expected width with it added [loss unit]."""
    reduces: str
    """What it mostly reduces: ``"extrapolation"`` (a lower r) or a parameter's name."""
    ratio_after: float
    """The target's extrapolation ratio r with it added."""
    param_sd_after: float
    """Parameter spread at the target with it added [sd of log loss]."""
    spread_before: float | None = None
    """``criterion="spread"``: the bootstrap forecasts' spread at the target before it, L
    (e^{z param_sd} - e^{-z param_sd}) [loss unit] (in a batch, after the picks before it);
    None under ``"width"``."""
    spread_after: float | None = None
    """``criterion="spread"``: the same with it added; None under ``"width"``."""

    @property
    def spread_reduction_per_flop(self) -> float | None:
        """``criterion="spread"``: (spread_before - spread_after) / FLOPs, what is ranked
        [loss unit / FLOP]; None under ``"width"``."""
        if self.spread_before is None or self.spread_after is None:
            return None
        return (self.spread_before - self.spread_after) / self.run.flops

    @property
    def reduction(self) -> float:
        """width_before - width_after [loss unit]."""
        return self.width_before - self.width_after

    @property
    def reduction_per_flop(self) -> float:
        """Width reduction per FLOP of the run [loss unit / FLOP]."""
        return self.reduction / self.run.flops

    def to_dict(self) -> dict:
        out = {**self.run.to_dict(), "width_before": self.width_before,
               "width_after": self.width_after, "reduction": self.reduction,
               "reduction_per_flop": self.reduction_per_flop,
               "reduction_per_1e18_flops": self.reduction_per_flop * 1e18,
               "reduces": self.reduces, "ratio_after": self.ratio_after,
               "param_sd_after": self.param_sd_after}
        if self.spread_after is not None:
            out.update(spread_before=self.spread_before, spread_after=self.spread_after,
                       spread_reduction_per_flop=self.spread_reduction_per_flop)
        return jsonable(out)


@dataclass(frozen=True)
class Suggestions:
    """The ranked candidates of :func:`suggest_runs` (best first)."""

    target: dict
    """The target (:meth:`delphi.Target.to_dict`)."""
    loss: float
    """The current forecast at the target [loss unit]."""
    unit: str
    width: float
    """The current new-run interval width at the target [loss unit]."""
    level: float
    interval_method: str
    """The interval the widths are of: ``"calibrated"`` or ``"reference"``."""
    method: str
    """How param_sd after a candidate was computed (:data:`METHODS`)."""
    law: str
    budget: float
    """FLOPs available: each candidate's cost, and a batch's total, stay within it."""
    ratio: float
    """The target's extrapolation ratio r now."""
    sigma_used: float
    """f sigma(r) now [sd of log loss]."""
    param_sd: float
    """The parameter spread at the target now [sd of log loss]."""
    run_sd: float
    """Run-to-run noise [sd of log loss] (held fixed)."""
    candidates: tuple[RunSuggestion, ...]
    """Best first: with ``n=1`` every candidate within the budget, ranked by reduction per
    FLOP; with ``n=K`` the greedy batch of K (each conditioned on the ones before)."""
    n_candidates: int
    """Candidates considered."""
    notes: tuple[str, ...] = ()
    criterion: str = "width"
    """What the candidates are ranked by (:data:`CRITERIA`)."""
    spread: float | None = None
    """``criterion="spread"``: the bootstrap forecasts' spread at the target now [loss unit];
    None under ``"width"``."""

    def __repr__(self) -> str:
        best = self.candidates[0].run.name if self.candidates else None
        crit = "" if self.criterion == "width" else f", criterion={self.criterion!r}"
        return (f"Suggestions(law={self.law!r}, loss={self.loss:.4g}, width={self.width:.4g}, "
                f"interval_method={self.interval_method!r}{crit}, "
                f"candidates={len(self.candidates)}"
                f" of {self.n_candidates}, best={best!r})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))
    ladder: str = ""

    @property
    def best(self) -> RunSuggestion:
        """The first suggestion."""
        return self.candidates[0]

    def to_frame(self) -> pd.DataFrame:
        """One row per suggestion: name, params, tokens, flops, peak_lr, width_before,
        width_after, reduction, reduction_per_flop, reduction_per_1e18_flops, reduces,
        ratio_after, param_sd_after (and, under ``criterion="spread"``, spread_before,
        spread_after, spread_reduction_per_flop)."""
        return pd.DataFrame([s.to_dict() for s in self.candidates])

    def to_dict(self) -> dict:
        """The JSON of ``delphi suggest --json``: ``target``, ``width`` (now) and
        ``candidates`` (best first), with the settings (``criterion`` among them) and the
        width's terms; ``"spread"`` adds ``spread`` (now) and each candidate's
        ``spread_after``."""
        extra = {} if self.spread is None else {"spread": self.spread}
        return jsonable({
            "target": self.target, "width": self.width, **extra, "loss": self.loss,
            "unit": self.unit, "level": self.level, "interval_method": self.interval_method,
            "method": self.method, "criterion": self.criterion, "law": self.law,
            "budget": self.budget,
            "ratio": self.ratio, "sigma_used": self.sigma_used, "param_sd": self.param_sd,
            "run_sd": self.run_sd, "n_candidates": self.n_candidates, "ladder": self.ladder,
            "candidates": [s.to_dict() for s in self.candidates], "notes": list(self.notes)})

    def report(self, limit: int = 15) -> str:
        """The table: candidate, cost, width before/after, reduction per 1e18 FLOPs and what
        it mostly reduces."""
        t = self.target
        what = ", ".join(f"{sym} = {t[k]:.3g}" for k, sym in
                         (("flops", "C"), ("params", "N"), ("tokens", "D"))
                         if t.get(k) is not None)
        lines = [f"target     {what}: forecast {self.loss:.4g} {self.unit}, "
                 f"{level_percent(self.level)} {self.interval_method} new-run interval width "
                 f"{self.width:.4g}",
                 f"terms      r = {self.ratio:.3g}, f sigma(r) = {self.sigma_used:.2%}, "
                 f"param sd {self.param_sd:.2%}, run noise {self.run_sd:.2%} (log loss)",
                 f"method     {self.method}; law {self.law}; budget {self.budget:.3g} FLOPs; "
                 f"{plural(self.n_candidates, 'candidate')}"]
        if self.criterion != "width":
            lines.append(f"criterion  {self.criterion}: ranked by the bootstrap spread's "
                         f"reduction per FLOP (spread now {self.spread:.4g}); before/after "
                         f"are the {self.interval_method} interval's widths")
        spread = self.criterion == "spread"
        # under "spread" the ranked figure (the spread's reduction per 1e18) is shown beside
        # the width's, so the order of the rows can be read off the table
        # a law without a learning-rate term has no peak LR to show (unless the file gave one)
        show_lr = any(s.run.peak_lr is not None for s in self.candidates[:limit])
        # enough decimals that the largest reduction shown is visible (0.3365 -> 0.3364 read
        # as no change at all for most of a table ranked by it)
        shown = [s.width_before - s.width_after for s in self.candidates[:limit]
                 if s.width_before > s.width_after]
        dec = 4 if not shown else min(8, max(4, 1 - math.floor(math.log10(max(shown)))))
        wid = max(8, dec + 4)
        lines.append(f"{'rank':>4} {'candidate':<22} {'params':>9} {'tokens':>9} "
                     f"{'flops':>9} " + (f"{'peak_lr':>8} " if show_lr else "")
                     + f"{'before':>{wid}} {'after':>{wid}} "
                     f"{'per 1e18':>9}" + (f" {'spread/1e18':>11}" if spread else "")
                     + "  reduces")
        for i, s in enumerate(self.candidates[:limit], 1):
            r = s.run
            lr = (f"{r.peak_lr:.3g}" if r.peak_lr is not None else "-") if show_lr else ""
            sp = (f" {s.spread_reduction_per_flop * 1e18:>11.3g}"
                  if s.spread_reduction_per_flop is not None else "")
            lines.append(f"{i:>4} {r.name[:22]:<22} {_g(r.params):>9} {_g(r.tokens):>9} "
                         f"{r.flops:>9.3g} " + (f"{lr:>8} " if show_lr else "")
                         + f"{s.width_before:>{wid}.{dec}f} "
                         f"{s.width_after:>{wid}.{dec}f} {s.reduction_per_flop * 1e18:>9.3g}{sp}  "
                         f"{s.reduces}")
        if len(self.candidates) > limit:
            lines.append(f"     ... {len(self.candidates) - limit} more (--json for all)")
        if self.candidates:
            # the columns were unexplained: "per 1e18" had no unit, "reduces" showed E, B, A
            lines.append(f"columns    before, after: the {level_percent(self.level)}"
                         f" new-run interval's "
                         f"width [{self.unit}] without and with the candidate; per 1e18: the "
                         f"width's reduction per 1e18 FLOPs of its cost; reduces: what it "
                         f"mostly narrows (extrapolation: a lower r; else the free parameter "
                         f"whose standard error falls most)")
        lines += [f"note       {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


@dataclass(frozen=True)
class DesignScore:
    """The expected interval at the target of a proposed ladder (:func:`score_design`)."""

    width: float
    """Expected new-run interval width at the target [loss unit]."""
    lower: float
    upper: float
    loss: float
    """The prior law's loss at the target [loss unit]."""
    level: float
    param_sd: float
    """Spread of the design's fit at the target [sd of log loss]."""
    run_sd: float
    """Run-to-run noise assumed [sd of log loss]."""
    sigma_ref: float
    """The reference class's sigma(r) at the design's r [sd of log loss]."""
    ratio: float
    """r = C_target / the design's largest compute."""
    n_runs: int
    n_budgets: int
    total_flops: float
    """Sum of the runs' costs [FLOPs]."""
    law: str
    prior: str
    """The stated prior law."""
    method: str
    seed: int
    notes: tuple[str, ...] = ()
    target: dict = field(default_factory=dict)
    """The target (:meth:`delphi.Target.to_dict`)."""

    def to_dict(self) -> dict:
        """``delphi plan --score --json``: every field above."""
        return jsonable({k: getattr(self, k) for k in self.__dataclass_fields__})

    def report(self) -> str:
        return "\n".join(
            [f"design     {self.n_runs} runs in {self.n_budgets} compute budgets, "
             f"{self.total_flops:.4g} FLOPs; target r = {self.ratio:.3g}",
             f"prior      {self.prior}",
             f"expected   {level_percent(self.level)}"
             f" new-run interval [{self.lower:.4g}, {self.upper:.4g}]"
             f" around {self.loss:.4g}: width {self.width:.4g}",
             f"terms      reference sigma(r) {self.sigma_ref:.2%}, param sd "
             f"{self.param_sd:.2%} ({self.method}), run noise {self.run_sd:.2%} (log loss)"]
            + [f"note       {n}" for n in self.notes])

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line with the key numbers: the expected interval and width at the target, the
        design's size and cost, r and the prior (:meth:`report` is the full text)."""
        return (f"DesignScore(width={self.width:.4g}, interval=[{self.lower:.4g}, "
                f"{self.upper:.4g}] ({level_percent(self.level)}), loss={self.loss:.4g}, "
                f"n_runs={self.n_runs}, n_budgets={self.n_budgets}, "
                f"total_flops={self.total_flops:.3g}, ratio={self.ratio:.3g}, law={self.law!r}, "
                f"method={self.method!r}, notes={len(self.notes)})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))


# ------------------------------------------------------------------------------ candidates
def _k_convention(ladder: Ladder | None) -> float:
    conv = getattr(ladder, "flops_convention", None)
    return float(conv.median) if conv is not None and conv.source == "given" else 1.0


def read_candidates(source, *, k: float = 1.0, what: str = "candidates") -> list[CandidateRun]:
    """Candidate runs from a file path (CSV; ``.jsonl``/``.ndjson`` or ``.parquet``/``.pq``
    by suffix, read as the ladder readers read them), a DataFrame or a list of dicts: columns
    ``params`` and ``tokens`` (counts), optionally ``flops`` [FLOPs] (else k x 6 N D, k the
    ladder's FLOP convention), ``peak_lr`` and ``run`` or ``name``. Losses are not read.

    Raises
    ------
    LadderError: the file is missing or unreadable, a required column is missing, or a
        value is not a positive finite number, is outside the ladder readers' plausible
        magnitudes (params and tokens 1..1e30, flops and k 6 N D 1..1e40, peak_lr
        1e-30..1e6: :data:`delphi.inputs.ladder.MAGNITUDES`), or a given ``flops`` is more
        than 25% away from k 6 N D (naming each bad row, counted from 0 as the ladder
        readers do: row 0 is line 2 of the CSV, and its column; up to 10 rows in one error).
    """
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if path.is_dir():
            raise LadderError(f"{what} file {path} is a directory: give a CSV file")
        if not path.is_file():
            raise LadderError(f"{what} file not found: {path}")
        fmt, _ = format_of(path)
        try:
            if fmt in ("jsonl", "parquet"):
                # as the ladder readers read them (a .jsonl read as CSV would be one column
                # named after its first line); a CSV keeps pandas' reader and its messages
                frame = read_file(path, fmt, ("run", "name"))
                if (len(frame) and "row" in frame.columns
                        and np.array_equal(frame["row"].to_numpy(), np.arange(len(frame)))):
                    frame = frame.drop(columns="row")       # the reader's own numbering
                if not len(frame.columns) or list(frame.columns) == ["row"]:
                    raise pd.errors.EmptyDataError
            else:
                frame = pd.read_csv(path)
        except pd.errors.EmptyDataError:
            raise LadderError(f"{what} file {path} is empty: give a header row (params, "
                              f"tokens, optionally flops, peak_lr, run) and a row per "
                              f"candidate") from None
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            raise LadderError(f"cannot read {what} from {path}: {exc}") from None
        label = str(path)
    elif isinstance(source, pd.DataFrame):
        frame, label = source, what
    else:
        frame, label = pd.DataFrame(list(source)), what
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty and not len(frame.columns):
        # an empty list or DataFrame: not "missing column(s) params, tokens ... columns are none"
        raise LadderError(f"{label}: no candidate rows (give at least one run with params and "
                          f"tokens)")
    missing = [c for c in ("params", "tokens") if c not in frame.columns]
    # compute alone (no N, no D) is a candidate for a law of C (power in C)
    by_compute = len(missing) == 2 and "flops" in frame.columns
    if missing and not by_compute:
        # one column whose name holds a separator: a spreadsheet's export in a locale with
        # decimal commas (the ladder readers say the same)
        seps = [name for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'"))
                if len(frame.columns) == 1 and sep in frame.columns[0]]
        hint = (f"; its fields look separated by {seps[0]}: save it comma-separated"
                if seps else "")
        raise LadderError(f"{label}: missing column(s) {', '.join(missing)} (a candidate is "
                          f"a run: params, tokens, optionally flops, peak_lr, run; or flops "
                          f"alone for a law of compute); columns are "
                          f"{', '.join(frame.columns) or 'none'}{hint}")
    if frame.empty:
        raise LadderError(f"{label}: no candidate rows")
    if "loss" in frame.columns:
        if what == "design":        # plan --score / score_design: not suggest's candidates
            raise LadderError(f"{label}: a 'loss' column: a design's runs are not trained yet "
                              f"(their losses are what the prior law gives); drop the column, "
                              f"or fit the trained runs as a ladder (delphi predict)")
        raise LadderError(f"{label}: a 'loss' column: candidates are runs not trained yet (their "
                          f"losses are what suggest predicts); drop the column, or add trained "
                          f"runs to the ladder instead")
    # Other columns are metadata (a `delphi plan` CSV carries steps, width, layers...); one
    # a letter or two off a column delphi reads is a typo that would be ignored silently.
    known = ("params", "tokens", "flops", "peak_lr", "run", "name")
    typos = {c: m[0] for c in frame.columns if c not in known
             and (m := difflib.get_close_matches(c, known, n=1, cutoff=0.8))}
    if typos:
        hints = ", ".join(f"{c!r} (did you mean {m!r}?)" for c, m in typos.items())
        raise LadderError(f"{label}: column(s) {hints}: a candidate has params, tokens and "
                          f"optionally flops, peak_lr, run; other columns are kept as notes "
                          f"of the run, not read")
    names = (frame["run"] if "run" in frame.columns else
             frame["name"] if "name" in frame.columns else None)
    out, problems = [], []
    for i, row in enumerate(frame.to_dict("records")):
        try:
            out.append(_candidate_row(i, row, frame.columns, names, by_compute, k))
        except _BadCell as exc:
            problems.append(str(exc))
    if problems:
        # every bad row at once, as the ladder readers do: a user fixes the file in one pass
        shown = problems[:_MAX_SHOWN]
        more = (f"\n  ... and {len(problems) - _MAX_SHOWN} more bad row(s)"
                if len(problems) > _MAX_SHOWN else "")
        if len(problems) == 1:
            raise LadderError(f"{label}: {problems[0]} [{ROWS_FROM_ZERO}]")
        raise LadderError(f"{label}: {len(problems)} bad candidate rows ({ROWS_FROM_ZERO}):"
                          f"\n  " + "\n  ".join(shown) + more)
    rows_of: dict[str, list[int]] = {}
    for c in out:
        rows_of.setdefault(c.name, []).append(c.row)
    twice = {n: r for n, r in rows_of.items() if len(r) > 1}
    if twice:       # a ranking names candidates: two of one name cannot be told apart
        n, r = next(iter(twice.items()))
        more = f" (and {len(twice) - 1} more names)" if len(twice) > 1 else ""
        raise LadderError(f"{label}: candidate name {n!r} is on rows "
                          f"{', '.join(map(str, r[:-1]))} and {r[-1]}{more} "
                          f"({ROWS_FROM_ZERO}); give each candidate its own name (column "
                          f"run), or drop the repeated row")
    return out


_MAX_SHOWN = 10
"""Bad candidate rows named in one error; the rest are counted."""


class _BadCell(ValueError):
    """A candidate row's problem, before the file's label is put in front."""


def _candidate_row(i: int, row: dict, columns, names, by_compute: bool,
                   k: float) -> CandidateRun:
    """One candidates-file row (numbered i from 0: line i + 2 of a CSV) as a CandidateRun.

    Raises _BadCell naming the row and column (an empty cell, a value that is not a
    positive finite number, or a ``flops`` more than 25% from k 6 N D).
    """
    vals = {}
    for col in ("params", "tokens", "flops", "peak_lr"):
        if col not in columns:
            continue
        v = row[col]
        if col in ("flops", "peak_lr") and not (by_compute and col == "flops") and (
                v is None or (isinstance(v, float) and math.isnan(v))):
            continue        # optional, left empty on this row
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if v is None or (isinstance(v, float) and math.isnan(v)):
            # an empty cell (or NA, null...): not "nan is not a number"
            raise _BadCell(f"row {i}, column {col!r} is empty; a candidate needs a positive "
                           f"finite number there")
        if isinstance(v, bool) or not (math.isfinite(x) and x > 0):
            raise _BadCell(f"row {i}, column {col!r}: {v!r} is not a positive finite number")
        lo, hi, noun = MAGNITUDES[col]
        if not lo <= x <= hi:
            # the ladder readers' plausible magnitudes: beyond them 6 N D overflows, and a
            # count below 1 is in other units (billions); a later message would blame the target
            raise _BadCell(f"row {i}, column {col!r}: {x:.4g} is outside {lo:g}..{hi:g}: not "
                           f"a plausible {noun} (in other units?)")
        vals[col] = x
    given = (str(names.iloc[i]) if names is not None and pd.notna(names.iloc[i])
             else None)
    if by_compute:
        return CandidateRun(params=None, tokens=None, flops=vals["flops"],
                            peak_lr=vals.get("peak_lr"),
                            name=given if given is not None else f"C{vals['flops']:.3g}", row=i)
    six_nd = FLOPS_PER_PARAM_TOKEN * vals["params"] * vals["tokens"]
    lo, hi, noun = MAGNITUDES["flops"]
    if not lo <= k * six_nd <= hi:
        raise _BadCell(f"row {i}: k x 6 x params x tokens = {k * six_nd:.4g} FLOPs is outside "
                       f"{lo:g}..{hi:g}: not a plausible {noun} (params or tokens in other "
                       f"units?)")
    flops = vals.get("flops", k * six_nd)
    if "flops" in vals and abs(flops / (k * six_nd) - 1) > _FLOPS_RTOL:
        raise _BadCell(f"row {i}, column 'flops': {flops:.4g} disagrees with k x 6 x params x "
                       f"tokens = {k * six_nd:.4g} (k = {k:.3g}, the ladder's FLOP convention) "
                       f"by more than {_FLOPS_RTOL:.0%}")
    name = given if given is not None else f"N{vals['params']:.3g}-D{vals['tokens']:.3g}"
    return CandidateRun(params=vals["params"], tokens=vals["tokens"], flops=flops,
                        peak_lr=vals.get("peak_lr"), name=name, row=i)


def candidate_grid(fit: Fit, budget: float, *, k: float = 1.0,
                   floor_flops: float | None = None) -> list[CandidateRun]:
    """The default candidates: compute levels a factor 2 apart from the smallest fitted
    run's compute (or ``floor_flops``) up to ``budget`` [FLOPs] (at most 14, the largest
    kept), and at each level 5 model sizes whose tokens per parameter D/N span the fitted
    runs' range (3x either side of their median when it spans less than 2x), N =
    sqrt(C / (6 k r)), D = r N; a candidate more than 2x smaller in N than the smallest
    fitted run is left out. A law of compute alone gets one size per level, at D/N = 20
    (Hoffmann et al. 2022's compute-optimal ratio: the law reads C only, so N and D are a
    suggestion of how to spend it).

    Raises
    ------
    LadderError: the fit has no N and D (nor C) to build a grid from, or the budget is below
        the smallest level.
    """
    x = fit.x
    if {"params", "tokens"} <= set(x):
        n, d = np.asarray(x["params"], float), np.asarray(x["tokens"], float)
        c = k * FLOPS_PER_PARAM_TOKEN * n * d
        ratio = d / n
    elif "flops" in x:
        c = np.asarray(x["flops"], float)
        ratio = np.array([20.0])      # Hoffmann et al. 2022's compute-optimal D/N
    else:
        raise LadderError("no default candidates: the law reads neither N and D nor C; give "
                          "a candidates file (columns params, tokens)")
    lo_c = float(floor_flops or c.min())
    if budget < lo_c:
        raise LadderError(f"budget {budget:.3g} FLOPs is below the smallest candidate compute "
                          f"{lo_c:.3g}: no candidate fits in it")
    levels = lo_c * 2.0 ** np.arange(int(math.floor(math.log2(budget / lo_c))) + 1)
    levels = levels[-_MAX_LEVELS:]
    lo_r, hi_r = float(ratio.min()), float(ratio.max())
    if hi_r < 2 * lo_r:
        mid = math.sqrt(lo_r * hi_r)
        lo_r, hi_r = mid / 3, mid * 3
    only_c = not {"params", "tokens"} <= set(fit.law.inputs)
    ratios = [float(np.median(ratio))] if only_c else np.geomspace(lo_r, hi_r, _RATIOS)
    out = []
    for level in levels:
        for r in ratios:
            n_ = math.sqrt(level / (FLOPS_PER_PARAM_TOKEN * k * r))
            n_i = float(max(1, round(n_)))
            d_i = float(max(1, round(level / (FLOPS_PER_PARAM_TOKEN * k * n_i))))
            out.append(CandidateRun(params=n_i, tokens=d_i,
                                    flops=k * FLOPS_PER_PARAM_TOKEN * n_i * d_i,
                                    name=f"C{level:.2g}-r{r:.3g}"))
    # around the design: no model more than 2x smaller than the smallest fitted one
    n_min = float(np.min(x["params"])) / 2 if "params" in x else 0.0
    return [cand for cand in out if cand.flops <= budget * (1 + 1e-9)
            and (only_c or cand.params >= n_min)]


# ------------------------------------------------------------------------------ the width
def _z(level: float) -> float:
    from scipy.stats import norm
    return float(norm.ppf(0.5 + level / 2))


def _width(centre: float, sd, z: float):
    return centre * (np.exp(z * np.asarray(sd)) - np.exp(-z * np.asarray(sd)))


class _Terms:
    """The calibrated interval's terms at the target and how a new run moves them."""

    def __init__(self, cal: dict, level: float, loss: float):
        self.sigma_0, self.k = float(cal["sigma_0"]), float(cal["k"])
        self.f = float(cal.get("small_sample_factor", 1.0))
        self.ratio = float(cal["ratio"])
        self.param_sd, self.run_sd = float(cal["param_sd"]), float(cal["run_sd"])
        self.z, self.loss = _z(level), float(loss)

    def sigma_used(self, r):
        return self.f * (self.sigma_0 + self.k * np.log10(np.maximum(np.asarray(r, float), 1.0)))

    def sd(self, r, param_sd):
        return np.sqrt(self.sigma_used(r) ** 2 + np.asarray(param_sd) ** 2 + self.run_sd ** 2)

    def width(self, r, param_sd):
        return _width(self.loss, self.sd(r, param_sd), self.z)


def _free(fit: Fit) -> tuple[tuple[str, ...], list[int]]:
    free = tuple(n for n in fit.law.param_names if n not in fit.fixed)
    rows = fit.covariance_params or tuple(n for n in free if n not in fit.at_bound)
    return free, [free.index(n) for n in rows]


def _jacobian(fit: Fit, x: Mapping[str, Any]) -> np.ndarray:
    """d log L / dz at the fit's parameters, at inputs ``x`` (each shape (m,)): (m, p)."""
    free, idx = _free(fit)
    xt = fit.law.check_inputs(_arrays(x))
    m = len(next(iter(xt.values())))
    problem = Problem(law=fit.law, x=xt, log_y=np.zeros(m), delta=fit.delta, free=free,
                      fixed=dict(fit.fixed))
    _, jac, ok = problem.residuals_and_jacobian(problem.pack(fit.params))
    if not ok:
        raise TargetError("the fitted law predicts a non-positive loss at a candidate or the "
                          "target")
    return jac[:, idx]


def _arrays(x: Mapping[str, Any]) -> dict[str, Any]:
    """A law's inputs as float arrays (a private ``_`` entry, e.g. a schedule, as it is)."""
    return {k: v if k.startswith("_") else np.asarray(v, float) for k, v in x.items()}


def _stack(inputs: Sequence[Mapping[str, Sequence[float]]]) -> dict[str, np.ndarray]:
    return {k: np.array([float(np.asarray(i[k], float).ravel()[0]) for i in inputs])
            for k in inputs[0]}


class _Fisher:
    """Linearised information M = J'J of the fitted runs (plus picks) and the target's g."""

    def __init__(self, fit: Fit, g: np.ndarray, names: Sequence[str]):
        j = _jacobian(fit, fit.x)
        self.m = j.T @ j
        self.g, self.names = g, list(names)

    def _inv(self, m):
        return np.linalg.pinv(m, rcond=1e-13, hermitian=True)

    def ratios(self, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """sqrt(var'/var) of the target per candidate row (c, p), and the parameter whose
        sd falls most, relatively, for each."""
        mi = self._inv(self.m)
        var = float(self.g @ mi @ self.g)
        u = rows @ mi                                   # (c, p): M^-1 j per row
        denom = 1.0 + np.einsum("cp,cp->c", u, rows)
        gu = u @ self.g
        after = np.maximum(var - gu ** 2 / denom, 0.0)
        rel = (u ** 2 / denom[:, None]) / np.maximum(np.diag(mi)[None, :], 1e-300)
        top = [self.names[int(i)] for i in np.argmax(rel, axis=1)]
        return np.sqrt(after / var) if var > 0 else np.ones(len(rows)), top

    def add(self, row: np.ndarray) -> None:
        self.m = self.m + np.outer(row, row)


class _Refits:
    """Poisson-bootstrap refits with a candidate added at its predicted loss plus noise."""

    def __init__(self, fit: Fit, xt: Mapping[str, Any], run_sd: float, level: float,
                 n_boot: int, seed: int):
        from scipy.stats import norm
        self.fit, self.level, self.n_boot = fit, level, n_boot
        self.free, _ = _free(fit)
        self.xt = _arrays(xt)
        self.seq = np.random.SeedSequence(seed)
        rng = np.random.default_rng(self.seq.spawn(1)[0])
        runs = np.array([lbl.split("@")[0] for lbl in fit.labels])
        names, inverse = np.unique(runs, return_inverse=True)
        self.w = rng.poisson(1.0, size=(n_boot, len(names))).astype(float)[:, inverse]
        # stratified noise: draw b's candidate takes quantile b mod S
        self.q = norm.ppf((np.arange(_STRATA) + 0.5) / _STRATA) * run_sd
        self.stratum = np.arange(n_boot) % _STRATA
        self.x = _arrays(fit.x)
        self.log_y = np.log(np.asarray(fit.y, float))
        self.n_picks = 0
        self.before = self._spread(self.x, self.log_y, self.w)

    def _problem(self, x, log_y):
        return Problem(law=self.fit.law, x=x, log_y=log_y, delta=self.fit.delta,
                       free=self.free, fixed=dict(self.fit.fixed))

    def _spread(self, x, log_y, w) -> float:
        problem = self._problem(x, log_y)
        z0 = problem.pack(self.fit.params)
        bounds = {k: v for k, v in self.fit.bounds.items() if k not in self.fit.fixed}
        batch = refine_batch(problem, z0, w, internal_bounds(problem, bounds))
        pred = np.array([math.log(float(self.fit.law.predict(problem.values(z), self.xt)[0]))
                         if np.all(np.isfinite(z)) else np.nan for z in batch.z])
        pred = pred[np.isfinite(pred)]
        a = (1 - self.level) / 2
        lo, hi = np.quantile(pred, [a, 1 - a])
        return float(hi - lo) / (2 * _z(self.level))

    def _with(self, inputs: Mapping[str, Any]):
        """Inputs, log losses and weights with a candidate's S noise rows added."""
        pred = math.log(float(self.fit.law.predict(self.fit.params, _arrays(inputs))[0]))
        x = {k: (np.concatenate([v, np.repeat(np.asarray(inputs[k], float).ravel()[:1],
                                              _STRATA)]) if not k.startswith("_") else v)
             for k, v in self.x.items()}
        log_y = np.concatenate([self.log_y, pred + self.q])
        rng = np.random.default_rng(self.seq.spawn(2 + self.n_picks)[-1])
        v = rng.poisson(1.0, size=self.n_boot).astype(float)
        extra = np.zeros((self.n_boot, _STRATA))
        extra[np.arange(self.n_boot), self.stratum] = v
        return x, log_y, np.hstack([self.w, extra])

    def ratio(self, inputs: Mapping[str, Any]) -> float:
        x, log_y, w = self._with(inputs)
        return self._spread(x, log_y, w) / self.before if self.before > 0 else 1.0

    def add(self, inputs: Mapping[str, Any]) -> None:
        self.x, self.log_y, self.w = self._with(inputs)
        self.n_picks += 1


# ------------------------------------------------------------------------------ suggest
def suggest_runs(ladder: Ladder, target=None, law: str | Law | None = None, *,
                 budget: float | None = None, n: int = 1, candidates=None,
                 method: str = "fisher", level: float | None = None, interval: str = "auto",
                 n_boot: int = 200, n_refit: int = 64, seed: int = 0, repeats: bool = True,
                 forecast=None, criterion: str = "width", **predict_kwargs) -> Suggestions:
    """Rank candidate runs by the expected reduction of the target forecast's calibrated
    (or reference) new-run interval width per FLOP (see the module docstring for the method).

    Parameters
    ----------
    ladder: the runs trained so far.
    target: a :class:`delphi.Target` or dict (``flops`` [FLOPs], ``params``, ``tokens``...),
        as for :func:`delphi.predict`.
    law: as for :func:`delphi.predict` (default from the ladder's design); one law, not
        ``"auto"``/an ensemble.
    budget: FLOPs available for the next runs: every candidate costs at most this, and a
        batch of ``n`` at most this in total. Default: the fitted runs' total compute (as
        much again as the ladder spent).
    n: runs to pick; above 1, a greedy batch (each conditioned on the ones before).
    candidates: runs to choose among: a CSV path, DataFrame or list of dicts (columns
        ``params``, ``tokens``, optionally ``flops``, ``peak_lr``, ``run``;
        :func:`read_candidates`), or None / ``"grid"`` for :func:`candidate_grid`.
    method: ``"fisher"`` (default) or ``"refit"`` (:data:`METHODS`).
    level, interval: the interval (``"auto"``, ``"calibrated"`` or ``"reference"``; level
        default 0.9), as for :func:`delphi.predict`.
    n_boot: the forecast's bootstrap draws. n_refit: draws per candidate for ``"refit"``
        (at least :data:`MIN_REFIT` = 8, one per noise stratum; default 64).
    seed: seeds the forecast's bootstrap and the refits; same inputs and seed give the same
        output.
    repeats: whether a batch may pick a candidate again (another seed of the same run;
        default True). False when the candidates are runs that exist once (a retrospective
        study).
    forecast: a :class:`delphi.Forecast` of ``target`` on ``ladder`` already made (reused
        instead of predicting again).
    criterion: what is ranked per FLOP (:data:`CRITERIA`): ``"width"`` (default), the
        calibrated (or reference) interval's width; ``"spread"``, the bootstrap forecasts'
        spread at the target alone, without the extrapolation term and the run noise (module
        docstring: what it is and when it ranks differently).
    predict_kwargs: other keywords of :func:`delphi.predict` (``fixed``, ``bounds``,
        ``delta``, ``fit_max_flops``...).

    Returns
    -------
    Suggestions (best first).

    Raises
    ------
    LadderError: a bad candidates file (row and column named), a candidate from a file that
        costs more than ``budget`` (named), no candidate within the budget, a bad ``n``.
    FitError: an unknown method or criterion (the allowed values named), an interval without
        a calibration (``interval="bootstrap"`` or ``"delta"``), a forecast without an
        interval, ``n_refit`` below 8.
    TargetError, LawError: as :func:`delphi.predict`.
    MissingArgumentError: no ``target`` given (as :func:`delphi.predict`).
    """
    if target is None:
        raise MissingArgumentError(
            "suggest_runs() needs the target the next runs should sharpen: {'flops': C} "
            "[FLOPs] or {'params': N, 'tokens': D}, or a delphi.Target")
    if method not in METHODS:
        raise FitError(f"unknown method {method!r}; use {' or '.join(METHODS)}")
    if not isinstance(criterion, str) or criterion not in CRITERIA:
        raise FitError(f"unknown criterion {criterion!r}; use {' or '.join(CRITERIA)}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise LadderError(f"n (runs to pick) must be an integer >= 1, got {n!r}")
    if (isinstance(n_refit, bool) or not isinstance(n_refit, (int, np.integer))
            or n_refit < MIN_REFIT):
        raise FitError(f"n_refit (draws per candidate) must be an integer >= {MIN_REFIT} (one "
                       f"per noise stratum), got {n_refit!r}")
    if interval not in ("auto", "calibrated", "reference"):
        raise FitError(f"suggestions rank runs by the calibrated or reference interval; "
                       f"interval must be auto, calibrated or reference, got {interval!r}")
    level = DEFAULT_LEVEL if level is None else level
    ladder = as_ladder(ladder)
    k = _k_convention(ladder)
    grid = candidates is None or (isinstance(candidates, str) and candidates == "grid")
    # A bad candidates file or a candidate beyond the budget is refused before the forecast.
    pool = None if grid else read_candidates(candidates, k=k)
    if budget is not None:
        budget = positive_number(budget, "budget must be a positive number of FLOPs",
                                 LadderError)
        if budget > 1e40:
            raise LadderError(f"budget {budget:.3g} FLOPs is beyond any training run (at most "
                              f"1e40, as a ladder's flops)")
        if pool is not None:
            _check_budget(pool, budget)
    if forecast is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # the forecast's warnings are in its notes
            forecast = predict(ladder, target, law, interval=interval, level=level,
                               n_boot=n_boot, seed=seed, off_trend=False, **predict_kwargs)
    if forecast.selection is not None:
        raise LawError("suggest ranks runs for one law's forecast; name a law instead of "
                       "auto or an ensemble")
    iv = forecast.interval
    if iv is None or iv.calibration is None:
        raise FitError("the forecast has no calibrated or reference interval to narrow: "
                       + "; ".join(n_ for n_ in forecast.notes if "interval" in n_)[:400])
    fit, flaw = forecast.fit, forecast.fit.law
    if any(str(k_).startswith("_") for k_ in fit.x):
        raise LawError(f"suggest ranks final runs (N, D, C, peak LR); law {flaw.name!r} reads "
                       f"whole loss curves or schedules, which a candidate does not have")
    terms = _Terms(iv.calibration, iv.level, forecast.loss)
    t = forecast.target
    c_target = t.flops if t.flops is not None else None
    c_max = c_target / terms.ratio if c_target else None
    notes: list[str] = []
    fitted_c = _fitted_flops(fit, k)
    budget_given = budget is not None
    if budget is None:
        budget = float(fitted_c.sum())
        notes.append(f"budget not given: the fitted runs' total compute, {budget:.3g} FLOPs")
    grid_used = pool is None
    if pool is None:
        grid_top = budget
        if c_target is not None and budget > c_target:
            # a ladder run as large as the target is the target: the grid stops below it
            grid_top = c_target / 2
            notes.append(f"the default grid stops at half the target's compute, "
                         f"{grid_top:.3g} FLOPs, below the budget {budget:.3g}")
        try:
            pool = candidate_grid(fit, grid_top, k=k)
        except LadderError as exc:
            if grid_top < budget:
                raise LadderError(f"{exc} (the grid stops at half the target's compute, "
                                  f"{grid_top:.3g} FLOPs, below the budget {budget:.3g}: a run "
                                  f"as large as the target is the target)") from None
            raise
        if not pool:
            raise LadderError(f"no grid candidate costs at most the budget {budget:.3g} FLOPs")
    else:
        _check_budget(pool, budget, given=budget_given)
        if c_target is not None:
            below = [c for c in pool if c.flops < c_target * (1 - 1e-9)]
            big = [c for c in pool if c not in below]
            if not below:
                raise LadderError(f"every candidate costs at least the target's compute "
                                  f"{c_target:.3g} FLOPs (e.g. {big[0].name!r}, "
                                  f"{big[0].flops:.3g}): a run as large as the target is the "
                                  f"target, not a rung of its ladder")
            if big:
                pool = below
                shown = ", ".join(f"{c.name} ({c.flops:.3g})" for c in big[:5])
                notes.append(f"left out {plural(len(big), 'candidate')} costing at least the "
                             f"target's compute {c_target:.3g} FLOPs (a run as large as the "
                             f"target is the target): {shown}"
                             + (f" and {len(big) - 5} more" if len(big) > 5 else ""))
    _check_by_compute(pool, flaw)
    inputs = []
    for c in pool:
        cand = Target(flops=c.flops, params=c.params, tokens=c.tokens, peak_lr=c.peak_lr)
        x, _ = target_inputs(cand, flaw, fit, ladder)
        if "flops" in x:
            x["flops"] = [c.flops]
        inputs.append(x)
    if "peak_lr" in flaw.inputs and any(c.peak_lr is None for c in pool):
        notes.append("candidates without a peak LR are at the fitted optimum eta*(N, D)")
        pool = [c if c.peak_lr is not None else CandidateRun(
            c.params, c.tokens, c.flops, float(x["peak_lr"][0]), c.name, c.row)
            for c, x in zip(pool, inputs)]
    xt, _ = target_inputs(as_target(t), flaw, fit, ladder)
    free, idx = _free(fit)
    names = [free[i] for i in idx]
    g = _jacobian(fit, xt)[0]
    fisher = _Fisher(fit, g, names)
    rows = _jacobian(fit, _stack(inputs))
    refits = (_Refits(fit, xt, terms.run_sd, iv.level, n_refit, seed)
              if method == "refit" else None)
    cost = np.array([c.flops for c in pool])
    c_now = c_max
    r_now, p_now = terms.ratio, terms.param_sd
    chosen: list[RunSuggestion] = []
    spent = 0.0
    avail = np.ones(len(pool), dtype=bool)
    ranking: list[RunSuggestion] = []
    for step in range(n):
        unpicked = avail.copy()
        avail &= cost <= (budget - spent) * (1 + 1e-9)
        if not avail.any():
            if step == 0:
                raise LadderError(f"no candidate costs at most the budget {budget:.3g} FLOPs")
            if not unpicked.any():
                # every candidate picked once: the budget was not what stopped it
                notes.append(f"only {plural(len(pool), 'candidate')} to pick from, each once "
                             f"under {option('repeats=False', '--no-repeats')}: {step} of the {n} "
                             f"runs asked for, {spent:.3g} of the budget's {budget:.3g} FLOPs")
            else:
                notes.append(f"the budget allows only {step} of the {n} runs asked for")
            break
        ratio_f, top = fisher.ratios(rows)
        if refits is not None:
            ratio_p = np.array([refits.ratio(inputs[i]) if avail[i] else 1.0
                                for i in range(len(pool))])
        else:
            ratio_p = ratio_f
        r_after = (np.array([c_target / max(c_now, c.flops) for c in pool])
                   if c_now else np.full(len(pool), r_now))
        p_after = p_now * ratio_p
        w_before = float(terms.width(r_now, p_now))
        w_after = terms.width(r_after, p_after)
        d_cal = terms.sigma_used(r_now) ** 2 - terms.sigma_used(r_after) ** 2
        d_par = p_now ** 2 - p_after ** 2
        if criterion == "spread":
            s_before = float(_width(terms.loss, p_now, terms.z))
            s_after = _width(terms.loss, p_after, terms.z)
            gain = s_before - s_after
        else:
            s_before, s_after = None, [None] * len(pool)
            gain = w_before - w_after
        per = np.where(avail, gain / cost, -np.inf)
        made = [RunSuggestion(run=pool[i], width_before=w_before, width_after=float(w_after[i]),
                              reduces=("nothing" if w_after[i] >= w_before else
                                       "extrapolation" if d_cal[i] > d_par[i] else top[i]),
                              ratio_after=float(r_after[i]), param_sd_after=float(p_after[i]),
                              spread_before=s_before,
                              spread_after=(None if s_after[i] is None
                                            else float(s_after[i])))
                for i in range(len(pool))]
        order = sorted(np.flatnonzero(avail), key=lambda i: (-per[i], cost[i], i))
        if n == 1:
            ranking = [made[i] for i in order]
            break
        best = order[0]
        if step and not gain[best] > 0:
            # a run that narrows nothing is no suggestion: the batch ends here, and says so
            notes.append(f"stopped after {plural(step, 'run')} of the {n} asked for: no "
                         f"remaining candidate narrows the interval further")
            break
        chosen.append(made[best])
        spent += cost[best]
        if not repeats:
            avail[best] = False
        fisher.add(rows[best])
        if refits is not None:
            refits.add(inputs[best])
        if c_now:
            c_now = max(c_now, cost[best])
            r_now = c_target / c_now
        p_now = float(p_after[best])
    out = tuple(ranking if n == 1 else chosen)
    if terms.param_sd <= 0:
        notes.append(f"the forecast's interval has no parameter spread (param sd 0: "
                     f"{iv.method} interval, {plural(fit.n_points, 'fitted point')} for "
                     f"{len(free)} free parameters), so only a run above the largest fitted "
                     f"compute narrows it (by lowering r); the others rank at 0")
    if out and all(c.width_after >= c.width_before for c in out):
        top_c = max(c.run.flops for c in out)
        notes.append(f"no candidate narrows the interval: none is above the largest fitted "
                     f"compute ({c_max:.3g} FLOPs; the largest candidate costs {top_c:.3g})"
                     if c_max and top_c <= c_max else
                     "no candidate narrows the interval")
        lo_c = float(fitted_c.min()) if len(fitted_c) else 0.0
        if grid_used and c_max and lo_c > 0 and top_c <= c_max < budget:
            # the budget is above the largest fitted run, but the grid's levels double from
            # the smallest run and its top one fell below it: "give --budget above the
            # largest fitted compute" asked for what was given
            need = lo_c * 2.0 ** (math.floor(math.log2(c_max / lo_c)) + 1)
            digits = 10.0 ** (math.floor(math.log10(need)) - 2)
            need = math.ceil(need / digits * (1 - 1e-12)) * digits  # 3 digits, rounded up
            notes.append(f"the default grid's levels double from the smallest fitted run's "
                         f"compute ({lo_c:.3g} FLOPs), so its largest within the budget "
                         f"{budget:.3g} is {top_c:.3g}; a budget of {need:.3g} FLOPs or more "
                         f"({option('budget=C', '--budget C')}) reaches above the largest "
                         f"fitted compute, or give candidates of your own")
        elif not budget_given:
            notes.append(f"give {option('budget=C', '--budget C')} above the largest fitted "
                         f"compute for candidates that lower r")
    if n > 1:
        counts: dict[str, int] = {}
        for c in chosen:
            counts[c.run.name] = counts.get(c.run.name, 0) + 1
        again = {k: v for k, v in counts.items() if v > 1}
        if again:
            shown = ", ".join(f"{k} x{v}" for k, v in list(again.items())[:5])
            notes.append(f"picked more than once: {shown}; repeats of one run are extra seeds "
                         f"of it (train each with its own seed)"
                         + ("" if not repeats else
                            f"; {option('repeats=False', '--no-repeats')} picks each run once"))
    if interval == "auto" and iv.method == "reference":
        notes.append("the interval is the reference class's (the ladder has too few "
                     "leave-future-out folds to calibrate itself)")
    notes += [f"forecast: {w}" for w in forecast.warnings]
    notes.append("held fixed: the calibration model sigma(r) and the run noise; a new run "
                 "changes the extrapolation ratio r and the parameter spread")
    return Suggestions(target=t.to_dict(), loss=float(forecast.loss), unit=forecast.unit,
                       width=float(terms.width(terms.ratio, terms.param_sd)),
                       level=float(iv.level), interval_method=str(iv.method), method=method,
                       law=flaw.name, budget=float(budget), ratio=terms.ratio,
                       sigma_used=float(terms.sigma_used(terms.ratio)),
                       param_sd=terms.param_sd, run_sd=terms.run_sd, candidates=out,
                       n_candidates=len(pool), notes=tuple(notes), ladder=ladder.name,
                       criterion=criterion,
                       spread=(float(_width(terms.loss, terms.param_sd, terms.z))
                               if criterion == "spread" else None))


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _check_by_compute(pool: Sequence[CandidateRun], law: Law, what: str = "candidates") -> None:
    """LadderError when a run given by its compute alone meets a law that reads N and D."""
    if any(c.params is None for c in pool) and ({"params", "tokens"} & set(law.inputs)):
        raise LadderError(f"the {what} give compute (flops) alone, and law {law.name!r} reads "
                          f"N and D: add params and tokens columns, or use a law of compute "
                          f"(power)")


def _check_budget(pool: Sequence[CandidateRun], budget: float, given: bool = True) -> None:
    """LadderError naming the first candidate that costs more than ``budget`` (``given``
    False: the default budget, the fitted runs' total compute, which the message says)."""
    over = [c for c in pool if c.flops > budget * (1 + 1e-9)]
    if over:
        c = over[0]
        what = "" if given else " (the default: the fitted runs' total compute)"
        where = (f"row {c.row}" if c.params is None else
                 f"row {c.row}: N = {c.params:.4g}, D = {c.tokens:.4g}")
        raise LadderError(f"candidate {c.name!r} ({where}) costs {c.flops:.4g} FLOPs, beyond "
                          f"the budget "
                          f"of {budget:.4g}{what}"
                          + (f" ({len(over) - 1} more beyond it)" if len(over) > 1 else "")
                          + "; raise --budget or drop it")


def _fitted_flops(fit: Fit, k: float) -> np.ndarray:
    x = fit.x
    if "flops" in x:
        return np.asarray(x["flops"], float)
    if {"params", "tokens"} <= set(x):
        return k * FLOPS_PER_PARAM_TOKEN * np.asarray(x["params"], float) * np.asarray(
            x["tokens"], float)
    raise LadderError("the fitted runs have no compute (neither C nor N and D)")


# ------------------------------------------------------------------------------ score
def _prior(prior, law) -> tuple[Law, dict[str, float], float | None, str, dict[str, float]]:
    """(law, parameter values, run noise or None, description, fixed values) of a stated
    prior (a Fit's fixed values stay fixed in the design's fits)."""
    if isinstance(prior, Fit):
        if law is not None and get_law(law).name != prior.law.name:
            raise LawError(f"the prior is a fit of law {prior.law.name!r}, not {law!r}")
        name = prior.extra.get("ladder") if isinstance(prior.extra, dict) else None
        try:
            noise = run_noise(prior)[0]
        except DelphiError:
            noise = None
        vals = ", ".join(f"{k}={v:.4g}" for k, v in prior.params.items())
        return prior.law, dict(prior.params), noise, (
            f"law {prior.law.name!r} fitted to {name or 'a ladder'} ({vals})"), dict(prior.fixed)
    if isinstance(prior, Mapping):
        lw = get_law(law if law is not None else "chinchilla")
        missing = [p for p in lw.param_names if p not in prior]
        unknown = [p for p in prior if p not in lw.param_names]
        if missing or unknown:
            raise LawError(f"prior parameters of law {lw.name!r}: "
                           + (f"missing {', '.join(missing)}" if missing else "")
                           + ("; " if missing and unknown else "")
                           + (f"unknown {', '.join(unknown)}" if unknown else "")
                           + f" (its parameters: {', '.join(lw.param_names)})")
        vals = {}
        for p, v in prior.items():
            try:
                vals[p] = float(v)
            except (TypeError, ValueError):
                raise LawError(f"prior parameter {p}: {v!r} is not a number") from None
            if not math.isfinite(vals[p]):
                raise LawError(f"prior parameter {p}: {v!r} is not finite")
            spec = next(q for q in lw.params if q.name == p)
            if not spec.lower <= vals[p] <= spec.upper:
                # e.g. a negative exponent: the law would grow with scale
                raise LawError(f"prior parameter {p} = {vals[p]:g} is outside its range "
                               f"{spec.lower:g}..{spec.upper:g} in law {lw.name!r}")
        text = ", ".join(f"{k}={v:.4g}" for k, v in vals.items())
        return lw, vals, None, f"law {lw.name!r} with published parameters ({text})", {}
    raise LawError(f"a prior is a Fit (delphi.fit of another ladder) or a mapping of a law's "
                   f"parameters, got {type(prior).__name__}")


def score_design(design, target, prior, *, law: str | Law | None = None,
                 noise: float | None = None, level: float | None = None,
                 method: str = "fisher", n_boot: int = 200, seed: int = 0,
                 reference=None) -> DesignScore:
    """The expected new-run interval width at ``target`` of a proposed ladder ``design``,
    before any of its runs is trained, under the prior law ``prior`` (module docstring).

    Parameters
    ----------
    design: the proposed runs: a CSV path, DataFrame or list of dicts with ``params``,
        ``tokens``, optionally ``flops`` [FLOPs] and ``peak_lr`` (:func:`read_candidates`;
        e.g. :meth:`delphi.analyses.planning.LadderPlan.to_frame`).
    target: the target (``flops`` [FLOPs], ``params``, ``tokens``), a dict or
        :class:`delphi.Target`; a law of N and D needs its N and D.
    prior: a :class:`delphi.Fit` of another ladder or recipe, or a mapping of the law's
        parameters (e.g. Hoffmann et al. 2022's E=1.69, A=406.4, B=410.7, alpha=0.34,
        beta=0.28 for ``law="chinchilla"``).
    law: the law of a prior given as parameters (default chinchilla); must match a Fit's.
    noise: run-to-run noise [sd of log loss] of the design's runs; default the prior fit's
        (:func:`delphi.uncertainty.run_noise`), else :data:`DEFAULT_NOISE`, with a note.
    level: interval level (default 0.9). method: ``"fisher"`` or ``"refit"`` (``n_boot``
        simulated ladders refitted; ``seed`` seeds them: same inputs and seed, same number).
    reference: the reference class (path or :class:`delphi.reference.ReferenceClass`;
        default the shipped one).

    Returns
    -------
    DesignScore.

    Raises
    ------
    LadderError: a bad design (row and column named), or fewer runs than free parameters.
    LawError: a bad prior. TargetError: a target the law cannot be evaluated at.
    FitError: an unknown method, or no reference model for the law.
    """

    if method not in METHODS:
        raise FitError(f"unknown method {method!r}; use {' or '.join(METHODS)}")
    level = DEFAULT_LEVEL if level is None else level
    lw, values, prior_noise, text, fixed = _prior(prior, law)
    runs = read_candidates(design, what="design")
    t = as_target(target)
    notes = []
    if noise is None:
        if prior_noise is not None:
            noise = prior_noise
            notes.append(f"run noise {noise:.2%} from the prior fit's residuals")
        else:
            noise = DEFAULT_NOISE
            notes.append(f"run noise not given: assumed {noise:.2%} "
                         f"({option('noise=SD', '--noise SD')} sets it)")
    if not (isinstance(noise, (int, float)) and math.isfinite(noise) and noise > 0):
        raise FitError(f"noise must be a positive sd of log loss, got {noise!r}")
    free = tuple(p for p in lw.param_names if p not in fixed)
    if len(runs) <= len(free):
        raise LadderError(f"a design of {plural(len(runs), 'run')} cannot fit the "
                          f"{len(free)} free parameters of law {lw.name!r}: it needs more runs "
                          f"than free parameters ({len(free) + 1} or more)")
    _check_by_compute(runs, lw, "design's runs")
    # The prior law as a Fit-like set of inputs; LR-aware laws read each run's peak LR.
    def inputs_of(rows_: Sequence[CandidateRun]) -> dict[str, np.ndarray]:
        out = {}
        for col in lw.inputs:
            if col == "peak_lr":
                out[col] = np.array([r.peak_lr if r.peak_lr is not None else float(
                    lw.optimal_lr(values, r.params, r.tokens)) for r in rows_])
            elif col in ("params", "tokens", "flops"):
                out[col] = np.array([getattr(r, col) for r in rows_], float)
            else:
                raise LawError(f"score_design cannot give law {lw.name!r} its input {col!r}")
        return out
    x = inputs_of(runs)
    tc = t.flops if t.flops is not None else (FLOPS_PER_PARAM_TOKEN * t.params * t.tokens
                                              if t.params and t.tokens else None)
    if tc is None:
        raise TargetError("the target needs its compute (flops) or N and D")
    trow = CandidateRun(params=t.params or 0.0, tokens=t.tokens or 0.0, flops=tc,
                        peak_lr=t.peak_lr)
    for col in lw.inputs:
        if col in ("params", "tokens") and not getattr(t, col):
            raise TargetError(f"law {lw.name!r} needs the target's {col}")
    xt = inputs_of([trow])
    loss = float(lw.predict(values, xt)[0])
    problem = Problem(law=lw, x=lw.check_inputs(x, what="design"),
                      log_y=np.zeros(len(runs)), delta=1.0, free=free, fixed=dict(fixed))
    xt_c = lw.check_inputs(xt)
    tproblem = Problem(law=lw, x=xt_c, log_y=np.zeros(1), delta=1.0, free=free,
                       fixed=dict(fixed))
    z_prior = problem.pack(values)
    log_mu, jac, ok = problem.residuals_and_jacobian(z_prior)
    _, g, ok_t = tproblem.residuals_and_jacobian(z_prior)
    if not (ok and ok_t):
        raise TargetError("the prior law predicts a non-positive loss at a run or the target")
    if method == "fisher":
        var = float(g[0] @ np.linalg.pinv(jac.T @ jac, rcond=1e-13, hermitian=True) @ g[0])
        param_sd = noise * math.sqrt(max(var, 0.0))
    else:
        # Every run's loss at S noise quantiles; draw b counts one of them per run (picked at
        # random): all draws are weighted refits of one problem, refined as a batch.
        from scipy.stats import norm
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        q = norm.ppf((np.arange(_STRATA) + 0.5) / _STRATA) * noise
        m = len(runs)
        rep = {k_: np.repeat(v, _STRATA) for k_, v in problem.x.items()}
        log_y = np.repeat(log_mu, _STRATA) + np.tile(q, m)
        pick = rng.integers(_STRATA, size=(n_boot, m))
        w = np.zeros((n_boot, m * _STRATA))
        w[np.arange(n_boot)[:, None], np.arange(m)[None, :] * _STRATA + pick] = 1.0
        prep = prepare(lw, rep, np.exp(log_y), fixed=fixed, delta=1.0)
        pb = prep.problem
        batch = refine_batch(pb, z_prior, w, prep.ibounds)
        preds = []
        for z in batch.z:
            pred = float(lw.predict(pb.values(z), xt_c)[0]) if np.all(np.isfinite(z)) else -1
            if math.isfinite(pred) and pred > 0:
                preds.append(math.log(pred))
        if len(preds) < n_boot / 2:
            raise FitError(f"{n_boot - len(preds)} of {n_boot} simulated ladders gave no "
                           f"forecast at the target")
        a = (1 - level) / 2
        lo, hi = np.quantile(preds, [a, 1 - a])
        param_sd = float(hi - lo) / (2 * _z(level))
    cost = np.array([r.flops for r in runs])
    ratio = tc / float(cost.max())
    n_budgets = int(budget_labels(pd.DataFrame({"flops": cost})).nunique())
    ref = reference if isinstance(reference, ReferenceClass) else load_reference(reference)
    model = ref.model(lw.name, n_budgets, level, fit_sd=float(noise),
                      fit_dof=len(runs) - len(free))
    sigma = float(model.sigma(ratio)) * model.small_sample_factor(level)
    sd = math.sqrt(sigma ** 2 + param_sd ** 2 + noise ** 2)
    z = _z(level)
    if ratio < 1:
        notes.append("the target's compute is below the design's largest run: r < 1, the "
                     "reference interval is its floor at r = 1")
    if ratio > model.max_ratio:
        notes.append(f"target r = {ratio:.3g} is beyond the largest extrapolation ratio in the "
                     f"reference class ({model.max_ratio:.3g}): sigma(r) is extrapolated "
                     f"there, so the expected width is too")
    return DesignScore(width=float(_width(loss, sd, z)), lower=loss * math.exp(-z * sd),
                       upper=loss * math.exp(z * sd), loss=loss, level=float(level),
                       param_sd=float(param_sd), run_sd=float(noise), sigma_ref=sigma,
                       ratio=float(ratio), n_runs=len(runs), n_budgets=n_budgets,
                       total_flops=float(cost.sum()), law=lw.name, prior=text,
                       method=method, seed=int(seed), notes=tuple(notes), target=t.to_dict())
