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
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The errors are tiny and needed by every caller that catches them: imported eagerly.
from .errors import (DataDirError, DegenerateFitError, DelphiError, DelphiWarning,  # noqa: E402
                     DuplicateRowsWarning, FitError, FitWarning, IdentifiabilityError, LadderError, LadderWarning,
                     LawError, ManifestError, MissingArgumentError, NotFittedError,
                     RegistryError, TargetError, TargetInputError, UnidentifiedError)

#: Public name -> the submodule that defines it (imported on first access).
_LAZY: dict[str, str] = {
    "Fit": "fitting", "ScalingLawFitter": "fitting", "fit": "fitting", "fit_arrays": "fitting",
    "Forecast": "forecasting.forecast", "Target": "forecasting.forecast", "predict": "forecasting.forecast",
    "Exclusion": "inputs.ladder", "Ladder": "inputs.ladder",
    "LAWS": "laws", "Law": "laws", "Param": "laws", "get_law": "laws",
    "list_ladders": "inputs.readers", "load_ladder": "inputs.readers", "load_manifest": "inputs.readers",
    "Backtest": "analyses.backtest", "backtest": "analyses.backtest",
    "prefix_fits": "analyses.backtest",
    "Completion": "forecasting.curves", "complete": "forecasting.curves",
    "complete_many": "forecasting.curves",
    "Registry": "registry", "Finding": "core.findings",
    "Interval": "forecasting.uncertainty", "bootstrap": "forecasting.uncertainty",
    "compare": "forecasting.selection", "Comparison": "forecasting.selection", "Candidate": "forecasting.selection",
    "leave_future_out": "forecasting.calibration", "CalibrationModel": "forecasting.calibration",
    "calibration_backtest": "forecasting.calibration",
    "predict_accuracy": "analyses.accuracy", "AccuracyForecast": "analyses.accuracy", "compare_accuracy": "analyses.accuracy",
    "compare_recipes": "analyses.recipes", "RecipeComparison": "analyses.recipes",
    "backtest_recipes": "analyses.recipes",
    "suggest_runs": "analyses.design", "score_design": "analyses.design",
    "Suggestions": "analyses.design", "DesignScore": "analyses.design",
    "track": "registry.tracking", "Tracking": "registry.tracking",
    "predict_curve": "forecasting.target_curve", "CurveForecast": "forecasting.target_curve",
}

if TYPE_CHECKING:  # static analysers and IDEs see the real imports
    from .analyses.backtest import Backtest, backtest, prefix_fits
    from .analyses.recipes import RecipeComparison, backtest_recipes, compare_recipes
    from .analyses.design import DesignScore, Suggestions, score_design, suggest_runs
    from .registry.tracking import Tracking, track
    from .forecasting.target_curve import CurveForecast, predict_curve
    from .forecasting.curves import Completion, complete
    from .fitting import Fit, ScalingLawFitter, fit, fit_arrays
    from .forecasting.forecast import Forecast, Target, predict
    from .inputs.ladder import Exclusion, Ladder
    from .laws import LAWS, Law, Param, get_law
    from .inputs.readers import list_ladders, load_ladder, load_manifest
    from .registry import Registry
    from .core.findings import Finding
    from .forecasting.calibration import CalibrationModel, calibration_backtest, leave_future_out
    from .forecasting.selection import Candidate, Comparison, compare
    from .forecasting.uncertainty import Interval, bootstrap

__all__ = [
    "__version__", "Ladder", "Exclusion", "load_ladder", "load_manifest", "list_ladders",
    "Law", "Param", "LAWS", "get_law", "fit", "fit_arrays", "Fit", "ScalingLawFitter",
    "predict", "Target", "Forecast", "Interval", "bootstrap", "backtest", "Backtest",
    "prefix_fits", "compare", "Comparison", "Candidate", "leave_future_out",
    "CalibrationModel", "calibration_backtest",
    "predict_accuracy", "AccuracyForecast", "compare_accuracy",
    "compare_recipes", "RecipeComparison", "backtest_recipes",
    "complete", "Completion", "Registry", "Finding",
    "suggest_runs", "Suggestions", "score_design", "DesignScore",
    "track", "Tracking", "predict_curve", "CurveForecast",
    "DelphiError", "LadderError", "DataDirError", "ManifestError", "LawError", "TargetError",
    "TargetInputError",
    "FitError", "NotFittedError", "IdentifiabilityError", "DegenerateFitError",
    "UnidentifiedError", "RegistryError", "MissingArgumentError", "DelphiWarning", "LadderWarning", "FitWarning",
    "DuplicateRowsWarning",
]


#: Where modules moved when the package was arranged in layers (issue 23): the old import
#: paths (``delphi.forecast``, ``delphi.ladder``, ``delphi.plot``...) keep working, as the same
#: module objects, through :class:`_MovedModules`.
MOVED: dict[str, str] = {
    "delphi.ladder": "delphi.inputs.ladder", "delphi.runstate": "delphi.inputs.runstate",
    "delphi.units": "delphi.inputs.units", "delphi.schedules": "delphi.inputs.schedules",
    "delphi.law_inputs": "delphi.inputs.law_inputs", "delphi.rules": "delphi.inputs.rules",
    "delphi.readers": "delphi.inputs.readers",
    "delphi.text": "delphi.core.text", "delphi.records": "delphi.core.records",
    "delphi._files": "delphi.core.files", "delphi.parallel": "delphi.core.parallel",
    "delphi.forecast": "delphi.forecasting.forecast",
    "delphi.target": "delphi.forecasting.target", "delphi.design": "delphi.forecasting.design",
    "delphi.candidates": "delphi.forecasting.candidates",
    "delphi.uncertainty": "delphi.forecasting.uncertainty",
    "delphi.calibration": "delphi.forecasting.calibration",
    "delphi.reference": "delphi.forecasting.reference",
    "delphi.selection": "delphi.forecasting.selection",
    "delphi.robustness": "delphi.forecasting.robustness",
    "delphi.curves": "delphi.forecasting.curves", "delphi.accuracy": "delphi.analyses.accuracy",
    "delphi.plot": "delphi.presentation.plot", "delphi.report": "delphi.presentation.report",
    "delphi.cli": "delphi.presentation.cli",
    "delphi.analyses.tracking": "delphi.registry.tracking",
}


def _moved(fullname: str) -> str | None:
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _MovedLoader(importlib.abc.Loader):
    """Loads an old module path as the module at its new one (the same object)."""

    def __init__(self, new: str, spec, alias: str = "") -> None:
        self.new, self.spec, self.alias = new, spec, alias

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        # Imported, under its own name, by create_module; the import system then set its
        # __spec__ to the old name's, which relative imports inside it would warn about.
        module.__spec__ = self.spec
        # The package's submodules already imported get their old names too: importing one
        # under an old name would otherwise bind it on the package, over a same-named
        # function (delphi.cli.main, the module, over delphi.cli's main()).
        for name, sub in list(sys.modules.items()):
            if name.startswith(self.new + ".") and self.alias:
                sys.modules.setdefault(self.alias + name[len(self.new):], sub)

    def get_code(self, fullname):         # python -m delphi.cli runs the moved __main__
        return self.spec.loader.get_code(self.new)


class _MovedModules(importlib.abc.MetaPathFinder):
    """Finds ``delphi.X`` for a module that moved (:data:`MOVED`)."""

    def find_spec(self, fullname, path=None, target=None):
        new = _moved(fullname)
        if new is None:
            return None
        spec = importlib.util.find_spec(new)
        if spec is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, _MovedLoader(new, spec, fullname),
            is_package=spec.submodule_search_locations is not None)


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    # First: the path finder would load a moved package's submodules a second time, under
    # the old name (delphi.cli.main beside delphi.presentation.cli.main).
    sys.meta_path.insert(0, _MovedModules())


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
