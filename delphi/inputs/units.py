"""Loss units: the names delphi accepts, and the unit a metric's name implies.

Labels only: delphi never converts a loss between units (bits per byte needs the eval set's
bytes per token). A ladder, its forecasts and the registry carry the unit so that numbers in
different units are not compared (scoring an outcome in another unit is an error).
"""

from __future__ import annotations

import re

from ..errors import LadderError

__all__ = ["UNITS", "DEFAULT_UNIT", "LOSS_RANGE", "normalize_unit", "unit_from_metric"]

#: Plausible losses [nats/token, bits/token or bits/byte]. A cross-entropy above 100 is far
#: beyond an untrained model's (ln of a 10^6-token vocabulary is 13.8 nats/token); below 1e-4
#: the model would almost never be wrong. Either is a unit slip (a perplexity, a percentage)
#: or a typo: a ladder warns of such losses and the registry refuses them.
LOSS_RANGE = (1e-4, 100.0)

#: Loss units delphi knows. Cross-entropy in nats per token is what training code logs;
#: bits per byte (bpb) is tokenizer-free; bits per token = nats per token / ln 2.
UNITS: tuple[str, ...] = ("nats/token", "bits/byte", "bits/token")
#: The unit of a ladder that says nothing else (what training code logs).
DEFAULT_UNIT = "nats/token"
_UNIT_ALIASES = {"bpb": "bits/byte", "bits-per-byte": "bits/byte", "bits_per_byte": "bits/byte",
                 "bitsperbyte": "bits/byte", "bits/bytes": "bits/byte",
                 "nats": "nats/token", "bits": "bits/token"}
# A metric named like this is bits per byte ("eval/paloma/c4_en/bpb", "bits_per_byte").
_BPB_NAME = re.compile(r"(?<![a-z])bpb(?![a-z])|bits?[\s_\-/]*per[\s_\-/]*byte", re.IGNORECASE)


def normalize_unit(unit: str, *, what: str = "unit") -> str:
    """The canonical name of a loss unit (one of :data:`UNITS`).

    Case and spaces are ignored; ``bpb``, ``bits-per-byte`` and ``bits_per_byte`` mean
    ``bits/byte``.

    Raises
    ------
    LadderError
        Not a string, or an unknown unit (the message lists the accepted ones).
    """
    if not isinstance(unit, str):
        raise LadderError(f"{what} must be a string such as 'nats/token', got {unit!r}")
    key = unit.strip().lower().replace(" per ", "/").replace(" ", "")
    key = _UNIT_ALIASES.get(key, key)
    if key not in UNITS:
        raise LadderError(f"unknown {what} {unit!r}; accepted: {', '.join(UNITS)} (also bpb "
                          f"for bits/byte)")
    return key


def unit_from_metric(metric: str | None) -> str | None:
    """``"bits/byte"`` when a metric's name says bits per byte (``bpb``, ``bits-per-byte``,
    ``bits_per_byte``, any case), else ``None`` (the name does not say)."""
    if metric and _BPB_NAME.search(str(metric)):
        return "bits/byte"
    return None
