"""Scoring registered forecasts against observed losses, and the scoreboard over a registry."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from ..errors import RegistryError
from ..core.text import level_percent, plural
from .schema import ACCURACY_UNIT, Entry, ForecastRecord, IntervalRecord


__all__ = ["Score", "ComparisonScore", "Scoreboard", "predicted_at", "band_at", "score_outcome",
           "score_comparison", "z_and_pit", "scoreboard", "UNIT_RATIO", "unit_mismatch",
           "unit_reason"]


def predicted_at(forecast: ForecastRecord, fraction: float, *, id: str = "?",
                 unit: str | None = None) -> float:
    """Predicted loss at ``fraction`` of training (1.0 = the final loss); for an accuracy
    prediction (``unit`` ``"accuracy"``, which only words the errors) the accuracy, a fraction.

    Below 1.0 the forecast curve is interpolated linearly in the fraction; the point forecast
    closes the curve at 1.0 when the curve stops short of it.

    Raises
    ------
    RegistryError
        ``fraction`` < 1 and the prediction has no curve, or ``fraction`` is before the curve's
        first point.
    """
    if fraction == 1.0:
        return forecast.loss
    if forecast.curve is None:
        what = "accuracy" if unit == ACCURACY_UNIT else "loss"
        raise RegistryError(f"prediction {id!r} has no forecast curve, so a partial outcome "
                            f"(fraction {fraction:g}) cannot be scored; score the final {what} "
                            f"(fraction 1) or register the curve with the prediction")
    fractions = [f for f, _ in forecast.curve]
    losses = [loss for _, loss in forecast.curve]
    if fractions[-1] < 1.0:
        fractions.append(1.0)
        losses.append(forecast.loss)
    if fraction < fractions[0]:
        raise RegistryError(f"fraction {fraction:g} is before the start of prediction {id!r}'s "
                            f"forecast curve ({fractions[0]:g}); it cannot be scored")
    import numpy as np  # here: `delphi registry list` and `show` stay free of numpy

    return float(np.interp(fraction, fractions, losses))


def band_at(forecast: ForecastRecord, fraction: float) -> IntervalRecord | None:
    """The forecast curve's band at ``fraction`` (``predict --curve``), its ends interpolated
    linearly in the fraction as the curve is (:func:`predicted_at`); None when the forecast has
    no band or ``fraction`` is before the curve's first point. At fraction 1 the band's last
    point is the final interval."""
    band = forecast.band
    if band is None or not forecast.curve:
        return None
    fractions = [f for f, _ in forecast.curve]
    if fraction < fractions[0] or fraction > 1.0:
        return None
    lower, upper = list(band.lower), list(band.upper)
    if fractions[-1] < 1.0:
        if forecast.interval is None:
            return None
        fractions.append(1.0)
        lower.append(forecast.interval.lower)
        upper.append(forecast.interval.upper)
    import numpy as np

    lo = float(np.interp(fraction, fractions, lower))
    hi = float(np.interp(fraction, fractions, upper))
    if not lo < hi:
        return None
    return IntervalRecord(lower=lo, upper=hi, level=band.level, kind="curve band",
                          method=band.method)


@dataclass(frozen=True)
class Score:
    """An observed loss scored against its prediction.

    Errors are in the target's unit (nats/token unless the entry says otherwise). For an
    accuracy prediction (unit ``"accuracy"``, :meth:`Registry.register_accuracy`) values are
    fractions, ``error_points`` = 100 x (actual - predicted) is the error in points and
    ``rel_error`` is None (a relative error of an accuracy means little).
    ``z`` and ``pit`` treat the interval as a central interval of a normal distribution at its
    level: mean = the interval's midpoint, sigma = half-width / Phi^-1((1 + level) / 2); they are
    None when the prediction has no interval or the outcome is partial (intervals are for the
    final loss), unless the forecast curve has a band (``predict --curve``): a partial outcome
    is then scored against the band at its fraction (:func:`band_at`).
    """

    prediction_id: str
    outcome_id: str
    fraction: float
    """Share of training done when ``actual`` was measured (1.0 = final)."""
    actual: float
    predicted: float
    """Predicted loss at ``fraction`` (interpolated on the forecast curve below 1.0)."""
    error: float
    """actual - predicted."""
    rel_error: float | None
    """(actual - predicted) / predicted (signed; positive = the run did worse than forecast);
    None for an accuracy prediction."""
    abs_error: float
    """|actual - predicted|."""
    interval: IntervalRecord | None
    inside: bool | None
    """actual within [lower, upper]; None without an interval."""
    z: float | None
    pit: float | None
    """Probability integral transform Phi(z): uniform on [0, 1] for calibrated forecasts."""
    no_interval_reason: str | None
    external: bool
    target_name: str | None
    unit: str | None
    source: str | None
    created_at: str | None = None
    error_points: float | None = None
    """Accuracy predictions only: 100 x (actual - predicted), in points (positive = the run
    scored higher than forecast)."""

    @property
    def is_accuracy(self) -> bool:
        """True for a benchmark-accuracy prediction (unit ``"accuracy"``)."""
        return self.unit == ACCURACY_UNIT

    def error_text(self) -> str:
        """The error as reports show it: ``+1.23 pts`` (accuracy) or ``+0.52%`` (relative)."""
        if self.error_points is not None:
            return f"{self.error_points:+.2f} pts"
        return f"{self.rel_error:+.2%}"

    @property
    def final(self) -> bool:
        """True for an outcome at the end of training."""
        return self.fraction == 1.0

    def to_dict(self) -> dict:
        """JSON-ready dict (the output of ``delphi score --json``)."""
        return {"prediction_id": self.prediction_id, "outcome_id": self.outcome_id,
                "target": self.target_name, "fraction": self.fraction, "actual": self.actual,
                "predicted": self.predicted, "error": self.error, "rel_error": self.rel_error,
                "abs_error": self.abs_error, "error_points": self.error_points,
                "interval": self.interval.model_dump(mode="json") if self.interval else None,
                "inside": self.inside, "z": self.z, "pit": self.pit,
                "no_interval_reason": self.no_interval_reason, "external": self.external,
                "unit": self.unit, "source": self.source, "created_at": self.created_at}

    def report(self) -> str:
        """Readable multi-line summary."""
        unit = f" {self.unit}" if self.unit else ""
        if self.is_accuracy:
            return self._accuracy_report()
        at = "final loss" if self.final else f"at {self.fraction:.0%} of training (forecast curve)"
        lines = [f"scored     {self.prediction_id}{' (external forecast)' if self.external else ''}"
                 f", {at}; outcome {self.outcome_id}",
                 f"predicted  {self.predicted:.4f}{unit}",
                 f"actual     {self.actual:.4f}{unit}"
                 + (f"  ({self.source})" if self.source else ""),
                 f"error      {self.error:+.4f} (relative {self.rel_error:+.3%}), "
                 f"absolute {self.abs_error:.4f}"]
        if self.interval is not None:
            iv = self.interval
            lines.append(f"interval   {level_percent(iv.level)} [{iv.lower:.4f}, {iv.upper:.4f}]"
                         f"{f' ({iv.kind})' if iv.kind else ''}: "
                         f"{'inside' if self.inside else 'OUTSIDE'}; z = {self.z:+.2f}, "
                         f"PIT = {self.pit:.3f}")
        else:
            lines.append(f"interval   none: {self.no_interval_reason}")
        ratio = self.actual / self.predicted if self.predicted > 0 else None
        if ratio is not None and not 1 / UNIT_RATIO <= ratio <= UNIT_RATIO:
            # a number in bits/byte scored against nats/token was reported as a -63% miss
            # with no word on the likely cause
            lines.append(f"check      the actual is {ratio:.3g}x the prediction: another unit or "
                         f"metric? The prediction is in {self.unit or 'its unit'} (the "
                         f"outcome is recorded as given)")
        return "\n".join(lines)

    def _accuracy_report(self) -> str:
        at = ("final accuracy" if self.final else
              f"accuracy at {self.fraction:.0%} of training (forecast curve)")
        lines = [f"scored     {self.prediction_id} ({self.target_name or 'accuracy'}), {at}; "
                 f"outcome {self.outcome_id}",
                 f"predicted  {100 * self.predicted:.2f} points",
                 f"actual     {100 * self.actual:.2f} points"
                 + (f"  ({self.source})" if self.source else ""),
                 f"error      {self.error_points:+.2f} points (actual - predicted)"]
        if self.interval is not None:
            iv = self.interval
            lines.append(f"interval   {level_percent(iv.level)}"
                         f" [{100 * iv.lower:.2f}, {100 * iv.upper:.2f}]"
                         f" points{f' ({iv.kind})' if iv.kind else ''}: "
                         f"{'inside' if self.inside else 'OUTSIDE'}; z = {self.z:+.2f}, "
                         f"PIT = {self.pit:.3f}")
        else:
            lines.append(f"interval   none: {self.no_interval_reason}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


UNIT_RATIO = 1.3
"""An actual loss more than this factor above or below its prediction gets a ``check`` line
asking whether it is in another unit or metric (bits vs nats: 1.44x; bits/byte vs nats/token:
~2-3x); the score itself does not depend on it."""


def unit_mismatch(actual: float, predicted: float, unit: str | None) -> str | None:
    """Why a loss ``actual`` [any unit] more than :data:`UNIT_RATIO` away from ``predicted``
    (in ``unit``, e.g. ``nats/token``) looks like another unit: ``"it is 1.44x the
    prediction, 1/ln 2: bits against a prediction in nats"``; None within the factor
    (the reasons: :func:`unit_reason`)."""
    if not predicted > 0 or 1 / UNIT_RATIO <= actual / predicted <= UNIT_RATIO:
        return None
    r = actual / predicted
    return f"it is {r:.3g}x the prediction, {unit_reason(r, unit)}"


def unit_reason(ratio: float, unit: str | None) -> str:
    """The likely cause of a loss ``ratio`` x its prediction (in ``unit``, default
    ``nats/token``), as a question: bits/nats = 1/ln 2 = 1.443 (within 3%; ln 2 = 0.693 against
    a prediction in bits); bits/byte against
    nats/token = 1 / (ln 2 x bytes per token), 0.2-0.6 for 2.4-7 bytes a token (and its
    inverse); else another unit, metric or evaluation set."""
    r, ln2 = ratio, math.log(2)
    unit = unit or "nats/token"
    bits = unit.startswith("bits")
    # only the direction the prediction's unit allows: 0.69x a prediction in nats is not
    # nats against bits
    if abs(r * ln2 - 1) < 0.03 and not bits:
        return "1/ln 2: an actual in bits against a prediction in nats?"
    if abs(r / ln2 - 1) < 0.03 and bits:
        return "ln 2: an actual in nats against a prediction in bits?"
    if "token" in unit and 0.2 <= r <= 0.6:
        return (f"about 1 / (ln 2 x bytes per token): an actual in bits/byte against a "
                f"prediction in {unit}?")
    if "byte" in unit and 1 / 0.6 <= r <= 5:
        return (f"about ln 2 x bytes per token: an actual in nats/token against a prediction "
                f"in {unit}?")
    return "another unit, metric or evaluation set?"


def z_and_pit(interval: IntervalRecord, actual: float) -> tuple[float, float]:
    """z and PIT of ``actual`` against ``interval`` read as the central interval of a normal
    distribution at its level: mean the midpoint, sigma = half-width / Phi^-1((1 + level) / 2);
    PIT = Phi(z)."""
    q = NormalDist().inv_cdf((1.0 + interval.level) / 2.0)
    sigma = (interval.upper - interval.lower) / (2.0 * q)
    z = (actual - (interval.lower + interval.upper) / 2.0) / sigma
    return z, NormalDist().cdf(z)


def score_outcome(prediction: Entry, *, outcome_id: str, actual: float, fraction: float,
                  source: str | None, created_at: str | None = None) -> Score:
    """Score ``actual`` (loss at ``fraction`` of training) against ``prediction``.

    Raises
    ------
    RegistryError
        See :func:`predicted_at`; also a score that is not a finite number.
    """
    fc = prediction.forecast
    assert fc is not None and prediction.target is not None
    accuracy = prediction.target.unit == ACCURACY_UNIT
    predicted = predicted_at(fc, fraction, id=prediction.id, unit=prediction.target.unit)
    error = actual - predicted
    interval = inside = z = pit = reason = None
    band = band_at(fc, fraction) if fraction != 1.0 else None
    if fc.interval is None and band is None:
        reason = "the forecast has no interval, so no z-score or PIT"
    elif fraction != 1.0 and band is None:
        reason = (f"the interval is for the final {'accuracy' if accuracy else 'loss'}; a "
                  f"partial outcome has no z-score or PIT (without a curve band)")
    else:
        interval = fc.interval if band is None else band
        inside = bool(interval.lower <= actual <= interval.upper)
        z, pit = z_and_pit(interval, actual)
    # Extreme numbers (an entry written before losses were range-checked) could overflow into
    # infinities, which no report or JSON may carry: say which prediction instead.
    for name, value in (("predicted", predicted), ("error", error),
                        ("relative error", error / predicted), ("z", z)):
        if value is not None and not math.isfinite(value):
            raise RegistryError(f"outcome {outcome_id!r} cannot be scored against prediction "
                                f"{prediction.id!r}: its {name} is not a finite number "
                                f"(actual {actual:.6g}, predicted {predicted:.6g})")
    return Score(prediction_id=prediction.id, outcome_id=outcome_id, fraction=fraction,
                 actual=actual, predicted=predicted, error=error,
                 rel_error=None if accuracy else error / predicted,
                 abs_error=abs(error), interval=interval, inside=inside, z=z, pit=pit,
                 no_interval_reason=reason, external=fc.external,
                 target_name=prediction.target.name, unit=prediction.target.unit, source=source,
                 created_at=created_at, error_points=100.0 * error if accuracy else None)


@dataclass(frozen=True)
class ComparisonScore:
    """The observed difference of two recipes scored against a registered comparison.

    Losses in the target's unit; ``observed`` = ``loss_recipe`` - ``loss_reference`` (negative:
    the recipe did better). ``z`` and ``pit`` read the comparison's interval as the central
    interval of a normal distribution at its level (as :class:`Score` does).
    """

    prediction_id: str
    outcome_id: str
    recipe: str
    reference: str
    loss_recipe: float
    loss_reference: float
    """Observed final losses of the two recipes' runs at the target."""
    observed: float
    """loss_recipe - loss_reference."""
    predicted: float
    """The registered difference."""
    error: float
    """observed - predicted."""
    interval: IntervalRecord
    """The registered interval of the difference (one new run of each recipe)."""
    inside: bool
    z: float
    pit: float
    p_better: float
    """The registered P(recipe better)."""
    winner_right: bool | None
    """Whether the predicted winner (the sign of ``predicted``) won; None on an exact tie."""
    recipe_score: Score
    """The recipe's own loss scored against the entry's forecast."""
    unit: str | None
    source: str | None
    created_at: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict (``delphi score --loss-a --loss-b --json``)."""
        return {"prediction_id": self.prediction_id, "outcome_id": self.outcome_id,
                "recipe": self.recipe, "reference": self.reference,
                "loss_recipe": self.loss_recipe, "loss_reference": self.loss_reference,
                "observed": self.observed, "predicted": self.predicted, "error": self.error,
                "interval": self.interval.model_dump(mode="json"), "inside": self.inside,
                "z": self.z, "pit": self.pit, "p_better": self.p_better,
                "winner_right": self.winner_right, "unit": self.unit, "source": self.source,
                "created_at": self.created_at, "recipe_score": self.recipe_score.to_dict()}

    def report(self) -> str:
        """Readable multi-line summary."""
        unit = f" {self.unit}" if self.unit else ""
        iv = self.interval
        won = ("tie" if self.winner_right is None else
               "yes" if self.winner_right else "NO")
        lines = [f"scored     comparison {self.prediction_id}: {self.recipe} - {self.reference}; "
                 f"outcome {self.outcome_id}",
                 f"observed   {self.observed:+.4f}{unit} ({self.recipe} {self.loss_recipe:.4f}, "
                 f"{self.reference} {self.loss_reference:.4f})"
                 + (f"  ({self.source})" if self.source else ""),
                 f"predicted  {self.predicted:+.4f}{unit}, P({self.recipe} better) "
                 f"{self.p_better:.3f}; predicted winner won: {won}",
                 f"error      {self.error:+.4f}",
                 f"interval   {level_percent(iv.level)} [{iv.lower:+.4f}, {iv.upper:+.4f}]: "
                 f"{'inside' if self.inside else 'OUTSIDE'}; z = {self.z:+.2f}, "
                 f"PIT = {self.pit:.3f}",
                 f"own loss   {self.recipe}: predicted {self.recipe_score.predicted:.4f}, "
                 f"{self.recipe_score.error_text()}"
                 + ("" if self.recipe_score.inside is None else
                    f", {'inside' if self.recipe_score.inside else 'OUTSIDE'} its interval")]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def score_comparison(prediction: Entry, *, outcome_id: str, loss_recipe: float,
                     loss_reference: float, source: str | None,
                     created_at: str | None = None) -> ComparisonScore:
    """Score the observed final losses of a comparison's two recipes against it: the
    difference ``loss_recipe - loss_reference`` against the registered interval (inside, z,
    PIT), and the recipe's own loss against the entry's forecast (:func:`score_outcome`).

    Raises
    ------
    RegistryError
        ``prediction`` is not a comparison; a score that is not a finite number.
    """
    cmp = prediction.comparison
    if cmp is None:
        raise RegistryError(f"prediction {prediction.id!r} is not a comparison of recipes: "
                            f"score it with one observed loss")
    own = score_outcome(prediction, outcome_id=outcome_id, actual=loss_recipe, fraction=1.0,
                        source=source, created_at=created_at)
    observed = loss_recipe - loss_reference
    iv = cmp.interval
    z, pit = z_and_pit(iv, observed)
    if not (math.isfinite(observed) and math.isfinite(z)):
        raise RegistryError(f"outcome {outcome_id!r} cannot be scored against comparison "
                            f"{prediction.id!r}: its difference or z is not a finite number")
    return ComparisonScore(
        prediction_id=prediction.id, outcome_id=outcome_id, recipe=cmp.recipe,
        reference=cmp.reference, loss_recipe=loss_recipe, loss_reference=loss_reference,
        observed=observed, predicted=cmp.difference, error=observed - cmp.difference,
        interval=iv, inside=bool(iv.lower <= observed <= iv.upper), z=z, pit=pit,
        p_better=cmp.p_better,
        winner_right=None if observed == 0 or cmp.difference == 0 else
        bool((observed < 0) == (cmp.difference < 0)),
        recipe_score=own, unit=prediction.target.unit if prediction.target else None,
        source=source, created_at=created_at)


@dataclass(frozen=True)
class Scoreboard:
    """Every scored outcome, and summary statistics over final outcomes.

    A prediction's final score is its outcome at fraction 1.0 (``score`` writes one per
    prediction and ``verify`` refuses a file with a second; should one be read anyway, the
    latest counts). Partial outcomes are listed but not summarised.
    """

    scores: tuple[Score, ...]
    """Every outcome, in file order."""
    final: tuple[Score, ...]
    """The latest final outcome of each scored prediction, in prediction order."""
    n_predictions: int
    n_projections: int
    unscored: tuple[str, ...]
    """Predictions with no final outcome yet."""
    mean_abs_rel_error: float | None = field(default=None)
    max_abs_rel_error: float | None = field(default=None)
    n_with_interval: int = 0
    n_inside: int = 0
    n_accuracy: int = 0
    """Final outcomes of accuracy predictions (the others are losses)."""
    mean_abs_error_points: float | None = None
    """Mean |actual - predicted| over final accuracy outcomes, in points (None without any);
    ``mean_abs_rel_error`` covers the loss predictions only."""
    max_abs_error_points: float | None = None
    n_accuracy_predictions: int = 0
    """Accuracy predictions, scored or not (they name the error column before any score)."""
    comparisons: tuple[ComparisonScore, ...] = ()
    """The scored comparisons of recipes (their differences), in file order; each one's
    recipe loss is also in :attr:`scores`."""

    @property
    def coverage(self) -> float | None:
        """Share of final outcomes with an interval that fell inside it."""
        return self.n_inside / self.n_with_interval if self.n_with_interval else None

    @property
    def n_partial(self) -> int:
        """Partial outcomes (fraction < 1: checkpoints that ``delphi track`` or ``score
        --fraction`` recorded), over every prediction."""
        return sum(not s.final for s in self.scores)

    @property
    def tracked(self) -> tuple[str, ...]:
        """Predictions with at least one partial outcome, in file order of their first."""
        return tuple(dict.fromkeys(s.prediction_id for s in self.scores if not s.final))

    def counts_text(self) -> str:
        """``"0 final outcomes, 12 tracked checkpoints (of 1 prediction)"``: what has been
        scored, final and partial (a registry that only tracks checkpoints is not "0
        scored")."""
        text = plural(len(self.final), "final outcome")
        if self.n_partial:
            text += (f", {plural(self.n_partial, 'tracked checkpoint')} (of "
                     f"{plural(len(self.tracked), 'prediction')})")
        return text

    def to_dict(self) -> dict:
        """JSON-ready dict (``delphi registry report --json``)."""
        return {"n_predictions": self.n_predictions, "n_projections": self.n_projections,
                "n_scored": len(self.final), "unscored": list(self.unscored),
                "n_partial": self.n_partial, "tracked": list(self.tracked),
                "mean_abs_rel_error": self.mean_abs_rel_error,
                "max_abs_rel_error": self.max_abs_rel_error,
                "n_with_interval": self.n_with_interval, "n_inside": self.n_inside,
                "coverage": self.coverage, "n_accuracy": self.n_accuracy,
                "mean_abs_error_points": self.mean_abs_error_points,
                "max_abs_error_points": self.max_abs_error_points,
                "final": [s.to_dict() for s in self.final],
                "scores": [s.to_dict() for s in self.scores],
                "comparisons": [c.to_dict() for c in self.comparisons]}

    def to_markdown(self) -> str:
        """The scoreboard as a markdown table plus a summary line."""
        def fmt(x, spec):
            return "" if x is None else format(x, spec)

        # "rel. error" unless the registry holds accuracy predictions (error in points),
        # scored or not: the header does not change when their first outcome arrives
        err = ("error (rel. or pts)" if self.n_accuracy_predictions
               or any(s.is_accuracy for s in self.scores) else "rel. error")
        head = (f"| prediction | target | fraction | predicted | actual | {err} | "
                "inside interval | z | PIT | source |")
        rows = [head, "|" + "---|" * 10]
        for s in self.scores:
            inside = "" if s.inside is None else ("yes" if s.inside else "no")
            name = s.prediction_id + (" (external)" if s.external else "")
            if s.is_accuracy:   # accuracies in points
                vals = f"{100 * s.predicted:.2f} pts | {100 * s.actual:.2f} pts"
            else:
                vals = f"{s.predicted:.4f} | {s.actual:.4f}"
            rows.append(f"| {name} | {s.target_name or ''} | {s.fraction:g} | {vals} | "
                        f"{s.error_text()} | {inside} | {fmt(s.z, '+.2f')} | "
                        f"{fmt(s.pit, '.3f')} | {s.source or ''} |")
        partial = (f"; {plural(self.n_partial, 'tracked checkpoint')} (partial outcomes) of "
                   f"{', '.join(self.tracked)}" if self.n_partial else "")
        summary = [f"**{len(self.final)} of {plural(self.n_predictions, 'prediction')} "
                   f"scored**{' on a final outcome' if self.n_partial else ''}{partial}"
                   + (f" ({plural(self.n_projections, 'projection')}, never scored)."
                      if self.n_projections else ".")]
        if self.mean_abs_rel_error is not None:
            summary.append(f"Final loss: mean |rel. error| {self.mean_abs_rel_error:.2%}, "
                           f"max {self.max_abs_rel_error:.2%}.")
        if self.mean_abs_error_points is not None:
            summary.append(f"Final accuracy ({self.n_accuracy}): mean |error| "
                           f"{self.mean_abs_error_points:.2f} points, max "
                           f"{self.max_abs_error_points:.2f}.")
        if self.final:
            summary.append(
                f"Interval coverage: {self.n_inside}/{self.n_with_interval} "
                f"({self.coverage:.0%})." if self.n_with_interval else
                "Interval coverage: no scored prediction has an interval.")
        if self.unscored:
            summary.append(f"Awaiting a final outcome: {', '.join(self.unscored)}.")
        text = "\n".join(rows) + "\n\n" + " ".join(summary)
        if self.comparisons:
            lines = ["| comparison | recipe - reference | predicted | interval | observed | "
                     "inside | z | winner right |", "|" + "---|" * 8]
            for c in self.comparisons:
                iv = c.interval
                won = "tie" if c.winner_right is None else ("yes" if c.winner_right else "no")
                lines.append(f"| {c.prediction_id} | {c.recipe} - {c.reference} | "
                             f"{c.predicted:+.4f} | {level_percent(iv.level)} [{iv.lower:+.4f}, "
                             f"{iv.upper:+.4f}] | {c.observed:+.4f} | "
                             f"{'yes' if c.inside else 'no'} | {c.z:+.2f} | {won} |")
            n_in = sum(c.inside for c in self.comparisons)
            text += ("\n\n" + "\n".join(lines) + f"\n\n**{len(self.comparisons)} comparison(s) "
                     f"scored**: {n_in} inside their interval.")
        return text

    def __str__(self) -> str:
        return self.to_markdown()


def scoreboard(entries: list[Entry]) -> Scoreboard:
    """Score every outcome in ``entries`` (registry order) and summarise the final ones.

    Raises
    ------
    RegistryError
        An outcome references a missing prediction (the file does not verify).
    """
    by_id = {e.id: e for e in entries if e.kind != "outcome"}
    scores: list[Score] = []
    comparisons: list[ComparisonScore] = []
    latest_final: dict[str, Score] = {}
    for e in entries:
        if e.kind != "outcome":
            continue
        o = e.outcome
        pred = by_id.get(o.of)
        if pred is None:
            raise RegistryError(f"outcome {e.id!r} scores unknown prediction {o.of!r}; "
                                f"run `delphi registry verify`")
        s = score_outcome(pred, outcome_id=e.id, actual=o.actual, fraction=o.fraction,
                          source=o.source, created_at=e.created_at.isoformat())
        scores.append(s)
        if pred.comparison is not None and o.reference_actual is not None:
            comparisons.append(score_comparison(
                pred, outcome_id=e.id, loss_recipe=o.actual, loss_reference=o.reference_actual,
                source=o.source, created_at=e.created_at.isoformat()))
        if s.final:
            latest_final[pred.id] = s
    import numpy as np

    predictions = [e.id for e in entries if e.kind == "prediction"]
    n_acc = sum(e.kind == "prediction" and e.target is not None
                and e.target.unit == ACCURACY_UNIT for e in entries)
    final = tuple(latest_final[i] for i in predictions if i in latest_final)
    rel = [abs(s.rel_error) for s in final if s.rel_error is not None]
    pts = [abs(s.error_points) for s in final if s.error_points is not None]
    with_iv = [s for s in final if s.inside is not None]
    return Scoreboard(
        scores=tuple(scores), final=final, n_predictions=len(predictions),
        n_projections=sum(e.kind == "projection" for e in entries),
        unscored=tuple(i for i in predictions if i not in latest_final),
        mean_abs_rel_error=float(np.mean(rel)) if rel else None,
        max_abs_rel_error=max(rel) if rel else None,
        n_with_interval=len(with_iv), n_inside=sum(bool(s.inside) for s in with_iv),
        n_accuracy=len(pts), mean_abs_error_points=float(np.mean(pts)) if pts else None,
        max_abs_error_points=max(pts) if pts else None, n_accuracy_predictions=n_acc,
        comparisons=tuple(comparisons))

