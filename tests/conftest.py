"""Shared fixtures. Tests that need the published ladders use ``data_dir``.

In CI (``CI`` set) a missing data directory is a failure, not a skip: the suite must not go
green by silently testing nothing. Elsewhere it skips with the path it looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delphi.readers.paths import default_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = default_data_dir()
    if not path.is_dir():
        message = (f"published ladders not found at {path}; set DELPHI_DATA_DIR "
                   "or put the shared/ folder beside the checkout")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
