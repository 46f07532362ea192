"""Forecasts: fit a ladder, predict a target. The one entry the CLI, notebooks and registry share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from . import __version__
from .errors import FitError, TargetError
from .fitting import DEFAULT_DELTA, DIVERGENCE_THRESHOLD, Fit, fit
from .ladder import FLOPS_PER_PARAM_TOKEN, Ladder
from .laws import Law, get_law
from .records import positive_number
from .uncertainty import DEFAULT_LEVEL, Interval

__all__ = ["Target", "Forecast", "predict", "default_law"]


def _check_positive(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    return positive_number(value, f"target {name} must be a positive finite number", TargetError)


@dataclass(frozen=True)
class Target:
    """The run to predict.

    Attributes
    ----------
    flops: C, training FLOPs (computed as 6·N·D when only N and D are given).
    params: N, parameters (count).
    tokens: D, training tokens.
    name: a label, e.g. ``"marin-535b-a23b hero run"``.
    peak_lr: the target's peak learning rate (read by ``chinchilla-lr``).
    schedule: its LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"`` (read by
        ``chinchilla-ckpt`` through the LR ratio at the end of the run).
    steps, batch_size: run length [steps] and batch [tokens]; D = steps x batch when
        ``tokens`` is not given.
    active_params: parameters active per token (MoE); C = 6 x active x D, as in the ladder.

    Raises
    ------
    TargetError
        A value is not a positive finite number, nothing at all is given, or C, N and D are
        all given and C is more than 25% away from 6·N·D.
    """

    flops: float | None = None
    params: float | None = None
    tokens: float | None = None
    name: str | None = None
    peak_lr: float | None = None
    schedule: str | None = None
    steps: int | None = None
    batch_size: float | None = None
    active_params: float | None = None
    flops_source: str = field(default="", compare=False, repr=False)
    """How :attr:`flops` was obtained: ``"given"``, ``"6ND"`` (total N) or ``"6 N_active D"``
    (set on construction)."""

    def __post_init__(self) -> None:
        for key in ("flops", "params", "tokens", "peak_lr", "steps", "batch_size",
                    "active_params"):
            object.__setattr__(self, key, _check_positive(key, getattr(self, key)))
        if self.tokens is None and self.steps is not None and self.batch_size is not None:
            object.__setattr__(self, "tokens", self.steps * self.batch_size)
        n = self.active_params or self.params
        if self.flops is not None and n is not None and self.tokens is not None:
            six_nd = FLOPS_PER_PARAM_TOKEN * n * self.tokens
            if abs(self.flops / six_nd - 1) > 0.25:
                what = "active params" if self.active_params else "params"
                raise TargetError(
                    f"target flops {self.flops:.4g} disagree with 6 x {what} x tokens = "
                    f"{six_nd:.4g}; give flops or N and D (for MoE, --target-active-params)")
        if self.schedule is not None:
            self.final_lr_ratio()  # fail early on a malformed schedule
        if self.flops is not None:
            object.__setattr__(self, "flops_source", "given")
        elif n is not None and self.tokens is not None:
            object.__setattr__(self, "flops", FLOPS_PER_PARAM_TOKEN * n * self.tokens)
            object.__setattr__(self, "flops_source",
                               "6 N_active D" if self.active_params else "6ND")
        if self.flops is None and (self.params is None or self.tokens is None):
            raise TargetError("a target needs --target-flops, or both --target-params and "
                              "--target-tokens")

    def final_lr_ratio(self) -> float:
        """h = lr / peak_lr at the last step of :attr:`schedule`.

        Raises
        ------
        TargetError
            No schedule, or a malformed one.
        """
        from .errors import DelphiError
        from .schedules import Schedule

        if self.schedule is None:
            raise TargetError("the target has no schedule")
        steps = int(self.steps) if self.steps else 10_000
        try:
            sched = Schedule.parse(self.schedule, peak_lr=1.0, total_steps=steps)
        except DelphiError as exc:
            raise TargetError(f"target schedule {self.schedule!r}: {exc}") from None
        return float(sched.lr_at([steps])[0])

    def inputs(self, law: Law, skip: tuple[str, ...] = ()) -> dict[str, list[float]]:
        """The law's inputs at this target (except ``skip``), shape (1,) each.

        Raises
        ------
        TargetError
            The law reads a quantity the target does not give.
        """
        out = {}
        for col in law.inputs:
            if col in skip:
                continue
            value = getattr(self, col, None)
            if value is None:
                flags = " and ".join(f"--target-{c.replace('_', '-')}" for c in law.inputs
                                     if c not in skip)
                raise TargetError(f"law {law.name!r} needs the target's {col}; give {flags}")
            out[col] = [value]
        return out

    def to_dict(self) -> dict:
        return {"name": self.name, "flops": self.flops, "params": self.params, "tokens": self.tokens,
                "active_params": self.active_params, "peak_lr": self.peak_lr,
                "schedule": self.schedule, "steps": self.steps, "batch_size": self.batch_size}


def _as_target(target) -> Target:
    """A :class:`Target` from a Target, a dict of its fields, or a bare number (C in FLOPs)."""
    if isinstance(target, Target):
        return target
    if isinstance(target, (int, float)) and not isinstance(target, bool):
        return Target(flops=float(target))
    if isinstance(target, dict):
        fields = set(Target.__dataclass_fields__)
        unknown = sorted(set(target) - fields)
        if unknown:
            raise TargetError(f"unknown target field(s) {', '.join(map(repr, unknown))}; "
                              f"known: {', '.join(sorted(fields))}")
        return Target(**target)
    raise TargetError(f"a target is a Target, a dict such as {{'flops': 1e23}} or a number of "
                      f"FLOPs, got {type(target).__name__}")


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
        f"--target-active-params (API: active_params) or --target-flops")


def _target_inputs(target: Target, law: Law, result: Fit, ladder: Ladder):
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
            inputs["h"] = [target.final_lr_ratio()]
        else:
            fin, _ = ladder.final_points()
            h = float(np.median(_final_h(ladder, fin)))
            inputs["h"] = [h]
            notes.append(f"target schedule not given: assumed it ends like the ladder's finished "
                         f"runs (final LR ratio h = {h:.3g})")
    return inputs, notes


def _final_h(ladder: Ladder, fin) -> np.ndarray:
    from .fitting.api import _lr_ratio
    return _lr_ratio(ladder, fin.reset_index(drop=True))


def default_law(ladder: Ladder, target: Target) -> str:
    """``chinchilla`` when the target and ladder give N and D, else ``power`` (compute only)."""
    if target.params is not None and target.tokens is not None and ladder.has("params", "tokens"):
        return "chinchilla"
    return "power"


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
    notes: tuple[str, ...] = field(default=())
    """Assumptions and choices made on the user's behalf."""
    interval: "Interval | None" = None
    """New-run and expected-loss intervals (None when they cannot be estimated; see notes)."""

    @property
    def lower(self) -> float | None:
        """Lower end of the new-run interval."""
        return self.interval.lower if self.interval else None

    @property
    def upper(self) -> float | None:
        """Upper end of the new-run interval."""
        return self.interval.upper if self.interval else None

    def to_dict(self) -> dict:
        """The JSON object printed by ``delphi predict --json``."""
        d = self.fit.to_dict()
        return {
            "law": d["law"],
            "params": d["params"],
            "target": self.target.to_dict(),
            "prediction": {"loss": self.loss, "metric": self.metric, "unit": self.unit,
                           "extrapolation": self.extrapolation,
                           **(self.interval.to_dict() if self.interval else
                              {"lower": None, "upper": None, "mean_lower": None,
                               "mean_upper": None, "level": None, "kind": None,
                               "method": None})},
            "fit": d["fit"],
            "ladder": {"name": self.ladder_name, "source": self.ladder_source,
                       "sha256": self.ladder_sha256},
            "notes": list(self.notes),
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
        for note in self.notes:
            lines.append(f"note       {note}")
        lines.append(f"prediction {self.loss:.4f} {self.unit}")
        iv = self.interval
        if iv is not None:
            label = "bootstrap" if iv.method == "bootstrap" else "delta method, approximate"
            pct = f"{100 * iv.level:.4g}%"
            lines.append(f"           {pct} interval for one new run  "
                         f"[{iv.lower:.4f}, {iv.upper:.4f}]  ({label})")
            lines.append(f"           {pct} interval for the expected loss "
                         f"[{iv.mean_lower:.4f}, {iv.mean_upper:.4f}]  (run noise "
                         f"{iv.noise:.2%} from {iv.noise_source})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.report())


def predict(ladder: Ladder, target: Target | Mapping[str, float], law: str | Law | None = None, *,
            fixed: Mapping[str, float] | None = None,
            bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
            fit_max_flops: float | None = None, include_unfinished: bool = False,
            divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0,
            interval: str | None = "auto", level: float = DEFAULT_LEVEL, n_boot: int = 200,
            boot_unit: str = "run", n_jobs: int | None = None,
            workers: int | None = None) -> Forecast:
    """Fit ``law`` to ``ladder`` and predict the loss of ``target``, with an interval.

    Parameters
    ----------
    ladder: the runs.
    target: a :class:`Target` or a dict with ``flops`` [FLOPs] and/or ``params`` and ``tokens``.
    law: law name or object; default :func:`default_law` (``power`` when only C is known).
    fixed, bounds, delta, fit_max_flops, include_unfinished, divergence_threshold, seed:
        as in :func:`delphi.fitting.fit`.
    interval: ``"bootstrap"`` (resample runs, refit: :func:`delphi.uncertainty.bootstrap`),
        ``"delta"`` (fast, approximate), ``"auto"`` (bootstrap when the ladder has at least
        2p + 2 points for p free parameters, else delta) or None.
    level: interval level (default 0.9). n_boot, boot_unit: bootstrap settings
        (``boot_unit="budget"`` resamples whole compute budgets).
    n_jobs: joblib workers for the bootstrap (see :mod:`delphi.parallel`); ``workers`` is an
        older alias.

    Returns
    -------
    Forecast

    Raises
    ------
    TargetError: invalid target, or one the law cannot be evaluated at.
    LadderError, LawError, FitError: see :func:`delphi.fitting.fit`.
    """
    target = _as_target(target)
    law = get_law(law or default_law(ladder, target))
    _base_inputs(target, law)  # fail on a missing input before spending time on the fit
    _check_moe_target(target, law, ladder)
    result = fit(ladder, law, fixed=fixed, bounds=bounds, delta=delta, fit_max_flops=fit_max_flops,
                 include_unfinished=include_unfinished,
                 divergence_threshold=divergence_threshold, seed=seed)
    inputs, notes = _target_inputs(target, law, result, ladder)
    loss = float(result.predict(inputs)[0])
    largest, smallest = result.extra.get("max_flops"), result.extra.get("min_flops")
    extrapolation = target.flops / largest if (largest and target.flops) else None
    if extrapolation is not None and extrapolation > 1e4:
        notes.append(f"the target is {extrapolation:.3g}x the largest fitted run's compute: "
                     f"more than four orders of magnitude of extrapolation")
    if smallest and target.flops and target.flops < smallest:
        notes.append(f"the target's compute {target.flops:.3g} is below the smallest fitted run "
                     f"({smallest:.3g}): the law is extrapolated downwards")
    if law.floor and law.floor in result.fixed:
        notes.append(f"{law.floor} fixed at {result.fixed[law.floor]:g} (not fitted)")
    if not result.converged:
        notes.append("THE FIT DID NOT CONVERGE: do not trust this prediction")
    band = _interval(result, inputs, interval, level, n_boot, boot_unit, seed,
                     n_jobs if n_jobs is not None else workers, notes)
    return Forecast(target=target, loss=loss, fit=result, ladder_name=ladder.name,
                    ladder_source=ladder.source, ladder_sha256=result.extra["sha256"],
                    metric=ladder.metric, unit=ladder.unit, extrapolation=extrapolation,
                    notes=tuple(notes), interval=band)


def _interval(result: Fit, inputs, method, level, n_boot, unit, seed, n_jobs, notes):
    from .uncertainty import bootstrap, bootstrap_interval, delta_interval

    if method is None or method == "none":
        return None
    if method not in ("auto", "bootstrap", "delta"):
        raise FitError(f"unknown interval method {method!r}; use auto, bootstrap, delta or none")
    # Bad settings are errors, not a silently missing interval.
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise FitError(f"interval level must be in (0, 1), got {level!r}")
    from .uncertainty import MAX_DRAWS
    if not (isinstance(n_boot, int) and 20 <= n_boot <= MAX_DRAWS):
        raise FitError(f"a bootstrap interval needs 20 to {MAX_DRAWS:,} draws (--n-boot), got "
                       f"{n_boot!r}")
    if not (isinstance(seed, int) and seed >= 0):
        raise FitError(f"seed must be a non-negative integer, got {seed!r}")
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
    try:
        if method == "delta":
            return delta_interval(result, inputs, level=level)
        draws = bootstrap(result, n=n_boot, unit=unit, seed=seed, n_jobs=n_jobs)
        notes.extend(draws.warnings)
        if draws.n_failed:
            notes.append(f"{draws.n_failed} of {n_boot} bootstrap draws failed to refit and "
                         f"were left out")
        return bootstrap_interval(result, draws, inputs, level=level, seed=seed)
    except FitError as exc:
        notes.append(f"no interval: {exc}")
        return None
