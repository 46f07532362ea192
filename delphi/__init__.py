"""delphi: predict the final loss of a large training run from a ladder of small runs.

The flow: ``load_ladder`` -> :class:`Ladder` -> ``fit(ladder, law)`` -> :class:`Fit` ->
``predict(ladder, target, law)`` -> :class:`Forecast`. See the README for the CLI.
"""

__version__ = "0.1.0"

from .errors import (DataDirError, DelphiError, DelphiWarning, FitError, FitWarning,  # noqa: E402
                     IdentifiabilityError, LadderError, LadderWarning, LawError, ManifestError,
                     RegistryError, TargetError)
from .fitting import Fit, ScalingLawFitter, fit, fit_arrays  # noqa: E402
from .forecast import Forecast, Target, predict  # noqa: E402
from .ladder import Exclusion, Ladder  # noqa: E402
from .laws import LAWS, Law, Param, get_law  # noqa: E402
from .readers import list_ladders, load_ladder, load_manifest  # noqa: E402
from .backtest import Backtest, backtest  # noqa: E402
from .curves import Completion, complete  # noqa: E402
from .registry import Registry  # noqa: E402
from .uncertainty import Interval, bootstrap  # noqa: E402

__all__ = [
    "__version__", "Ladder", "Exclusion", "load_ladder", "load_manifest", "list_ladders",
    "Law", "Param", "LAWS", "get_law", "fit", "fit_arrays", "Fit", "ScalingLawFitter",
    "predict", "Target", "Forecast", "Interval", "bootstrap", "backtest", "Backtest",
    "complete", "Completion", "Registry",
    "DelphiError", "LadderError", "DataDirError", "ManifestError", "LawError", "TargetError",
    "FitError", "IdentifiabilityError", "RegistryError", "DelphiWarning", "LadderWarning",
    "FitWarning",
]
