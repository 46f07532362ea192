"""Where bundled manifests and the published ladders live."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import DataDirError

__all__ = ["REPO_ROOT", "BUNDLED_DIR", "default_data_dir", "data_dir"]

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Folder of bundled ladders and manifests (``ladders/`` at the repository root).
BUNDLED_DIR = REPO_ROOT / "ladders"
DATA_DIR_ENV = "DELPHI_DATA_DIR"


def default_data_dir() -> Path:
    """``$DELPHI_DATA_DIR`` if set, else ``../shared/ladders`` from the repository root."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else (REPO_ROOT.parent / "shared" / "ladders")


def data_dir() -> Path:
    """The published-ladders directory, checked to exist.

    Raises
    ------
    DataDirError
        The directory does not exist; the message says where delphi looked and how to point
        it elsewhere.
    """
    path = default_data_dir()
    if not path.is_dir():
        how = (f"${DATA_DIR_ENV} is set to {os.environ[DATA_DIR_ENV]!r}"
               if os.environ.get(DATA_DIR_ENV) else f"${DATA_DIR_ENV} is not set")
        raise DataDirError(
            f"published ladders directory not found: looked in {path} ({how}); "
            f"set {DATA_DIR_ENV}=/path/to/ladders to point delphi at it")
    return path
