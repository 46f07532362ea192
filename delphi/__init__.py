"""delphi: predict the final loss of a large training run from a ladder of small runs.

The flow: ``load_ladder`` -> :class:`Ladder` -> ``fit(ladder, law)`` -> :class:`Fit` ->
``predict(ladder, target, law)`` -> :class:`Forecast`. See the README for the CLI.

``import delphi`` is quick: the names below (and the submodules, e.g. ``delphi.plot``) are
imported on first use, so a notebook or the ``delphi`` command pays for pandas, scipy and the
fitting engine only when it needs them. ``delphi.X`` and ``from delphi import X`` work for
every name in ``__all__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The errors are tiny and needed by every caller that catches them: imported eagerly.
from .errors import (DataDirError, DegenerateFitError, DelphiError, DelphiWarning,  # noqa: E402
                     FitError, FitWarning, IdentifiabilityError, LadderError, LadderWarning,
                     LawError, ManifestError, NotFittedError, RegistryError, TargetError,
                     UnidentifiedError)

#: Public name -> the submodule that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "Fit": "fitting", "ScalingLawFitter": "fitting", "fit": "fitting", "fit_arrays": "fitting",
    "Forecast": "forecast", "Target": "forecast", "predict": "forecast",
    "Exclusion": "ladder", "Ladder": "ladder",
    "LAWS": "laws", "Law": "laws", "Param": "laws", "get_law": "laws",
    "list_ladders": "readers", "load_ladder": "readers", "load_manifest": "readers",
    "Backtest": "analyses.backtest", "backtest": "analyses.backtest",
    "prefix_fits": "analyses.backtest",
    "Completion": "curves", "complete": "curves",
    "complete_many": "curves",
    "Registry": "registry",
    "Interval": "uncertainty", "bootstrap": "uncertainty",
    "compare": "selection", "Comparison": "selection", "Candidate": "selection",
    "leave_future_out": "calibration", "CalibrationModel": "calibration",
    "calibration_backtest": "calibration",
    "predict_accuracy": "accuracy", "AccuracyForecast": "accuracy", "compare_accuracy": "accuracy",
    "compare_recipes": "analyses.recipes", "RecipeComparison": "analyses.recipes",
    "backtest_recipes": "analyses.recipes",
}

if TYPE_CHECKING:  # static analysers and IDEs see the real imports
    from .analyses.backtest import Backtest, backtest, prefix_fits
    from .analyses.recipes import RecipeComparison, backtest_recipes, compare_recipes
    from .curves import Completion, complete
    from .fitting import Fit, ScalingLawFitter, fit, fit_arrays
    from .forecast import Forecast, Target, predict
    from .ladder import Exclusion, Ladder
    from .laws import LAWS, Law, Param, get_law
    from .readers import list_ladders, load_ladder, load_manifest
    from .registry import Registry
    from .calibration import CalibrationModel, calibration_backtest, leave_future_out
    from .selection import Candidate, Comparison, compare
    from .uncertainty import Interval, bootstrap

__all__ = [
    "__version__", "Ladder", "Exclusion", "load_ladder", "load_manifest", "list_ladders",
    "Law", "Param", "LAWS", "get_law", "fit", "fit_arrays", "Fit", "ScalingLawFitter",
    "predict", "Target", "Forecast", "Interval", "bootstrap", "backtest", "Backtest",
    "prefix_fits", "compare", "Comparison", "Candidate", "leave_future_out",
    "CalibrationModel", "calibration_backtest",
    "predict_accuracy", "AccuracyForecast", "compare_accuracy",
    "compare_recipes", "RecipeComparison", "backtest_recipes",
    "complete", "Completion", "Registry",
    "DelphiError", "LadderError", "DataDirError", "ManifestError", "LawError", "TargetError",
    "FitError", "NotFittedError", "IdentifiabilityError", "DegenerateFitError",
    "UnidentifiedError", "RegistryError", "DelphiWarning", "LadderWarning", "FitWarning",
]


def __getattr__(name: str) -> Any:
    """Import a public name (or a submodule such as ``delphi.plot``) on first access."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists but one of its imports is missing
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names only (not this module's helpers: importlib, Any, TYPE_CHECKING...)."""
    return sorted(__all__)
