"""Small helpers for the text of messages and reports (no third-party imports)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, one: str, many: str | None = None) -> str:
    """``"1 entry"``, ``"2 entries"``: ``n`` and the noun in the right number (``many``
    defaults to ``one + "s"``; for a phrase, the noun is its first word: ``plural(1,
    "degree of freedom", "degrees of freedom")``)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
