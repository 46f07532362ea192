"""What ``register`` and ``score`` guarantee of every entry they write, in one place.

The API checks its input with these functions before it writes; :func:`~delphi.registry.chain.
verify_bytes` and every append check each line of a file with :class:`ChainRules`, so a file
verifies exactly when the API could have written it: an entry no writer of delphi would write
(a second final outcome, an outcome id that is not ``ID/outcome-N``, a prediction named like an
outcome, a date far in the future, a loss out of range...) fails verification, naming its line,
even when its hash chain is intact.
"""

from __future__ import annotations

import math
import numbers
import re
from datetime import datetime, timedelta
from typing import Any

from ..errors import LadderError, RegistryError
from ..inputs.units import LOSS_RANGE, normalize_unit
from .schema import ACCURACY_UNIT, Entry, IntervalRecord
from .scoring import score_comparison, score_outcome

__all__ = ["MAX_ID_LENGTH", "LOSS_RANGE", "FUTURE_TOLERANCE", "ACCURACY_UNIT", "ChainRules",
           "check_id", "check_number", "check_loss", "check_accuracy", "check_forecast_values",
           "check_unit_as_written", "future_problem", "plain_number"]

#: Longest id a user may choose (outcome ids append ``/outcome-N`` to it).
MAX_ID_LENGTH = 64
# LOSS_RANGE, the losses a registry accepts, is the plausible range of
# delphi.inputs.units.LOSS_RANGE (a ladder warns of losses outside it), also because extremes
# would overflow the scores (relative error, z) into infinities.
#: How far an entry's ``created_at`` may be ahead of the clock (clock skew between machines).
#: Further ahead, every later entry would have to be dated after it.
FUTURE_TOLERANCE = timedelta(minutes=5)

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")
_OUTCOME_MARK = "/outcome-"


def plain_number(value: Any) -> Any:
    """numpy scalars -> Python numbers; anything else unchanged (the schema rejects bad
    types)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


def check_id(id: Any) -> None:
    """Refuse an id ``register`` would not write: not a string, characters other than
    letters, digits and ``._:/@+-`` (or not starting with a letter or digit), longer than
    :data:`MAX_ID_LENGTH`, or containing ``/outcome-`` (reserved for outcome entries).

    Raises
    ------
    RegistryError
        Naming the id and the rule it breaks.
    """
    if not isinstance(id, str):
        raise RegistryError(f"id must be a string, got {id!r}")
    if not _ID.fullmatch(id):
        raise RegistryError(f"id {id!r}: use letters, digits and ._:/@+- only, starting with "
                            f"a letter or digit (no spaces)")
    if len(id) > MAX_ID_LENGTH:
        raise RegistryError(f"id {id[:20]!r}... is {len(id)} characters; at most "
                            f"{MAX_ID_LENGTH}")
    if _OUTCOME_MARK in id:
        raise RegistryError(f"id {id!r}: '{_OUTCOME_MARK}' is reserved for outcome entries")


def check_number(value: Any, what: str) -> float:
    """``value`` as a plain number.

    Raises
    ------
    RegistryError
        Not a finite int or float.
    """
    v = plain_number(value)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RegistryError(f"{what}: must be a number (got {value!r:.60})")
    if not math.isfinite(v):
        raise RegistryError(f"{what}: {v} is not a finite number")
    return v


def check_loss(value: Any, what: str) -> None:
    """Refuse a loss that is not a finite number in :data:`LOSS_RANGE`.

    Raises
    ------
    RegistryError
        Not a finite number, or outside the range.
    """
    v = check_number(value, what)
    lo, hi = LOSS_RANGE
    if not lo <= v <= hi:
        raise RegistryError(f"{what}: {v:.6g} is outside the range a registry accepts for a "
                            f"loss, [{lo:g}, {hi:g}] (nats/token, bits/token or bits/byte); "
                            f"check the number and its unit")


def check_accuracy(value: Any, what: str) -> None:
    """Refuse an accuracy that is not a finite fraction in (0, 1].

    Raises
    ------
    RegistryError
        Not a number, or not a fraction in (0, 1].
    """
    v = plain_number(value)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RegistryError(f"{what}: must be a number (got {value!r:.60})")
    if not (math.isfinite(v) and 0 < v <= 1):
        raise RegistryError(f"{what}: {v:.6g} is not an accuracy fraction in (0, 1] (unit "
                            f"{ACCURACY_UNIT!r}: 0.612, not 61.2 points)")


def check_forecast_values(loss: Any, interval: IntervalRecord | None, curve: tuple | None, *,
                          accuracy: bool = False) -> None:
    """Refuse a forecast whose numbers a registry does not hold: for a loss, the loss and
    every curve point in :data:`LOSS_RANGE` and the interval's ends in [0, 100]; for an
    accuracy (unit ``"accuracy"``), the accuracy and every curve point in (0, 1] and the
    interval's ends in [0, 1].

    Raises
    ------
    RegistryError
        Naming the value (``loss``, ``interval.upper``, ``curve point 2``) and its range.
    """
    check = check_accuracy if accuracy else check_loss
    what = "invalid accuracy forecast" if accuracy else "invalid forecast"
    check(loss, f"{what}: {'accuracy' if accuracy else 'loss'}")
    top = 1.0 if accuracy else LOSS_RANGE[1]
    if interval is not None:
        for name in ("lower", "upper", "mean_lower", "mean_upper"):
            value = getattr(interval, name)
            # An interval's lower end may reach 0 (a loss is positive), not below.
            if value is not None and not 0 <= value <= top:
                raise RegistryError(f"{what}: interval.{name}: {value:.6g} is outside "
                                    f"[0, {top:g}], the range of "
                                    f"{'an accuracy' if accuracy else 'a loss'}")
    for k, point in enumerate(curve or (), 1):
        if isinstance(point, tuple) and len(point) == 2:
            check(point[1], f"{what}: curve point {k} (fraction {point[0]}) "
                            f"{'accuracy' if accuracy else 'loss'}")


def check_unit_as_written(unit: str | None) -> None:
    """Refuse a target unit ``register`` would not write: it writes no unit, ``"accuracy"``
    or a loss unit's canonical name (:data:`delphi.units.UNITS`), never an alias (``bpb``).

    Raises
    ------
    RegistryError
        An unknown unit, or an alias of a known one.
    """

    if unit is None or unit == ACCURACY_UNIT:
        return
    try:
        canonical = normalize_unit(unit, what="target unit")
    except LadderError as exc:
        raise RegistryError(f"{exc} (or {ACCURACY_UNIT!r} for a benchmark accuracy)") from None
    if canonical != unit:
        raise RegistryError(f"target unit {unit!r}: register writes it as {canonical!r}")


def future_problem(stamp: datetime, now: datetime) -> str | None:
    """Why an entry dated ``stamp`` cannot have been written at ``now`` (more than
    :data:`FUTURE_TOLERANCE` ahead of it), or None."""
    if stamp <= now + FUTURE_TOLERANCE:
        return None
    return (f"is dated {stamp.isoformat()}, in the future (this machine's clock says "
            f"{now.replace(microsecond=0).isoformat()}); register and score date an entry at most "
            f"{FUTURE_TOLERANCE.total_seconds() / 60:g} minutes ahead of the clock, or every "
            f"later entry would have to be dated after it")


class ChainRules:
    """The invariants the API keeps across a registry, checked entry by entry in file order.

    For every entry: a unique id, a date no earlier than the previous entry's and (when
    ``now`` is given) at most :data:`FUTURE_TOLERANCE` after ``now``. For a prediction or a
    projection: an id ``register`` accepts (:func:`check_id`), its numbers in range
    (:func:`check_forecast_values`) and a canonical unit (:func:`check_unit_as_written`). For
    an outcome: it scores a prediction registered before it (not a projection), with the
    reference's final loss exactly when the prediction is a comparison of recipes, its id is
    ``ID/outcome-N`` for its N-th outcome of that prediction, its value is in range for the
    prediction's unit and can be scored against it (a partial outcome needs a forecast
    curve that starts before it), and a prediction has at most one final outcome
    (``fraction`` 1).

    Use: ``problem = rules.problem(entry, line)``; if None, ``rules.add(entry, line)``.
    """

    def __init__(self, now: datetime | None = None):
        self.now = now
        self.lines: dict[str, int] = {}
        """Line (1-based) of every entry added, by id."""
        self.forecasts: dict[str, Entry] = {}
        """Predictions and projections, by id."""
        self.n_outcomes: dict[str, int] = {}
        """Outcomes added per prediction id."""
        self.final: dict[str, tuple[str, int]] = {}
        """The final outcome of each prediction that has one: (outcome id, line)."""
        self.last_time: datetime | None = None

    def copy(self) -> "ChainRules":
        other = ChainRules(self.now)
        other.lines, other.forecasts = dict(self.lines), dict(self.forecasts)
        other.n_outcomes, other.final = dict(self.n_outcomes), dict(self.final)
        other.last_time = self.last_time
        return other

    def problem(self, entry: Entry, line: int) -> str | None:
        """What is wrong with ``entry`` as line ``line`` after the entries added so far (a
        phrase that follows "line N (id X)"), or None when the API could have written it."""
        if entry.id in self.lines:
            return f"repeats the id of line {self.lines[entry.id]}"
        if self.last_time is not None and entry.created_at < self.last_time:
            return (f"is dated {entry.created_at.isoformat()}, before line {line - 1} "
                    f"({self.last_time.isoformat()}): entries must be in time order")
        if self.now is not None:
            late = future_problem(entry.created_at, self.now)
            if late is not None:
                return late
        if entry.kind == "outcome":
            return self._outcome_problem(entry)
        try:
            check_id(entry.id)
            unit = entry.target.unit
            check_forecast_values(entry.forecast.loss, entry.forecast.interval,
                                  entry.forecast.curve, accuracy=unit == ACCURACY_UNIT)
            check_unit_as_written(unit)
            if entry.comparison is not None:
                check_loss(entry.comparison.reference_loss,
                           "invalid comparison: reference_loss")
                if unit == ACCURACY_UNIT:
                    raise RegistryError("a comparison of recipes compares losses, not "
                                        "accuracies")
        except RegistryError as exc:
            return f"is a {entry.kind} that register refuses: {exc}"
        return None

    def _outcome_problem(self, entry: Entry) -> str | None:
        o = entry.outcome
        pred = self.forecasts.get(o.of)
        if pred is None:
            return f"scores {o.of!r}, which is not registered before it"
        if pred.kind != "prediction":
            return f"scores {o.of!r}, a {pred.kind}, not a prediction"
        n = self.n_outcomes.get(o.of, 0) + 1
        expected = f"{o.of}{_OUTCOME_MARK}{n}"
        if entry.id != expected:
            return (f"is outcome {n} of {o.of!r}, which score names {expected!r}, not "
                    f"{entry.id!r}")
        accuracy = pred.target.unit == ACCURACY_UNIT
        if pred.comparison is not None:
            if o.reference_actual is None or o.fraction != 1.0:
                return (f"is an outcome of comparison {o.of!r} without the reference's final "
                        f"loss: a comparison is scored with both recipes' final losses")
        elif o.reference_actual is not None:
            return (f"gives a reference loss, but {o.of!r} is not a comparison of recipes")
        try:
            if pred.comparison is not None:
                check_loss(o.reference_actual, "invalid outcome: reference_actual")
            if accuracy:
                check_accuracy(o.actual, f"invalid outcome of accuracy prediction {o.of!r}: "
                                         f"actual")
            else:
                check_loss(o.actual, "invalid outcome: actual")
            score_outcome(pred, outcome_id=entry.id, actual=o.actual, fraction=o.fraction,
                          source=o.source)
            if pred.comparison is not None:
                score_comparison(pred, outcome_id=entry.id, loss_recipe=o.actual,
                                 loss_reference=o.reference_actual, source=o.source)
        except RegistryError as exc:
            return f"is an outcome that score refuses: {exc}"
        if o.fraction >= 1.0 and o.of in self.final:
            first, first_line = self.final[o.of]
            return (f"is a second final outcome of {o.of!r} (the first is line {first_line}, "
                    f"{first}); score records a final {'accuracy' if accuracy else 'loss'} "
                    f"once, so a prediction cannot be re-scored")
        return None

    def add(self, entry: Entry, line: int) -> None:
        """Count ``entry`` (checked by :meth:`problem`) as line ``line``."""
        self.lines[entry.id] = line
        self.last_time = entry.created_at
        if entry.kind == "outcome":
            of = entry.outcome.of
            self.n_outcomes[of] = self.n_outcomes.get(of, 0) + 1
            if entry.outcome.fraction >= 1.0:
                self.final.setdefault(of, (entry.id, line))
        else:
            self.forecasts[entry.id] = entry
