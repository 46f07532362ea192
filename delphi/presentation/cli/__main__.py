"""``python -m delphi.cli``: the ``delphi`` command."""

import sys

from .main import main

sys.exit(main())
