"""The :class:`Registry`: locked, fsynced, hash-chained appends of predictions and outcomes."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from filelock import FileLock, Timeout
from pydantic import ValidationError

from ..core.files import describe_not_a_file, read_regular_file
from ..core.files import reason as _reason
from ..errors import LadderError, RegistryError, option
from .chain import (Problem, check_line, VerifyReport, line_problem, normalized, split_lines,
                    verify_bytes)
from .invariants import (ACCURACY_UNIT, FUTURE_TOLERANCE, LOSS_RANGE, MAX_ID_LENGTH,
                         ChainRules, check_forecast_values, plain_number)
from .invariants import check_accuracy as _check_accuracy
from .invariants import check_id as _check_id
from .invariants import check_loss as _check_loss
from .invariants import check_number as _check_number
from .schema import (GENESIS, CandidateRecord, ComparisonRecord, Entry, ExclusionRecord,
                     FitRecord, ForecastRecord,
                     FindingRecord, IntervalRecord, SelectionRecord, CurveBandRecord, CarryOverRecord,
                     LadderRecord, LawRecord, OutcomeRecord, TargetRecord, entry_hash,
                     validation_message)
from .scoring import (ComparisonScore, Score, Scoreboard, score_comparison, score_outcome,
                      scoreboard, unit_mismatch)
from .signing import SigningKey, load_signing_key, load_trusted_keys, sign_fields, signature_valid
from ..inputs.units import DEFAULT_UNIT, normalize_unit
from .. import __version__

if TYPE_CHECKING:  # annotations only: the analysis stack is imported on first use
    from ..analyses.recipes import RecipeComparison

try:  # the lock on the registry file itself (every path to it); POSIX only
    import fcntl
except ImportError:  # pragma: no cover - Windows: the lock file alone
    fcntl = None

__all__ = ["Registry", "MAX_ID_LENGTH", "PAUSE_ENV", "PAUSE_SIGNAL_ENV", "LOSS_RANGE",
           "FUTURE_TOLERANCE", "CLOCK_WAIT_SECONDS", "LOCK_NOTE_AFTER", "ACCURACY_UNIT", "MAX_REGISTRY_BYTES"]

# MAX_ID_LENGTH, LOSS_RANGE, ACCURACY_UNIT and FUTURE_TOLERANCE are defined with the other
# invariants (delphi.registry.invariants), which verify checks too.
#: Largest registry file read [bytes]: about 100,000 entries. A larger file, like a FIFO or a
#: device, is refused in one line instead of being read without bound.
MAX_REGISTRY_BYTES = 512 * 2**20
#: Test hook: when set to a fraction in [0, 1], an append writes that share of its line,
#: fsyncs, creates the file named by :data:`PAUSE_SIGNAL_ENV` (if set) and sleeps, so a test
#: can kill the writer mid-line. Never set it outside tests.
PAUSE_ENV = "DELPHI_REGISTRY_TEST_PAUSE"
PAUSE_SIGNAL_ENV = "DELPHI_REGISTRY_TEST_PAUSE_SIGNAL"
_TARGET_FIELDS = set(TargetRecord.model_fields) - {"facts"}
# Target attributes kept as facts when C was converted to the ladder's FLOP convention (the
# record format predates them: a new field would change every existing entry's hash).
_TARGET_FACTS = {"flops_source", "flops_k"}
_SETTING_KEYS = {"fixed", "bounds", "delta", "huber_delta", "fit_max_flops", "include_unfinished",
                 "divergence_threshold", "seed", "interval", "level", "n_boot", "boot_unit",
                 "workers"}
_INTERVAL_FIELDS = tuple(IntervalRecord.model_fields)


def _finite_or_none(value: Any) -> float | None:
    v = plain_number(value)
    return float(v) if isinstance(v, (int, float)) and abs(v) != float("inf") and v == v else None


def _explicit_time(value: datetime | str | None) -> datetime | None:
    """A given timestamp, validated; None when the entry is to be stamped at append time.

    Raises
    ------
    RegistryError
        Not a time-zone-aware timestamp, or more than :data:`FUTURE_TOLERANCE` in the future.
    """
    if value is None:
        return None
    stamp = _timestamp(value)
    now = _timestamp(None)
    if stamp > now + FUTURE_TOLERANCE:
        raise RegistryError(f"created_at {stamp.isoformat()} is in the future (now "
                            f"{now.isoformat()}); an explicit timestamp may be at most "
                            f"{FUTURE_TOLERANCE.total_seconds() / 60:g} minutes ahead, or every "
                            f"later entry would have to be dated after it")
    return stamp


#: An entry stamped now waits (under the lock) at most this long for the clock to pass the
#: registry's last entry (a writer whose clock is a second or two ahead); further ahead, it is
#: refused, never stamped with the other entry's time (F34: a time is the writer's claim).
CLOCK_WAIT_SECONDS = 2.0


def _now(state) -> datetime:
    """Now (to the second), the time the entry is written: never before the registry's last
    entry, and never moved to it.

    When the last entry is dated at most :data:`CLOCK_WAIT_SECONDS` ahead of this machine's
    clock, the writer waits for the clock to reach it (holding the lock), so the stamp is still
    the real time of writing.

    Raises
    ------
    RegistryError
        The last entry is dated further ahead of now (an explicit ``created_at`` up to
        :data:`FUTURE_TOLERANCE` ahead, or another machine's clock): stamping the new entry with
        that date would be false, and stamping it now would break time order. The message
        names both times and how long to wait.
    """
    now = _timestamp(None)
    if state.last_time is None or state.last_time <= now:
        return now
    where = f"line {len(state.lines)}" + next(
        (f", id {rid}" for rid, i in state.ids.items() if i == len(state.lines) - 1), "")
    if state.last_time > now + FUTURE_TOLERANCE:
        raise RegistryError(f"the registry's last entry ({where}) is dated "
                            f"{state.last_time.isoformat()}, in the future (now "
                            f"{now.isoformat()}); a new entry cannot be stamped truthfully "
                            f"after it. Check this machine's clock")
    stamp = state.last_time.isoformat().replace("+00:00", "Z")
    ahead = (state.last_time - datetime.now(timezone.utc)).total_seconds()
    if ahead <= CLOCK_WAIT_SECONDS:
        time.sleep(max(ahead, 0.0) + 0.01)
        now = _timestamp(None)
        if now >= state.last_time:
            return now
    raise RegistryError(
        f"the registry's last entry ({where}) is dated {state.last_time.isoformat()}, "
        f"{(state.last_time - now).total_seconds():.0f} s ahead of this machine's clock (now "
        f"{now.isoformat()}): entries are in time order and an entry's created_at is the time "
        f"it is written, so it is neither dated before that entry nor moved to its time; "
        f"nothing was written. Retry after {stamp}, or give "
        f"{option('created_at', '--created-at')} {stamp} (or later) if the entry may claim "
        f"that time")


def _check_losses(loss: Any, interval: IntervalRecord | None, curve: tuple | None,
                  accuracy: bool = False) -> None:
    """Refuse a forecast's numbers out of range, before any write (see
    :func:`~delphi.registry.invariants.check_forecast_values`)."""
    check_forecast_values(loss, interval, curve, accuracy=accuracy)


def _timestamp(value: datetime | str | None) -> datetime:
    """``value`` as an aware UTC datetime; now (to the second) when None."""
    if value is None:
        return datetime.now(timezone.utc).replace(microsecond=0)
    text = value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise RegistryError(f"created_at: not an ISO 8601 timestamp: {value!r}") from None
    if not isinstance(value, datetime):
        raise RegistryError(f"created_at must be a datetime or ISO string, got {value!r}")
    if value.tzinfo is None:
        shown = text if isinstance(text, str) else value.isoformat()
        raise RegistryError(f"created_at {shown} has no time zone; add Z or +00:00")
    try:
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        shown = text if isinstance(text, str) else value.isoformat()
        raise RegistryError(f"created_at {shown} is outside the calendar once converted to UTC "
                            f"(years 1 to 9999)") from None


def _curve(curve: Sequence[Sequence[float]] | None) -> tuple | None:
    if curve is None:
        return None
    try:
        return tuple((plain_number(f), plain_number(loss)) for f, loss in curve)
    except (TypeError, ValueError):
        raise RegistryError("curve must be a list of (fraction, loss) pairs") from None


def _snap_curve(curve: tuple | None, loss: Any) -> tuple | None:
    """A curve whose final point (fraction 1) was typed rounded: end it at the exact forecast.

    Within 0.1% the typed value is the forecast; further off it is a different claim, and the
    schema rejects it.
    """
    if not curve or not isinstance(loss, (int, float)):
        return curve
    f_last, l_last = curve[-1]
    if f_last == 1.0 and isinstance(l_last, (int, float)) and loss and \
            abs(l_last / loss - 1) <= 1e-3:
        return tuple(curve[:-1]) + ((1.0, float(loss)),)
    return curve


def _band(forecast) -> "CurveBandRecord":
    """The :class:`CurveBandRecord` of a :class:`~delphi.forecasting.target_curve.CurveForecast`."""
    try:
        return CurveBandRecord(
            level=plain_number(forecast.level),
            lower=tuple(plain_number(p.lower) for p in forecast.points),
            upper=tuple(plain_number(p.upper) for p in forecast.points),
            steps=tuple(int(p.step) for p in forecast.points),
            schedule=str(forecast.schedule),
            method=str(getattr(forecast, "band_method", None)
                       or "final new-run interval's relative widths carried along the curve"),
            completion_error=tuple((plain_number(f), plain_number(e))
                                   for f, e in forecast.completion_error),
            carry_over=tuple(CarryOverRecord(
                fraction=plain_number(c.fraction), rho=plain_number(c.rho),
                sd=plain_number(c.sd), rms=plain_number(c.rms), n=int(c.n),
                window=plain_number(c.window),
                corr=None if getattr(c, "corr", None) is None else plain_number(c.corr),
                weight=(None if getattr(c, "weight", None) is None
                        else plain_number(c.weight)))
                for c in getattr(forecast, "carry_over", ())) or None,
            correlation_use=("variance" if getattr(forecast, "correlation_use", None)
                             == "variance" else None),
            fold_weight_share=(None if getattr(forecast, "fold_weight_share", None) is None
                               else plain_number(forecast.fold_weight_share)),
            early_completion_error=tuple(
                (plain_number(f), plain_number(e))
                for f, e in getattr(forecast, "early_completion_error", ())) or None)
    except ValidationError as exc:
        raise RegistryError(validation_message(exc, "forecast curve band")) from None


def _interval(interval: Any) -> IntervalRecord | None:
    """An :class:`IntervalRecord` from a record, a mapping, an object with ``lower``, ``upper``,
    ``level`` (and ``kind``) attributes, or a ``(lower, upper, level[, kind])`` tuple."""
    if interval is None or isinstance(interval, IntervalRecord):
        return interval
    if isinstance(interval, Mapping):
        data = dict(interval)
    elif isinstance(interval, (tuple, list)):
        if len(interval) not in (3, 4):
            raise RegistryError("interval must be (lower, upper, level[, kind])")
        data = dict(zip(("lower", "upper", "level", "kind"), interval))
    else:  # e.g. delphi.uncertainty.Interval: keep the fields the record knows
        data = {k: getattr(interval, k, None) for k in _INTERVAL_FIELDS}
    required = ("lower", "upper", "level")
    data = {k: plain_number(v) for k, v in data.items() if v is not None or k in required}
    try:
        return IntervalRecord(**data)
    except ValidationError as exc:
        raise RegistryError(validation_message(exc, "interval")) from None


def _target_record(base: Mapping[str, Any], facts: Mapping[str, Any] | None) -> TargetRecord:
    data = {k: plain_number(v) for k, v in base.items() if v is not None}
    extra = {k: plain_number(v) for k, v in (data.pop("facts", None) or {}).items()}
    converted = str(data.get("flops_source", "")).endswith("ladder k")
    extra.update({k: v for k in _TARGET_FACTS & set(data) if (v := data.pop(k)) is not None
                  and converted})
    for key, value in (facts or {}).items():
        if value is None:
            continue
        if key in _TARGET_FIELDS:
            data[key] = plain_number(value)
        else:
            extra[key] = plain_number(value)
    unknown = set(data) - _TARGET_FIELDS
    if unknown:
        raise RegistryError(f"target: unknown field(s) {sorted(unknown)}; known: "
                            f"{sorted(_TARGET_FIELDS)} (put anything else in 'facts')")
    if "unit" in data:
        data["unit"] = _unit(data["unit"], "target unit")
    try:
        return TargetRecord(**data, facts=extra)
    except ValidationError as exc:
        raise RegistryError(validation_message(exc, "target")) from None


def _unit(unit: Any, what: str) -> str:
    """``unit`` as one of :data:`delphi.units.UNITS` or :data:`ACCURACY_UNIT`
    (RegistryError listing them if not)."""

    if isinstance(unit, str) and unit.strip().lower() == ACCURACY_UNIT:
        return ACCURACY_UNIT
    try:
        return normalize_unit(unit, what=what)
    except LadderError as exc:
        raise RegistryError(f"{exc} (or {ACCURACY_UNIT!r} for a benchmark accuracy)") from None


def _check_outcome_unit(pred: Entry, unit: str | None) -> None:
    """An outcome in another unit than its prediction's cannot be scored against it."""
    if unit is None or pred.target is None:
        return
    if pred.target.unit is None:
        # A loss registered without a unit (an external forecast) is scored as nats/token,
        # delphi's default (Score's errors say so): an outcome in another unit would be scored
        # against it as if it were comparable.
        if unit != DEFAULT_UNIT:
            flag = option("target['unit']", "--target-unit")
            raise RegistryError(f"prediction {pred.id!r} was registered without a unit, so it "
                                f"is read as {DEFAULT_UNIT} (the default); an outcome in {unit} "
                                f"cannot be scored against it: give the outcome in "
                                f"{DEFAULT_UNIT}, or register the prediction again with its "
                                f"unit ({flag})")
        return
    try:
        expected = _unit(pred.target.unit, "prediction unit")
    except RegistryError:
        expected = pred.target.unit          # an old free-text unit: compare as written
    if unit != expected and expected == ACCURACY_UNIT:
        raise RegistryError(f"the outcome is in {unit} but prediction {pred.id!r} is a "
                            f"benchmark accuracy (unit {ACCURACY_UNIT!r}): loss units do not "
                            f"apply to accuracy entries; give the accuracy as a fraction "
                            f"(0.612) with no unit, or unit {ACCURACY_UNIT!r}")
    if unit != expected and unit == ACCURACY_UNIT:
        raise RegistryError(f"the outcome is an accuracy but prediction {pred.id!r} is a loss "
                            f"in {expected}: an accuracy cannot be scored against a loss; give "
                            f"the observed loss in {expected}")
    if unit != expected:
        exact = ({"nats/token", "bits/token"} == {unit, expected})
        how = (" (bits/token = nats/token / ln 2: convert the outcome)" if exact else
               " (converting needs the eval set's bytes per token)")
        raise RegistryError(f"the outcome is in {unit} but prediction {pred.id!r} is in "
                            f"{expected}: losses in different units cannot be scored against "
                            f"each other{how}")


def _findings(found) -> tuple[FindingRecord, ...] | None:
    """The registry's records of :attr:`Forecast.findings` (None for an object without them,
    e.g. an external forecast)."""
    if found is None:
        return None
    return tuple(FindingRecord(code=f.code, severity=f.severity, subject=f.subject,
                               message=f.message) for f in found)


def _selection(sel: Mapping[str, Any] | None) -> SelectionRecord | None:
    """The registry's record of :attr:`Forecast.selection` (the comparison table itself is
    left out: the candidates, their weights, forecasts and errors are kept)."""
    if sel is None:
        return None
    cands = tuple(CandidateRecord(
        label=str(c["label"]), law=str(c["law"]),
        fixed={k: plain_number(v) for k, v in c.get("fixed", {}).items()},
        huber_delta=plain_number(c.get("huber_delta")), weight=float(c["weight"]),
        loss=plain_number(c.get("loss")), mean_abs_error=plain_number(c.get("mean_abs_error")))
        for c in sel["candidates"])
    return SelectionRecord(rule=sel["rule"], chosen=str(sel["chosen"]), candidates=cands,
                           runner_up=sel.get("runner_up"), spread=plain_number(sel.get("spread")),
                           weighting=sel.get("weighting"))


def _fit_record(fit, settings: Mapping[str, Any] | None) -> FitRecord:
    settings = dict(settings or {})
    unknown = set(settings) - _SETTING_KEYS
    if unknown:
        raise RegistryError(f"settings: unknown key(s) {sorted(unknown)}; known: "
                            f"{sorted(_SETTING_KEYS)}")
    bounds = {k: (_finite_or_none(lo), _finite_or_none(hi)) for k, (lo, hi) in fit.bounds.items()}
    return FitRecord(
        fixed={k: plain_number(v) for k, v in fit.fixed.items()}, bounds=bounds,
        huber_delta=plain_number(fit.delta), fit_max_flops=plain_number(settings.get("fit_max_flops")),
        include_unfinished=settings.get("include_unfinished"),
        divergence_threshold=plain_number(settings.get("divergence_threshold")),
        seed=plain_number(settings.get("seed")), n_boot=plain_number(settings.get("n_boot")),
        boot_unit=settings.get("boot_unit"), n_runs=int(fit.n_points),
        runs=tuple(str(r) for r in fit.labels),
        excluded=tuple(ExclusionRecord(run=str(e.run), reason=str(e.reason))
                       for e in fit.exclusions),
        converged=bool(fit.converged), message=str(fit.message),
        objective=_finite_or_none(fit.objective), warnings=tuple(str(w) for w in fit.warnings))


def _require_forecast(forecast) -> None:
    for attr in ("target", "loss", "fit", "ladder_sha256"):
        if not hasattr(forecast, attr):
            raise RegistryError(f"register() needs a delphi Forecast (from delphi.predict), "
                                f"got {type(forecast).__name__}; for a forecast made "
                                f"elsewhere use register_external()")


def _forecast_fields(forecast, *, id: str, kind: str, author, notes, curve, interval,
                     target_facts, settings, created_at) -> dict:
    """The fields of a prediction entry of a delphi Forecast (see :meth:`Registry.register`).

    Raises
    ------
    RegistryError
        Not a Forecast, and the value errors of :meth:`Registry.register`.
    """
    _require_forecast(forecast)
    fit, t = forecast.fit, forecast.target
    target = _target_record(
        {**t.to_dict(), "metric": forecast.metric, "unit": forecast.unit}, target_facts)
    iv = _interval(getattr(forecast, "interval", None) if interval is None else interval)
    band = None
    predicted = getattr(forecast, "points", None)   # a CurveForecast (predict --curve)
    if curve is None and predicted:
        curve = [(p.fraction, p.loss) for p in predicted]
        band = _band(forecast)
    points = _snap_curve(_curve(curve), plain_number(forecast.loss))
    _check_losses(forecast.loss, iv, points, accuracy=target.unit == ACCURACY_UNIT)
    try:
        fc = ForecastRecord(loss=plain_number(forecast.loss), interval=iv, curve=points,
                            band=band,
                            extrapolation=plain_number(forecast.extrapolation),
                            # the forecast's warnings are kept too, marked as such
                            notes=tuple(str(n) for n in forecast.notes) + tuple(
                                f"warning: {w}" for w in getattr(forecast, "warnings", ())),
                            findings=_findings(getattr(forecast, "findings", None)),
                            selection=_selection(getattr(forecast, "selection", None)))
        sel = getattr(forecast, "selection", None)
        if sel is not None and sel.get("rule") == "ensemble":
            # the loss is no single law's: the members and weights are in the selection
            members = ", ".join(f"{c['label']} x {c['weight']:.3g}"
                                for c in sel["candidates"])
            law = LawRecord(name="ensemble", formula=f"exp(sum w_i ln L_i) over {members}")
        else:
            law = LawRecord(name=fit.law.name, formula=fit.law.formula,
                            params={k: plain_number(v) for k, v in fit.params.items()},
                            stderr={k: _finite_or_none(v) for k, v in fit.stderr.items()})
        fit_rec = _fit_record(fit, settings)
        ladder = LadderRecord(name=str(forecast.ladder_name),
                              source=str(forecast.ladder_source),
                              sha256=str(forecast.ladder_sha256))
    except ValidationError as exc:
        raise RegistryError(validation_message(exc, "forecast")) from None
    fields = dict(id=id, kind=kind, created_at=_explicit_time(created_at), author=author,
                  target=target, forecast=fc, law=law, fit=fit_rec, ladder=ladder,
                  notes=notes)
    return fields


@dataclass
class _State:
    """What an append needs to know about the file: its bytes, lines, ids and last hash."""

    data: bytes = b""
    lines: list[bytes] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    last_hash: str = GENESIS
    last_time: datetime | None = None
    rules: ChainRules = field(default_factory=ChainRules)
    """The invariants over the entries so far (what verify checks), to check the next one."""

    def entry(self, id: str) -> Entry:
        try:
            return Entry.model_validate_json(self.lines[self.ids[id]])
        except ValidationError as exc:
            raise RegistryError(f"the entry {id!r} is unreadable ({validation_message(exc)}); "
                                f"run `delphi registry verify --registry PATH`") from None


@dataclass(frozen=True)
class _Held:
    """The registry's lock, held: the file to write (symlinks resolved) and whether taking the
    lock created it (a failed first append removes it again)."""

    real: Path
    created: bool = False


class Registry:
    """A preregistration registry: one append-only, hash-chained JSON Lines file.

    Appends take the registry's lock, write the whole line in one call and fsync it; concurrent
    writers (threads or processes) are serialised, through whichever path they reach the file
    (the given path, a symlink, a relative path, a hard link, a bind mount). Nothing is ever
    edited in place: an outcome is a new entry that references its prediction. An append
    refuses to extend a file that does not verify (:meth:`verify`): an entry after a tampered
    one would bless it.

    Parameters
    ----------
    path: the registry file (created on the first append; its directory must exist).
    lock_timeout: seconds to wait for the lock before raising :class:`RegistryError`.
    on_wait: called with a one-line note when the lock is still held by another writer after
        :data:`LOCK_NOTE_AFTER` seconds (the CLI prints it on stderr); None: wait silently.

    The lock is two locks, taken in this order: the lock file ``REAL.lock`` beside the real
    file (``REAL`` is the path with every symlink resolved, so symlinks and relative paths to
    one file share it; via :mod:`filelock`), then an exclusive ``flock`` of the registry file
    itself (so do hard links and bind mounts, and writers on other machines of a shared file
    system that supports it). A writer that waited for a file replaced meanwhile (renamed
    over, e.g. by ``git checkout``) locks the file now at the path instead. The lock file stays
    beside the registry, empty: that is how :mod:`filelock` works (deleting it after use would
    let two writers lock different files).

    Registry files must be regular files of at most :data:`MAX_REGISTRY_BYTES` bytes: a named
    pipe, a device or a directory is refused in one line (never opened for reading).

    Every method raises :class:`~delphi.errors.RegistryError` on bad input or a bad file, and a
    failed append (bad input, disk full, file-size limit, read-only file system) leaves the file
    byte-identical. Appends take ``sign_key=`` to sign the entry (Ed25519, see
    :mod:`delphi.registry.signing`); :meth:`verify` takes ``trusted_keys=`` to require it, and
    :meth:`head` gives the hash to publish elsewhere.
    """

    def __init__(self, path: str | os.PathLike, *, lock_timeout: float = 60.0,
                 on_wait: Callable[[str], None] | None = None):
        if not isinstance(path, (str, os.PathLike)) or "\x00" in str(path):
            raise RegistryError(f"a registry is a path to its .jsonl file (str or os.PathLike, "
                                f"no NUL character), got {type(path).__name__} {path!r:.60}")
        if str(path) in ("-", ""):
            # '-' reads a ladder or run log from standard input; a registry is appended to
            # and read back, so `--registry -` made a file named '-' in the working directory
            why = ("standard input and output are not files" if str(path) == "-"
                   else "an empty path")
            raise RegistryError(f"a registry is a file (appended to, then read back): "
                                f"{str(path)!r} cannot be one ({why}); give a path, e.g. "
                                f"preds.jsonl")
        self.path = Path(path)
        self.lock_timeout = float(lock_timeout)
        self.on_wait = on_wait
        self._cache: _State | None = None

    def __repr__(self) -> str:
        return f"Registry({str(self.path)!r})"

    # ------------------------------------------------------------------ reading
    def _read(self, path: Path | None = None) -> bytes:
        """The file's bytes (b"" when there is none).

        Raises
        ------
        RegistryError
            Not a regular file (a FIFO, a device, a directory), larger than
            :data:`MAX_REGISTRY_BYTES`, or unreadable.
        """
        try:
            return read_regular_file(self.path if path is None else path,
                                     limit=MAX_REGISTRY_BYTES, what="registry",
                                     error=RegistryError)
        except FileNotFoundError:
            return b""

    def entries(self) -> list[Entry]:
        """Every complete entry, in file order (a torn last line is left out: see
        :meth:`verify`). Does not check the chain.

        Raises
        ------
        RegistryError
            A line is not a valid entry (run :meth:`verify` to locate tampering); the file is
            not a regular file (a FIFO, a device, a directory) or is larger than
            :data:`MAX_REGISTRY_BYTES`.
        """
        out = []
        lines, _ = split_lines(self._read())
        while lines and not lines[-1].strip():  # trailing blank lines: verify reports them
            lines.pop()
        for i, line in enumerate(lines, 1):
            try:
                out.append(Entry.model_validate_json(line))
            except ValidationError:
                # verify's words, never the parser's (which quote the raw bytes)
                raise RegistryError(f"{self.path}: line {i} {line_problem(line)}; run `delphi "
                                    f"registry verify --registry {self.path}`") from None
        return out

    def get(self, id: str) -> Entry:
        """The entry with this id.

        Raises
        ------
        RegistryError
            No such id.
        """
        entries = self.entries()
        for e in entries:
            if e.id == id:
                return e
        if not self.path.exists():
            raise RegistryError(f"no registry at {self.path}: register a prediction there "
                                f"first (delphi register --registry PATH --id ID LADDER), or "
                                f"check the path")
        known = [e.id for e in entries if "/outcome-" not in e.id]
        near = [k for k in known if k.startswith(f"{id}-")]   # a comparison's ID-<recipe>-<k>
        raise RegistryError(f"no entry {id!r} in {self.path}"
                            + (f"; did you mean {', '.join(near[:5])}?" if near else "")
                            + f" (known: {', '.join(known[:10]) or 'none'}"
                            + (" ..." if len(known) > 10 else "") + ")")

    def outcomes(self, id: str) -> list[Entry]:
        """Outcome entries scoring prediction ``id``, in file order."""
        return [e for e in self.entries() if e.kind == "outcome" and e.outcome.of == id]

    def scores(self, id: str | None = None) -> list[Score]:
        """Scores of every outcome (of prediction ``id`` only, when given), in file order."""
        board = self.report()
        return [s for s in board.scores if id is None or s.prediction_id == id]

    def report(self) -> Scoreboard:
        """The scoreboard: every outcome scored; mean and max |relative error| and interval
        coverage over the latest final outcome of each prediction."""
        return scoreboard(self.entries())

    def verify(self, expect_head: str | None = None,
               trusted_keys: str | os.PathLike | Mapping[str, str] | None = None
               ) -> VerifyReport:
        """Recompute the hash chain and check every entry (see :class:`VerifyReport`).

        Parameters
        ----------
        expect_head: a head hash published earlier; fails when no entry has it.
        trusted_keys: a trusted-keys file (or ``{public key text: name}``); when given, every
            entry must be signed by one of these keys (see :mod:`delphi.registry.signing`).

        Raises
        ------
        RegistryError
            The file does not exist, is not a regular file (a FIFO, a device, a directory) or
            is larger than :data:`MAX_REGISTRY_BYTES`; ``expect_head`` is not 64 hexadecimal
            digits (either case is accepted); the trusted-keys file is unreadable, not a
            regular file, too large or malformed.
        """
        if trusted_keys is not None and not isinstance(trusted_keys, (Mapping, str,
                                                                      os.PathLike)):
            raise RegistryError(f"trusted_keys is a trusted-keys file (a path) or a mapping "
                                f"{{public key text: name}}, got {type(trusted_keys).__name__}")
        if trusted_keys is not None and not isinstance(trusted_keys, Mapping):
            trusted_keys = load_trusted_keys(trusted_keys)
        if not self.path.exists():
            raise RegistryError(f"no registry at {self.path}")
        return verify_bytes(self._read(), self.path, expect_head, trusted_keys)

    def head(self) -> str:
        """The hash of the last entry, to publish elsewhere (a commit, an issue comment) and
        check later with ``verify(expect_head=...)``.

        Raises
        ------
        RegistryError
            The file does not exist, is empty, or does not verify (its head proves nothing).
        """
        report = self.verify()
        if not report.ok:
            raise RegistryError(f"the registry does not verify, so its head proves nothing: "
                                f"{report}")
        if report.head is None:
            raise RegistryError(f"{self.path} is empty: there is no head to publish yet")
        return report.head

    # ------------------------------------------------------------------ writing
    def _real_path(self) -> Path:
        """The registry's path with every symlink resolved (absolute): the file writes go to.

        Raises
        ------
        RegistryError
            Its directory does not exist, or something other than a regular file is there.
        """
        real = Path(os.path.realpath(self.path))
        if not real.parent.is_dir():
            raise RegistryError(f"cannot write {self.path}: directory {self.path.parent} "
                                f"does not exist")
        try:
            mode = os.stat(real).st_mode
        except FileNotFoundError:
            return real
        except OSError:
            mode = None
        if mode is None or not stat.S_ISREG(mode):
            raise RegistryError(f"registry {describe_not_a_file(self.path)}")
        return real

    @contextmanager
    def _lock(self) -> Iterator[_Held]:
        """Hold the registry's lock (see the class docstring); yields what is held.

        Raises
        ------
        RegistryError
            The lock file cannot be created (read-only or full file system, a folder we may not
            write), the registry is not a regular file, or the lock is not had within
            ``lock_timeout`` seconds.
        """
        real = self._real_path()
        lock_path = str(real) + ".lock"
        # Create the lock file ourselves first: on a read-only or full file system, or in a
        # directory we may not write, filelock raises a bare OSError or (older versions) retries
        # until the timeout and blames another writer.
        try:
            os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as exc:
            raise RegistryError(f"cannot write {self.path}: cannot create its lock file "
                                f"{lock_path} ({_reason(exc)})") from None
        start = time.monotonic()
        noted: list[bool] = []

        def note(held: str = lock_path) -> None:
            if not noted and self.on_wait is not None:
                self.on_wait(f"waiting for the registry lock held by another writer "
                             f"({held}); giving up after {self.lock_timeout:g} s")
            noted.append(True)

        lock = FileLock(lock_path, timeout=self.lock_timeout)
        try:
            first = min(LOCK_NOTE_AFTER, self.lock_timeout)
            try:
                lock.acquire(timeout=first)
            except Timeout:
                if self.lock_timeout <= first:
                    raise
                note()
                lock.acquire(timeout=self.lock_timeout - first)
        except Timeout:
            raise RegistryError(f"could not lock {self.path} within {self.lock_timeout:g} s "
                                f"(another writer holds {lock.lock_file})") from None
        except OSError as exc:
            raise RegistryError(f"cannot write {self.path}: cannot lock {lock_path} "
                                f"({_reason(exc)})") from None
        try:
            fd, created = self._lock_file(real, start, note)
            try:
                yield _Held(real, created)
            finally:
                if fd is not None:
                    if created:
                        _remove_if_empty(real, fd)
                    os.close(fd)   # releases the flock
        finally:
            lock.release()

    def _lock_file(self, real: Path, start: float,
                   note: Callable[[str], None]) -> tuple[int | None, bool]:
        """Open (creating it if missing) and ``flock`` the registry file ``real``: every path
        to the file, hard links and bind mounts included, takes this lock. Returns the open
        descriptor (closing it releases the lock; None where ``flock`` is unavailable) and
        whether the file was created here.

        If the file at ``real`` was replaced or removed while we waited (renamed over), the
        lock of the old file guards nothing: lock the file now there instead.

        Raises
        ------
        RegistryError
            The file cannot be opened or created, is not a regular file, or the lock is not had
            before ``lock_timeout`` seconds have passed since ``start``.
        """
        if fcntl is None:  # pragma: no cover - Windows: the lock file alone
            return None, False
        flags = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        while True:
            created = False
            try:
                fd = os.open(real, os.O_RDWR | flags)
            except FileNotFoundError:
                try:
                    fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o644)
                    created = True
                except FileExistsError:
                    continue       # another writer created it meanwhile: open theirs
                except OSError as exc:
                    raise RegistryError(f"cannot write {self.path}: cannot create it "
                                        f"({_reason(exc)})") from None
            except OSError as exc:
                try:  # a read-only file is locked all the same: the append then says why
                    fd = os.open(real, os.O_RDONLY | flags)
                except OSError:
                    raise RegistryError(f"cannot write {self.path}: cannot open it "
                                        f"({_reason(exc)})") from None
            try:
                held = os.fstat(fd)
                if not stat.S_ISREG(held.st_mode):
                    raise RegistryError(f"registry {describe_not_a_file(self.path)}")
                self._flock(fd, real, start, note)
                try:
                    now = os.stat(real)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd, created
            os.close(fd)       # replaced or removed while we waited: lock the file there now

    def _flock(self, fd: int, real: Path, start: float, note: Callable[[str], None]) -> None:
        """``flock(fd, LOCK_EX)``, polling until ``lock_timeout`` seconds after ``start``
        (``note`` is called once :data:`LOCK_NOTE_AFTER` seconds have passed). A file system
        without ``flock`` is left to the lock file alone.

        Raises
        ------
        RegistryError
            The lock is not had in time.
        """
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno in _NO_FLOCK:
                    return
                raise RegistryError(f"cannot write {self.path}: cannot lock it "
                                    f"({_reason(exc)})") from None
            waited = time.monotonic() - start
            if waited >= self.lock_timeout:
                raise RegistryError(f"could not lock {self.path} within {self.lock_timeout:g} s "
                                    f"(another writer holds {real}, through another path to "
                                    f"it: a hard link or a mount)")
            if waited >= LOCK_NOTE_AFTER:
                note(f"{real}, through another path to it")
            time.sleep(min(0.02, self.lock_timeout - waited))

    def _scan(self, held: _Held) -> _State:
        """The file's state for an append (call with the lock held).

        Raises
        ------
        RegistryError
            A torn last line (run repair first), an unreadable line, or a line that does not
            verify (altered, out of the chain, or one the API would not have written:
            :class:`~delphi.registry.invariants.ChainRules`).
        """
        data = self._read(held.real)
        lines, tail = split_lines(data)
        if tail:
            raise RegistryError(
                f"{self.path}: line {len(lines) + 1} is torn (an earlier append was interrupted); "
                f"nothing was written. Run `delphi registry repair --registry {self.path}` (it keeps a "
                f"backup), then retry")
        # Other writers only ever append: re-parse only what was added since the last scan.
        cached = self._cache
        if cached is not None and data.startswith(cached.data):
            state = _State(cached.data, list(cached.lines), dict(cached.ids), cached.last_hash,
                           cached.last_time, cached.rules.copy())
        else:
            state = _State()
        state.rules.now = datetime.now(timezone.utc)
        for i in range(len(state.lines), len(lines)):
            line = lines[i]
            try:
                raw = json.loads(line)
                rid, rhash = raw["id"], raw["hash"]
                if not (isinstance(rid, str) and isinstance(rhash, str)):
                    raise TypeError
            except (ValueError, TypeError, KeyError):
                raise RegistryError(f"{self.path}: line {i + 1} is unreadable; nothing was "
                                    f"written. Run `delphi registry verify --registry {self.path}`") from None
            # Never extend a broken chain: an append would bless the tampered history.
            try:
                entry = check_line(line, raw, state.last_hash)
            except Problem as problem:
                raise RegistryError(f"{self.path}: line {i + 1} (id {rid}) {problem.message}; "
                                    f"nothing was written. Run `delphi registry verify "
                                    f"--registry {self.path}`") from None
            if entry.prev_hash != state.last_hash or rid in state.ids:
                how = (f"duplicates line {state.lines.index(line) + 1}"
                       if line in state.lines else "breaks the chain")
                raise RegistryError(f"{self.path}: line {i + 1} (id {rid}) {how}; "
                                    f"nothing was written. Run `delphi registry verify "
                                    f"--registry {self.path}`")
            problem = state.rules.problem(entry, i + 1)
            if problem is not None:
                raise RegistryError(f"{self.path}: line {i + 1} (id {rid}) {problem}; nothing "
                                    f"was written. Run `delphi registry verify --registry "
                                    f"{self.path}`")
            state.rules.add(entry, i + 1)
            state.ids.setdefault(rid, i)
            state.lines.append(line)
            state.last_hash = rhash
            state.last_time = entry.created_at
        state.data = data
        return state

    def _write(self, held: _Held, payload: bytes) -> None:
        """Append ``payload`` to ``held.real`` (call with the lock held). On any error the file
        is truncated back to its length before the call (removed if it was created) and
        fsynced, so a failed append (disk full, file-size limit, I/O error) leaves it
        byte-identical."""
        path = held.real
        new = held.created or not path.exists()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RegistryError(f"cannot open {self.path} for appending ({_reason(exc)}); "
                                f"nothing was written") from None
        try:
            size = os.fstat(fd).st_size  # we hold the lock: nobody else appends
        except OSError as exc:
            os.close(fd)
            raise RegistryError(f"cannot append to {self.path} ({_reason(exc)}); nothing was "
                                f"written") from None
        try:
            view = memoryview(payload)
            pause = os.environ.get(PAUSE_ENV)
            if pause:
                k = int(float(pause) * len(payload))
                _write_all(fd, view[:k])
                os.fsync(fd)
                signal = os.environ.get(PAUSE_SIGNAL_ENV)
                if signal:
                    Path(signal).write_text(str(k))
                time.sleep(3600)
                view = view[k:]
            _write_all(fd, view)
            os.fsync(fd)
        except OSError as exc:
            undo = _truncate(fd, size)
            if undo is None and new:
                try:
                    os.unlink(path)
                except OSError:
                    pass  # an empty file: verify and appends treat it as no entries
            if undo is None:
                raise RegistryError(f"cannot append to {self.path} ({_reason(exc)}); nothing "
                                    f"was written (the file is unchanged)") from None
            raise RegistryError(f"cannot append to {self.path} ({_reason(exc)}), and cutting "
                                f"the partial line off failed too ({_reason(undo)}): run "
                                f"`delphi registry repair --registry {self.path}` once it can be "
                                f"written") from None
        finally:
            os.close(fd)
        if new:  # make the new directory entry durable too (best effort: not every file
            try:  # system can fsync a directory, and the line itself is already on disk)
                dfd = os.open(path.parent, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            except OSError:
                pass

    def _append(self, build: Callable[[_State], dict],
                sign_key: SigningKey | None = None) -> Entry:
        """Lock, scan, build the entry's fields from the state, seal (and sign), write, unlock."""
        with self._lock() as held:
            state = self._scan(held)
            fields = build(state)
            if fields.get("created_at") is None:  # stamped under the lock: in file order
                fields["created_at"] = _now(state)
            entry = _seal(fields, state.last_hash, sign_key)
            if state.last_time is not None and entry.created_at < state.last_time:
                raise RegistryError(
                    f"created_at {entry.created_at.isoformat()} is earlier than the last entry's "
                    f"({state.last_time.isoformat()}); a registry's entries are in time order")
            if entry.id in state.ids:
                raise RegistryError(f"id {entry.id!r} is already in {self.path} (line "
                                    f"{state.ids[entry.id] + 1}); ids are unique: choose another")
            # What is written must verify: the same rules as verify, on the new line.
            state.rules.now = datetime.now(timezone.utc)
            problem = state.rules.problem(entry, len(state.lines) + 1)
            if problem is not None:
                raise RegistryError(f"entry {entry.id!r} would not verify: it {problem}; "
                                    f"nothing was written")
            line = entry.line.encode("ascii")
            self._write(held, line + b"\n")
            state.rules.add(entry, len(state.lines) + 1)
            state.ids[entry.id] = len(state.lines)
            state.lines.append(line)
            state.last_hash = entry.hash
            state.last_time = entry.created_at
            state.data += line + b"\n"
            self._cache = state
        return entry

    def register(self, forecast, *, id: str, author: str | None = None,
                 kind: str = "prediction", notes: str | None = None,
                 curve: Sequence[Sequence[float]] | None = None, interval: Any = None,
                 target_facts: Mapping[str, Any] | None = None,
                 settings: Mapping[str, Any] | None = None,
                 created_at: datetime | str | None = None,
                 sign_key: str | os.PathLike | SigningKey | None = None) -> Entry:
        """Append a delphi :class:`~delphi.forecast.Forecast` as a prediction (or projection).

        Parameters
        ----------
        forecast: from :func:`delphi.predict`; its loss, interval (the new-run one, with its
            method and expected-loss interval), fit, law, ladder fingerprint and notes are
            recorded.
        id: short unique name (letters, digits, ``._:/@+-``; at most 64 characters).
        kind: ``"prediction"`` (a run that will exist, scoreable) or ``"projection"``
            (a hypothetical target, never scored).
        curve: predicted loss along training, ``[(fraction, loss), ...]`` with fractions in
            (0, 1] increasing; partial outcomes are scored against it.
        interval: overrides the forecast's interval: ``(lower, upper, level[, kind])`` or a
            mapping.
        target_facts: more about the target: ``active_params``, ``metric``, ... or any other
            scalar fact (kept under ``target.facts``).
        settings: the keyword arguments given to :func:`delphi.predict`, to record how to redo
            it (``fit_max_flops``, ``include_unfinished``, ``divergence_threshold``, ``seed``,
            ``n_boot``, ``boot_unit``; fixed values, bounds and the Huber delta are read from
            the fit, the interval method and level from the interval).
        created_at: the entry's timestamp (default: now, UTC). Give one only to transcribe
            history (the bundled ``marin-registry.jsonl`` does, for a reproducible file); at
            most :data:`FUTURE_TOLERANCE` (5 minutes) ahead of now.
        sign_key: an Ed25519 private key file (``delphi registry keygen``) or a loaded
            :class:`~delphi.registry.signing.SigningKey`: the entry is signed with it (only the
            public key and the signature are written).

        Returns
        -------
        Entry, as written.

        Raises
        ------
        RegistryError
            Bad id or kind, duplicate id, a non-finite loss or parameter, a loss outside
            :data:`LOSS_RANGE`, a malformed curve or interval, a future ``created_at`` or one
            outside the calendar in UTC (``0001-01-01T00:00:00+01:00``), a bad key file, a
            torn or unreadable registry or one that does not verify (:meth:`verify`), a lock
            timeout, a file that cannot be written (read-only, disk full) or is not a regular
            file (a FIFO, a device). Nothing is written.
        """
        if hasattr(forecast, "step2") and hasattr(forecast, "accuracy"):
            # an AccuracyForecast (delphi.predict_accuracy): unit accuracy
            if curve is not None or interval is not None:
                raise RegistryError("register(): curve= and interval= are for loss forecasts; "
                                    "an accuracy forecast is registered with its own interval")
            return self.register_accuracy(forecast, id=id, author=author, kind=kind,
                                          notes=notes, target_facts=target_facts,
                                          settings=settings, created_at=created_at,
                                          sign_key=sign_key)
        if kind not in ("prediction", "projection"):
            raise RegistryError(f"kind must be 'prediction' or 'projection', got {kind!r}")
        _require_forecast(forecast)
        _check_id(id)
        key = _signing_key(sign_key)
        fields = _forecast_fields(forecast, id=id, kind=kind, author=author, notes=notes,
                                  curve=curve, interval=interval, target_facts=target_facts,
                                  settings=settings, created_at=created_at)
        return self._append(lambda state: fields, key)

    def register_comparison(self, comparison: RecipeComparison, *, id: str,
                            author: str | None = None, notes: str | None = None,
                            settings: Mapping[str, Any] | None = None,
                            created_at: datetime | str | None = None,
                            sign_key: str | os.PathLike | SigningKey | None = None
                            ) -> list[Entry]:
        """Append a comparison of recipes (:func:`delphi.compare_recipes`) as claims that can
        be scored: one prediction entry per (recipe other than the reference, target), each
        saying "the recipe beats the reference at the target by -d [lo, hi]".

        Each entry is a prediction of the recipe's own loss at the target (its forecast,
        law, fit and ladder, as :meth:`register` writes them) with a ``comparison`` record
        (:class:`~delphi.registry.schema.ComparisonRecord`): the difference recipe -
        reference and its interval for one new run of each (level, method, expected-loss
        interval), P(better), the compute multiplier and crossover with their intervals, the
        two recipes' names, the target, the law, the pairing, the reference's own forecast
        and its fitted data (name, source, SHA-256; the recipe's is the entry's ``ladder``),
        and delphi's version. Score it with both observed final losses
        (:meth:`score_comparison`).

        Parameters
        ----------
        comparison: a :class:`~delphi.analyses.recipes.RecipeComparison` made with its
            recipes' own forecasts (``forecasts=True``, the default).
        id: the entry's id when the comparison holds one (recipe, target); else the ids are
            ``ID-<recipe>-<k>``, k = 1, 2... the target's place in the comparison (the
            recipe's name with characters an id cannot hold replaced by ``_``).
        settings: as in :meth:`register` (``n_boot`` defaults to the comparison's draws).
        Other parameters as in :meth:`register`.

        Returns
        -------
        The entries written, in the comparison's order.

        Raises
        ------
        RegistryError
            Not a RecipeComparison or one without its recipes' forecasts, a bad id or one
            already in the registry (checked for every entry before the first is written),
            accuracies instead of losses, and the errors of :meth:`register`. An entry that
            fails to be written (disk full...) leaves the ones before it written.
        """
        import re

        # A RecipeComparison exists only once its module is imported: look it up there rather
        # than import the analysis stack (the fitting engine, scipy) with the registry.
        recipes = sys.modules.get("delphi.analyses.recipes")
        if recipes is None or not isinstance(comparison, recipes.RecipeComparison):
            raise RegistryError(f"register_comparison() needs a delphi RecipeComparison (from "
                                f"delphi.compare_recipes), got {type(comparison).__name__}")
        _check_id(id)
        key = _signing_key(sign_key)
        if comparison.unit == ACCURACY_UNIT:
            raise RegistryError("a comparison of recipes compares losses, not accuracies")
        rows = list(comparison.comparisons)
        targets = list(dict.fromkeys((c.target_flops, c.target_params, c.target_tokens)
                                     for c in rows))
        ids = []
        for c in rows:
            if len(rows) == 1:
                ids.append(id)
                continue
            k = targets.index((c.target_flops, c.target_params, c.target_tokens)) + 1
            ids.append(f"{id}-{re.sub(r'[^A-Za-z0-9._:@+-]', '_', c.recipe)}-{k}")
        for i in ids:
            try:
                _check_id(i)
            except RegistryError as exc:
                if i == id:
                    raise
                # the suffix is delphi's: say so, and how long ID may be
                longest = max(len(x) - len(id) for x in ids)
                raise RegistryError(f"{exc} -- entry {i[:40]!r}... is ID {id!r} plus the "
                                    f"suffix -<recipe>-<target> delphi adds for each of the "
                                    f"{len(ids)} comparisons; give an ID of at most "
                                    f"{MAX_ID_LENGTH - longest} characters") from None
        if len(set(ids)) < len(ids):
            raise RegistryError(f"the comparison's entries would share ids ({', '.join(ids)}): "
                                f"give the recipes distinct names")
        if self.path.exists():
            taken = {e.id for e in self.entries()} & set(ids)
            if taken:
                raise RegistryError(f"id {', '.join(map(repr, sorted(taken)))} is already in "
                                    f"{self.path}; "
                                    f"ids are unique: choose another ID (nothing was written)")
        settings = {"n_boot": comparison.n_draws + comparison.n_failed, **dict(settings or {})}
        built = []
        for eid, c in zip(ids, rows):
            own, ref = c.recipe_forecast, c.reference_forecast
            if own is None or ref is None:
                raise RegistryError("register_comparison() needs the recipes' own forecasts: "
                                    "make the comparison with forecasts=True (the default)")
            facts = {"reference": c.reference, "compared_at_flops": c.target_flops}
            fields = _forecast_fields(own, id=eid, kind="prediction", author=author,
                                      notes=notes, curve=None, interval=None,
                                      target_facts=facts, settings=settings,
                                      created_at=created_at)
            _check_loss(ref.loss, f"invalid comparison {eid!r}: the reference's forecast")
            try:
                record = ComparisonRecord(
                    reference=c.reference, recipe=c.recipe,
                    target_flops=plain_number(c.target_flops),
                    target_params=plain_number(c.target_params),
                    target_tokens=plain_number(c.target_tokens),
                    difference=plain_number(c.loss),
                    interval=_interval({
                        "lower": c.lower, "upper": c.upper, "level": comparison.level,
                        "kind": "new-run difference", "method": comparison.method,
                        "mean_lower": c.mean_lower, "mean_upper": c.mean_upper,
                        "n_draws": comparison.n_draws, "n_failed": comparison.n_failed}),
                    p_better=plain_number(c.p_better),
                    multiplier=_finite_or_none(c.multiplier),
                    multiplier_lower=_finite_or_none(c.multiplier_lower),
                    multiplier_upper=_finite_or_none(c.multiplier_upper),
                    crossover=_finite_or_none(c.crossover),
                    crossover_lower=_finite_or_none(c.crossover_lower),
                    crossover_upper=_finite_or_none(c.crossover_upper),
                    reference_loss=plain_number(ref.loss),
                    reference_interval=_interval(ref.interval),
                    reference_ladder=LadderRecord(name=str(ref.ladder_name),
                                                  source=str(ref.ladder_source),
                                                  sha256=str(ref.ladder_sha256)),
                    law=comparison.law, method=comparison.method, pairing=comparison.pairing,
                    n_draws=int(comparison.n_draws),
                    fixed={k: plain_number(v) for k, v in comparison.fixed.items()})
            except ValidationError as exc:
                raise RegistryError(validation_message(exc, f"comparison {eid!r}")) from None
            built.append({**fields, "comparison": record})
        return [self._append(lambda state, f=f: f, key) for f in built]

    def register_accuracy(self, forecast, *, id: str, author: str | None = None,
                          kind: str = "prediction", notes: str | None = None,
                          target_facts: Mapping[str, Any] | None = None,
                          settings: Mapping[str, Any] | None = None,
                          created_at: datetime | str | None = None,
                          sign_key: str | os.PathLike | SigningKey | None = None) -> Entry:
        """Append a benchmark-accuracy forecast (:func:`delphi.predict_accuracy`, one task) as
        a prediction (or projection). :meth:`register` given an ``AccuracyForecast`` calls this.

        The entry uses the registry's ordinary format (old readers read it, every hash is
        computed as for losses): ``target.unit`` is ``"accuracy"``, ``target.name`` the task,
        ``target.metric`` the accuracy column(s), ``target.params``/``tokens`` the target N
        and D, ``target.facts`` the task's chance level, the design and the predicted task loss
        with its interval; ``forecast.loss`` holds the predicted accuracy (a fraction in
        (0, 1]) and ``forecast.interval`` the new-run interval of the final accuracy
        (fractions; ``mean_lower``/``mean_upper`` the expected accuracy's); ``law`` records
        both steps' laws and parameters (``step1.E``, ``step2.k``...); ``fit`` the fitted
        runs, both steps' fixed values and warnings; ``ladder.sha256`` the SHA-256 of the
        points both steps were fitted on (``AccuracyForecast.fitted_sha256``). Scores of such an entry
        give ``error_points`` = 100 x (actual - predicted) instead of a relative error
        (:class:`~delphi.registry.Score`); the interval check, z and PIT are as for losses.

        Parameters
        ----------
        forecast: an :class:`~delphi.accuracy.AccuracyForecast` (one task; for
            ``task="all"`` register each element under its own id).
        settings: as in :meth:`register` (``seed``, ``n_boot`` are read from the forecast
            when not given).
        Other parameters as in :meth:`register`.

        Returns
        -------
        Entry, as written.

        Raises
        ------
        RegistryError
            Not an AccuracyForecast, bad id or kind, duplicate id, an accuracy or interval end
            outside [0, 1] (or the accuracy outside its interval), non-finite parameters, and
            the file errors of :meth:`register`. Nothing is written.
        """
        if isinstance(forecast, (list, tuple)):
            raise RegistryError("register_accuracy() takes one AccuracyForecast; for "
                                "task='all' register each task under its own id")
        for attr in ("task", "accuracy", "lower", "upper", "step1", "step2", "target",
                     "fitted_sha256"):
            if not hasattr(forecast, attr):
                raise RegistryError(f"register_accuracy() needs an AccuracyForecast (from "
                                    f"delphi.predict_accuracy), got {type(forecast).__name__}")
        if kind not in ("prediction", "projection"):
            raise RegistryError(f"kind must be 'prediction' or 'projection', got {kind!r}")
        _check_id(id)
        key = _signing_key(sign_key)
        task, s1, s2 = forecast.task, forecast.step1, forecast.step2
        _check_accuracy(forecast.accuracy, f"invalid accuracy forecast of task {task.name!r}: "
                                           f"accuracy")
        for name in ("lower", "upper", "mean_lower", "mean_upper"):
            v = plain_number(getattr(forecast, name, None))
            if v is not None and not (isinstance(v, float) and 0 <= v <= 1):
                raise RegistryError(f"invalid accuracy forecast of task {task.name!r}: "
                                    f"{name} = {v!r} is not a fraction in [0, 1]")
        facts = {"task": task.name, "chance": float(task.chance), "design": forecast.design,
                 "task_loss": _finite_or_none(forecast.task_loss),
                 "task_loss_lower": _finite_or_none(forecast.task_loss_lower),
                 "task_loss_upper": _finite_or_none(forecast.task_loss_upper),
                 "checkpoint_noise_sd": _finite_or_none(forecast.noise_sd)}
        facts.update(dict(target_facts or {}))
        base = {"name": task.name, "metric": f"{task.name} accuracy ("
                + " + ".join(task.accuracy) + ")", "unit": ACCURACY_UNIT,
                **{k: v for k, v in forecast.target.items() if k in _TARGET_FIELDS}}
        target = _target_record(base, facts)
        noise = _finite_or_none(forecast.step1_noise)
        iv = _interval({
            "lower": forecast.lower, "upper": forecast.upper, "level": forecast.level,
            "kind": "new-run",
            "method": "bootstrap over runs through both steps + step-1 run noise + "
                      "checkpoint noise" + (", stretched by the extrapolation calibration"
                                            if getattr(forecast, "calibration", None)
                                            else ""),
            "mean_lower": forecast.mean_lower, "mean_upper": forecast.mean_upper,
            "noise": noise, "noise_source": f"step-1 task-loss run noise (sd of log); "
                                            f"checkpoint accuracy noise sd "
                                            f"{100 * forecast.noise_sd:.3g} points",
            "n_draws": forecast.n_boot, "n_failed": forecast.n_failed})
        settings = {"seed": forecast.seed, "n_boot": forecast.n_boot, "boot_unit": "run",
                    **dict(settings or {})}
        unknown = set(settings) - _SETTING_KEYS
        if unknown:
            raise RegistryError(f"settings: unknown key(s) {sorted(unknown)}; known: "
                                f"{sorted(_SETTING_KEYS)}")
        runs = tuple(sorted(set(str(r) for r in s1.labels) | set(
            str(r) for r in s2.labels if not str(r).startswith("<"))))
        try:
            fc = ForecastRecord(
                loss=plain_number(forecast.accuracy), interval=iv,
                notes=tuple(str(n) for n in forecast.notes) + tuple(
                    f"warning: {w}" for w in forecast.warnings))
            law = LawRecord(
                name=f"{forecast.design}: {s1.law.name} -> {s2.law.name}",
                formula=f"step 1: {s1.law.formula}; step 2: {s2.law.formula}",
                params={f"step{i}.{k}": plain_number(v) for i, f in ((1, s1), (2, s2))
                        for k, v in f.params.items()},
                stderr={f"step{i}.{k}": _finite_or_none(v) for i, f in ((1, s1), (2, s2))
                        for k, v in f.stderr.items()})
            fit_rec = FitRecord(
                fixed={f"step{i}.{k}": plain_number(v) for i, f in ((1, s1), (2, s2))
                       for k, v in f.fixed.items()},
                bounds={f"step{i}.{k}": (_finite_or_none(lo), _finite_or_none(hi))
                        for i, f in ((1, s1), (2, s2)) for k, (lo, hi) in f.bounds.items()},
                huber_delta=plain_number(s1.delta), fit_max_flops=plain_number(settings.get("fit_max_flops")),
                seed=plain_number(settings.get("seed")), n_boot=plain_number(settings.get("n_boot")),
                boot_unit=settings.get("boot_unit"), n_runs=len(runs), runs=runs,
                converged=bool(s1.converged and s2.converged),
                message=f"step 1: {s1.message}; step 2 ({s2.n_points} checkpoints): "
                        f"{s2.message}",
                objective=_finite_or_none(s1.objective),
                warnings=tuple(f"step 1: {w}" for w in s1.warnings)
                + tuple(f"step 2: {w}" for w in s2.warnings))
            ladder = LadderRecord(name=str(forecast.ladder or "?"),
                                  source="points of both fitted steps (delphi.accuracy)",
                                  sha256=forecast.fitted_sha256)
        except ValidationError as exc:
            raise RegistryError(validation_message(exc, f"accuracy forecast of task "
                                                        f"{task.name!r}")) from None
        fields = dict(id=id, kind=kind, created_at=_explicit_time(created_at), author=author,
                      target=target, forecast=fc, law=law, fit=fit_rec, ladder=ladder,
                      notes=notes)
        return self._append(lambda state: fields, key)

    def register_external(self, *, id: str, target: Mapping[str, Any] | Any, loss: float,
                          source: str, law: str | None = None,
                          law_params: Mapping[str, float] | None = None,
                          made_at: str | None = None, interval: Any = None,
                          curve: Sequence[Sequence[float]] | None = None,
                          author: str | None = None, kind: str = "prediction",
                          notes: str | None = None,
                          created_at: datetime | str | None = None,
                          sign_key: str | os.PathLike | SigningKey | None = None) -> Entry:
        """Append a forecast made outside delphi (marked ``forecast.external = true``).

        Parameters
        ----------
        target: a mapping of target fields (``flops`` [FLOPs], ``params``, ``active_params``,
            ``tokens``, ``name``, ``metric``, ``unit``...; other keys go to ``facts``) or a
            :class:`~delphi.forecast.Target`.
        loss: the forecast final loss, in the target's unit.
        source: where the forecast was published (URL or citation); required.
        law: the law or method used, as its authors describe it; ``law_params`` its parameters.
        made_at: when the forecast was made, as the source states it (ISO date).
        Other parameters as in :meth:`register`.

        Returns
        -------
        Entry, as written.

        Raises
        ------
        RegistryError
            As :meth:`register`; also a missing source or an empty target, and for a target
            in unit ``"accuracy"`` a forecast, interval end or curve point that is not a
            fraction in [0, 1]. Nothing is written.
        """
        if kind not in ("prediction", "projection"):
            raise RegistryError(f"kind must be 'prediction' or 'projection', got {kind!r}")
        _check_id(id)
        key = _signing_key(sign_key)
        base = target.to_dict() if hasattr(target, "to_dict") else target
        if not isinstance(base, Mapping):
            raise RegistryError(f"target must be a mapping or a Target, got {target!r}")
        base = dict(base)
        target_rec = _target_record({"facts": base.pop("facts", None)}, base)
        iv = _interval(interval)
        points = _snap_curve(_curve(curve), plain_number(loss))
        _check_losses(loss, iv, points, accuracy=target_rec.unit == ACCURACY_UNIT)
        try:
            fc = ForecastRecord(loss=plain_number(loss), interval=iv, curve=points, external=True,
                                source=source,
                                made_at=made_at)
            law_rec = None if law is None and not law_params else LawRecord(
                name=law or "unspecified",
                params={k: plain_number(v) for k, v in (law_params or {}).items()})
        except ValidationError as exc:
            raise RegistryError(validation_message(exc, "external forecast")) from None
        fields = dict(id=id, kind=kind, created_at=_explicit_time(created_at), author=author,
                      target=target_rec, forecast=fc, law=law_rec, notes=notes)
        return self._append(lambda state: fields, key)

    def score(self, id: str, actual: float, fraction: float = 1.0, source: str | None = None, *,
              author: str | None = None, notes: str | None = None,
              created_at: datetime | str | None = None, unit: str | None = None,
              sign_key: str | os.PathLike | SigningKey | None = None,
              force: bool = False) -> Score:
        """Append the observed loss (or accuracy) of prediction ``id`` as an outcome entry and
        score it.

        Parameters
        ----------
        id: the prediction's id.
        actual: observed loss, in the prediction's unit; for an accuracy prediction (unit
            ``"accuracy"``) the observed accuracy as a fraction in (0, 1] (0.612, not 61.2).
        fraction: share of training done when ``actual`` was measured, in (0, 1]; below 1 the
            prediction's forecast curve is interpolated.
        source: where the number comes from (W&B run, issue comment...).
        unit: unit of ``actual`` (:data:`delphi.units.UNITS`, or ``"accuracy"``); default:
            the prediction's. A unit other than the prediction's is an error: losses in
            different units are not comparable (nats and bits differ by ln 2; bytes and tokens
            by the tokenizer), and loss units do not apply to an accuracy. A prediction
            registered without a unit (an external one) is in nats/token, the default.
        created_at, sign_key: as in :meth:`register`.
        force: record a final loss more than :data:`~delphi.registry.scoring.UNIT_RATIO`
            (1.3x) above or below its prediction, which is otherwise refused: a final outcome
            is recorded once and cannot be corrected, and such a factor is usually another
            unit (bits vs nats: 1.44x; bits/byte vs nats/token: ~0.2-0.6x), so the error names
            the factor and the likely unit (:func:`~delphi.registry.scoring.unit_mismatch`).
            Partial outcomes (``fraction`` < 1, what ``track`` records) are never refused for
            it: a run off its curve is what tracking is for.

        Returns
        -------
        Score (its ``outcome_id`` is the new entry's id, ``ID/outcome-N``).

        Raises
        ------
        RegistryError
            Unknown id, a projection or outcome id, a non-finite loss or one outside
            :data:`LOSS_RANGE` (for an accuracy prediction: an accuracy outside (0, 1]), a
            second final outcome, a fraction outside (0, 1], a partial outcome without a curve,
            an unknown unit or one other than the prediction's, a future ``created_at`` or one
            outside the calendar in UTC, a score that is not a finite number, a torn registry
            or one that does not verify, a file that cannot be written or is not a regular
            file; a final loss more than 1.3x off its prediction without ``force``. Nothing is
            written.
        """
        if not isinstance(force, bool):
            raise RegistryError(f"force must be True or False, got {force!r}")
        return self._score(id, actual, fraction, source, author=author, notes=notes,
                           created_at=created_at, unit=unit, sign_key=sign_key, force=force)

    def score_comparison(self, id: str, loss_a: float, loss_b: float,
                         source: str | None = None, *, author: str | None = None,
                         notes: str | None = None, created_at: datetime | str | None = None,
                         unit: str | None = None,
                         sign_key: str | os.PathLike | SigningKey | None = None
                         ) -> ComparisonScore:
        """Append the observed final losses of a registered comparison's two recipes
        (:meth:`register_comparison`) as one outcome entry and score the difference.

        Parameters
        ----------
        id: the comparison's id.
        loss_a: the reference recipe's (A's) observed final loss at the target.
        loss_b: the recipe's (B's) observed final loss, in the same unit.
        source, author, notes, created_at, unit, sign_key: as in :meth:`score`.

        Returns
        -------
        ComparisonScore: the observed difference ``loss_b - loss_a`` against the registered
        interval (inside or not, z and PIT, as :meth:`score` scores a loss), whether the
        predicted winner won, and the recipe's own loss scored against its forecast
        (``recipe_score``; it also counts in :meth:`report`'s loss scores). The outcome entry
        is ``ID/outcome-1`` with ``actual`` = ``loss_b`` and ``reference_actual`` = ``loss_a``.

        Raises
        ------
        RegistryError
            Unknown id, an entry that is not a comparison, a loss that is not a finite number
            in :data:`LOSS_RANGE` (naming ``loss_a`` or ``loss_b``), a comparison already
            scored, a unit other than the comparison's, and the file errors of :meth:`score`.
            Nothing is written.
        """
        _check_number(loss_a, "invalid outcome: loss_a (the reference's loss)")
        _check_loss(loss_a, "invalid outcome: loss_a (the reference's loss)")
        _check_loss(loss_b, "invalid outcome: loss_b (the recipe's loss)")
        return self._score(id, loss_b, 1.0, source, author=author, notes=notes,
                           created_at=created_at, unit=unit, sign_key=sign_key,
                           reference_actual=loss_a)

    def comparison_scores(self, id: str | None = None) -> list[ComparisonScore]:
        """Scores of every scored comparison (of comparison ``id`` only, when given), in
        file order."""
        return [c for c in self.report().comparisons if id is None or c.prediction_id == id]

    def _score(self, id, actual, fraction, source, *, author, notes, created_at, unit,
               sign_key, reference_actual=None, force=False):
        given_unit = None if unit is None else _unit(unit, "outcome unit")
        if not isinstance(id, str):
            raise RegistryError(f"id must be a string, got {id!r}")
        # The range of actual depends on the prediction's unit (a loss, or an accuracy
        # fraction): checked under the lock once the prediction is read; the rest now.
        _check_number(actual, "invalid outcome: actual")
        key = _signing_key(sign_key)

        def record(value: Any) -> OutcomeRecord:
            try:
                return OutcomeRecord(of=id, actual=plain_number(value), fraction=plain_number(fraction),
                                     source=source, reference_actual=plain_number(reference_actual))
            except ValidationError as exc:
                raise RegistryError(validation_message(exc, "outcome")) from None

        record(1.0)     # of, fraction and source, before taking the lock
        result: dict[str, Score] = {}

        def build(state: _State) -> dict:
            if not state.lines:
                raise RegistryError(f"no registry at {self.path} (or it is empty): register a "
                                    f"prediction first")
            if id not in state.ids:
                known = [i for i in state.ids if "/outcome-" not in i]
                raise RegistryError(f"no prediction {id!r} in {self.path}; register it first "
                                    f"(known: {', '.join(known[:10]) or 'none'})")
            pred = state.entry(id)
            if pred.kind != "prediction":
                raise RegistryError(f"{id!r} is an {pred.kind} entry, not a prediction; only "
                                    f"predictions are scored")
            _check_outcome_unit(pred, given_unit)
            if pred.comparison is not None and reference_actual is None:
                c = pred.comparison
                how = option("score_comparison(id,loss_a=LA,loss_b=LB)",
                             "--loss-a LA --loss-b LB")
                raise RegistryError(f"{id!r} is a comparison of {c.recipe} against "
                                    f"{c.reference}: score it with both observed final losses "
                                    f"({how})")
            if pred.comparison is None and reference_actual is not None:
                raise RegistryError(f"{id!r} is not a comparison of recipes: score it with one "
                                    f"observed loss (score(id, actual); CLI --actual)")
            accuracy = pred.target is not None and pred.target.unit == ACCURACY_UNIT
            if accuracy:
                _check_accuracy(actual, f"invalid outcome of accuracy prediction {id!r}: actual")
            else:
                _check_loss(actual, "invalid outcome: actual")
            outcome = record(actual)
            # The file verified as far as the scan read it, so its outcomes of `id` are
            # ID/outcome-1..N and at most one of them is final (invariants.ChainRules).
            final = state.rules.final.get(id)
            if outcome.fraction >= 1.0 and final is not None:
                raise RegistryError(
                    f"{id!r} already has a final outcome ({final[0]}, line {final[1]}); a final "
                    f"{'accuracy' if accuracy else 'loss'} is recorded once")
            oid = f"{id}/outcome-{state.rules.n_outcomes.get(id, 0) + 1}"
            stamp = _explicit_time(created_at) or _now(state)
            # Scored before the append: a score that cannot be computed or printed (as JSON)
            # must not leave an outcome behind.
            if reference_actual is not None:
                result["score"] = score_comparison(
                    pred, outcome_id=oid, loss_recipe=outcome.actual,
                    loss_reference=outcome.reference_actual, source=source,
                    created_at=stamp.isoformat())
            else:
                result["score"] = score_outcome(pred, outcome_id=oid, actual=outcome.actual,
                                                fraction=outcome.fraction, source=source,
                                                created_at=stamp.isoformat())
                s = result["score"]
                off = (None if force or accuracy or outcome.fraction < 1.0 else
                       unit_mismatch(s.actual, s.predicted, s.unit))
                if off is not None:
                    raise RegistryError(
                        f"final outcome of {id!r} not recorded: the actual {s.actual:g} (read "
                        f"in the prediction's unit, {s.unit or DEFAULT_UNIT}) against a "
                        f"prediction of {s.predicted:.4g}: "
                        f"{off} A final outcome is recorded once and cannot be corrected: "
                        f"give the loss in the prediction's unit, or, if this is the real "
                        f"number, record it with {option('force=True', '--force')}")
            return dict(id=oid, kind="outcome", created_at=stamp, author=author,
                        outcome=outcome, notes=notes)

        self._append(build, key)
        return result["score"]

    def repair(self) -> Path | None:
        """Fix an interrupted append at the end of the file, or a changed layout, keeping a
        backup.

        A torn last line is removed; a last line that is a whole valid entry missing only its
        newline is completed. Every complete entry is kept. When the entries are intact but the
        layout changed (CRLF line endings, e.g. from git autocrlf; trailing blank lines; a
        byte-order mark) the file is rewritten in its canonical layout, so that the hashes
        verify again.

        The repair goes to the registry file itself, through a symlink too (the symlink stays
        one), and is made in place under the lock, once the backup is on disk: the file keeps
        its identity, so every other path to it (a hard link, a bind mount) still names the
        repaired file and writers waiting on its lock append to it. (Renaming a rewritten copy
        over it would leave those paths on the old file, and the registry would fork.) Should
        the machine crash during the rewrite, the backup holds the original.

        Returns
        -------
        The backup's path (``REAL.bak``, ``REAL.bak.2``..., beside the real file), or None when
        the file verifies and nothing was done.

        Raises
        ------
        RegistryError
            The file is damaged elsewhere (altered, reordered or deleted entries, or an entry
            the API would not write: restore it from version control), it does not exist, is
            not a regular file, or cannot be written.
        """
        if not self.path.exists():
            raise RegistryError(f"no registry at {self.path}")
        if verify_bytes(self._read(), self.path).ok:
            return None  # nothing to do: no lock needed (the file may be read-only)
        with self._lock() as held:
            data = self._read(held.real)
            report = verify_bytes(data, self.path)
            if report.ok:
                return None
            if not report.repairable:
                raise RegistryError(f"cannot repair {self.path}: {report}. Repair only fixes an "
                                    f"interrupted append at the end, CRLF line endings and "
                                    f"trailing blank lines; restore the file from version "
                                    f"control")
            backup = self._backup_path(held.real)
            self._write_backup(backup, data)
            if report.fix is not None:
                self._rewrite(held.real, data, normalized(data)[0], backup)
                self._cache = None
                return backup
            _, tail = split_lines(data)
            try:
                fd = os.open(held.real, os.O_WRONLY | os.O_APPEND)
            except OSError as exc:
                raise RegistryError(f"cannot repair {self.path} ({_reason(exc)}); nothing was "
                                    f"changed (backup {backup})") from None
            try:
                if report.tail_complete:
                    _write_all(fd, memoryview(b"\n"))
                else:
                    os.ftruncate(fd, len(data) - len(tail))
                os.fsync(fd)
            except OSError as exc:
                undo = _truncate(fd, len(data)) if report.tail_complete else None
                raise RegistryError(
                    f"cannot repair {self.path} ({_reason(exc)}); "
                    + ("the file is unchanged" if undo is None else
                       f"restoring it failed too ({_reason(undo)})")
                    + f" (backup {backup})") from None
            finally:
                os.close(fd)
            self._cache = None
        return backup

    def _rewrite(self, real: Path, old: bytes, data: bytes, backup: Path) -> None:
        """Rewrite the file ``real`` (holding ``old``) as ``data``, no longer than ``old``, in
        place: written from its start, cut to its new length, fsynced (call with the lock
        held, once the backup is on disk). On an error the old bytes are written back.

        Raises
        ------
        RegistryError
            The file cannot be written (it is unchanged, or, if restoring it failed too, the
            message says to restore it from the backup).
        """
        try:
            fd = os.open(real, os.O_WRONLY)
        except OSError as exc:
            raise RegistryError(f"cannot repair {self.path} ({_reason(exc)}); the file is "
                                f"unchanged (backup {backup})") from None
        def put(content: bytes) -> None:
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, memoryview(content))
            os.ftruncate(fd, len(content))
            os.fsync(fd)

        try:
            try:
                put(data)
            except OSError as exc:
                try:
                    put(old)
                except OSError as undo:
                    raise RegistryError(
                        f"cannot repair {self.path} ({_reason(exc)}), and restoring it failed "
                        f"too ({_reason(undo)}): copy the backup {backup} back over it") from None
                raise RegistryError(f"cannot repair {self.path} ({_reason(exc)}); the file is "
                                    f"unchanged (backup {backup})") from None
        finally:
            os.close(fd)

    def _write_backup(self, backup: Path, data: bytes) -> None:
        """Write ``data`` to a new file ``backup`` and fsync it; on failure remove it.

        Raises
        ------
        RegistryError
            The backup cannot be written in full (nothing was changed; no backup is left).
        """
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise RegistryError(f"cannot repair {self.path}: cannot create the backup {backup} "
                                f"({_reason(exc)}); nothing was changed") from None
        try:
            _write_all(fd, memoryview(data))
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            try:
                os.unlink(backup)  # a partial backup would pass for a good one
            except OSError:
                pass
            raise RegistryError(f"cannot repair {self.path}: writing the backup {backup} failed "
                                f"({_reason(exc)}); nothing was changed and no backup was "
                                f"left") from None
        os.close(fd)

    @staticmethod
    def _backup_path(real: Path) -> Path:
        """``REAL.bak`` beside the real file, or ``REAL.bak.2``... if taken."""
        candidate = real.with_name(real.name + ".bak")
        n = 1
        while candidate.exists():
            n += 1
            candidate = real.with_name(f"{real.name}.bak.{n}")
        return candidate


#: Seconds of waiting for a held lock before :class:`Registry` calls its ``on_wait``.
LOCK_NOTE_AFTER = 2.0
# flock errors of a file system that has no flock (some network and FUSE file systems): the
# lock file alone serialises writers there.
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def _remove_if_empty(real: Path, fd: int) -> None:
    """Remove the file ``real`` that taking the lock created, if it is still empty and still
    the one locked (a failed first append leaves no file). Best effort."""
    try:
        held, now = os.fstat(fd), os.stat(real)
        if held.st_size == 0 and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            os.unlink(real)
    except OSError:
        pass


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _seal(fields: dict, prev_hash: str, sign_key: SigningKey | None = None) -> Entry:
    """The entry with ``prev_hash``, its signature (with ``sign_key``) and its own hash,
    checked to read back identically.

    Raises
    ------
    RegistryError
        The fields do not make a valid entry.
    """

    body = {"delphi_version": __version__, **fields, "prev_hash": prev_hash, "hash": GENESIS}
    try:
        draft = Entry(**body)
    except ValidationError as exc:
        raise RegistryError(validation_message(exc)) from None
    if sign_key is not None:  # sign the content and prev_hash; the hash then covers both
        draft = draft.model_copy(update={"signature": sign_fields(draft.fields(), sign_key)})
    entry = draft.model_copy(update={"hash": entry_hash(draft.fields())})
    # What is written must verify later: re-read it exactly as verify will.
    line = entry.line
    back = Entry.model_validate_json(line)
    if back.line != line or entry_hash(back.fields()) != back.hash or (
            back.signature is not None and not signature_valid(back.fields())):
        raise RegistryError(f"internal error: entry {entry.id!r} does not round-trip; "
                            f"nothing was written")
    return back


def _truncate(fd: int, size: int) -> OSError | None:
    """Cut the file back to ``size`` bytes and fsync it; the error if that failed."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        return exc
    try:
        os.fsync(fd)
    except OSError:
        pass  # the length is already restored for every reader; durability is best effort
    return None


def _signing_key(sign_key: Any) -> SigningKey | None:
    if sign_key is None or isinstance(sign_key, SigningKey):
        return sign_key
    if isinstance(sign_key, (str, os.PathLike)):
        return load_signing_key(sign_key)
    raise RegistryError(f"sign_key must be a key file path or a SigningKey (from "
                        f"delphi.registry.load_signing_key), got {type(sign_key).__name__}")
