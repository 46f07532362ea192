"""Learning-rate schedules and the schedule-dependent quantities scaling laws need.

Conventions used throughout this module
---------------------------------------
* **Steps are 1-based.** Step ``s`` is the ``s``-th optimiser update; a run of
  ``total_steps = T`` takes steps ``1..T``. A per-step LR array ``lrs`` of shape ``(T,)``
  holds ``lrs[s - 1] = eta_s``, the LR *used* at step ``s``. A checkpoint "at step ``s``"
  has taken the updates ``1..s``.
* **Warmup is linear from 0**: with ``W = warmup_steps > 0``, ``eta_s = peak * s / W`` for
  ``1 <= s <= W`` (so ``eta_W = peak``; the implicit ``eta_0 = 0`` is never used).
* **Annealing quantities ignore warmup.** The "LR drop" at step ``i`` is
  ``d_i = eta_{i-1} - eta_i``. Both the annealing area S2 of Tissue et al. 2024 and the
  loss-reduction sum LD of Luo et al. 2025 are written for the schedule *after* warmup, with
  ``eta_0`` the peak LR. We therefore set ``d_i = 0`` for every step up to and including
  ``p``, the first step at which ``lrs`` reaches its maximum (the end of warmup; ``p = 1``
  without warmup), and ``d_i = eta_{i-1} - eta_i`` for ``i > p``. Later LR *increases* (a
  re-warm) give negative drops, as the formulas say.
* ``S1`` is the sum of all LRs *including* warmup, ``S1(s) = sum_{i<=s} eta_i``; in the
  multi-power law this is ``S1(t) + S_W`` (post-warmup area plus warmup area).

Invalid schedules and schedule inputs raise :class:`~delphi.errors.LadderError` (a
``ValueError``); invalid multi-power-law parameters raise :class:`~delphi.errors.LawError`.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import LadderError, LawError

__all__ = [
    "KINDS",
    "COOLDOWNS",
    "Schedule",
    "LoggedSchedule",
    "features",
    "momentum_filter",
    "multipower_ld",
    "MultiPowerLD",
    "multipower_groups",
    "multipower_ld_grid",
    "MultiPowerGroups",
    "warmup_end",
    "Restart",
    "find_restarts",
]

#: Schedule shapes :class:`Schedule` knows.
KINDS: tuple[str, ...] = ("constant", "cosine", "linear", "wsd")
#: WSD cooldown shapes.
COOLDOWNS: tuple[str, ...] = ("linear", "1-sqrt")

# Keys `Schedule.parse` accepts for each kind, mapped to the field they set.
_PARSE_KEYS: dict[str, dict[str, str]] = {
    "constant": {"warmup": "warmup_steps"},
    "cosine": {"warmup": "warmup_steps", "final": "final_ratio"},
    "linear": {"warmup": "warmup_steps", "final": "final_ratio"},
    "wsd": {"warmup": "warmup_steps", "decay": "decay_fraction", "cooldown": "cooldown",
            "final": "final_ratio"},
}

# Maximum number of float64 elements of one (checkpoints x terms) block in multipower_ld.
_BLOCK_ELEMENTS = 1 << 20
# multipower_ld(max_terms=...): extra group boundaries at t - floor(r^j) before each checkpoint.
_REFINE_RATIO = 1.25


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _real(name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise LadderError(f"{name} must be a real number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise LadderError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(out):
        raise LadderError(f"{name} must be finite, got {value!r}")
    return out


def _check_steps(steps: Any, total_steps: int, *, name: str = "steps") -> np.ndarray:
    """Validate 1-based step counts against a run of ``total_steps``; return int64 array."""
    arr = np.asarray(steps)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or np.issubdtype(arr.dtype, np.floating)):
        raise LadderError(f"{name} must be integer step counts, got dtype {arr.dtype}")
    if arr.size and np.issubdtype(arr.dtype, np.floating):
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            raise LadderError(f"{name} must be whole step counts; got {arr[bad].flat[0]!r}")
    out = arr.astype(np.int64)
    if out.size:
        lo, hi = out.min(), out.max()
        if lo < 1 or hi > total_steps:
            bad_value = lo if lo < 1 else hi
            raise LadderError(f"{name} must lie in 1..{total_steps} (1-based steps of this "
                              f"run), got {bad_value}")
    return out


def _check_lrs(lrs: Any) -> np.ndarray:
    """Validate a per-step LR sequence of shape (T,), T >= 1, finite and >= 0."""
    arr = np.asarray(lrs, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise LadderError(f"lrs must be a non-empty 1-D array of per-step learning rates, "
                          f"got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise LadderError(f"lrs must be finite and >= 0; lrs[{i}] (step {i + 1}) = {arr[i]!r}")
    return arr


@dataclass(frozen=True)
class Schedule:
    """A parametric learning-rate schedule: warmup, then constant / cosine / linear / WSD.

    The LR used at 1-based step ``s`` (``T = total_steps``, ``W = warmup_steps``,
    ``P = peak_lr``, ``f = final_ratio``):

    * warmup, ``s <= W``: ``P * s / W`` (linear from 0, reaching ``P`` at ``s = W``);
    * after warmup, with progress ``p = (s - W) / (T - W)`` in ``(0, 1]``:

      - ``constant``: ``P``;
      - ``cosine``: ``P * (f + (1 - f) * (1 + cos(pi p)) / 2)`` (Loshchilov & Hutter 2017,
        arXiv 1608.03983, Eq. 5), so ``P * f`` at ``s = T`` and ``P (1 + f) / 2`` at
        ``p = 1/2``;
      - ``linear``: ``P * (1 - (1 - f) p)``;
      - ``wsd`` (warmup-stable-decay; Hu et al. 2024 arXiv 2404.06395, Hägele et al. 2024
        arXiv 2405.18392): ``P`` on the plateau, then a cooldown over the last
        ``D = round(decay_fraction * T)`` steps with progress ``q = (s - (T - D)) / D`` in
        ``(0, 1]``: ``linear`` -> ``P * (f + (1 - f)(1 - q))``, ``1-sqrt`` ->
        ``P * (f + (1 - f)(1 - sqrt(q)))`` (Hägele et al. 2024, Sec. 3, Eq. 1).

    Attributes
    ----------
    kind:
        One of :data:`KINDS`.
    peak_lr:
        Peak learning rate ``P`` (> 0, finite).
    total_steps:
        Number of optimiser steps ``T`` (int > 0).
    warmup_steps:
        Linear-warmup length ``W`` (int, ``0 <= W <= T``; ``W < T`` unless ``constant``).
    final_ratio:
        Final LR as a fraction of the peak, in [0, 1] (ignored by ``constant``).
    decay_fraction:
        WSD only: share of ``total_steps`` spent in the cooldown, in (0, 1]; the cooldown
        must have at least one step and must not overlap the warmup.
    cooldown:
        WSD only: cooldown shape, one of :data:`COOLDOWNS`.

    Raises
    ------
    LadderError
        For any invalid field; the message names the field and the bad value.
    """

    kind: str
    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    final_ratio: float = 0.0
    decay_fraction: float = 0.2
    cooldown: str = "linear"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise LadderError(f"unknown schedule kind {self.kind!r}; valid kinds: "
                              f"{', '.join(KINDS)}")
        peak = _real("peak_lr", self.peak_lr)
        if peak <= 0:
            raise LadderError(f"peak_lr must be > 0, got {self.peak_lr!r}")
        object.__setattr__(self, "peak_lr", peak)
        if not _is_int(self.total_steps) or self.total_steps <= 0:
            raise LadderError(f"total_steps must be an integer > 0, got {self.total_steps!r}")
        if not _is_int(self.warmup_steps) or self.warmup_steps < 0:
            raise LadderError(f"warmup_steps must be an integer >= 0, got "
                              f"{self.warmup_steps!r}")
        object.__setattr__(self, "total_steps", int(self.total_steps))
        object.__setattr__(self, "warmup_steps", int(self.warmup_steps))
        if self.warmup_steps > self.total_steps:
            raise LadderError(f"warmup_steps = {self.warmup_steps} exceeds total_steps = "
                              f"{self.total_steps}")
        if self.kind != "constant" and self.warmup_steps >= self.total_steps:
            raise LadderError(f"a {self.kind} schedule needs at least one step after warmup; "
                              f"warmup_steps = {self.warmup_steps}, total_steps = "
                              f"{self.total_steps}")
        final = _real("final_ratio", self.final_ratio)
        if not 0.0 <= final <= 1.0:
            raise LadderError(f"final_ratio must lie in [0, 1], got {self.final_ratio!r}")
        object.__setattr__(self, "final_ratio", final)
        frac = _real("decay_fraction", self.decay_fraction)
        object.__setattr__(self, "decay_fraction", frac)
        if self.cooldown not in COOLDOWNS:
            raise LadderError(f"unknown cooldown {self.cooldown!r}; valid cooldowns: "
                              f"{', '.join(COOLDOWNS)}")
        if self.kind == "wsd":
            if not 0.0 < frac <= 1.0:
                raise LadderError(f"decay_fraction must lie in (0, 1], got "
                                  f"{self.decay_fraction!r}")
            d = self.decay_steps
            if d < 1:
                raise LadderError(f"decay_fraction = {frac!r} of total_steps = "
                                  f"{self.total_steps} rounds to a cooldown of 0 steps")
            if self.warmup_steps + d > self.total_steps:
                raise LadderError(f"warmup ({self.warmup_steps} steps) and cooldown ({d} "
                                  f"steps = decay_fraction {frac!r} x {self.total_steps}) "
                                  f"overlap: together they exceed total_steps = "
                                  f"{self.total_steps}")

    @property
    def decay_steps(self) -> int:
        """WSD cooldown length ``D = round(decay_fraction * total_steps)`` in steps
        (0 for the other kinds)."""
        if self.kind != "wsd":
            return 0
        return int(round(self.decay_fraction * self.total_steps))

    def lr_at(self, steps: Any) -> np.ndarray:
        """Learning rate used at the given 1-based steps.

        Parameters
        ----------
        steps:
            Integer step counts in ``1..total_steps``, any shape (a scalar gives a 0-d array).

        Returns
        -------
        ndarray
            Float LRs, same shape as ``steps``.

        Raises
        ------
        LadderError
            A step outside ``1..total_steps`` or not a whole number.
        """
        s = _check_steps(steps, self.total_steps).astype(float)
        P, T, W, f = self.peak_lr, self.total_steps, self.warmup_steps, self.final_ratio
        if self.kind == "constant":
            after = np.full_like(s, P)
        elif self.kind == "wsd":
            D = self.decay_steps
            q = np.clip((s - (T - D)) / D, 0.0, 1.0)
            shape = 1.0 - q if self.cooldown == "linear" else 1.0 - np.sqrt(q)
            after = P * (f + (1.0 - f) * shape)
        else:
            p = np.clip((s - W) / (T - W), 0.0, 1.0)
            if self.kind == "cosine":
                after = P * (f + (1.0 - f) * 0.5 * (1.0 + np.cos(np.pi * p)))
            else:  # linear
                after = P * (1.0 - (1.0 - f) * p)
        if W > 0:
            return np.where(s <= W, P * s / W, after)
        return after

    def lrs(self) -> np.ndarray:
        """Per-step LRs, shape ``(total_steps,)``: element ``s - 1`` is the LR at step ``s``."""
        return self.lr_at(np.arange(1, self.total_steps + 1))

    def spec(self) -> str:
        """The canonical CLI string, e.g. ``"wsd:warmup=100,decay=0.2,cooldown=1-sqrt,final=0"``.

        ``Schedule.parse(s.spec(), peak_lr=s.peak_lr, total_steps=s.total_steps) == s``.
        """
        parts: list[str] = []
        for key, attr in _PARSE_KEYS[self.kind].items():
            value = getattr(self, attr)
            parts.append(f"{key}={value if isinstance(value, str) else repr(value)}")
        return f"{self.kind}:{','.join(parts)}"

    @classmethod
    def parse(cls, text: str, *, peak_lr: float, total_steps: int) -> "Schedule":
        """Build a schedule from a CLI string ``kind[:key=value,...]``.

        Examples: ``"constant"``, ``"cosine:warmup=50,final=0.1"``, ``"linear:final=0.1"``,
        ``"wsd:warmup=100,decay=0.2,cooldown=1-sqrt,final=0"``. Keys per kind:
        ``warmup`` (steps, int; all kinds), ``final`` (final LR / peak; cosine, linear, wsd),
        ``decay`` (cooldown share of total steps) and ``cooldown`` (``linear`` or
        ``1-sqrt``; wsd only). Omitted keys take the field defaults.

        Raises
        ------
        LadderError
            Unknown kind or key (the message lists the valid ones), a malformed
            ``key=value`` pair, a repeated key, or an invalid resulting schedule.
        """
        if not isinstance(text, str) or not text.strip():
            raise LadderError(f"schedule spec must be a non-empty string like "
                              f"'cosine:warmup=50,final=0.1', got {text!r}")
        kind, _, rest = text.strip().partition(":")
        kind = kind.strip().lower()
        if kind not in _PARSE_KEYS:
            raise LadderError(f"unknown schedule kind {kind!r} in {text!r}; valid kinds: "
                              f"{', '.join(KINDS)}")
        valid = _PARSE_KEYS[kind]
        kwargs: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, sep, value = item.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not sep or not value:
                raise LadderError(f"malformed schedule option {item!r} in {text!r}; expected "
                                  f"key=value")
            if key not in valid:
                raise LadderError(f"unknown key {key!r} for a {kind} schedule in {text!r}; "
                                  f"valid keys: {', '.join(valid)}")
            attr = valid[key]
            if attr in kwargs:
                raise LadderError(f"key {key!r} given twice in {text!r}")
            if attr == "cooldown":
                kwargs[attr] = value.lower()
            elif attr == "warmup_steps":
                try:
                    number = float(value)
                except ValueError:
                    number = math.nan
                if not math.isfinite(number) or number != int(number):
                    raise LadderError(f"warmup must be a whole number of steps, got {value!r} "
                                      f"in {text!r}")
                kwargs[attr] = int(number)
            else:
                try:
                    kwargs[attr] = float(value)
                except ValueError:
                    raise LadderError(f"{key} must be a number, got {value!r} in "
                                      f"{text!r}") from None
        return cls(kind=kind, peak_lr=peak_lr, total_steps=total_steps, **kwargs)


@dataclass(frozen=True, eq=False)
class LoggedSchedule:
    """A schedule reconstructed from a logged, possibly sparse, per-step learning rate.

    Training logs (e.g. OLMo's ``optim/learning_rate_group0`` at its ``_step`` values)
    often record the LR only every ~200 steps. The LR at every step ``1..total_steps`` is
    rebuilt by linear interpolation between the logged points, anchored at
    ``(0, initial_lr)`` (``initial_lr = 0`` by default: warmup starts from 0) unless step 0
    itself is logged, and held at the last logged value after the last logged step.

    Build it with :meth:`from_logged`. It has the same ``lrs()`` / ``lr_at()`` /
    ``peak_lr`` / ``total_steps`` interface as :class:`Schedule`.

    Attributes
    ----------
    steps:
        Logged step counts, shape ``(m,)``, strictly increasing, >= 0 (int64).
    logged_lr:
        Logged LRs at those steps, shape ``(m,)``.
    total_steps:
        Length of the reconstructed run, in steps.
    initial_lr:
        LR assumed at step 0 when step 0 is not logged.
    """

    steps: np.ndarray
    logged_lr: np.ndarray
    total_steps: int
    initial_lr: float = 0.0
    kind: str = field(default="logged", init=False)

    @classmethod
    def from_logged(cls, steps: Any, lr: Any, total_steps: int | None = None, *,
                    initial_lr: float = 0.0) -> "LoggedSchedule":
        """Reconstruct the per-step LR from logged ``(step, lr)`` pairs.

        Parameters
        ----------
        steps:
            Logged step counts, shape ``(m,)``, whole numbers >= 0, in any order.
            Repeated steps (e.g. after a restart) are allowed only with identical LRs.
        lr:
            Logged LRs, shape ``(m,)``, finite and >= 0, with at least one > 0.
        total_steps:
            Number of steps of the run; defaults to the last logged step (which must then
            be >= 1).
        initial_lr:
            LR at step 0 used as the interpolation anchor when step 0 is not logged.

        Raises
        ------
        LadderError
            Mismatched shapes, no points, non-finite or negative values, conflicting
            duplicates, an all-zero LR, or a bad ``total_steps``.
        """
        s = np.asarray(steps, dtype=float)
        v = np.asarray(lr, dtype=float)
        if s.ndim != 1 or v.ndim != 1 or s.shape != v.shape or s.size == 0:
            raise LadderError(f"logged steps and lr must be non-empty 1-D arrays of equal "
                              f"length, got shapes {s.shape} and {v.shape}")
        bad = ~np.isfinite(s) | (s < 0) | (s != np.round(s))
        if bad.any():
            raise LadderError(f"logged steps must be whole numbers >= 0, got "
                              f"{s[bad][0]!r}")
        bad = ~np.isfinite(v) | (v < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise LadderError(f"logged lr must be finite and >= 0; at step {int(s[i])} "
                              f"lr = {v[i]!r}")
        order = np.argsort(s, kind="stable")
        s, v = s[order].astype(np.int64), v[order]
        dup = np.flatnonzero(np.diff(s) == 0)
        if dup.size:
            conflict = dup[v[dup] != v[dup + 1]]
            if conflict.size:
                j = conflict[0]
                raise LadderError(f"step {s[j]} is logged twice with different learning "
                                  f"rates ({v[j]!r} and {v[j + 1]!r})")
            keep = np.ones(s.size, dtype=bool)
            keep[dup + 1] = False
            s, v = s[keep], v[keep]
        if not np.any(v > 0):
            raise LadderError("every logged learning rate is 0; cannot define a schedule")
        init = _real("initial_lr", initial_lr)
        if init < 0:
            raise LadderError(f"initial_lr must be >= 0, got {initial_lr!r}")
        if total_steps is None:
            total_steps = int(s[-1])
        if not _is_int(total_steps) or total_steps < 1:
            raise LadderError(f"total_steps must be an integer >= 1, got {total_steps!r} "
                              f"(last logged step {int(s[-1])})")
        s.setflags(write=False)
        v.setflags(write=False)
        return cls(steps=s, logged_lr=v, total_steps=int(total_steps), initial_lr=init)

    @property
    def peak_lr(self) -> float:
        """The largest logged LR (> 0)."""
        return float(self.logged_lr.max())

    def lr_at(self, steps: Any) -> np.ndarray:
        """LR at 1-based ``steps`` in ``1..total_steps`` by linear interpolation (same shape).

        Raises
        ------
        LadderError
            A step outside ``1..total_steps``.
        """
        s = _check_steps(steps, self.total_steps)
        xs, ys = self.steps, self.logged_lr
        if xs[0] != 0:
            xs = np.concatenate(([0], xs))
            ys = np.concatenate(([self.initial_lr], ys))
        return np.interp(s.astype(float), xs.astype(float), ys)

    def lrs(self) -> np.ndarray:
        """Per-step LRs, shape ``(total_steps,)``: element ``s - 1`` is the LR at step ``s``."""
        return self.lr_at(np.arange(1, self.total_steps + 1))


def _as_lrs_and_peak(lrs: Any, peak_lr: float | None) -> tuple[np.ndarray, float]:
    if hasattr(lrs, "lrs") and callable(lrs.lrs):
        if peak_lr is None:
            peak_lr = lrs.peak_lr
        lrs = lrs.lrs()
    arr = _check_lrs(lrs)
    if peak_lr is None:
        peak = float(arr.max())
        if peak <= 0:
            raise LadderError("lrs are all 0; cannot normalise by the peak learning rate")
    else:
        peak = _real("peak_lr", peak_lr)
        if peak <= 0:
            raise LadderError(f"peak_lr must be > 0, got {peak_lr!r}")
    return arr, peak


def _lr_drops(eta: np.ndarray) -> np.ndarray:
    """``d_i = eta_{i-1} - eta_i`` per step (shape (T,)), 0 up to and including the first
    step where ``eta`` peaks (``eta_0 := peak``; see the module conventions)."""
    d = np.zeros_like(eta)
    d[1:] = eta[:-1] - eta[1:]
    d[: int(np.argmax(eta)) + 1] = 0.0
    return d


# momentum_filter: within a block of B steps, lambda^-k (k < B) stays below exp(this).
_FILTER_LOG_RANGE = 500.0


def momentum_filter(d: Any, lam: float) -> np.ndarray:
    """The momentum recursion ``m_i = lam * m_{i-1} + d_i`` (``m_0 = 0``) for all steps at once.

    Equal to ``scipy.signal.lfilter([1], [1, -lam], d)`` (to rounding) without a Python
    loop over steps. Closed form ``m_i = lam^i sum_{j<=i} lam^-j d_j`` evaluated as a scaled
    cumulative sum in blocks of ``B`` steps with ``lam^-B <= exp(500)``, so ``lam^-j`` neither
    overflows nor underflows however long the run; ``d`` is divided by ``max|d|`` first and
    multiplied back. Block ``b`` then adds ``lam^(k+1)`` times the value carried out of block
    ``b - 1`` (a loop over blocks only: one block for ``lam = 0.999`` up to ~5e5 steps).
    Rounding error is that of the direct recursion (relative ~``eps / (1 - lam)``).
    Used for the annealing area S2 of Tissue et al. 2024 (arXiv 2408.11029), Eq. 3.

    Parameters
    ----------
    d:
        Inputs of shape ``(T,)`` (the per-step LR drops), finite.
    lam:
        Decay ``lambda`` in [0, 1).

    Returns
    -------
    ndarray
        ``m``, float array of shape ``(T,)``.

    Raises
    ------
    LadderError
        ``d`` not 1-D or not finite, or ``lam`` outside [0, 1).
    """
    x = np.asarray(d, dtype=float)
    if x.ndim != 1:
        raise LadderError(f"momentum_filter needs a 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise LadderError("momentum_filter needs finite inputs")
    lam = _real("momentum", lam)
    if not 0.0 <= lam < 1.0:
        raise LadderError(f"momentum must lie in [0, 1), got {lam!r}")
    n = x.size
    scale = float(np.max(np.abs(x))) if n else 0.0
    if lam == 0.0 or scale == 0.0:
        return x.copy()
    x = x / scale
    log_lam = math.log(lam)
    size = int(min(n, max(1, math.floor(_FILTER_LOG_RANGE / -log_lam))))
    blocks = -(-n // size)
    padded = np.zeros(blocks * size)
    padded[:n] = x
    k = np.arange(size, dtype=float)
    up = np.exp(-log_lam * k)                   # lam^-k <= exp(500)
    down = np.exp(log_lam * k)                  # lam^k >= exp(-500)
    m = np.cumsum(padded.reshape(blocks, size) * up, axis=1) * down
    if blocks > 1:
        # m at the end of block b: its own part plus lam^B times that of block b - 1
        lam_b = math.exp(log_lam * size)
        ends = m[:, -1].copy()
        for b in range(1, blocks):
            ends[b] += lam_b * ends[b - 1]
        m[1:] += ends[:-1, None] * (down * lam)[None, :]   # lam^(k+1) m_end(b-1)
    return m.ravel()[:n] * scale


def features(lrs: Any, steps: Any, *, peak_lr: float | None = None,
             momentum: float = 0.999) -> dict[str, np.ndarray]:
    """Schedule features at checkpoints: forward area S1, annealing area S2, h and the LR.

    From Tissue et al. 2024, "Scaling Law with Learning Rate Annealing" (arXiv 2408.11029),
    Eq. 3 (law ``L(s) = L0 + A S1^-alpha - C S2``):

    * ``S1(s) = sum_{i=1}^{s} eta_i`` (forward area; includes warmup);
    * ``S2(s) = sum_{i=1}^{s} m_i`` with ``m_i = lambda m_{i-1} + (eta_{i-1} - eta_i)``,
      ``m_0 = 0``, ``lambda = momentum`` (annealing area with momentum; the paper uses
      ``lambda = 0.999``). Warmup is excluded: the drops are 0 up to the first step where
      the LR peaks (``eta_0 := peak``), so S2 = 0 for a constant schedule. The recursion is
      the IIR filter ``m = lfilter([1], [1, -lambda], d)``, computed by
      :func:`momentum_filter` (blocked scaled cumulative sums, no scipy.signal).
    * ``h(s) = eta_s / peak_lr`` and ``lr(s) = eta_s``.

    Parameters
    ----------
    lrs:
        Per-step LRs, shape ``(T,)`` (``lrs[s-1]`` at step ``s``), finite and >= 0; or an
        object with ``lrs()`` and ``peak_lr`` (:class:`Schedule`, :class:`LoggedSchedule`).
    steps:
        1-based checkpoint steps in ``1..T``, shape ``(n,)``.
    peak_lr:
        Normaliser of ``h``; default the schedule's ``peak_lr`` or ``max(lrs)``.
    momentum:
        ``lambda`` in [0, 1).

    Returns
    -------
    dict
        ``{"S1", "S2", "h", "lr"}``, each a float array of shape ``(n,)``; S1 and S2 are in
        LR x steps.

    Raises
    ------
    LadderError
        Bad ``lrs``, steps out of range, a non-positive ``peak_lr``, or ``momentum``
        outside [0, 1).
    """
    eta, peak = _as_lrs_and_peak(lrs, peak_lr)
    lam = _real("momentum", momentum)
    if not 0.0 <= lam < 1.0:
        raise LadderError(f"momentum must lie in [0, 1), got {momentum!r}")
    s = np.atleast_1d(_check_steps(steps, eta.size))
    if s.ndim != 1:
        raise LadderError(f"steps must be 1-D, got shape {s.shape}")
    idx = s - 1
    S1 = np.cumsum(eta)[idx]
    m = momentum_filter(_lr_drops(eta), lam)
    S2 = np.cumsum(m)[idx]
    lr = eta[idx]
    return {"S1": S1, "S2": S2, "h": lr / peak, "lr": lr}


def warmup_end(lrs: Any) -> int:
    """The 1-based step at which warm-up ends: the first step where the LR reaches its peak.

    Checkpoints at steps below it are taken while the LR is still rising. This is the step
    ``p`` of the module conventions (the annealing area S2 and the multi-power LD start
    there), so a checkpoint is warm-up exactly when the annealing laws see no decay yet and
    the LR has not reached its peak: ``W`` for a :class:`Schedule` with ``warmup_steps = W
    > 0``, 1 without warm-up, and the first logged point at the peak for a
    :class:`LoggedSchedule` (the interpolated LR rises up to it).

    Parameters
    ----------
    lrs:
        Per-step LRs, shape ``(T,)``, or a schedule (an object with ``lrs()``).

    Returns
    -------
    int
        ``p`` in ``1..T``.

    Raises
    ------
    LadderError
        Bad LRs (empty, non-finite or negative).
    """
    if hasattr(lrs, "lrs") and callable(lrs.lrs):
        lrs = lrs.lrs()
    return int(np.argmax(_check_lrs(lrs))) + 1


@dataclass(frozen=True)
class Restart:
    """A place where a run's logged step goes back in file order: the run was resumed.

    ``kind`` is ``"rollback"`` when the loss jumps back up to about the run's earlier loss at
    that step (resumed from an earlier checkpoint, the overlapping steps logged twice) and
    ``"counter"`` when the loss carries on from where it was (the step counter restarted, so
    the later steps are not the run's global steps). Either way the rows are not one loss
    curve in step order.
    """

    run: str
    """Run id."""
    row: int
    """Source row (the ladder's ``row`` column) where the step goes back."""
    step: float
    """Step logged at ``row``."""
    prev_row: int
    """The row logged just before it (same run, file order)."""
    prev_step: float
    """Step logged at ``prev_row`` (greater than ``step``)."""
    loss: float
    """Loss at ``row``."""
    prev_loss: float
    """Loss at ``prev_row``."""
    kind: str
    """``"rollback"`` or ``"counter"`` (see the class docstring)."""
    index: int = -1
    """Position of ``row`` in the arrays given to :func:`find_restarts`."""
    prev_index: int = -1
    """Position of ``prev_row`` there (above ``index`` when the run is logged newest first)."""
    superseded: tuple[int, ...] = ()
    """Rollback only: positions (as ``index``) of the rows logged before the restart, and not
    already superseded by an earlier rollback, at or after the step it resumed at. The run
    continued from the later segment, so these earlier rows are not part of its loss curve."""

    def describe(self) -> str:
        """One clause for messages, naming rows, steps and losses."""
        what = (f"the loss jumps back up ({self.prev_loss:.4g} -> {self.loss:.4g}): resumed "
                f"from an earlier checkpoint" if self.kind == "rollback" else
                f"the loss carries on ({self.prev_loss:.4g} -> {self.loss:.4g}): the step "
                f"counter restarted")
        return (f"step {self.prev_step:g} (row {self.prev_row}) -> {self.step:g} "
                f"(row {self.row}), {what}")


#: A run whose step goes back but repeats no step is read in step order (not resumed) when its
#: loss in step order has at most this share of its total variation in file order.
UNORDERED_SMOOTHING = 0.5


def _not_in_step_order(steps: np.ndarray, loss: np.ndarray) -> bool:
    """True when a run's rows (file order, steps of shape (n,), losses (n,)) are a loss curve
    whose rows were reordered, not a resumed log (:func:`find_restarts`)."""
    if np.unique(steps).size < steps.size:      # a step logged twice: two segments overlap
        return False
    ok = np.isfinite(loss)
    s, y = steps[ok], loss[ok]
    k = np.argsort(s, kind="stable")
    by_step = np.abs(np.diff(y[k])).sum()
    by_file = np.abs(np.diff(y)).sum()
    if by_step <= UNORDERED_SMOOTHING * by_file:
        return True
    # Blocks of disjoint step ranges in the wrong order (shards merged out of order): within
    # the blocks both orders agree, so step order is the log when its joins are the smoother.
    # A restarted counter whose steps fall below the earlier ones joins smoothly in file order.
    cuts = np.flatnonzero(s[1:] < s[:-1]) + 1
    lo = np.minimum.reduceat(s, np.r_[0, cuts])
    hi = np.maximum.reduceat(s, np.r_[0, cuts])
    order = np.argsort(lo)
    return bool(np.all(lo[order][1:] > hi[order][:-1]) and by_step < by_file)


def find_restarts(group: Any, steps: Any, losses: Any, rows: Any,
                  names: Any) -> list[Restart]:
    """Restarts of logged step counters: rows whose step is below the previous row's step of
    the same run, with the rows in **file order** (the order they were logged in).

    A resumed run logged as one history has its step going back where it was resumed: to an
    earlier checkpoint (a *rollback*: the loss jumps back up to its earlier value at that
    step) or to 0 (a restarted counter: the loss carries on). Sorted by step, the segments of
    such a run interleave, and a loss curve fitted through them blames the misfit on the LR
    schedule. A run logged newest-first (more decreases than increases) is read in reverse.
    A run whose rows are merely not in step order (a table sorted or merged by another key)
    is not resumed: when no step of it repeats and its loss read in step order varies at most
    :data:`UNORDERED_SMOOTHING` times as much as in file order (total variation, the sum of
    |loss change| between neighbours), or its rows are blocks of disjoint step ranges out of
    order (shards merged in the wrong order) and step order varies less, step order is its
    logging order and it has no restart.
    A resumed run's segments are each a smooth curve in file order and interleave in step
    order (a restarted counter), or retrace the curve (a rollback: the loss jumps back up once
    a resume), so step order is not that much smoother; a shuffled curve's file order zigzags
    over its whole range. Vectorised: one pass over all rows; a Python loop only over the
    runs whose step goes back.

    Parameters
    ----------
    group:
        Run index of each row, int array of shape ``(n,)``, indexing ``names``.
    steps, losses:
        Step and loss of each row, shape ``(n,)`` (NaN steps are skipped).
    rows:
        Source row labels, shape ``(n,)``, for messages.
    names:
        Run ids, shape ``(n_runs,)``.

    Returns
    -------
    list of Restart
        In run order, then file order; empty when every run's steps increase. A rollback's
        :attr:`Restart.superseded` lists the earlier rows its later segment replaces.
    """
    g = np.asarray(group, dtype=np.int64)
    s = np.asarray(steps, dtype=float)
    loss = np.asarray(losses, dtype=float)
    label = np.asarray(rows)
    if g.size < 2:
        return []
    where = np.arange(g.size)
    ok = ~np.isnan(s)
    if not ok.all():
        g, s, loss, label, where = g[ok], s[ok], loss[ok], label[ok], where[ok]
    order = np.argsort(g, kind="stable")                  # runs together, file order kept
    g, s, loss, label, where = g[order], s[order], loss[order], label[order], where[order]
    same = g[1:] == g[:-1]
    down = same & (s[1:] < s[:-1])
    if not down.any():
        return []
    up = same & (s[1:] > s[:-1])
    n_runs = int(g.max()) + 1
    n_down = np.bincount(g[1:][down], minlength=n_runs)
    n_up = np.bincount(g[1:][up], minlength=n_runs)
    out: list[Restart] = []
    starts = np.searchsorted(g, np.arange(n_runs))
    ends = np.searchsorted(g, np.arange(n_runs), side="right")
    for run in np.flatnonzero(n_down):
        a, b = int(starts[run]), int(ends[run])
        rs, rl, rr, rw = s[a:b], loss[a:b], label[a:b], where[a:b]
        if n_down[run] > n_up[run]:                       # logged newest first
            rs, rl, rr, rw = rs[::-1], rl[::-1], rr[::-1], rw[::-1]
        if _not_in_step_order(rs, rl):
            continue
        gone = np.zeros(rs.size, dtype=bool)              # superseded by an earlier rollback
        for i in np.flatnonzero(rs[1:] < rs[:-1]) + 1:
            before_s, before_l = rs[:i], rl[:i]
            k = np.argsort(before_s, kind="stable")
            kind = "counter"
            if before_s[k[0]] <= rs[i]:
                # The run's earlier loss at this step: a rollback lands near it.
                earlier = float(np.interp(rs[i], before_s[k], before_l[k]))
                if abs(rl[i] - earlier) < abs(rl[i] - rl[i - 1]):
                    kind = "rollback"
            superseded: tuple[int, ...] = ()
            if kind == "rollback":
                # The run went on from a checkpoint at or before this step: what it logged
                # earlier from this step on is not part of the curve it continued.
                hit = np.flatnonzero(~gone[:i] & (rs[:i] >= rs[i]))
                gone[hit] = True
                superseded = tuple(sorted(int(w) for w in rw[hit]))
            out.append(Restart(run=str(names[run]), row=_plain(rr[i]), step=float(rs[i]),
                               prev_row=_plain(rr[i - 1]), prev_step=float(rs[i - 1]),
                               loss=float(rl[i]), prev_loss=float(rl[i - 1]), kind=kind,
                               index=int(rw[i]), prev_index=int(rw[i - 1]),
                               superseded=superseded))
    return out


def _plain(value: Any):
    """A row label as a plain Python value (no numpy scalar reprs in messages)."""
    return value.item() if isinstance(value, np.generic) else value


class MultiPowerLD(NamedTuple):
    """Result of :func:`multipower_ld`."""

    ld: np.ndarray
    """LD(t) / B at the checkpoints, shape ``(n,)`` (units: LR)."""
    grad: np.ndarray
    """Derivatives of ``ld`` w.r.t. ``(C, beta, gamma)``, shape ``(n, 3)``."""


def _ld_terms(tq: np.ndarray, P: np.ndarray, dK: np.ndarray, etaK: np.ndarray,
              startK: np.ndarray, lastK: np.ndarray, C: float, beta: float,
              gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``d G(eta^-gamma (P[t] - start))`` over the terms with ``last <= t`` for each t."""
    n = tq.size
    ld = np.zeros(n)
    grad = np.zeros((n, 3))
    if dK.size == 0 or n == 0:
        return ld, grad
    pos = etaK > 0
    log_eta = np.log(np.where(pos, etaK, 1.0))
    with np.errstate(over="ignore"):
        scale = np.where(pos, np.exp(-gamma * log_eta), 0.0)  # eta^-gamma (0 where eta = 0)
    g_inf = 1.0 if (C > 0 and beta > 0) else 0.0          # G(+inf)
    block = max(1, _BLOCK_ELEMENTS // dK.size)
    for a in range(0, n, block):
        t = tq[a:a + block]
        S = P[t][:, None] - startK[None, :]
        S = np.where(lastK[None, :] <= t[:, None], S, 0.0)  # only terms with k <= t
        S = np.maximum(S, 0.0)                               # rounding guard
        with np.errstate(over="ignore", invalid="ignore"):
            x = S * scale[None, :]
        # x = inf: eta_k = 0 with S > 0, or eta_k^-gamma S overflowing float64
        inf = ((~pos)[None, :] & (S > 0)) | ~np.isfinite(x)
        x = np.where(inf, 0.0, x)
        log_u = np.log1p(C * x)
        u_mb = np.exp(-beta * log_u)                         # u^-beta
        u_mb1 = u_mb / (1.0 + C * x)                         # u^-(beta+1)
        G = np.where(inf, g_inf, 1.0 - u_mb)
        dC = np.where(inf, 0.0, beta * x * u_mb1)
        dB = np.where(inf, 0.0, log_u * u_mb)
        dG = np.where(inf, 0.0, -beta * C * x * log_eta[None, :] * u_mb1)
        ld[a:a + block] = G @ dK
        grad[a:a + block, 0] = dC @ dK
        grad[a:a + block, 1] = dB @ dK
        grad[a:a + block, 2] = dG @ dK
    return ld, grad


def multipower_ld(lrs: Any, steps: Any, C: float, beta: float, gamma: float, *,
                  max_terms: int | None = None) -> MultiPowerLD:
    """Loss-reduction sum of the multi-power law (without its ``B`` factor) and its gradient.

    Luo et al. 2025, "A Multi-Power Law for Loss Curve Prediction Across Learning Rate
    Schedules" (arXiv 2503.12811), Sec. 3, Eq. (MPL):
    ``L(t) = L0 + A (S1(t) + S_W)^-alpha - LD(t)`` with

        LD(t) = B sum_{k=1}^{t} (eta_{k-1} - eta_k) G(eta_k^-gamma S_k(t)),
        G(x) = 1 - (C x + 1)^-beta,      S_k(t) = sum_{tau=k}^{t} eta_tau.

    This returns ``LD(t) / B``. Indexing (see the module docstring): steps are 1-based over
    the whole run including warmup; the paper's ``eta_0`` is the peak LR and warmup does not
    contribute, i.e. the drop ``eta_{k-1} - eta_k`` is taken as 0 for every ``k`` up to the
    first step where the LR peaks. ``S1(t) + S_W`` of the paper is ``features(...)["S1"]``.
    Only steps with a non-zero drop contribute, and ``S_k(t) = P_t - P_{k-1}`` with ``P`` the
    cumulative LR sum. Cost is O(n x #drops), evaluated in blocks of bounded memory.

    Edge cases: a term with ``S_k(t) = 0`` contributes 0; a term with ``eta_k = 0`` and
    ``S_k(t) > 0`` (a later re-warm), or whose ``x`` overflows, has ``x = inf``, ``G = 1``
    (0 if ``C = 0`` or ``beta = 0``) and zero derivatives (their limits).

    Derivatives, with ``x = eta_k^-gamma S_k(t)`` and ``u = C x + 1``:
    ``dG/dC = beta x u^-(beta+1)``, ``dG/dbeta = u^-beta ln u``,
    ``dG/dgamma = -beta C x ln(eta_k) u^-(beta+1)``.

    Parameters
    ----------
    lrs:
        Per-step LRs, shape ``(T,)``, finite and >= 0; or an object with ``lrs()``.
    steps:
        1-based checkpoint steps in ``1..T``, shape ``(n,)``.
    C, beta, gamma:
        Law parameters; ``C >= 0`` and ``beta >= 0`` finite, ``gamma`` finite.
    max_terms:
        Optional speed-up for long smooth schedules (e.g. a 1e5-step cosine): contiguous
        drops are merged into groups, each evaluated once with the group's summed drop, its
        mean ``eta_k`` and its mean ``P_{k-1}`` (a midpoint rule; exact when every group
        has one step). The
        groups are ``max_terms`` equal runs of drops, further split at every checkpoint and
        at steps ``t - floor(1.25^j)`` (j = 0, 1, ...) before each checkpoint ``t``, so the
        terms close to a checkpoint, where ``G`` changes fastest, stay (nearly) exact;
        at most ``max_terms + n (log(T) / log(1.25) + 2)`` terms. Relative error on
        smooth cosine / linear / WSD schedules of 5e3-1e5 steps is ~1e-4 to 3e-4 for
        ``max_terms = 200`` (about 25x faster than exact for 50 checkpoints of 1e5
        steps). ``None`` (default) is exact.

    Returns
    -------
    MultiPowerLD
        ``ld`` of shape ``(n,)`` and ``grad`` of shape ``(n, 3)`` (columns C, beta, gamma).

    Raises
    ------
    LawError
        Non-finite or out-of-range ``C``, ``beta``, ``gamma`` or a bad ``max_terms``.
    LadderError
        Bad ``lrs`` or steps.
    """
    if hasattr(lrs, "lrs") and callable(lrs.lrs):
        lrs = lrs.lrs()
    eta = _check_lrs(lrs)
    params = {}
    for name, value in (("C", C), ("beta", beta), ("gamma", gamma)):
        try:
            params[name] = float(value)
        except (TypeError, ValueError):
            raise LawError(f"multi-power parameter {name} must be a real number, got "
                           f"{value!r}") from None
        if not math.isfinite(params[name]):
            raise LawError(f"multi-power parameter {name} must be finite, got {value!r}")
    if params["C"] < 0 or params["beta"] < 0:
        bad = "C" if params["C"] < 0 else "beta"
        raise LawError(f"multi-power parameter {bad} must be >= 0, got {params[bad]!r}")
    if max_terms is not None and (not _is_int(max_terms) or max_terms < 1):
        raise LawError(f"max_terms must be a positive integer or None, got {max_terms!r}")
    t = np.atleast_1d(_check_steps(steps, eta.size))
    if t.ndim != 1:
        raise LadderError(f"steps must be 1-D, got shape {t.shape}")

    P = np.concatenate(([0.0], np.cumsum(eta)))     # P[t] = sum_{tau <= t} eta_tau
    d = _lr_drops(eta)
    K = np.flatnonzero(d) + 1                          # 1-based steps with a drop
    if max_terms is None or K.size <= max_terms:
        dK, etaK, startK, lastK = d[K - 1], eta[K - 1], P[K - 1], K
    else:
        size = -(-K.size // max_terms)
        # group ends at each checkpoint and at geometric distances t - floor(r^j) before it,
        # so groups close to a checkpoint (where G varies fastest) stay narrow
        j = np.arange(int(math.log(eta.size) / math.log(_REFINE_RATIO)) + 2)
        offsets = np.unique(np.floor(_REFINE_RATIO ** j)).astype(np.int64)
        ends = (t[:, None] - np.concatenate(([0], offsets))[None, :]).ravel()
        cuts = np.union1d(np.arange(0, K.size, size),
                          np.searchsorted(K, ends[ends >= 1], side="right"))
        cuts = cuts[(cuts > 0) & (cuts < K.size)]
        bounds = np.concatenate(([0], cuts, [K.size]))
        first, last = bounds[:-1], bounds[1:] - 1
        count = (last - first + 1).astype(float)

        def group_sum(values: np.ndarray) -> np.ndarray:
            c = np.concatenate(([0.0], np.cumsum(values)))
            return c[last + 1] - c[first]

        dK = group_sum(d[K - 1])
        etaK = group_sum(eta[K - 1]) / count       # mean LR of the group's steps
        startK = group_sum(P[K - 1]) / count       # mean P_{k-1}: S at the group's middle
        lastK = K[last]
    ld, grad = _ld_terms(t, P, dK, etaK, startK, lastK,
                         params["C"], params["beta"], params["gamma"])
    return MultiPowerLD(ld=ld, grad=grad)


# multipower_groups: drops at distance e in [r^j, r^(j+1)) before a checkpoint form one group.
GROUP_RATIO = 1.08


class MultiPowerGroups(NamedTuple):
    """Per-checkpoint groups of LR drops for :func:`multipower_ld_grid` (see
    :func:`multipower_groups`). The ``m`` groups are stored row by row: the groups of
    checkpoint ``i`` are ``start[i]:start[i + 1]`` (``start`` has shape ``(n + 1,)``)."""

    start: np.ndarray
    """First group of each checkpoint, int64 of shape ``(n + 1,)``; every row has >= 1 group."""
    drop: np.ndarray
    """Summed LR drop of each group, shape ``(m,)`` (units: LR)."""
    eta: np.ndarray
    """The group's LR ``eta_k`` (|drop|-weighted mean over its steps), shape ``(m,)``."""
    area: np.ndarray
    """``S_k(t)`` at the group's |drop|-weighted centroid, shape ``(m,)`` (LR x steps)."""


def _run_groups(eta: np.ndarray, t: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """Groups of one run's drops for checkpoints ``t`` (n,): (count per row, drop, eta, area)."""
    P = np.concatenate(([0.0], np.cumsum(eta)))
    d = _lr_drops(eta)
    K = np.flatnonzero(d) + 1                        # 1-based steps with a drop
    dK, etaK, PK = d[K - 1], eta[K - 1], P[K - 1]
    wK = np.abs(dK)
    zero = np.zeros(1)
    cD = np.concatenate((zero, np.cumsum(dK)))
    cW = np.concatenate((zero, np.cumsum(wK)))
    cWE = np.concatenate((zero, np.cumsum(wK * etaK)))
    cWP = np.concatenate((zero, np.cumsum(wK * PK)))
    # group j of checkpoint t holds the drops at steps k in (t - offsets[j+1], t - offsets[j]]
    edges = np.searchsorted(K, t[:, None] - offsets[None, :], side="right")   # (n, J + 1)
    hi, lo = edges[:, :-1], edges[:, 1:]
    cnt = hi - lo
    keep = cnt > 0
    keep[:, 0] = True                                 # every row keeps its nearest group
    rows = np.broadcast_to(np.arange(t.size)[:, None], keep.shape)[keep]
    hi, lo, cnt = hi[keep], lo[keep], cnt[keep]
    W = cW[hi] - cW[lo]
    single = cnt == 1
    safe_w = np.where(W > 0, W, 1.0)
    eta_g = np.where(single, etaK[np.minimum(lo, K.size - 1)] if K.size else 1.0,
                     (cWE[hi] - cWE[lo]) / safe_w)
    p_g = np.where(single, PK[np.minimum(lo, K.size - 1)] if K.size else 0.0,
                   (cWP[hi] - cWP[lo]) / safe_w)
    empty = cnt == 0
    drop = np.where(empty, 0.0, cD[hi] - cD[lo])
    eta_g = np.where(empty, 1.0, eta_g)
    area = np.where(empty, 0.0, np.maximum(P[t][rows] - p_g, 0.0))
    return np.bincount(rows, minlength=t.size), drop, eta_g, area


def multipower_groups(lrs: Any, steps: Any, group: Any = None, *,
                      ratio: float = GROUP_RATIO) -> MultiPowerGroups:
    """Group the LR drops before every checkpoint of one or many runs, for the multi-power law.

    For the loss-reduction sum of Luo et al. 2025 (arXiv 2503.12811, Sec. 3, Eq. (MPL); see
    :func:`multipower_ld`), ``LD(t)/B = sum_k d_k G(eta_k^-gamma S_k(t))``, the drops before a
    checkpoint ``t`` are grouped by their distance ``e = t - k``: the groups are
    ``e in [floor(r^j), floor(r^(j+1)))`` (``r = ratio``), so drops within about ``1/(r-1)``
    steps of the checkpoint, where ``G`` changes fastest, are single exact terms and farther
    groups span a fixed share ``(r - 1)`` of their distance. Each group is evaluated once
    with its summed drop, and its ``eta_k`` and ``P_{k-1}`` averaged with weights ``|d_k|``
    (the centroid of the drop: a midpoint rule whose first-order error vanishes); with a
    single step it is exact. About ``log(T) / log(r) - 1 / (r - 1)`` groups per checkpoint
    (~60 for T = 2,000, ~95 for 2e4 at r = 1.08) instead of ``T``: relative error of LD
    on cosine / linear / WSD schedules of 1e3-2e4 steps ~1e-4 over the law's search
    range (typically 2e-5 to 2e-4, at most 6e-4 measured (1-sqrt cooldowns); :func:`multipower_ld` with
    ``max_terms=200``: 1e-5 to 5e-3). The
    groups depend on the schedules and steps only; build them once per fit.

    Parameters
    ----------
    lrs:
        One run's per-step LRs (shape ``(T,)``, or an object with ``lrs()``), or a list of
        them, one per run (a list of numbers is one run).
    steps:
        1-based checkpoint steps, shape ``(n,)``, each within its run's ``1..T``.
    group:
        Run index of each checkpoint (into the list ``lrs``), shape ``(n,)``; default all 0.
    ratio:
        Growth ``r > 1`` of the group widths with distance from the checkpoint.

    Returns
    -------
    MultiPowerGroups
        ``start`` of shape ``(n + 1,)`` and ``drop``, ``eta``, ``area`` of shape ``(m,)``.

    Raises
    ------
    LadderError
        Bad LRs, steps out of a run's range, or a bad ``group``.
    LawError
        ``ratio`` not a finite number > 1.
    """
    many = isinstance(lrs, (list, tuple)) and len(lrs) > 0 and all(
        hasattr(r, "lrs") or np.ndim(r) >= 1 for r in lrs)
    runs = list(lrs) if many else [lrs]
    runs = [_check_lrs(r.lrs() if hasattr(r, "lrs") and callable(r.lrs) else r) for r in runs]
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        r = math.nan
    if not (math.isfinite(r) and r > 1.0):
        raise LawError(f"ratio must be a finite number > 1, got {ratio!r}")
    t_all = np.atleast_1d(np.asarray(steps))
    if t_all.ndim != 1:
        raise LadderError(f"steps must be 1-D, got shape {t_all.shape}")
    n = t_all.size
    g = np.zeros(n, dtype=np.int64) if group is None else np.asarray(group)
    if g.shape != (n,) or (n and (not np.issubdtype(g.dtype, np.integer)
                                  or g.min() < 0 or g.max() >= len(runs))):
        raise LadderError(f"group must hold a run index in 0..{len(runs) - 1} per step")
    t_max = max(r_.size for r_ in runs)
    j = np.arange(int(math.ceil(math.log(t_max + 1) / math.log(r))) + 2)
    offsets = np.unique(np.concatenate(([0], np.floor(r ** j), [t_max + 1]))).astype(np.int64)
    offsets = offsets[offsets <= t_max + 1]
    counts = np.zeros(n, dtype=np.int64)
    parts: list[tuple[np.ndarray, ...]] = []
    order = np.argsort(g, kind="stable")
    bounds = np.searchsorted(g[order], np.arange(len(runs) + 1))
    for run in range(len(runs)):               # once per run, when a fit starts
        rows = order[bounds[run]:bounds[run + 1]]
        if rows.size == 0:
            continue
        t = _check_steps(t_all[rows], runs[run].size)
        cnt, drop, eta_g, area = _run_groups(runs[run], t, offsets)
        counts[rows] = cnt
        parts.append((rows, cnt, drop, eta_g, area))
    start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    m = int(start[-1])
    drop_all, eta_all, area_all = np.zeros(m), np.ones(m), np.zeros(m)
    for rows, cnt, drop, eta_g, area in parts:
        # destination of each of this run's groups: its row's slots in row order
        dest = (np.repeat(start[rows] - np.concatenate(([0], np.cumsum(cnt)[:-1])), cnt)
                + np.arange(cnt.sum()))
        drop_all[dest], eta_all[dest], area_all[dest] = drop, eta_g, area
    return MultiPowerGroups(start=start, drop=drop_all, eta=eta_all, area=area_all)


#: ln eta, ln S and the eta = 0 < S mask of the last few groups evaluated (the fit evaluates
#: one set of groups hundreds of times; these two logs were a fifth of each evaluation).
_GROUP_LOGS: list = []
_GROUP_LOGS_SIZE = 4


def _group_logs(groups: MultiPowerGroups) -> tuple[np.ndarray, ...]:
    """(ln eta with 0 where eta = 0, ln S with -inf where S = 0, eta = 0 < S) of ``groups``,
    shape (m,) each, and whether any group has eta = 0 < S (0-d bool), cached by identity
    (groups are immutable tuples of arrays not modified in place)."""
    for g, logs in _GROUP_LOGS:
        if g is groups:
            return logs
    eta, area = groups.eta, groups.area
    pos = eta > 0
    log_eta = np.log(np.where(pos, eta, 1.0))          # 0 where eta = 0 (handled below)
    with np.errstate(divide="ignore"):
        log_area = np.log(area)                        # -inf where S = 0: x = 0
    fixed = ~pos & (area > 0)                          # eta = 0 < S: x = inf
    logs = (log_eta, log_area, fixed, np.array(fixed.any()))
    for a in logs:
        a.setflags(write=False)
    _GROUP_LOGS.insert(0, (groups, logs))
    del _GROUP_LOGS[_GROUP_LOGS_SIZE:]
    return logs


#: Scratch buffers of :func:`multipower_ld_grid`, per thread, kept between calls up to this many
#: float64 elements each (the fit's evaluations: one point on ~1e5 groups, a batch of ~10 on a
#: subsample). A fresh buffer of this size is a new mapping whose pages the kernel faults in on
#: first touch: on the 96k-group bench case that was ~60% of an evaluation (2.5 ms of which
#: ~1.6 ms were the first writes into four new arrays). Larger blocks (the screen's) allocate.
_SCRATCH_KEEP = 1 << 19
_SCRATCH = threading.local()


def _scratch(shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """Four float64 work arrays of ``shape``, reused between calls of one thread when small
    enough (:data:`_SCRATCH_KEEP`); their contents are undefined."""
    size = shape[0] * shape[1]
    if size > _SCRATCH_KEEP:
        return tuple(np.empty(shape) for _ in range(4))
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None or bufs[0].size < size:
        bufs = tuple(np.empty(size) for _ in range(4))
        _SCRATCH.bufs = bufs
    return tuple(b[:size].reshape(shape) for b in bufs)


def multipower_ld_grid(groups: MultiPowerGroups, C: Any, beta: Any, gamma: Any, *,
                       grad: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``LD(t)/B`` of the multi-power law at many ``(C, beta, gamma)`` at once, from groups.

    Luo et al. 2025 (arXiv 2503.12811), Sec. 3, Eq. (MPL): ``LD(t)/B = sum_k d_k G(x_k)``,
    ``G(x) = 1 - (C x + 1)^-beta``, ``x_k = eta_k^-gamma S_k(t)``, summed over the groups of
    :func:`multipower_groups` by numpy broadcasting (no loop over checkpoints, runs or
    parameter points). Edge cases as :func:`multipower_ld`: ``S = 0`` contributes 0; a group
    with ``eta = 0`` and ``S > 0``, or whose ``C x`` overflows, has ``x = inf``, ``G = 1``
    (0 if ``C = 0`` or ``beta = 0``) and zero derivatives. With one step per group this is
    :func:`multipower_ld` (to rounding); the derivatives are exact for the grouped sum.

    Parameters
    ----------
    groups:
        From :func:`multipower_groups`, for ``n`` checkpoints.
    C, beta, gamma:
        Parameter values, scalars or arrays of one shape ``(G,)`` (broadcast together);
        ``C >= 0``, ``beta >= 0``, finite (not checked here: the caller validates).
    grad:
        Also return the derivatives.

    Returns
    -------
    (ld, grad)
        ``ld`` of shape ``(G, n)`` (``(n,)`` for scalar parameters); ``grad`` of shape
        ``(G, n, 3)`` (``(n, 3)``), columns ``C, beta, gamma``, or None when not asked for.
    """
    C_, beta_, gamma_ = np.broadcast_arrays(*(np.asarray(v, dtype=float)
                                              for v in (C, beta, gamma)))
    scalar = C_.ndim == 0
    C_, beta_, gamma_ = (np.atleast_1d(v).reshape(-1, 1) for v in (C_, beta_, gamma_))
    start, drop, eta, area = groups[:4]
    n = start.size - 1
    npts = C_.shape[0]
    if n == 0 or drop.size == 0:
        ld = np.zeros((npts, n))
        g = np.zeros((npts, n, 3)) if grad else None
        return (ld[0], None if g is None else g[0]) if scalar else (ld, g)
    log_eta, log_area, fixed_special, fixed_any = _group_logs(groups)
    with np.errstate(divide="ignore"):
        log_c = np.log(C_)
    # The same operations, in the same order, as the plain expressions in the comments (so
    # bit for bit the same numbers), into buffers reused in place: a fit evaluates this
    # hundreds of times on ~1e5 groups, and allocating each temporary cost a third of it.
    m = drop.size
    shape = (npts, m)
    cx, buf_u, buf_g, work = _scratch(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        cx = np.multiply(gamma_, log_eta, out=cx)
        np.subtract(log_area, cx, out=cx)
        np.add(cx, log_c, out=cx)
        np.exp(cx, out=cx)                              # C x = exp((ln S - gamma ln eta) + ln C)
    # C x is exp of a sum of finite terms and -inf: it is non-finite only where it overflowed
    # (or is nan), which its maximum shows in one pass; the mask is built only then.
    any_special = bool(fixed_any) or not np.isfinite(cx.max())
    special = None
    if any_special:
        special = np.isfinite(cx)
        np.logical_not(special, out=special)
        np.logical_or(fixed_special, special, out=special)
        any_special = bool(special.any())
    if any_special:
        cx[special] = 0.0
    log_u = np.log1p(cx, out=buf_u)
    G = np.multiply(-beta_, log_u, out=buf_g)
    np.expm1(G, out=G)
    np.negative(G, out=G)                               # 1 - u^-beta
    if any_special:
        g_inf = ((C_ > 0) & (beta_ > 0)).astype(float)
        G = np.where(special, g_inf, G)
    idx = start[:-1]
    work = np.multiply(G, drop, out=work)
    ld = np.add.reduceat(work, idx, axis=1)
    out_grad = None
    if grad:
        u_mb = np.subtract(1.0, G, out=G)               # G is not needed any more
        q = np.add(1.0, cx, out=work)
        np.divide(u_mb, q, out=q)
        np.multiply(cx, q, out=q)
        np.multiply(q, drop, out=q)                     # d C x u^-(beta+1)
        if any_special:
            q[special] = 0.0
            u_mb[special] = 0.0
        out_grad = np.empty((npts, n, 3))
        c_pos = C_ > 0
        sq = np.add.reduceat(q, idx, axis=1)
        out_grad[:, :, 0] = beta_ * sq / np.where(c_pos, C_, 1.0)        # beta x u^-(beta+1)
        if not c_pos.all():   # C = 0: x itself (cx is 0)
            with np.errstate(over="ignore", invalid="ignore"):
                x = np.exp(log_area - gamma_ * log_eta)
            x = np.where(~np.isfinite(x) if special is None else special | ~np.isfinite(x),
                         0.0, x)
            dc0 = beta_ * np.add.reduceat(x * drop, idx, axis=1)        # u = 1 at C = 0
            out_grad[:, :, 0] = np.where(c_pos, out_grad[:, :, 0], dc0)
        np.multiply(log_u, u_mb, out=log_u)
        np.multiply(log_u, drop, out=log_u)
        out_grad[:, :, 1] = np.add.reduceat(log_u, idx, axis=1)
        np.multiply(q, log_eta, out=q)
        out_grad[:, :, 2] = -beta_ * np.add.reduceat(q, idx, axis=1)
    if scalar:
        return ld[0], None if out_grad is None else out_grad[0]
    return ld, out_grad
