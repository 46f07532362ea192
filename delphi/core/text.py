"""Small helpers for the text of messages and reports (no third-party imports)."""

from __future__ import annotations

import math

__all__ = ["plural", "not_utf8", "level_percent"]


def plural(n: int, one: str, many: str | None = None) -> str:
    """``"1 entry"``, ``"2 entries"``: ``n`` and the noun in the right number (``many``
    defaults to ``one + "s"``; for a phrase, the noun is its first word: ``plural(1,
    "degree of freedom", "degrees of freedom")``)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def level_percent(level) -> str:
    """A coverage ``level`` (a fraction in (0, 1)) as the percentage a label shows: ``0.9`` as
    ``"90%"``, ``0.975`` as ``"97.5%"``, ``0.999999`` as ``"99.9999%"``, with the fewest
    significant digits that give the level back (float noise such as 90.00000000000001 is
    not shown), so that a level in (0, 1) is never labelled ``"100%"`` or ``"0%"``. Anything
    else (a NaN, a value outside (0, 1)) is shown as ``:g`` would."""
    pct = 100 * float(level)
    if not (math.isfinite(pct) and 0 < pct < 100):
        return f"{pct:g}%"
    for digits in range(2, 17):
        text = f"{pct:.{digits}g}"
        if abs(float(text) - pct) <= 1e-9 * pct and 0 < float(text) < 100:
            return text + "%"
    return f"{pct!r}%"


def not_utf8(path, data: bytes, exc: UnicodeDecodeError, first_line: int = 1) -> str:
    """``"PATH, line L: not UTF-8 text (byte 0xXX at byte C of the line)"`` for the decode
    error ``exc`` of ``data`` (whose first line is line ``first_line`` of the file): the start
    of the message every reader of a text file gives, before its advice."""
    line = first_line + data.count(b"\n", 0, exc.start)
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return (f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
            f"{column} of the line)")
