"""Shared fixtures. Tests that need the published ladders use ``data_dir``.

In CI (``CI`` set) a missing data directory is a failure, not a skip: the suite must not go
green by silently testing nothing. Elsewhere it skips with the path it looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from delphi.readers.paths import default_data_dir

# Under pytest-xdist each worker is one of two processes on two cores: BLAS threads of their
# own would fight over the cores (DEVELOPERS.md), so each worker's BLAS runs one thread, and
# so do the CLI processes its tests start (they inherit the environment).
if os.environ.get("PYTEST_XDIST_WORKER"):
    from threadpoolctl import threadpool_limits

    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    _BLAS_LIMIT = threadpool_limits(limits=1)


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


@pytest.fixture(scope="session")
def olmo_ladder(data_dir):
    """The published OLMo ladder, its known FLOP-convention warning expected
    (tests/bundled.py), loaded once per test process: loading parses 30 W&B histories (about
    a second). Several modules read it; none may modify it."""
    from bundled import load

    return load("olmo-ladder")
