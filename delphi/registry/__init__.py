"""Preregistration registry: record forecasts before a run, score them after.

A registry is one append-only JSON Lines file. Each line is an :class:`Entry` (a prediction,
a projection, or an outcome referencing a prediction) whose ``hash`` covers its content and
its ``prev_hash``, the previous entry's hash, so altering, deleting or reordering entries is
detected by :meth:`Registry.verify`, which also checks that every entry is one ``register`` or
``score`` could have written there (:mod:`delphi.registry.invariants`: a second final outcome,
an outcome id other than ``ID/outcome-N`` or a date in the future fails it, naming the line).
Appends are locked (one lock per file, through whichever path: symlinks, hard links, bind
mounts) and fsynced, and never extend a file that does not verify; an append that fails
(disk full, file-size limit) leaves the file byte-identical, and one interrupted mid-line (a
killed writer) leaves a torn last line that :meth:`Registry.repair` removes (keeping a backup).

The chain proves nothing against someone who can write the file and recompute every hash:
publish the head (:meth:`Registry.head`) elsewhere and check it later, and sign entries
(:mod:`delphi.registry.signing`, Ed25519) to show who wrote them.

>>> reg = Registry("forecasts.jsonl")                                # doctest: +SKIP
>>> reg.register(delphi.predict(ladder, {"flops": 1e23}), id="my-1e23")  # doctest: +SKIP
>>> reg.score("my-1e23", actual=2.31)                                # doctest: +SKIP

Benchmark accuracies (:func:`delphi.predict_accuracy`) register the same way
(:meth:`Registry.register_accuracy`, or :meth:`Registry.register` given an
``AccuracyForecast``) with unit ``"accuracy"``: values are fractions, and their scores give the
error in points (``Score.error_points``) instead of a relative error.

>>> reg.register_accuracy(delphi.predict_accuracy(ladder, "hellaswag", target_params=3.2e9,
...                       target_tokens=6.4e10), id="hs-3b")            # doctest: +SKIP
>>> reg.score("hs-3b", actual=0.612).error_points                       # doctest: +SKIP

A comparison of recipes (:func:`delphi.compare_recipes`) is a claim too: one prediction per
recipe and target whose ``comparison`` record holds the difference and its interval
(:meth:`Registry.register_comparison`), scored with both recipes' observed final losses
(:meth:`Registry.score_comparison`).

>>> reg.register_comparison(delphi.compare_recipes([a, b], target_flops=1e22), id="b-vs-a")  # doctest: +SKIP
>>> reg.score_comparison("b-vs-a", loss_a=2.61, loss_b=2.55).inside                # doctest: +SKIP
"""

from .chain import Signer, VerifyReport
from .core import (ACCURACY_UNIT, FUTURE_TOLERANCE, LOSS_RANGE, MAX_ID_LENGTH, MAX_REGISTRY_BYTES,
                   PAUSE_ENV, PAUSE_SIGNAL_ENV, Registry)
from .schema import (FORMAT, GENESIS, ComparisonRecord, Entry, FitRecord, ForecastRecord,
                     IntervalRecord,
                     LadderRecord, LawRecord, OutcomeRecord, SignatureRecord, TargetRecord,
                     canonical_json, entry_hash)
from .scoring import ComparisonScore, Score, Scoreboard
from .signing import (SigningKey, generate_key, load_signing_key, load_trusted_keys)

__all__ = [
    "Registry", "ACCURACY_UNIT", "Entry", "Score", "ComparisonScore", "Scoreboard",
    "VerifyReport", "TargetRecord", "ComparisonRecord",
    "ForecastRecord", "IntervalRecord", "LawRecord", "FitRecord", "LadderRecord",
    "OutcomeRecord", "SignatureRecord", "Signer", "FORMAT", "GENESIS", "MAX_ID_LENGTH",
    "LOSS_RANGE", "FUTURE_TOLERANCE", "MAX_REGISTRY_BYTES", "PAUSE_ENV", "PAUSE_SIGNAL_ENV", "canonical_json",
    "entry_hash", "SigningKey", "generate_key", "load_signing_key", "load_trusted_keys",
]
