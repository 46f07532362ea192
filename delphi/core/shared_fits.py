"""Fits shared within one command: a fit asked for twice with the same inputs runs once.

A command can ask for the same fit from two places: ``delphi report`` fits the ladder for
its page and its backtest fits the same points again as the fold the others are refined from.
:func:`fit_arrays` is deterministic (same law, points, settings, seed and start give the same
bits), so inside :func:`shared_fits` its result is kept by a key of everything it reads and
handed back on the next identical call. The memo lives only while the ``with`` block runs (a
context variable: no state is left between commands, threads or workers). Standard library
at import (the CLI enters the block for every command).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Mapping

__all__ = ["shared_fits", "fit_key", "lookup", "store", "active"]

_ACTIVE: ContextVar[dict | None] = ContextVar("delphi_shared_fits", default=None)


@contextmanager
def shared_fits() -> Iterator[dict]:
    """Within the block, :func:`delphi.fitting.fit_arrays` runs each distinct fit once and
    returns the same :class:`~delphi.fitting.Fit` for a repeated call. Nested blocks share
    the outermost memo. Yields the memo (key -> (law, Fit)), e.g. for tests to count it."""
    memo = _ACTIVE.get()
    if memo is not None:
        yield memo
        return
    memo = {}
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)


def active() -> bool:
    """True inside :func:`shared_fits`."""
    return _ACTIVE.get() is not None


def _array(v) -> tuple | None:
    import numpy as np      # not at import: the CLI opens the scope before numpy is needed

    a = np.asarray(v)
    if a.dtype.kind not in "biuf":
        return None
    return (a.dtype.str, a.shape, a.tobytes())


def _values(m: Mapping | None) -> tuple | None:
    """A mapping of names to numbers (or pairs of numbers / None, as bounds) as a key; repr of
    a float is exact, so equal keys mean equal values. ``False`` for anything else."""
    if m is None:
        return None
    out = []
    for k, v in m.items():
        if isinstance(v, (list, tuple)):
            v = tuple(None if e is None else float(e) for e in v)
        else:
            v = float(v)
        out.append((str(k), repr(v)))
    return tuple(sorted(out))


def fit_key(law, x: Mapping, y, *, labels, fixed, bounds, delta, seed, starts, init,
            warm_start) -> tuple | None:
    """The key of one :func:`fit_arrays` call: the law object, every input's dtype, shape
    and bytes, the losses', the labels and each setting; None when an argument is not plain
    numbers (it is then fitted as usual)."""
    try:
        xs = []
        for k in sorted(x):
            a = _array(x[k])
            if a is None:
                return None
            xs.append((str(k), a))
        ya = _array(y)
        if ya is None:
            return None
        return (id(law), tuple(xs), ya,
                None if labels is None else tuple(str(s) for s in labels),
                _values(fixed), _values(bounds), repr(float(delta)), int(seed), int(starts),
                _values(init), _values(warm_start))
    except (TypeError, ValueError):
        return None


def lookup(key: tuple | None, owner):
    """What was kept for ``key`` with ``owner`` (the law object of a fit, the ladder of a
    selection), else None."""
    memo = _ACTIVE.get()
    if memo is None or key is None:
        return None
    hit = memo.get(key)
    if hit is None or hit[0] is not owner:
        return None
    return hit[1]


def store(key: tuple | None, owner, result) -> None:
    """Keep ``result`` for ``key``; ``owner`` (whose id the key holds) is kept too, so its id
    is not reused while the scope lasts."""
    memo = _ACTIVE.get()
    if memo is not None and key is not None:
        memo[key] = (owner, result)
