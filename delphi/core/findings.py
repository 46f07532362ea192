"""Findings: a warning or note as a typed record, made once where it is found and rendered
alike by the text report, the JSON, figures, the HTML report and the registry.

A :class:`Finding` carries a stable ``code`` (what kind of finding: ``"no-interval"``,
``"off-trend"``, ``"far-extrapolation"``...; :data:`CODES` lists delphi's), a ``severity``
(``"warning"``: a reason to distrust the result; ``"note"``: an assumption or choice made on
the user's behalf), the ``subject`` it concerns (a run id, a parameter, the target) and the
``message`` a reader sees. Consumers test ``code`` and ``severity``, never the wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

__all__ = ["CODES", "Finding", "messages", "of_code"]

Severity = Literal["warning", "note"]

#: delphi's finding codes and what each means. A finding made from a plain string (an older
#: producer, or a user's) has code ``"other"``.
CODES: dict[str, str] = {
    "target-convention": "the target's C disagrees with the ladder's FLOP convention, or was "
                         "computed from N and D with it",
    "flops-drift": "the ladder's C/(6ND) drifts across rungs: the target's C depends on which k",
    "degenerate": "the law collapsed to a constant over the ladder and was extrapolated anyway",
    "outside-design": "the target lies outside the ladder's design (D/N or N far beyond it)",
    "ladder-design": "what the ladder's design measures and what it cannot (one D, one D/N)",
    "target-tokens": "the target's D differs from a fixed-D ladder's one token count",
    "law-in-c": "a law in C was used for a target given by N and D",
    "ratio-from-n": "the extrapolation ratio was taken in N (a fixed-D sweep)",
    "far-extrapolation": "more than four orders of magnitude beyond the largest fitted run",
    "below-smallest": "the target is below the smallest fitted run",
    "fixed-parameters": "parameters were fixed, not fitted: the result is conditional on them",
    "not-converged": "the fit did not converge",
    "interval": "how the interval was made (method, its inputs, what it leaves out)",
    "no-interval": "why there is no interval",
    "off-trend": "rungs the other rungs' law misses, kept in the fit",
    "floor-range": "the forecast across a range of pinned floors",
    "curve": "how the target's predicted curve and its band were made",
    "selection": "how the law was chosen (auto) or the ensemble weighted, and what it means",
    "other": "a finding without a code of its own",
}


@dataclass(frozen=True)
class Finding:
    """One warning or note about a result."""

    code: str
    """What kind of finding: a key of :data:`CODES`."""
    severity: Severity
    """``"warning"`` (a reason to distrust the result) or ``"note"`` (informational)."""
    message: str
    """The sentence a reader sees, as the text report prints it."""
    subject: str | None = None
    """What it concerns: a run id, a parameter name, ``"target"`` or ``"interval"``; None
    when it is about the result as a whole."""

    def __post_init__(self) -> None:
        if self.severity not in ("warning", "note"):
            raise ValueError(f"a finding's severity is 'warning' or 'note', got "
                             f"{self.severity!r}")
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}; codes: {', '.join(CODES)}")

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict:
        """``{"code", "severity", "subject", "message"}`` (the JSON's ``findings`` items)."""
        return {"code": self.code, "severity": self.severity, "subject": self.subject,
                "message": self.message}

    @classmethod
    def note(cls, code: str, message: str, subject: str | None = None) -> "Finding":
        """A note (informational)."""
        return cls(code, "note", message, subject)

    @classmethod
    def warning(cls, code: str, message: str, subject: str | None = None) -> "Finding":
        """A warning (a reason to distrust the result)."""
        return cls(code, "warning", message, subject)


def messages(findings: Iterable[Finding], severity: Severity | None = None) -> tuple[str, ...]:
    """The messages of ``findings`` (of one ``severity`` if given), in order."""
    return tuple(f.message for f in findings if severity is None or f.severity == severity)


def of_code(findings: Iterable[Finding], *codes: str) -> list[Finding]:
    """The findings whose code is one of ``codes``, in order."""
    return [f for f in findings if f.code in codes]
