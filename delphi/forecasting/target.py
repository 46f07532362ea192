"""The target of a forecast: the run to predict, by its compute, size and tokens
(:class:`Target`), and :func:`as_target` for the forms the API accepts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import DelphiError, TargetError, TargetInputError, option
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, check_target_value
from ..inputs.schedules import Schedule

__all__ = ["Target", "as_target", "MAX_FLOOR_POINTS", "K_PLAUSIBLE", "DESIGN_FACTOR"]


def _check_positive(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    return check_target_value(name, value)


@dataclass(frozen=True)
class Target:
    """The run to predict.

    Attributes
    ----------
    flops: C, training FLOPs. When only N and D are given: 6·N·D here, and
        :func:`predict` converts it to the ladder's FLOP convention, C = k·6·N·D with the
        ladder's median k = C/(6·N·D) (see :attr:`flops_source`, :attr:`flops_k`).
    params: N, parameters (count).
    tokens: D, training tokens.
    name: a label, e.g. ``"marin-535b-a23b hero run"``.
    peak_lr: the target's peak learning rate (read by ``chinchilla-lr``).
    schedule: its LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"`` (read by
        ``chinchilla-ckpt`` through the LR ratio at the end of the run).
    steps, batch_size: run length [steps] and batch [tokens]; D = steps x batch when
        ``tokens`` is not given.
    active_params: parameters active per token (MoE); C = 6 x active x D, as in the ladder.

    Raises
    ------
    TargetError
        A value is not a positive finite number (a bool is not one), more active than total
        parameters, nothing at all is given, or C, N and D are
        all given and C / (6·N·D) is outside 0.3..2, the range of FLOP conventions in use
        (:func:`predict` then checks C against the ladder's own convention, within 25%).
    """

    flops: float | None = None
    params: float | None = None
    tokens: float | None = None
    name: str | None = None
    peak_lr: float | None = None
    schedule: str | None = None
    steps: int | None = None
    batch_size: float | None = None
    active_params: float | None = None
    flops_source: str = field(default="", compare=False, repr=False)
    """How :attr:`flops` was obtained: ``"given"``, ``"6ND"`` (total N) or ``"6 N_active D"``
    (set on construction); :func:`predict` appends ``" x ladder k"`` when it converts them
    to the ladder's FLOP convention."""
    flops_k: float | None = field(default=None, compare=False, repr=False)
    """The k of C = k·6·N·D used for :attr:`flops` (None when C was given, 1 for 6·N·D)."""

    def __post_init__(self) -> None:
        for key in ("flops", "params", "tokens", "peak_lr", "steps", "batch_size",
                    "active_params"):
            object.__setattr__(self, key, _check_positive(key, getattr(self, key)))
        if self.tokens is None and self.steps is not None and self.batch_size is not None:
            object.__setattr__(self, "tokens",
                               _check_positive("tokens", self.steps * self.batch_size))
        if (self.active_params is not None and self.params is not None
                and self.active_params > self.params * (1 + 1e-9)):
            # Active parameters are a subset of the total: more is a swapped pair or a typo.
            raise TargetError(
                f"the target's {option('active_params', '--target-active-params')} "
                f"{self.active_params:.4g} exceeds its {option('params', '--target-params')} "
                f"{self.params:.4g}, the total: a mixture of experts "
                f"activates part of its parameters per token (swapped?)")
        n = self.active_params or self.params
        if self.flops is not None and n is not None and self.tokens is not None:
            six_nd = FLOPS_PER_PARAM_TOKEN * n * self.tokens
            # Ladders count C as k·6·N·D with k from ~1/3 (forward only) to ~2 (attention
            # included); predict() checks C against the ladder's own k.
            if not K_PLAUSIBLE[0] <= self.flops / six_nd <= K_PLAUSIBLE[1]:
                what = "active params" if self.active_params else "params"
                raise TargetInputError(
                    f"target flops {self.flops:.4g} disagree with 6 x {what} x tokens = "
                    f"{six_nd:.4g} (ratio {self.flops / six_nd:.3g}, outside the FLOP "
                    f"conventions in use, {K_PLAUSIBLE[0]:g}..{K_PLAUSIBLE[1]:g}); give flops "
                    f"or N and D (for MoE, {option('active_params', '--target-active-params')})")
        if self.schedule is not None:
            self.finallr_ratio()  # fail early on a malformed schedule
        if self.flops is not None:
            object.__setattr__(self, "flops_source", "given")
        elif n is not None and self.tokens is not None:
            object.__setattr__(self, "flops", FLOPS_PER_PARAM_TOKEN * n * self.tokens)
            object.__setattr__(self, "flops_source",
                               "6 N_active D" if self.active_params else "6ND")
            object.__setattr__(self, "flops_k", 1.0)
        if self.flops is None and self.params is None:
            raise TargetError(f"a target needs {option('flops', '--target-flops')}, or both "
                              f"{option('params', '--target-params')} and "
                              f"{option('tokens', '--target-tokens')} (params alone for a law "
                              f"in N, e.g. on a ladder whose runs share one token count)")

    def finallr_ratio(self) -> float:
        """h = lr / peak_lr at the last step of :attr:`schedule`.

        Raises
        ------
        TargetError
            No schedule, or a malformed one.
        """

        if self.schedule is None:
            raise TargetError("the target has no schedule")
        steps = int(self.steps) if self.steps else 10_000
        try:
            sched = Schedule.parse(self.schedule, peak_lr=1.0, total_steps=steps)
        except DelphiError as exc:
            raise TargetError(f"target schedule {self.schedule!r}: {exc}") from None
        return float(sched.lr_at([steps])[0])

    def inputs(self, law: Law, skip: tuple[str, ...] = ()) -> dict[str, list[float]]:
        """The law's inputs at this target (except ``skip``), shape (1,) each.

        Raises
        ------
        TargetInputError
            The law reads a quantity the target does not give (a :class:`TargetError`).
        """
        out = {}
        for col in law.inputs:
            if col in skip:
                continue
            value = getattr(self, col, None)
            if value is None:
                flags = " and ".join(option(c, f"--target-{c.replace('_', '-')}")
                                     for c in law.inputs if c not in skip)
                raise TargetInputError(f"law {law.name!r} needs the target's {col}; give "
                                       f"{flags}")
            out[col] = [value]
        return out

    def to_dict(self) -> dict:
        return {"name": self.name, "flops": self.flops, "params": self.params, "tokens": self.tokens,
                "active_params": self.active_params, "peak_lr": self.peak_lr,
                "schedule": self.schedule, "steps": self.steps, "batch_size": self.batch_size,
                "flops_source": self.flops_source or None, "flops_k": self.flops_k}


#: C / (6·N·D) of FLOP conventions in use: forward-only counts are near 1/3, counts with
#: attention up to about 2 (the same range the ladder check uses).
K_PLAUSIBLE = (0.3, 2.0)
#: A target's D/N or N more than this factor beyond the fitted runs' range is outside the
#: ladder's design.
DESIGN_FACTOR = 10.0
#: Most values a floor range (``floor_range``) is scanned at: each is one forecast.
MAX_FLOOR_POINTS = 101


def as_target(target) -> Target:
    """A :class:`Target` from a Target, a dict of its fields, or a bare number (C in FLOPs)."""
    if isinstance(target, Target):
        return target
    if isinstance(target, (int, float)) and not isinstance(target, bool):
        return Target(flops=float(target))
    if isinstance(target, dict):
        fields = set(Target.__dataclass_fields__)
        unknown = sorted(set(target) - fields)
        if unknown:
            alias = {"N": "params", "D": "tokens", "C": "flops"}
            hint = "; ".join(f"{k} is {alias[k]!r}" for k in unknown if k in alias)
            raise TargetError(f"unknown target field(s) {', '.join(map(repr, unknown))}"
                              f"{' (' + hint + ')' if hint else ''}; "
                              f"known: {', '.join(sorted(fields))}")
        return Target(**target)
    number = ""
    if isinstance(target, str):
        try:
            number = f": pass the number {float(target):g}, not the string {target!r}"
        except ValueError:
            number = f" {target!r}"
    raise TargetError(f"a target is a Target, a dict such as {{'flops': 1e23}} or a number of "
                      f"FLOPs, got {type(target).__name__}{number}")
