"""Loss units: the names delphi accepts, and the unit a metric's name implies.

Labels only: delphi never converts a loss between units (bits per byte needs the eval set's
bytes per token). A ladder, its forecasts and the registry carry the unit so that numbers in
different units are not compared (scoring an outcome in another unit is an error).
"""

from __future__ import annotations

import re

from ..errors import LadderError

__all__ = ["UNITS", "DEFAULT_UNIT", "LOSS_RANGE", "BITS_PER_BYTE_MAX", "TYPICAL_FINAL_LOSS",
           "normalize_unit", "unit_from_metric", "unit_plausibility"]

#: Plausible losses [nats/token, bits/token or bits/byte]. A cross-entropy above 100 is far
#: beyond an untrained model's (ln of a 10^6-token vocabulary is 13.8 nats/token); below 1e-4
#: the model would almost never be wrong. Either is a unit slip (a perplexity, a percentage)
#: or a typo: a ladder warns of such losses and the registry refuses them.
LOSS_RANGE = (1e-4, 100.0)

#: A uniform guess over the 256 byte values costs log2(256) = 8 bits/byte: no trained LM is
#: above it, so a ladder whose every run ends above it is not in bits/byte (an error).
BITS_PER_BYTE_MAX = 8.0
#: ``{unit: (low, high)}``: where a language model's final losses lie, for the units where
#: that range tells units apart. LMs reach ~0.5-1.5 bits/byte (the Pile, C4, Paloma: Gao et
#: al. 2020; OLMo's bpb evals); a bits/byte ladder whose every run ends above 2 is likely in
#: nats/token or bits/token, and is warned about, not refused. No nats/token range: real
#: ladders end below 1 nat/token (Llama 3's isoFLOP points, 0.74..0.93, openathena-isoflops)
#: where bits per byte also lie, so a low nats ladder says nothing about its unit.
TYPICAL_FINAL_LOSS = {"bits/byte": (0.0, 2.0)}

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


def unit_plausibility(unit: str, final_losses) -> tuple[str | None, str | None]:
    """``(error, warning)`` about a ladder's unit from its runs' final losses (1-d, the unit's
    numbers; non-finite and non-positive ones ignored), each a sentence or ``None``.

    The error: every run ends above :data:`BITS_PER_BYTE_MAX` bits/byte (worse than a uniform
    guess over bytes). The warning: every run ends outside :data:`TYPICAL_FINAL_LOSS` for
    ``unit`` (above 2 bits/byte). Other units: neither. Every run, not the median, so that
    one diverged or tiny run does not trip it; the wording names the range seen and the
    likely unit.
    """
    import numpy as np    # here, not at the top: the registry reads units without numpy

    y = np.asarray(final_losses, dtype=float)
    y = y[np.isfinite(y) & (y > 0)]
    if not len(y) or unit not in TYPICAL_FINAL_LOSS:
        return None, None
    lo, hi = float(y.min()), float(y.max())
    seen = f"{lo:.4g}" if lo == hi else f"{lo:.4g}..{hi:.4g}"
    runs = "the run ends" if len(y) == 1 else f"all {len(y)} runs end"
    if lo > BITS_PER_BYTE_MAX:
        return (f"{runs} above {BITS_PER_BYTE_MAX:g} bits/byte ({seen}), worse than a uniform "
                f"guess over bytes (log2 256 = 8 bits/byte; language models reach ~0.5-1.5): "
                f"these losses are not bits per byte (nats/token? bits/token? a perplexity?)"
                ), None
    high = TYPICAL_FINAL_LOSS[unit][1]
    if lo > high:
        return None, (f"{runs} above {high:g} bits/byte ({seen}), where language models reach "
                      f"~0.5-1.5 bits/byte: wrong unit? These look like nats/token or "
                      f"bits/token")
    return None, None
