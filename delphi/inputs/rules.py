"""Hyperparameter rules: how a ladder's runs (and the target) choose their settings.

:func:`adamh_rule` is the AdamH recipe of the Marin Delphi scaling suite: batch size,
learning rates, Adam epsilon and beta2 as closed-form functions of the training-token
budget, anchored at a reference run of ``B0 = 64`` sequences of 4096 tokens trained on
``T0 = 2.5e9`` tokens.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from ..errors import LadderError

__all__ = ["AdamHSettings", "adamh_rule", "ADAMH_LR_CAP", "ADAMH_MIN_BATCH",
           "ADAMH_MAX_BATCH"]

#: Cap on the projection-weight learning rate; the batch is halved until it is below this.
ADAMH_LR_CAP = 0.01
#: Batch-size limits in sequences.
ADAMH_MIN_BATCH = 8
ADAMH_MAX_BATCH = 8192
#: Lower bound on beta2; the batch is halved until beta2 is above it.
ADAMH_BETA2_MIN = 0.9
#: Upper bound on beta2.
ADAMH_BETA2_MAX = 0.9999
#: The starting batch targets about this many optimiser steps (2^16).
ADAMH_TARGET_STEPS = 2 ** 16


@dataclass(frozen=True)
class AdamHSettings:
    """Hyperparameters chosen by :func:`adamh_rule` for one training run.

    Attributes
    ----------
    tokens:
        Training tokens ``T`` the settings are for.
    batch_sequences:
        Batch size ``B`` in sequences (a power of two in 8..8192).
    batch_tokens:
        Batch size in tokens, ``B * seq_len``.
    seq_len:
        Tokens per sequence.
    lr:
        Projection-weight (matrix) learning rate, capped at :data:`ADAMH_LR_CAP`.
    scalar_lr:
        Learning rate of scalar and embedding parameters.
    eps:
        Adam epsilon.
    beta2:
        Adam second-moment decay.
    lr_capped:
        True when the uncapped projection lr was >= the cap (only possible at the minimum
        batch of 8 sequences).
    steps:
        Optimiser steps ``ceil(T / batch_tokens)``.
    """

    tokens: float
    batch_sequences: int
    batch_tokens: int
    seq_len: int
    lr: float
    scalar_lr: float
    eps: float
    beta2: float
    lr_capped: bool
    steps: int


def _next_pow2(x: float) -> int:
    """Smallest power of two >= x (x > 0), exact for powers of two; 1 for x <= 1."""
    if x <= 1.0:
        return 1
    mantissa, exponent = math.frexp(x)  # x = mantissa * 2**exponent, mantissa in [0.5, 1)
    return 2 ** (exponent - 1) if mantissa == 0.5 else 2 ** exponent


def _positive(name: str, value: Any, *, integer: bool = False) -> float:
    if isinstance(value, bool) or (integer and not isinstance(value, numbers.Integral)):
        kind = "a positive integer" if integer else "a positive finite number"
        raise LadderError(f"{name} must be {kind}, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise LadderError(f"{name} must be a positive finite number, got {value!r}") from None
    if not math.isfinite(out) or out <= 0:
        raise LadderError(f"{name} must be a positive finite number, got {value!r}")
    return out


def adamh_rule(tokens: float, *, B0_sequences: int = 64, seq_len: int = 4096,
               T0: float = 2.5e9) -> AdamHSettings:
    """AdamH hyperparameters for a run of ``tokens`` training tokens.

    Source: Marin Delphi scaling suite (AdamH recipe). With ``B`` the batch in sequences,
    ``B0 = B0_sequences`` (64 sequences of 4096 tokens), ``T = tokens`` and ``T0 = 2.5e9``:

    * projection-weight lr ``= min(0.00630 * sqrt(B / B0) * (T0 / T)^0.3, 0.01)``;
    * scalar / embedding lr ``= 0.000656 * sqrt(B T0 / (B0 T))``;
    * ``eps = 1.85e-8 * sqrt(B0 T / (B T0))``;
    * ``beta2 = clip(0.9999^(B / B0), 0.9, 0.9999)``;
    * batch: start at the next power of two >= ``T / (seq_len * 2^16)`` sequences (about
      2^16 steps; ``seq_len * 2^16 = 4096 * 2^16`` by default), clamp to at most 8192, then
      halve while the uncapped projection lr is >= 0.01 or the unclipped beta2 is <= 0.9,
      never going below 8 sequences (a start below 8 is raised to 8). At 8 sequences the
      projection lr may still reach the cap, which then applies.

    Parameters
    ----------
    tokens:
        Training tokens ``T`` (positive, finite).
    B0_sequences:
        Reference batch size in sequences (positive int).
    seq_len:
        Sequence length in tokens (positive int).
    T0:
        Reference token budget (positive, finite).

    Returns
    -------
    AdamHSettings

    Raises
    ------
    LadderError
        ``tokens``, ``T0``, ``B0_sequences`` or ``seq_len`` not positive and finite (the
        integer arguments must be ints).
    """
    T = _positive("tokens", tokens)
    B0 = _positive("B0_sequences", B0_sequences, integer=True)
    L = int(_positive("seq_len", seq_len, integer=True))
    T_ref = _positive("T0", T0)

    def raw_lr(b: int) -> float:
        return 0.00630 * math.sqrt(b / B0) * (T_ref / T) ** 0.3

    def raw_beta2(b: int) -> float:
        return 0.9999 ** (b / B0)

    batch = min(max(_next_pow2(T / (L * ADAMH_TARGET_STEPS)), ADAMH_MIN_BATCH),
                ADAMH_MAX_BATCH)
    while batch > ADAMH_MIN_BATCH and (raw_lr(batch) >= ADAMH_LR_CAP
                                       or raw_beta2(batch) <= ADAMH_BETA2_MIN):
        batch //= 2

    lr = raw_lr(batch)
    batch_tokens = batch * L
    return AdamHSettings(
        tokens=T,
        batch_sequences=batch,
        batch_tokens=batch_tokens,
        seq_len=L,
        lr=min(lr, ADAMH_LR_CAP),
        scalar_lr=0.000656 * math.sqrt(batch * T_ref / (B0 * T)),
        eps=1.85e-8 * math.sqrt(B0 * T / (batch * T_ref)),
        beta2=min(max(raw_beta2(batch), ADAMH_BETA2_MIN), ADAMH_BETA2_MAX),
        lr_capped=lr >= ADAMH_LR_CAP,
        steps=math.ceil(T / batch_tokens),
    )
