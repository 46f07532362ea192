"""Preregistration registry: record forecasts before a run, score them after.

A registry is one append-only JSON Lines file. Each line is an :class:`Entry` (a prediction,
a projection, or an outcome referencing a prediction) whose ``hash`` covers its content and
its ``prev_hash``, the previous entry's hash, so altering, deleting or reordering entries is
detected by :meth:`Registry.verify`. Appends are locked and fsynced; an append interrupted
mid-line leaves a torn last line that :meth:`Registry.repair` removes (keeping a backup).

>>> reg = Registry("forecasts.jsonl")                                # doctest: +SKIP
>>> reg.register(delphi.predict(ladder, {"flops": 1e23}), id="my-1e23")  # doctest: +SKIP
>>> reg.score("my-1e23", actual=2.31)                                # doctest: +SKIP
"""

from .chain import VerifyReport
from .core import MAX_ID_LENGTH, PAUSE_ENV, PAUSE_SIGNAL_ENV, Registry
from .schema import (FORMAT, GENESIS, Entry, FitRecord, ForecastRecord, IntervalRecord,
                     LadderRecord, LawRecord, OutcomeRecord, TargetRecord, canonical_json,
                     entry_hash)
from .scoring import Score, Scoreboard

__all__ = [
    "Registry", "Entry", "Score", "Scoreboard", "VerifyReport", "TargetRecord",
    "ForecastRecord", "IntervalRecord", "LawRecord", "FitRecord", "LadderRecord",
    "OutcomeRecord", "FORMAT", "GENESIS", "MAX_ID_LENGTH", "PAUSE_ENV", "PAUSE_SIGNAL_ENV",
    "canonical_json", "entry_hash",
]
