"""Small helpers for the text of messages and reports (no third-party imports)."""

from __future__ import annotations

__all__ = ["plural", "not_utf8"]


def plural(n: int, one: str, many: str | None = None) -> str:
    """``"1 entry"``, ``"2 entries"``: ``n`` and the noun in the right number (``many``
    defaults to ``one + "s"``; for a phrase, the noun is its first word: ``plural(1,
    "degree of freedom", "degrees of freedom")``)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def not_utf8(path, data: bytes, exc: UnicodeDecodeError, first_line: int = 1) -> str:
    """``"PATH, line L: not UTF-8 text (byte 0xXX at byte C of the line)"`` for the decode
    error ``exc`` of ``data`` (whose first line is line ``first_line`` of the file): the start
    of the message every reader of a text file gives, before its advice."""
    line = first_line + data.count(b"\n", 0, exc.start)
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return (f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
            f"{column} of the line)")
