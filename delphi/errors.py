"""Exceptions and warnings raised by delphi.

One base class, :class:`DelphiError`, so a caller can catch everything delphi raises on
purpose; specific subclasses so a bad ladder can be told apart from a failed fit.
"""

from __future__ import annotations

import os
import re
import sys
import warnings

__all__ = [
    "DelphiError",
    "LadderError",
    "DataDirError",
    "ManifestError",
    "LawError",
    "TargetError",
    "TargetInputError",
    "FitError",
    "NotFittedError",
    "IdentifiabilityError",
    "DegenerateFitError",
    "UnidentifiedError",
    "RegistryError",
    "MissingArgumentError",
    "DelphiWarning",
    "LadderWarning",
    "DuplicateRowsWarning",
    "FitWarning",
    "user_stacklevel",
    "warn_user",
    "option",
    "for_cli",
]


class DelphiError(Exception):
    """Base class of every error delphi raises deliberately."""


class LadderError(DelphiError, ValueError):
    """The ladder data is unusable: a bad value, a missing column, a duplicate row.

    Messages name the run, the source row and the column concerned.
    """


class DataDirError(LadderError, FileNotFoundError):
    """The directory holding the published ladders (``DELPHI_DATA_DIR``) was not found."""


class ManifestError(LadderError):
    """A ladder manifest (TOML) is malformed or names something that does not exist."""


class LawError(DelphiError, ValueError):
    """An unknown law, or a bad parameter name, bound or fixed value for a law."""


class TargetError(DelphiError, ValueError):
    """The prediction target is invalid or outside what the law can extrapolate to."""


class TargetInputError(TargetError):
    """The target does not give a quantity the law reads (``chinchilla`` at a target given
    by C alone), or gives quantities that contradict each other (C far from 6·N·D): the
    message names the quantities and the flags that give them. The CLI reports it as a usage
    error (exit code 2) when the target came from its flags."""


class FitError(DelphiError, RuntimeError):
    """The fit cannot be done or did not produce a trustworthy optimum."""


class NotFittedError(DelphiError, ValueError, AttributeError):
    """An estimator (:class:`~delphi.ScalingLawFitter`) was used before ``fit``. Also an
    AttributeError and a ValueError, as scikit-learn's ``NotFittedError`` is (``hasattr()``
    checks and scikit-learn's own handling rely on it)."""


class IdentifiabilityError(FitError):
    """The ladder's design cannot identify one or more free parameters of the law."""


class DegenerateFitError(IdentifiabilityError):
    """The fitted law collapsed to a constant over the ladder (its losses show no trend beyond
    their noise), so extrapolating it would be arbitrary. ``allow_degenerate=True``
    (``--allow-degenerate``) predicts anyway."""


class UnidentifiedError(IdentifiabilityError):
    """An answer rests on a parameter the ladder does not identify (its profile-likelihood
    interval reaches the edge of its admissible range); the message names it and the range."""


class RegistryError(DelphiError):
    """The preregistration registry is malformed, altered or cannot be written."""


class MissingArgumentError(DelphiError, TypeError):
    """A public function was called without an argument it needs (``delphi.fit(ladder)``
    with no law): the message names the argument and its choices. Also a TypeError, as
    Python's own missing-argument error is, so ``except TypeError`` still catches it."""


class DelphiWarning(UserWarning):
    """Base class of delphi's warnings (also recorded on the objects they concern)."""


class LadderWarning(DelphiWarning):
    """Something in the ladder looks suspicious but usable (e.g. a FLOP column far from 6ND)."""


class DuplicateRowsWarning(LadderWarning):
    """Rows repeated exactly (identical in every column: two logs of one run concatenated)
    were merged, one copy of each kept; the message names the runs, steps and rows, and
    each dropped copy is listed in the ladder's exclusions."""


class FitWarning(DelphiWarning):
    """A fit finished but needs attention (parameter at a bound, poorly identified, ...)."""


# Frames of files under this directory are delphi's own; a warning skips them.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that attributes the warning to the first
    frame outside the delphi package: the user's line that called ``delphi.fit``,
    ``delphi.predict``, ``load_ladder``..., however deep inside delphi the warning is raised
    (the depth varies with the entry point, so a fixed number would point into delphi).

    Counted from the function that calls this one: ``warnings.warn(msg, FitWarning,
    stacklevel=user_stacklevel())``. With no frame outside delphi (a delphi module run as a
    script), the outermost frame.
    """
    frame = sys._getframe(1)              # the function issuing the warning: stacklevel 1
    level = 1
    while frame.f_back is not None and _is_delphi(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level


def _is_delphi(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def warn_user(message: str, category: type[Warning] = DelphiWarning) -> None:
    """Issue ``message`` as a ``category`` warning attributed to the caller's line outside
    delphi (see :func:`user_stacklevel`), so that ``python -W error``, warning filters by
    module and the printed ``file:line`` point at the user's code."""
    warnings.warn(message, category, stacklevel=user_stacklevel())


# A setting named in a message is spelled both ways: the Python keyword for API users and the
# flag for the command line, which prints only the flag (a CLI user never sees `x=True`).
OPTION = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*(?:\(\))?(?:\['[^'\s]*'\])*"
                     r"(?:=(?:\{[^{}\s]*\}|[^\s(),;:]+))?"
                     r" \(CLI (?P<flag>[^()]*--[^()]*)\)")


def option(api: str, flag: str) -> str:
    """Name a setting in a message in both spellings: ``option("drop_invalid=True",
    "--drop-invalid")`` is ``"drop_invalid=True (CLI --drop-invalid)"``.

    ``api`` is one token without spaces (``include_edge=True``, ``to_dict()['extra']``);
    ``flag`` is what a command-line user types or reads, containing a ``--flag`` and no
    parentheses (``--include-edge``, ``no --include-edge``). The command line prints
    ``flag`` alone (:func:`for_cli`). Raises ``ValueError`` on a malformed pair.
    """
    if (not api or any(c.isspace() for c in api) or "--" not in flag
            or any(c in flag for c in "()")):
        raise ValueError(f"option({api!r}, {flag!r}): api is one token; flag names a --flag, "
                         f"without parentheses")
    return f"{api} (CLI {flag})"


def for_cli(text: str) -> str:
    """``text`` as the command line prints it: each ``API (CLI FLAG)`` written by
    :func:`option` becomes ``FLAG``; the rest is unchanged."""
    return OPTION.sub(lambda m: m.group("flag"), text) if "(CLI " in text else text
