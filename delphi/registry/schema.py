"""The registry's record format: pydantic models, canonical JSON and the entry hash.

One JSON object per line. Every model forbids unknown fields and is strict about types (a
string is never silently read as a number), so a hand-edited or foreign line is rejected with
a message naming the field. Floats must be finite.

Canonical form: ``json.dumps(entry, sort_keys=True, separators=(",", ":"),
ensure_ascii=True, allow_nan=False)`` of the model's JSON dump, every field present (``null``
when unset). ``hash`` is the SHA-256 (hex) of the canonical form of the entry *without* its
``hash`` field; ``prev_hash`` is the previous line's ``hash`` (:data:`GENESIS` on line 1).

``signature`` is the one exception to "every field present": an unsigned entry omits it, so
entries written before signing existed keep their bytes and hashes. A signed entry's
``signature`` (:class:`SignatureRecord`) is covered by its ``hash`` like any other field; what
the signature itself signs is described in :mod:`delphi.registry.signing`.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Mapping

from pydantic import (AwareDatetime, BaseModel, ConfigDict, Field, ValidationError,
                      field_validator, model_validator)

from ..errors import RegistryError

__all__ = [
    "FORMAT", "GENESIS", "KINDS", "Entry", "TargetRecord", "IntervalRecord", "ForecastRecord",
    "LawRecord", "FitRecord", "ExclusionRecord", "LadderRecord", "OutcomeRecord",
    "ComparisonRecord", "SignatureRecord", "CurveBandRecord", "CarryOverRecord", "canonical_json", "entry_hash", "validation_message", "ACCURACY_UNIT",
]

#: The unit of a benchmark-accuracy prediction: values are fractions in (0, 1].
ACCURACY_UNIT = "accuracy"

#: Format tag stored in every entry; bump it when the schema changes incompatibly.
FORMAT = "delphi.registry/1"
#: ``prev_hash`` of the first entry: there is nothing before it.
GENESIS = "0" * 64
#: Entry kinds. ``prediction``: a run that will exist; ``projection``: a hypothetical target
#: (never scored); ``outcome``: the observed loss of a registered prediction.
KINDS = ("prediction", "projection", "outcome")

Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
#: Ids are short and human-readable: no spaces, at most 80 characters.
EntryId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,79}$")]
Text = Annotated[str, Field(max_length=20_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TargetRecord(_Strict):
    """What was forecast: the run (or hypothetical run) and the eval it is scored on."""

    name: Text | None = None
    metric: Text | None = None
    """Eval metric and set, e.g. ``"Paloma macro loss (dropless)"``."""
    unit: Text | None = None
    """Unit of the loss, e.g. ``"nats/token"``."""
    flops: Positive | None = None
    """C, training compute [FLOPs]."""
    params: Positive | None = None
    """N, total parameters [count]."""
    active_params: Positive | None = None
    """Active parameters per token for MoE models [count]."""
    tokens: Positive | None = None
    """D, training tokens [tokens]."""
    peak_lr: Positive | None = None
    schedule: Text | None = None
    """LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"``."""
    steps: Positive | None = None
    """Run length [optimizer steps]."""
    batch_size: Positive | None = None
    """Batch [tokens]."""
    facts: dict[str, bool | int | Finite | Text] = Field(default_factory=dict)
    """Any other fact about the target (schedule details, hardware...), scalar values only."""

    @model_validator(mode="after")
    def _something_given(self) -> "TargetRecord":
        if self.flops is None and self.params is None and self.tokens is None:
            raise ValueError("a target needs at least one of flops, params, tokens")
        return self


class IntervalRecord(_Strict):
    """A forecast interval for the final loss: ``[lower, upper]`` at ``level``."""

    lower: Finite
    upper: Finite
    level: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
    """Nominal coverage, e.g. 0.9."""
    kind: Text | None = None
    """What ``lower``/``upper`` cover, e.g. ``"new-run"`` (one fresh run's loss: what an outcome
    is scored against) or ``"mean"`` (the expected loss)."""
    method: Text | None = None
    """How it was made, e.g. ``"bootstrap"`` or ``"delta"``."""
    mean_lower: Finite | None = None
    """Lower end of the expected-loss interval (parameter uncertainty only), when given."""
    mean_upper: Finite | None = None
    noise: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """Run-to-run noise used, standard deviation of log loss."""
    noise_source: Text | None = None
    n_draws: Annotated[int, Field(ge=0)] | None = None
    """Bootstrap draws used."""
    n_failed: Annotated[int, Field(ge=0)] | None = None
    """Bootstrap draws whose refit failed."""

    @model_validator(mode="after")
    def _ordered(self) -> "IntervalRecord":
        if not self.lower < self.upper:
            raise ValueError(f"interval lower ({self.lower}) must be below upper ({self.upper})")
        if (self.mean_lower is None) != (self.mean_upper is None) or (
                self.mean_lower is not None and self.mean_lower > self.mean_upper):
            raise ValueError("mean_lower and mean_upper must both be given, lower <= upper")
        return self


class CandidateRecord(_Strict):
    """One candidate recipe of a forecast whose law was chosen by backtest or averaged."""

    label: Text
    law: Text
    fixed: dict[str, Finite] = Field(default_factory=dict)
    huber_delta: Positive | None = None
    weight: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    """Its weight in the forecast (1 for the chosen law of ``auto``, 0 for the others)."""
    loss: Positive | None = None
    """Its own forecast of the target, when made."""
    mean_abs_error: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """Its leave-future-out mean |log error| on the ladder."""


class SelectionRecord(_Strict):
    """How a forecast's law was chosen (``--law auto``) or which laws it averages
    (``--ensemble``), with their weights (:mod:`delphi.selection`)."""

    rule: Literal["auto", "ensemble"]
    chosen: Text
    """The chosen candidate's label, or ``"ensemble"``."""
    candidates: tuple[CandidateRecord, ...]
    runner_up: Text | None = None
    spread: Finite | None = None
    """Runner-up forecast / chosen forecast - 1 (``auto``)."""
    weighting: Text | None = None
    """The ensemble's weighting rule."""


class FindingRecord(_Strict):
    """One finding of the forecaster, as :class:`delphi.core.findings.Finding` made it."""

    code: Annotated[str, Field(max_length=64)]
    """Its kind (:data:`delphi.core.findings.CODES`; a registry may hold codes a later delphi
    adds, so any short string is accepted)."""
    severity: Literal["warning", "note"]
    subject: Text | None = None
    """The run, parameter or ``"target"`` it concerns."""
    message: Text


class CarryOverRecord(_Strict):
    """How much of a tracked run's deviation from the curve carries over to its final loss, at
    one fraction (measured on the ladder's size folds:
    :func:`delphi.forecasting.target_curve.carry_over`)."""

    fraction: Fraction
    rho: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    sd: Positive
    """Residual sd of the folds' final log error after the carry-over."""
    rms: Positive
    """RMS of the folds' final log error (the tracker scales the ladder's sd by sd / rms)."""
    n: Annotated[int, Field(ge=2)]
    window: Fraction
    """Share of the run the deviation so far averages."""
    corr: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] | None = None
    """Correlation of the anchored forecast's and the run-only completion's errors on the
    folds; absent when not measured (the tracker then weighs them as independent)."""
    weight: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    """The anchored forecast's weight that minimises the folds' squared combined error;
    absent when not measured (the tracker then weighs by the two sds)."""


class CurveBandRecord(_Strict):
    """The band around a forecast curve (``predict --curve``, issue 26): one ``lower`` and one
    ``upper`` per curve point, at ``level``; partial outcomes are scored against it (z, PIT,
    inside), as a final outcome is against the interval."""

    level: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
    lower: tuple[Positive, ...]
    upper: tuple[Positive, ...]
    steps: tuple[Annotated[int, Field(ge=1)], ...] = ()
    """The target's step at each curve point (empty when not given)."""
    schedule: Text | None = None
    """The LR schedule the curve follows (a ``Schedule`` spec)."""
    method: Text | None = None
    """How the band was made (e.g. the final interval's relative widths carried along)."""
    completion_error: tuple[tuple[Fraction, Positive], ...] = ()
    """``(fraction, RMS log error)`` of run-only completions measured on the ladder at that
    fraction: the preregistered weight of a run's own completion when tracking revises the
    final forecast (:mod:`delphi.registry.tracking`)."""
    carry_over: tuple[CarryOverRecord, ...] | None = None
    """The carry-over per fraction the tracker anchors the ladder's final forecast by; absent
    (not null) in entries registered without it, which track as before anchoring existed."""
    correlation_use: Literal["variance"] | None = None
    """``"variance"``: the tracker keeps the inverse-variance weights and gives their
    combination its variance under the carry-over's ``corr``; absent: the correlated (BLUE)
    weights when a ``corr`` is recorded."""
    fold_weight_share: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    """Share of the carry-over's fold ``weight`` in the tracker's ladder weight (the rest the
    precision weight); absent in entries registered without fold weights."""
    early_completion_error: tuple[tuple[Fraction, Positive], ...] | None = None
    """``(fraction, RMS log error)`` of the early run-only completion (from warm-up) on the
    ladder; absent in entries registered without it (no run-only completion before 6
    checkpoints from the curve's start)."""


class ForecastRecord(_Strict):
    """The forecast itself."""

    loss: Positive
    """Predicted final loss, in the target's unit."""
    interval: IntervalRecord | None = None
    curve: tuple[tuple[Fraction, Positive], ...] | None = None
    """Predicted loss along the run: ``(fraction of training, loss)`` pairs, fractions strictly
    increasing; partial outcomes are scored against it."""
    extrapolation: Positive | None = None
    """Target compute over the largest fitted run's compute."""
    external: bool = False
    """True when the number was made outside delphi (no fit recorded here)."""
    source: Text | None = None
    """Where an external forecast was published (URL or citation)."""
    made_at: Text | None = None
    """When an external forecast was made, as its source states it (ISO date)."""
    notes: tuple[Text, ...] = ()
    """Assumptions made by the forecaster (delphi's :attr:`Forecast.notes`, then its
    :attr:`Forecast.warnings` prefixed ``"warning: "``)."""
    selection: SelectionRecord | None = None
    """The candidates and weights behind a forecast made with ``--law auto`` or
    ``--ensemble``; absent otherwise."""
    findings: tuple[FindingRecord, ...] | None = None
    """The forecaster's findings as typed records (code, severity, subject, message), the
    same messages as :attr:`notes`; absent in entries written before delphi recorded them."""
    band: CurveBandRecord | None = None
    """The band around :attr:`curve` (``predict --curve``); absent (not null) otherwise."""

    @model_validator(mode="after")
    def _consistent(self) -> "ForecastRecord":
        if self.external and not self.source:
            raise ValueError("an external forecast needs a source")
        if self.interval is not None and not (self.interval.lower <= self.loss
                                               <= self.interval.upper):
            raise ValueError(f"the predicted loss {self.loss} is outside its interval "
                             f"[{self.interval.lower}, {self.interval.upper}]")
        if self.curve is not None:
            if not self.curve:
                raise ValueError("a forecast curve needs at least one point")
            fractions = [f for f, _ in self.curve]
            if any(b <= a for a, b in zip(fractions, fractions[1:])):
                raise ValueError("forecast curve fractions must be strictly increasing")
            f_last, l_last = self.curve[-1]
            # The curve ends where the point forecast says; two final values would be ambiguous.
            if f_last == 1.0 and not math.isclose(l_last, self.loss, rel_tol=1e-6):
                raise ValueError(f"the forecast curve ends at {l_last} but the forecast loss is "
                                 f"{self.loss}")
        if self.band is not None:
            b = self.band
            n = len(self.curve or ())
            if len(b.lower) != n or len(b.upper) != n or (b.steps and len(b.steps) != n):
                raise ValueError(f"the curve band needs one lower, upper (and step) per curve "
                                 f"point ({n}), got {len(b.lower)}, {len(b.upper)}, "
                                 f"{len(b.steps)}")
            for k, ((f, v), lo, hi) in enumerate(zip(self.curve, b.lower, b.upper), 1):
                if not lo <= v <= hi:
                    raise ValueError(f"curve point {k} (fraction {f}): loss {v} is outside its "
                                     f"band [{lo}, {hi}]")
        return self


class LawRecord(_Strict):
    """The law and its fitted parameters (natural units)."""

    name: Text
    """A delphi law name (``power``, ``chinchilla``...) or, for an external forecast, a
    description of the method."""
    formula: Text | None = None
    params: dict[str, Finite] = Field(default_factory=dict)
    stderr: dict[str, Finite | None] = Field(default_factory=dict)
    """Approximate standard errors of the free parameters (null when unavailable)."""


class ExclusionRecord(_Strict):
    run: Text
    reason: Text


class FitRecord(_Strict):
    """Fit settings (enough to redo the fit) and the fit's diagnostics."""

    fixed: dict[str, Finite] = Field(default_factory=dict)
    bounds: dict[str, tuple[Finite | None, Finite | None]] = Field(default_factory=dict)
    """Bounds used per parameter; null for an open side."""
    huber_delta: Positive | None = None
    fit_max_flops: Positive | None = None
    include_unfinished: bool | None = None
    divergence_threshold: Positive | None = None
    seed: int | None = None
    n_boot: Annotated[int, Field(ge=0)] | None = None
    """Bootstrap draws requested for the interval."""
    boot_unit: Text | None = None
    """What the bootstrap resampled (``"run"`` or ``"budget"``)."""
    n_runs: Annotated[int, Field(ge=0)]
    runs: tuple[Text, ...] = ()
    excluded: tuple[ExclusionRecord, ...] = ()
    converged: bool
    message: Text | None = None
    objective: Finite | None = None
    warnings: tuple[Text, ...] = ()


class LadderRecord(_Strict):
    """The fitted data: where it came from and the SHA-256 of the canonical fitted points."""

    name: Text
    source: Text
    sha256: Sha256


class ComparisonRecord(_Strict):
    """A comparison of two recipes at one target, as a claim: "``recipe`` beats
    ``reference`` at the target by ``-difference`` [interval]" (:func:`delphi.compare_recipes`).

    It sits on a prediction entry whose forecast is the recipe's own (its loss, law, fit and
    ladder); this record holds the difference and the reference's side. Scored with both
    observed final losses (:meth:`Registry.score_comparison`): the observed
    L_recipe - L_reference against ``interval``.
    """

    reference: Text
    """The reference recipe (ladder) A."""
    recipe: Text
    """The recipe (ladder) B whose forecast the entry holds."""
    target_flops: Positive
    """Target compute C [FLOPs]: a target by compute compares each recipe at its own
    compute-optimal allocation (the envelope L*(C))."""
    target_params: Positive | None = None
    target_tokens: Positive | None = None
    """N and D of a target given by N and D (both recipes at that N and D)."""
    difference: Finite
    """Predicted L_recipe - L_reference at the target [the target's unit]; negative: the
    recipe is better."""
    interval: IntervalRecord
    """Interval of the difference for one new run of each recipe (paired bootstrap draws and
    run noise); ``mean_lower``/``mean_upper`` the expected-loss difference's."""
    p_better: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    """Share of the paired draws in which the recipe's expected loss is the lower."""
    multiplier: Positive | None = None
    """Effective compute multiplier: the compute the reference needs to reach the recipe's
    loss, over the target compute (None: unbounded)."""
    multiplier_lower: Positive | None = None
    multiplier_upper: Positive | None = None
    crossover: Positive | None = None
    """Compute where the two fitted curves meet, nearest the target [FLOPs] (None: not in
    1e15..1e27)."""
    crossover_lower: Positive | None = None
    crossover_upper: Positive | None = None
    reference_loss: Positive
    """The reference's own forecast at the target, in the target's unit."""
    reference_interval: IntervalRecord | None = None
    reference_ladder: LadderRecord
    """The reference's fitted data (name, source, SHA-256); the recipe's is the entry's
    ``ladder``."""
    law: Text
    """The law fitted to both recipes."""
    method: Text
    """How the draws were paired, in words."""
    pairing: Literal["run", "budget", "none"]
    n_draws: Annotated[int, Field(ge=0)]
    """Paired draws; 0 for recipes too small to resample (the interval then combines their
    own forecast intervals: :attr:`method` says so)."""
    fixed: dict[str, Finite] = Field(default_factory=dict)
    """Parameters held fixed for both recipes (e.g. a shared floor E)."""


class OutcomeRecord(_Strict):
    """An observed loss of a registered prediction."""

    of: EntryId
    """Id of the prediction scored."""
    actual: Positive
    """Observed loss, in the prediction's unit (of a comparison: the recipe's)."""
    fraction: Fraction = 1.0
    """Share of the planned training done when it was measured (1.0 = final)."""
    source: Text | None = None
    """Where the number comes from (W&B run, issue comment...)."""
    reference_actual: Positive | None = None
    """A comparison's outcome only: the reference recipe's observed final loss (the
    observed difference is ``actual - reference_actual``); absent otherwise, and in entries
    written before comparisons existed."""


class SignatureRecord(_Strict):
    """An Ed25519 signature of an entry (see :mod:`delphi.registry.signing`).

    Only the public key and the signature are stored; the private key never is.
    """

    alg: Literal["ed25519"] = "ed25519"
    key: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]{43}=$")]
    """The signer's public key: 32 raw bytes, base64."""
    sig: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]{86}==$")]
    """The signature: 64 bytes, base64."""


class Entry(_Strict):
    """One line of the registry: a prediction, a projection or an outcome."""

    format: Literal["delphi.registry/1"] = FORMAT
    id: EntryId
    kind: Literal["prediction", "projection", "outcome"]
    created_at: AwareDatetime
    """When the entry was written (UTC, as claimed by the writer: the chain proves order, the
    repository's history proves time)."""
    author: Text | None = None
    target: TargetRecord | None = None
    forecast: ForecastRecord | None = None
    law: LawRecord | None = None
    fit: FitRecord | None = None
    ladder: LadderRecord | None = None
    outcome: OutcomeRecord | None = None
    comparison: ComparisonRecord | None = None
    """A comparison of two recipes (a prediction of the recipe's loss that also claims the
    difference to the reference); absent otherwise."""
    delphi_version: Text
    notes: Text | None = None
    signature: SignatureRecord | None = None
    """Ed25519 signature by the entry's writer; omitted (not null) when unsigned."""
    prev_hash: Sha256
    hash: Sha256

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        try:
            return value.astimezone(timezone.utc)
        except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
            raise ValueError("outside the calendar once converted to UTC (years 1 to "
                             "9999)") from None

    @model_validator(mode="after")
    def _fields_for_kind(self) -> "Entry":
        forecast_fields = ("target", "forecast", "law", "fit", "ladder", "comparison")
        if self.kind == "outcome":
            if self.outcome is None:
                raise ValueError("an outcome entry needs an 'outcome'")
            extra = [f for f in forecast_fields if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"an outcome entry cannot carry {', '.join(extra)}")
            return self
        if self.outcome is not None:
            raise ValueError(f"a {self.kind} entry cannot carry an 'outcome'")
        if self.target is None or self.forecast is None:
            raise ValueError(f"a {self.kind} entry needs 'target' and 'forecast'")
        if not self.forecast.external and (self.law is None or self.fit is None
                                           or self.ladder is None):
            raise ValueError("a forecast made by delphi needs 'law', 'fit' and 'ladder' "
                             "(mark a forecast made elsewhere as external)")
        return self

    def fields(self) -> dict[str, Any]:
        """The entry's JSON fields as written: every field, except ``signature`` when unsigned."""
        data = self.model_dump(mode="json")
        if data.get("signature") is None:
            data.pop("signature", None)
        fc = data.get("forecast")
        for key in ("selection", "findings", "band"):
            if isinstance(fc, dict) and fc.get(key) is None:
                fc.pop(key, None)     # entries written before it existed stay canonical
        band = fc.get("band") if isinstance(fc, dict) else None
        if isinstance(band, dict):
            for key in ("carry_over", "early_completion_error", "correlation_use",
                        "fold_weight_share"):
                if band.get(key) is None:
                    band.pop(key, None)
            for c in band.get("carry_over") or ():
                for key in ("corr", "weight"):
                    if isinstance(c, dict) and c.get(key) is None:
                        c.pop(key, None)
        if data.get("comparison") is None:
            data.pop("comparison", None)
        oc = data.get("outcome")
        if isinstance(oc, dict) and oc.get("reference_actual") is None:
            oc.pop("reference_actual", None)
        return data

    @property
    def line(self) -> str:
        """The entry as written in the file (canonical JSON, no newline)."""
        return canonical_json(self.fields())


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, ASCII only, no NaN or infinity.

    Raises
    ------
    RegistryError
        ``obj`` holds a non-finite float or a value JSON cannot represent.
    """
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RegistryError(f"cannot write a registry entry: {exc}") from None


def entry_hash(fields: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``fields`` without its ``hash`` key."""
    body = {k: v for k, v in fields.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def validation_message(exc: ValidationError, what: str = "registry entry") -> str:
    """One readable line from a pydantic error: each bad field, what is wrong, what was given."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(entry)"
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        given = err.get("input")
        shown = "" if err.get("type") in ("missing",) or isinstance(given, (dict, BaseModel)) \
            else f" (got {given!r:.60})"
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}{shown}")
    return f"invalid {what}: " + "; ".join(parts)
