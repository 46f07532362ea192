"""Running many independent jobs (bootstrap blocks, backtest folds, sweeps) serially or in
parallel through joblib, with a progress bar on a terminal.

One knob everywhere: ``n_jobs`` (API) / ``-j/--jobs`` (CLI), joblib's convention: ``None``
takes the active ``joblib.parallel_config`` (serial when none is set), ``1`` is serial,
``-1`` all cores. Results come back in job order and every job seeds itself, so the output
is bit-identical whatever the number of workers or the backend. To run on a Dask cluster::

    from dask.distributed import Client
    from joblib import parallel_config
    client = Client("tcp://scheduler:8786")
    with parallel_config(backend="dask"):
        draws = delphi.bootstrap(fit, n=10_000, n_jobs=-1)

Each job runs with its BLAS pinned to one thread: the linear algebra in a fit is on tiny
matrices, and threads from several workers only fight over the cores.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Callable, Iterable, Sequence

from ..errors import FitError, option, user_stacklevel

__all__ = ["map_jobs", "progress", "set_quiet", "is_quiet", "check_n_jobs", "progress_delay",
           "one_blas_thread", "runs_serially", "resolved_jobs"]

_QUIET = False
#: A bar appears only once a job has run this long [s] (tqdm's ``delay``): quick jobs stay
#: silent. ``DELPHI_PROGRESS_DELAY`` overrides it (e.g. 0 to always show the bar).
PROGRESS_DELAY = 2.0
# Jobs per worker when items are grouped into chunks (fewer, larger tasks; see map_jobs).
_CHUNKS_PER_WORKER = 4


def set_quiet(quiet: bool = True) -> None:
    """Turn progress bars (and the CLI's notes) off for this process (``--quiet``)."""
    global _QUIET
    _QUIET = bool(quiet)


def is_quiet() -> bool:
    """Whether :func:`set_quiet` (or ``DELPHI_QUIET=1``) turned progress output off."""
    return _QUIET or os.environ.get("DELPHI_QUIET", "") not in ("", "0")


def progress_delay() -> float:
    """Seconds before a progress bar appears: ``DELPHI_PROGRESS_DELAY`` or
    :data:`PROGRESS_DELAY`."""
    text = os.environ.get("DELPHI_PROGRESS_DELAY", "")
    try:
        value = float(text) if text else PROGRESS_DELAY
    except ValueError:
        return PROGRESS_DELAY
    return value if value >= 0 else PROGRESS_DELAY


def check_n_jobs(n_jobs: Any) -> int | None:
    """Validate ``n_jobs``: None, or a non-zero integer (negative counts from the cores).

    Raises
    ------
    FitError: anything else (0, a float, a string).
    """
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise FitError(f"{option('n_jobs', '--jobs')} must be a non-zero whole number "
                       f"(1 = serial, -1 = all cores), got {n_jobs!r}")
    return int(n_jobs)


def progress(iterable: Iterable, total: int, desc: str, *, show: bool | None = None,
             unit: str = "it"):
    """Wrap ``iterable`` in a tqdm bar on stderr when stderr is a terminal and not quiet.

    The bar is delayed by :func:`progress_delay` seconds (2 s by default), so only jobs that
    take a while show one, and it is removed when done. ``show`` forces it on or off
    (``show=True`` still writes nothing when quiet).
    """
    if show is None:
        show = _stderr_is_terminal()
    if not show or is_quiet():
        return iterable
    from tqdm.auto import tqdm
    # A terminal that reports no size (some CI consoles, `script` without one) would get no
    # bar at all from tqdm (it hides bars below the screen's last row): assume 80 x 24 there.
    columns, lines = _terminal_size()
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                delay=progress_delay(), leave=False, dynamic_ncols=columns > 0,
                ncols=None if columns > 0 else 80, nrows=None if lines > 0 else 24)


def _terminal_size() -> tuple[int, int]:
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


_CONTROLLER = None


def one_blas_thread():
    """Context manager pinning BLAS to one thread. The scan for BLAS libraries is done once
    per process: it costs milliseconds, a sizeable share of a small fit."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def _run_chunk(fn: Callable, chunk: Sequence[Any]) -> list:
    # One task per chunk of items: the pickling of ``fn`` is paid once per chunk. A worker
    # process does not have the caller's warning filters (the CLI ignores delphi's warnings,
    # which its report prints): its warnings are recorded and re-issued by the caller.
    with one_blas_thread(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [fn(item) for item in chunk]
    return [results, [(str(w.message), w.category) for w in caught]]


def _reissue(chunks):
    """The results of :func:`_run_chunk`'s chunks, their warnings issued here, in order."""
    for results, caught in chunks:
        for message, category in caught:
            warnings.warn(message, category, stacklevel=user_stacklevel())
        yield from results


def _local_jobs(n_jobs: int) -> int:
    # Local workers beyond the cores only add start-up cost and contention.
    cores = os.cpu_count() or 1
    return cores if n_jobs > cores else (max(1, cores + 1 + n_jobs) if n_jobs < 0 else n_jobs)


def _resolve_n_jobs(n_jobs: int | None) -> int:
    if "joblib" not in sys.modules:
        # joblib's import costs ~40 ms, a sizeable share of a serial command. Unimported, no
        # parallel_config can be active, so its backend is the default one: local workers
        # (loky; threads when JOBLIB_MULTIPROCESSING=0, whose None means all cores: ask
        # joblib then).
        if n_jobs is not None:
            return _local_jobs(n_jobs)
        if "JOBLIB_MULTIPROCESSING" not in os.environ:
            return 1
    from joblib.parallel import get_active_backend
    backend, configured_jobs = get_active_backend()
    if n_jobs is not None:
        if type(backend).__name__ in ("LokyBackend", "SequentialBackend", "MultiprocessingBackend",
                                      "ThreadingBackend"):
            n_jobs = _local_jobs(n_jobs)
        return n_jobs
    # Nothing configured (joblib's default loky backend, no n_jobs): serial. A configured
    # backend (e.g. Dask, threads) without n_jobs gets all its workers.
    default = type(backend).__name__ in ("LokyBackend", "SequentialBackend")
    return (configured_jobs or 1) if default else (configured_jobs or -1)


def resolved_jobs(n_jobs: int | None) -> int:
    """The jobs :func:`map_jobs` runs with this ``n_jobs`` (joblib's convention and the active
    ``parallel_config``) before its cap at the number of items: 1 serially, the local
    workers (capped at the cores), or a configured backend's count (-1 when unknown).

    Raises
    ------
    FitError: a bad ``n_jobs``.
    """
    return _resolve_n_jobs(check_n_jobs(n_jobs))


def runs_serially(n_jobs: int | None) -> bool:
    """Whether :func:`map_jobs` with this ``n_jobs`` (joblib's convention, and the active
    ``parallel_config``) runs its jobs in this process, one after another.

    Raises
    ------
    FitError: a bad ``n_jobs``.
    """
    return _resolve_n_jobs(check_n_jobs(n_jobs)) == 1


def map_jobs(fn: Callable[[Any], Any], items: Sequence[Any], *, n_jobs: int | None = None,
             desc: str = "jobs", show_progress: bool | None = None, unit: str = "it",
             chunk_size: int | None = None) -> list:
    """``[fn(item) for item in items]``, serially or through joblib, in order.

    ``fn`` must be a module-level function (it is pickled for process and Dask workers) and
    must not depend on global state: each item carries its own seed. Every call of ``fn``
    runs with BLAS pinned to one thread.

    Parameters
    ----------
    fn: the job, one item -> one result.
    items: the jobs' inputs.
    n_jobs: joblib's convention (None: the active ``parallel_config``, serial by default;
        1 serial; -1 all cores). Local workers are capped at the number of cores and of
        items; starting them costs about a second, so parallel pays off for long jobs.
    desc, unit: progress-bar label and unit (one unit per item).
    show_progress: force the bar on/off (default: on a terminal, unless quiet).
    chunk_size: items per parallel task (default: about four tasks per worker, so that tiny
        jobs do not drown in scheduling overhead). Results do not depend on it.

    Returns
    -------
    list: ``fn(item)`` for each item, in the order of ``items``.

    Raises
    ------
    FitError: a bad ``n_jobs``. Exceptions raised by ``fn`` propagate.
    """
    items = list(items)
    n_jobs = _resolve_n_jobs(check_n_jobs(n_jobs))
    if n_jobs > len(items):  # no more workers than jobs
        n_jobs = max(1, len(items))
    if n_jobs == 1 or len(items) <= 1:
        with one_blas_thread():
            return list(progress((fn(it) for it in items), len(items), desc,
                                 show=show_progress, unit=unit))
    from joblib import Parallel, delayed, effective_n_jobs
    if chunk_size is None:
        workers = max(1, effective_n_jobs(n_jobs))
        chunk_size = max(1, -(-len(items) // (_CHUNKS_PER_WORKER * workers)))
    chunks = [items[i:i + chunk_size] for i in range(0, len(items), chunk_size)]
    runner = Parallel(n_jobs=n_jobs, return_as="generator")
    out = runner(delayed(_run_chunk)(fn, chunk) for chunk in chunks)
    return list(progress(_reissue(out), len(items), desc, show=show_progress, unit=unit))
