"""Reference-class intervals: how far other ladders' laws missed, for ladders too small to say.

A ladder's own leave-future-out errors (:mod:`delphi.calibration`) size an interval only when
it has at least :data:`~delphi.calibration.MIN_FOLDS` cuts to refit at. A hero-run ladder of
four to seven rungs often has none, and a fit with one or two residual degrees of freedom has
no noise estimate either, so it would get no interval at all. Reference-class forecasting
(Kahneman & Tversky 1979; Flyvbjerg 2006) answers with the track record of similar
forecasts: here the leave-future-out log errors of the same law on the *public* ladders
(``../shared/ladders``), recorded with the extrapolation ratio r = C_run / C_max_fitted and
the number of rungs (compute budgets) each fold fitted. They ship with delphi as a data file,
``delphi/data/reference_errors.json.gz``, with their provenance; ``benchmarks/
bench_reference.py`` regenerates it (:func:`build_reference`).

The model (:meth:`ReferenceClass.model`): the ``level`` quantile of |log error| as a line in
log10 r, q(r) = q_0 + q_1 log10 r, fitted by weighted linear quantile regression (Koenker &
Bassett 1978) over the reference errors of the same law (all laws pooled when fewer than
:data:`MIN_LADDERS` public ladders have it) from folds fitted on about as many rungs as the
forecast's (the window n +- j, widened until :func:`window_ladders` ladders contribute: 9 at
90%, the fewest for which a quantile can cover a new ladder at that level). Every
ladder weighs the same, whatever its number of errors. The quantile is read directly from
the pooled errors, so their heavy tails (ladders differ in noise and in misspecification)
are in it, and no small-sample factor is applied. Ladders differ most in how much their runs
scatter about their law: a fit whose residual scale s_fit has at least :data:`MIN_SD_DOF`
degrees of freedom reads the quantile off q(r, s) = q_0 + q_2 s_fit + q_1 log10 r instead,
fitted on the folds' own fit scales (scored leave one ladder out on the public ladders: the
interval score falls from 0.373 to 0.353 at the same coverage,
``benchmarks/bench_reference.py``). As an sd of log loss, sigma(r) = q(r) / z with z the
normal quantile of the level, so it combines in quadrature with a fit's parameter
uncertainty as a calibration does (:func:`delphi.calibration.calibrated_interval`).

A ladder that can calibrate itself blends the two (:func:`blend`): s(r) = w sigma_own(r) +
(1 - w) sigma_ref(r), with w = n / (n + :data:`PRIOR_FOLDS`) for n own folds; the reference
class counts as much as :data:`PRIOR_FOLDS` folds of the ladder's own (shrinkage towards a
prior by the number of observations, as a credibility-weighted estimate: Buhlmann 1967). The
shrinkage takes the place of the own model's Student-t widening for few folds: scored leave one
ladder out on the public ladders, the blend without it has the lower interval score on every
ladder (0.370 against 0.410, ``benchmarks/bench_rules_lolo.py``).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import linprog
from ..core.quantile_line import quantile_line
from ..core.quantiles import check_level, norm_ppf
from ..core.text import level_percent

from .calibration import MAX_FOLDS, SIGMA_FLOOR, CalibrationModel, LFOErrors, leave_future_out
from ..errors import DelphiError, FitError
from .uncertainty import DEFAULT_LEVEL
from .candidates import Candidate, default_candidates
from ..laws import get_law
from ..inputs.readers import as_ladder, load_ladder
from ..fitting.diagnostics import residual_scale
from ..fitting.api import compute_frontier

__all__ = ["ReferenceClass", "ReferenceModel", "BlendedModel", "blend", "build_reference",
           "load_reference", "reference_rows", "REFERENCE_PATH", "MIN_LADDERS", "PRIOR_FOLDS",
           "MAX_PER_FOLD", "COLUMNS", "MIN_SD_DOF", "window_ladders", "FRONTIER_SPAN",
           "frontier_span", "outside_class"]

#: The reference errors shipped with delphi.
REFERENCE_PATH = Path(__file__).parents[1] / "data" / "reference_errors.json.gz"
#: Fewest public ladders a reference model is fitted from: the rung window (and, failing the
#: law, the law filter) widens until this many contribute.
MIN_LADDERS = 4
#: Weight of the reference class in a blend, in folds of the ladder's own calibration.
PRIOR_FOLDS = 3
#: Predictions kept per (ladder, law, fold), evenly spaced in r: an isoFLOP grid predicts
#: hundreds of runs per fold, which would otherwise outweigh the fold's independent information.
MAX_PER_FOLD = 16
#: A law of compute alone is fitted to a ladder's compute frontier (the lowest loss of each
#: budget). Its errors join the reference class only where that frontier is close to
#: compute-optimal: its tokens per parameter D/N span at most this factor. The public ladders
#: fall in two groups, isoFLOP minima and compute-optimal ladders (2.2x to 5x) and over-training
#: or LR grids whose frontier mixes 5 to 640 tokens per parameter (20x to 275x); 10 lies in the
#: gap. A forecast by a law of C is made on a compute-optimal ladder, not on the latter.
FRONTIER_SPAN = 10.0
#: Laws whose errors stand in for a law with too few public ladders of its own (before every
#: law is pooled): ``power-n`` is the same form as ``power``, in N on a fixed-data sweep.
FAMILY = {"power-n": "power"}
#: Columns of :attr:`ReferenceClass.rows`.
COLUMNS = ("ladder", "law", "n_free", "n_budgets", "n_points", "budget", "cut", "run", "ratio",
           "log_error", "fit_sd", "fit_dof")
#: Columns of a version-1 file (before the fold fits' residual scale was recorded); such a
#: file still reads, and its models are unconditional on the ladder's noise.
COLUMNS_V1 = COLUMNS[:10]
#: Fewest residual degrees of freedom a fit's residual scale needs to size a reference
#: interval (:meth:`ReferenceClass.model`'s ``fit_sd``): with 0 or 1 the scale is a guess.
MIN_SD_DOF = 2


def window_ladders(level: float = DEFAULT_LEVEL) -> int:
    """How many public ladders the rung window of a reference model at ``level`` must take in:
    max(:data:`MIN_LADDERS`, ceil(level / (1 - level))), 9 at the default 90%.

    A reference interval is a prediction for a ladder outside the reference class, so its
    unit of exchangeability is the ladder, not the error. Conformal prediction over K
    exchangeable groups (the hierarchical case: Lee, Barber & Willett 2023, Sec. 3; Dunn,
    Wasserman & Ramdas 2023) covers a new group at ``level`` with the quantile at level
    (K + 1) / K of the pooled, group-weighted errors, which is finite only when
    K >= level / (1 - level). With fewer ladders a quantile is one ladder's idiosyncrasy
    away from the next: a window of 4 ladders (the rule before) left porian2024-owt2 at 69%
    and misfitting2025-final at 73% coverage leave one ladder out, 9 lifts both above 75%
    (``benchmarks/bench_reference.py``, where the other window sizes tried are shown).
    The quantile itself stays at ``level`` (the pooled-CDF estimate, which Dunn et al.
    recommend for its width); a ladder with fewer public ladders in reach uses them all.

    Raises FitError for a level outside (0, 1).
    """
    check_level(level, what="level")
    return max(MIN_LADDERS, math.ceil(level / (1 - level) - 1e-9))


def _z(level: float) -> float:
    return float(norm_ppf(0.5 + level / 2))


def _quantile_line(x: np.ndarray, y: np.ndarray, tau: float, w: np.ndarray,
                   s: np.ndarray | None = None) -> tuple[float, ...]:
    """(a, b[, c]) minimising sum_i w_i rho_tau(y_i - a - b x_i [- c s_i]), a >= SIGMA_FLOOR,
    b, c >= 0: weighted linear quantile regression (Koenker & Bassett 1978) as a sparse
    linear programme, y_i - a - b x_i - c s_i = u_i - v_i with u, v >= 0 and cost
    tau w u + (1 - tau) w v. Without s, the line is found exactly without the programme
    (:func:`delphi.core.quantile_line.quantile_line`: the same optimum; the midpoint of the
    optimal lines where it is not unique)."""
    if s is None:
        return quantile_line(x, y, tau, w, a_min=SIGMA_FLOOR, b_min=0.0)
    n = len(y)
    cols = [np.ones(n), x] + ([s] if s is not None else [])
    p = len(cols)
    eye = sparse.identity(n, format="csr")
    a_eq = sparse.hstack([sparse.csr_matrix(np.column_stack(cols)), eye, -eye], format="csr")
    cost = np.concatenate([np.zeros(p), tau * w, (1 - tau) * w])
    res = linprog(cost, A_eq=a_eq, b_eq=y,
                  bounds=[(SIGMA_FLOOR, None)] + [(0, None)] * (p - 1) + [(0, None)] * (2 * n),
                  method="highs")
    if not res.success:
        raise FitError(f"reference-class quantile regression failed: {res.message}")
    return tuple(float(v) for v in res.x[:p])


@dataclass(frozen=True)
class ReferenceModel(CalibrationModel):
    """The ``level`` quantile of other ladders' |log error| against r, as a
    :class:`~delphi.calibration.CalibrationModel`: sigma(r) = q(r) / z, so
    ``sigma_0 = q_0 / z`` and ``k = q_1 / z`` (z the normal quantile of ``level``).

    ``n_folds`` counts the (ladder, cut) folds the errors come from; the small-sample factor
    is 1 (the quantile is read from many ladders' errors, not a scale from a few folds).
    """

    level: float = DEFAULT_LEVEL
    """Level the quantile line was fitted at (its half-width covers this share of errors)."""
    q_0: float = 0.0
    """Half-width of the ``level`` interval at r = 1 [log loss]."""
    q_1: float = 0.0
    """Its growth per decade of r [log loss per log10 r]."""
    q_2: float = 0.0
    """Its growth per unit of the fit's residual scale (0 when the model is not conditioned on
    it): q(r) = q_0 + q_2 s_fit + q_1 log10 r."""
    fit_sd: float | None = None
    """The forecast fit's residual scale s_fit [sd of log loss] the model was evaluated at
    (None: unconditional, every fold's errors alike)."""
    ladders: tuple[str, ...] = ()
    """Public ladders whose errors were used."""
    laws: tuple[str, ...] = ()
    """Laws whose errors were used (the forecast's, or all when it had too few ladders)."""
    rungs: tuple[int, int] = (0, 0)
    """The window of fitted rungs (compute budgets) the errors' folds had."""
    n_rungs: int | None = None
    """The forecast's rungs the window was centred on (None: every fold used)."""
    excluded: tuple[str, ...] = ()
    """Ladders left out of the reference class (e.g. the forecast's own, when it is public)."""
    notes: tuple[str, ...] = ()
    """How the errors were chosen, when the law or rung filter had to widen."""

    def small_sample_factor(self, level: float = DEFAULT_LEVEL) -> float:
        """1: the quantile is read from the pooled errors of many ladders."""
        return 1.0

    def to_dict(self) -> dict:
        return {"method": "reference", "model": "q(r) = q_0 + q_1 log10 r, the level quantile "
                "of |log error| on the public ladders",
                "level": self.level, "q_0": self.q_0, "q_1": self.q_1, "q_2": self.q_2,
                "fit_sd": self.fit_sd,
                "sigma_0": self.sigma_0, "k": self.k, "n_folds": self.n_folds,
                "n_errors": self.n_errors, "max_ratio": self.max_ratio, "law": self.law,
                "laws": list(self.laws), "ladders": list(self.ladders),
                "rungs": list(self.rungs), "n_rungs": self.n_rungs,
                "excluded": list(self.excluded), "notes": list(self.notes)}

    def describe(self) -> str:
        """One line: what the reference interval rests on."""
        lo, hi = self.rungs
        rungs = f"{lo}" if lo == hi else f"{lo}-{hi}"
        laws = (f"law {self.law!r}" if self.laws == (self.law,) else
                f"laws {', '.join(self.laws)} (too few ladders with {self.law!r} alone)")
        return (f"{self.n_errors} leave-future-out errors of {laws} from {self.n_folds} folds "
                f"fitted on {rungs} rungs, on {len(self.ladders)} public ladders "
                f"({', '.join(self.ladders)}"
                f"{'; ' + ', '.join(self.excluded) + ' left out' if self.excluded else ''}): "
                f"{level_percent(self.level)} of |log error| within "
                + (f"{self.q_0:.2%} + {self.q_2:.3g} x {self.fit_sd:.2%} (the fit's residual "
                   f"scale) + {self.q_1:.2%} log10 r" if self.fit_sd is not None and self.q_2
                   else f"{self.q_0:.2%} + {self.q_1:.2%} log10 r"
                   + (f" (the fit's residual scale, {self.fit_sd:.2%}, adds nothing on these "
                      f"ladders)" if self.fit_sd is not None else "")))

    def report(self) -> str:
        return f"reference  {self.describe()}"


@dataclass(frozen=True)
class BlendedModel(CalibrationModel):
    """A ladder's own calibration shrunk towards the reference class (:func:`blend`):
    sigma(r) = w sigma_own(r) + (1 - w) sigma_ref(r), a line in log10 r again."""

    own: CalibrationModel | None = None
    reference: ReferenceModel | None = None
    weight: float = 1.0
    """w = n / (n + PRIOR_FOLDS), the own calibration's weight."""
    own_factor: float = 1.0
    """The factor the own model's sigma(r) enters the blend with: 1 (the shrinkage towards the
    reference class takes the place of its Student-t widening; see the module docstring)."""

    def small_sample_factor(self, level: float = DEFAULT_LEVEL) -> float:
        """1: the blend's shrinkage replaces the small-sample widening."""
        return 1.0

    def to_dict(self) -> dict:
        own = self.own.to_dict() if self.own is not None else {}
        return {**own, "method": "calibrated",
                "model": "w f sigma_own(r) + (1 - w) sigma_ref(r)",
                "sigma_0": self.sigma_0, "k": self.k, "own_sigma_0": own.get("sigma_0"),
                "own_k": own.get("k"), "own_small_sample_factor": self.own_factor,
                "blend_weight": self.weight, "prior_folds": PRIOR_FOLDS,
                "reference": self.reference.to_dict() if self.reference is not None else None}

    def report(self) -> str:
        return (f"calibration  sigma(r) = {self.sigma_0:.3%} + {self.k:.3%} log10 r: "
                f"{self.weight:.2f} x own ({self.own.n_folds} folds) + {1 - self.weight:.2f} "
                f"x reference class")


def blend(own: CalibrationModel, ref: ReferenceModel,
          level: float = DEFAULT_LEVEL) -> BlendedModel:
    """The ladder's own calibration ``own`` shrunk towards the reference class ``ref``:
    w = n / (n + :data:`PRIOR_FOLDS`) for the own model's n folds (Buhlmann 1967 credibility
    weighting, the reference class counting as :data:`PRIOR_FOLDS` folds), sigma(r) =
    w sigma_own(r) + (1 - w) sigma_ref(r): the shrinkage, not the own model's Student-t
    factor, accounts for a calibration from few folds (chosen leave one ladder out; module
    docstring). Both are lines in log10 r, so the blend is one. ``level`` is accepted for
    symmetry with the models' intervals; the blend does not depend on it."""
    w = own.n_folds / (own.n_folds + PRIOR_FOLDS)
    return BlendedModel(sigma_0=w * own.sigma_0 + (1 - w) * ref.sigma_0,
                        k=w * own.k + (1 - w) * ref.k, n_folds=own.n_folds,
                        n_errors=own.n_errors, max_ratio=max(own.max_ratio, ref.max_ratio),
                        law=own.law, ladder=own.ladder, own=own, reference=ref, weight=w)


@dataclass(frozen=True)
class ReferenceClass:
    """Leave-future-out errors of laws on public ladders, with their provenance.

    ``rows`` has one row per (ladder, law, fold, predicted run) and the :data:`COLUMNS`:
    ``ladder``, ``law``, ``n_free`` (free parameters), ``n_budgets`` (rungs fitted),
    ``n_points`` (runs fitted), ``budget`` and ``cut`` [FLOPs] (the fold's budget label and
    largest fitted compute), ``run``, ``ratio`` (r = C_run / cut) and ``log_error``
    (log L_pred - log L_obs).
    """

    rows: pd.DataFrame
    provenance: dict = field(default_factory=dict)
    """Where the errors come from: generator, delphi version and commit, date, settings and,
    per ladder, its source, sha256 and laws (or why it was left out)."""

    @property
    def ladders(self) -> tuple[str, ...]:
        return tuple(sorted(self.rows["ladder"].unique()))

    @property
    def laws(self) -> tuple[str, ...]:
        return tuple(sorted(self.rows["law"].unique()))

    def __len__(self) -> int:
        return len(self.rows)

    def without(self, *ladders: str) -> "ReferenceClass":
        """The same reference class without the errors of ``ladders`` (leave one ladder out:
        a public ladder scored against a reference it did not contribute to)."""
        keep = ~self.rows["ladder"].isin(ladders)
        prov = {**self.provenance, "excluded": sorted(set(self.provenance.get("excluded", []))
                                                      | set(ladders))}
        return ReferenceClass(rows=self.rows[keep].reset_index(drop=True), provenance=prov)

    def select(self, law: str, n_rungs: int | None = None,
               exclude: Iterable[str] = (),
               level: float = DEFAULT_LEVEL) -> tuple[pd.DataFrame, dict]:
        """The errors a reference model for ``law`` at ``n_rungs`` fitted rungs uses, and how
        they were chosen (``laws``, ``rungs``, ``notes``).

        The law's own errors when :data:`MIN_LADDERS` ladders have them, else every law's;
        of those, the folds with n_rungs +- j rungs, j = 0, 1, ... until
        :func:`window_ladders` ``(level)`` ladders contribute, or every ladder left when
        there are fewer (every fold when ``n_rungs`` is None). Ladders in ``exclude`` are
        left out.

        Raises FitError when no errors remain (the message says which filter emptied it).
        """
        exclude = tuple(exclude)
        rows = self.rows[~self.rows["ladder"].isin(exclude)]
        notes: list[str] = []
        if not len(rows):
            raise FitError("the reference class has no errors" + (
                f" outside the ladders {', '.join(exclude)}" if exclude else ""))
        mine = rows[rows["law"] == law]
        kin = rows[rows["law"] == FAMILY.get(law, law)]
        if mine["ladder"].nunique() >= MIN_LADDERS:
            rows, laws = mine, (law,)
        elif law in FAMILY and kin["ladder"].nunique() >= MIN_LADDERS:
            notes.append(f"{mine['ladder'].nunique()} public ladder(s) have errors of law "
                         f"{law!r} (fewer than {MIN_LADDERS}): the errors of {FAMILY[law]!r}, "
                         f"the same form, are used")
            rows, laws = kin, (FAMILY[law],)
        else:
            notes.append(f"{mine['ladder'].nunique()} public ladder(s) have errors of law "
                         f"{law!r} (fewer than {MIN_LADDERS}): every law's errors are used")
            laws = tuple(sorted(rows["law"].unique()))
        nb = rows["n_budgets"].to_numpy(int)
        if n_rungs is None:
            lo, hi = int(nb.min()), int(nb.max())
        else:
            need = min(window_ladders(level), rows["ladder"].nunique())
            for j in range(0, int(max(nb.max(), n_rungs)) + 1):
                lo, hi = max(n_rungs - j, 1), n_rungs + j
                sel = (nb >= lo) & (nb <= hi)
                if rows["ladder"][sel].nunique() >= need:
                    break
            lo, hi = max(lo, int(nb[sel].min())), min(hi, int(nb[sel].max()))
            rows = rows[sel]
            if (lo, hi) != (n_rungs, n_rungs):
                span = f"{lo}" if lo == hi else f"{lo}-{hi}"
                notes.append(f"folds fitted on {span} rungs (the forecast has {n_rungs}): "
                             f"the window widens until {need} public ladders contribute"
                             + ("" if need >= window_ladders(level) else
                                f" (all there are; a {level_percent(level)}"
                                f" reference interval asks for "
                                f"{window_ladders(level)})"))
        return rows, {"laws": laws, "rungs": (lo, hi), "notes": tuple(notes)}

    def model(self, law: str, n_rungs: int | None = None, level: float = DEFAULT_LEVEL,
              exclude: Iterable[str] = (), fit_sd: float | None = None,
              fit_dof: int | None = None) -> ReferenceModel:
        """The reference model for ``law`` at ``n_rungs`` fitted rungs and ``level`` (see the
        module docstring), leaving out the ladders in ``exclude``.

        ``fit_sd`` (with ``fit_dof``): the forecast fit's residual scale [sd of log loss,
        :func:`delphi.fitting.diagnostics.residual_scale`] and residual degrees of freedom.
        With at least :data:`MIN_SD_DOF` of them, the quantile line is conditioned on it,
        q = q_0 + q_2 s_fit + q_1 log10 r, fitted on the folds whose own fits had as many: a
        ladder whose runs scatter about its law is one whose extrapolations miss by more.
        Otherwise the model is unconditional (with a note when the reference class lacks the
        folds' scales, e.g. a version-1 file); :meth:`ReferenceModel.describe` says which.

        Raises FitError when fewer than :data:`MIN_LADDERS` ladders remain, for a level
        outside (0, 1) or a bad ``n_rungs``, or when the quantile regression fails; LawError
        for a law delphi does not know.
        """
        check_level(level, what="level")
        law = get_law(law).name           # LawError naming the known laws
        if n_rungs is not None and (isinstance(n_rungs, bool) or int(n_rungs) != n_rungs
                                    or n_rungs < 1):
            raise FitError(f"n_rungs must be a whole number >= 1 or None, got {n_rungs!r}")
        exclude = tuple(exclude)
        left = set(self.rows["ladder"]) - set(exclude)
        if len(left) < MIN_LADDERS:
            raise FitError(f"the reference class has {len(left)} ladder(s)"
                           + (f" outside {', '.join(exclude)}" if exclude else "")
                           + f" ({', '.join(sorted(left)) or 'none'}): a reference model needs "
                             f"at least {MIN_LADDERS}, so that it is not one ladder's errors")
        rows, info = self.select(law, n_rungs, exclude, level)
        notes = list(info["notes"])
        s = None
        if fit_sd is not None:
            ok = np.isfinite(pd.to_numeric(rows["fit_sd"], errors="coerce")) & (
                pd.to_numeric(rows["fit_dof"], errors="coerce") >= MIN_SD_DOF)
            if not (math.isfinite(fit_sd) and fit_sd >= 0):
                raise FitError(f"fit_sd must be a finite sd >= 0, got {fit_sd!r}")
            if fit_dof is None or fit_dof < MIN_SD_DOF:
                pass          # a scale from 0 or 1 dof: the unconditioned line, as described
            elif rows["ladder"][ok].nunique() < MIN_LADDERS:
                notes.append(f"{rows['ladder'][ok].nunique()} public ladder(s) record their "
                             f"folds' residual scale here (fewer than {MIN_LADDERS}): the "
                             f"interval is not conditioned on the fit's")
            else:
                rows = rows[ok]
                s = rows["fit_sd"].to_numpy(float)
        x = np.log10(np.maximum(rows["ratio"].to_numpy(float), 1.0))
        y = np.abs(rows["log_error"].to_numpy(float))
        counts = rows["ladder"].map(rows["ladder"].value_counts()).to_numpy(float)
        w = 1.0 / counts          # each ladder weighs the same
        q = _quantile_line(x, y, level, w * len(w) / w.sum(), s)
        q0, q1, q2 = (q + (0.0,))[:3]
        at = float(fit_sd) if s is not None else None
        z = _z(level)
        folds = rows[["ladder", "law", "budget"]].drop_duplicates()
        base = q0 + q2 * at if at is not None else q0
        return ReferenceModel(sigma_0=base / z, k=q1 / z, n_folds=len(folds), n_errors=len(rows),
                              max_ratio=float(rows["ratio"].max()), law=law,
                              ladder="reference class", level=level, q_0=q0, q_1=q1,
                              q_2=q2, fit_sd=at,
                              ladders=tuple(sorted(rows["ladder"].unique())),
                              laws=info["laws"], rungs=info["rungs"], n_rungs=n_rungs,
                              excluded=exclude, notes=tuple(notes))

    def to_json(self, path: str | Path) -> Path:
        """Write the errors and provenance (gzip-compressed JSON when ``path`` ends in .gz).
        Rows are stored as lists in :data:`COLUMNS` order, floats to 7 significant digits."""
        path = Path(path)
        rows = [[_round(v) for v in r] for r in self.rows[list(COLUMNS)].itertuples(index=False)]
        doc = {"format": "delphi reference errors v2", "columns": list(COLUMNS),
               "provenance": self.provenance, "rows": rows}
        text = json.dumps(doc, separators=(",", ":"), sort_keys=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".gz":
            # mtime=0: the same errors give the same bytes
            with open(path, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
                gz.write(text.encode())
        else:
            path.write_text(text)
        return path

    @classmethod
    def from_json(cls, path: str | Path) -> "ReferenceClass":
        """Read a file written by :meth:`to_json`.

        Raises DelphiError when the file is missing or not a reference-errors file (the
        message names the path and what is wrong)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
            text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
            doc = json.loads(text)
        except (OSError, ValueError, EOFError) as exc:
            raise DelphiError(f"cannot read the reference errors {str(path)!r}: {exc}") from exc
        cols = doc.get("columns") if isinstance(doc, dict) else None
        if cols not in (list(COLUMNS), list(COLUMNS_V1)):
            raise DelphiError(f"{str(path)!r} is not a delphi reference-errors file (expected "
                              f"columns {list(COLUMNS)})")
        try:
            rows = pd.DataFrame(doc.get("rows", []), columns=cols)
            for c in COLUMNS[len(cols):]:
                rows[c] = np.nan          # a version-1 file: no residual scales recorded
            num = rows[["ratio", "log_error"]].apply(pd.to_numeric, errors="coerce")
        except (ValueError, TypeError) as exc:
            raise DelphiError(f"{str(path)!r}: malformed rows ({exc})") from exc
        bad = ~np.isfinite(num["ratio"]) | ~np.isfinite(num["log_error"]) | (num["ratio"] <= 0)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DelphiError(f"{str(path)!r}: row {i} (ladder {rows['ladder'].iloc[i]!r}, run "
                              f"{rows['run'].iloc[i]!r}) has a missing, non-numeric or "
                              f"non-finite error, or a ratio <= 0")
        rows[["ratio", "log_error"]] = num
        rows[["fit_sd", "fit_dof"]] = rows[["fit_sd", "fit_dof"]].apply(
            pd.to_numeric, errors="coerce")
        return cls(rows=rows.astype({"n_free": int, "n_budgets": int, "n_points": int}),
                   provenance=doc.get("provenance", {}))

    def report(self) -> str:
        p = self.provenance
        return (f"reference class: {len(self)} leave-future-out errors of "
                f"{', '.join(self.laws)} on {len(self.ladders)} public ladders "
                f"({', '.join(self.ladders)}); generated {p.get('date', '?')} by "
                f"{p.get('generated_by', '?')} (delphi {p.get('delphi_version', '?')})")

    def __str__(self) -> str:
        return self.report()


def _round(v):
    if isinstance(v, (float, np.floating)):
        return float(f"{float(v):.7g}")
    if isinstance(v, np.integer):
        return int(v)
    return v


def reference_rows(errors: LFOErrors, n_free: int,
                   max_per_fold: int | None = MAX_PER_FOLD,
                   runs: Iterable[str] | None = None) -> pd.DataFrame:
    """The :data:`COLUMNS` rows of one leave-future-out pass (``errors``) of a law with
    ``n_free`` free parameters; only the predictions of ``runs`` (default: all); at most
    ``max_per_fold`` predictions per fold, evenly spaced in order of r (always the nearest
    and the farthest)."""
    out = []
    keep = None if runs is None else np.isin(errors.run.astype(str), list(runs))
    fits = errors.fits if len(errors.fits) == len(errors.folds) else [None] * len(errors.folds)
    for fold, fit in zip(errors.folds, fits):
        sd = residual_scale(fit) if fit is not None else math.nan
        dof = fit.dof if fit is not None else math.nan
        sel = errors.budget == fold["budget"]
        sel = np.flatnonzero(sel if keep is None else sel & keep)
        sel = sel[np.argsort(errors.ratio[sel], kind="mergesort")]
        if max_per_fold is not None and len(sel) > max_per_fold:
            sel = sel[np.unique(np.round(np.linspace(0, len(sel) - 1, max_per_fold)).astype(int))]
        for i in sel:
            out.append((errors.ladder, errors.law, n_free, fold["n_budgets"], fold["n_points"],
                        fold["budget"], fold["cut"], str(errors.run[i]), float(errors.ratio[i]),
                        float(errors.log_error[i]), sd, dof))
    return pd.DataFrame(out, columns=list(COLUMNS))


def build_reference(ladders: Sequence, laws: Callable | None = None, *,
                    max_folds: int | None = MAX_FOLDS, max_per_fold: int | None = MAX_PER_FOLD,
                    seed: int = 0, provenance: Mapping | None = None,
                    progress: Callable[[str], None] | None = None) -> ReferenceClass:
    """Leave-future-out errors of each ladder's laws: a :class:`ReferenceClass`.

    ``ladders``: :class:`~delphi.ladder.Ladder` objects, bundled names or paths (as
    :func:`delphi.load_ladder` reads them); their ``name`` labels the rows.
    ``laws(ladder)``: the :class:`~delphi.selection.Candidate` objects (or law names) to refit
    on it; default :func:`delphi.selection.default_candidates` (every law that applies to its
    design). Each is refitted by
    :func:`delphi.calibration.leave_future_out` at up to ``max_folds`` cuts (the settings a
    forecast calibrates with), and its errors are kept at the runs of the ladder's compute
    frontier (the lowest loss of each budget): a forecast of a larger run is a forecast of
    the best run at a larger budget, not of an isoFLOP grid's far ends. A law of C is kept
    only on a ladder whose frontier is close to compute-optimal (:data:`FRONTIER_SPAN`). A
    law that cannot be cut, or is not kept, is recorded in the provenance with why.
    """
    frames, record = [], {}
    for ladder in ladders:
        ladder = load_ladder(ladder) if isinstance(ladder, (str, Path)) else as_ladder(ladder)
        cands = (laws or default_candidates)(ladder)
        entry = {"source": str(ladder.source), "sha256": ladder.fingerprint(), "laws": {}}
        frontier = _frontier_runs(ladder)
        for cand in cands:
            cand = cand if isinstance(cand, Candidate) else Candidate(law=str(cand))
            law = get_law(cand.law)
            n_free = sum(p.name not in cand.fixed for p in law.params)
            if progress is not None:
                progress(f"{ladder.name}: {law.name}")
            why = outside_class(ladder, law)
            if why is not None:
                entry["laws"][law.name] = {"skipped": why}
                continue
            try:
                errors = leave_future_out(ladder, law, fixed=cand.fixed or None,
                                          delta=cand.delta, max_folds=max_folds, seed=seed)
            except DelphiError as exc:
                entry["laws"][law.name] = {"skipped": str(exc)}
                continue
            rows = reference_rows(errors, n_free, max_per_fold, runs=frontier)
            entry["laws"][law.name] = {"fixed": dict(cand.fixed), "folds": errors.n_folds,
                                       "errors": len(rows), "notes": list(errors.notes)}
            frames.append(rows)
        record[ladder.name] = entry
    rows = (pd.concat(frames, ignore_index=True) if frames else
            pd.DataFrame(columns=list(COLUMNS)))
    prov = {"max_folds": max_folds, "max_per_fold": max_per_fold, "seed": seed,
            **dict(provenance or {}), "ladders": record}
    return ReferenceClass(rows=rows, provenance=prov)


def _frontier_runs(ladder) -> set[str] | None:
    """The runs of the ladder's compute frontier (the lowest loss of each budget), or None
    (every run) when the ladder has no compute."""
    finals, _ = ladder.final_points()
    if "flops" not in finals.columns:
        return None
    finals = finals.dropna(subset=["flops"])
    front, _, _ = compute_frontier(finals)
    return set(front["run"].astype(str))


def outside_class(ladder, law) -> str | None:
    """Why ``law``'s reference errors do not apply to ``ladder`` (None when they do).

    The one rule for which ladders a law's reference class is made of and which ladders it
    then speaks for (:func:`build_reference` keeps a ladder's errors, and
    :func:`delphi.selection.compare` ranks a law by the reference class on a ladder, only
    where this is None; :func:`delphi.predict` says when it is not): a law of compute alone
    is fitted to the compute frontier, so its errors belong to the ladders whose frontier's
    tokens per parameter D/N span at most :data:`FRONTIER_SPAN` (compute-optimal ladders
    and isoFLOP minima; a ladder without N and D counts as one). Other laws: always None.
    Raises LawError for a law delphi does not know."""
    law = get_law(law)
    if law.inputs != ("flops",):
        return None
    span = frontier_span(ladder)
    if span is None or span <= FRONTIER_SPAN:
        return None
    return (f"a law of C is fitted to the compute frontier, whose tokens per parameter span "
            f"{span:.3g}x here (> {FRONTIER_SPAN:g}x): not a compute-optimal ladder, as the "
            f"ones its reference errors come from are")


def frontier_span(ladder) -> float | None:
    """max / min of D/N over the ladder's compute frontier (None without N and D)."""
    finals, _ = ladder.final_points()
    if not {"params", "tokens", "flops"} <= set(finals.columns):
        return None
    finals = finals.dropna(subset=["params", "tokens", "flops"])
    if not len(finals):
        return None
    front, _, _ = compute_frontier(finals)
    ratio = (front["tokens"] / front["params"]).to_numpy(float)
    return float(ratio.max() / ratio.min())


@lru_cache(maxsize=4)
def _load(path: str) -> ReferenceClass:
    return ReferenceClass.from_json(path)


def load_reference(path: str | Path | None = None) -> ReferenceClass:
    """The reference class at ``path`` (default: the one shipped with delphi,
    :data:`REFERENCE_PATH`), read once per process.

    Raises DelphiError when the file is missing or malformed."""
    return _load(str(Path(path) if path is not None else REFERENCE_PATH))
