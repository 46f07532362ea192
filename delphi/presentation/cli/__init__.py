"""The ``delphi`` command line: argument parsing and printing only; the science is elsewhere.

:mod:`.main` builds the parser and runs a command; :mod:`.options` holds the options and argument
types the commands share; :mod:`.output` what is written where (notes, errors, the JSON error
contract); one module per group of commands (:mod:`.forecast`, :mod:`.analyses`,
:mod:`.registry`) adds its commands with ``add_commands(subparsers)``.
"""

from .main import main
from .output import note

__all__ = ["main", "note"]
