"""The laws delphi fits, by name. See :mod:`delphi.laws.base` for what a law is."""

from __future__ import annotations

from ..errors import LawError
from .base import Law, Param
from .chinchilla import CHINCHILLA
from .hparams import DEEPSEEK_BATCH, DEEPSEEK_LR, STEPLAW_BATCH, STEPLAW_LR
from .lr import CHINCHILLA_LR
from .power import POWER

__all__ = ["Law", "Param", "LAWS", "HPARAM_LAWS", "get_law", "POWER", "CHINCHILLA",
           "CHINCHILLA_LR"]

#: Every loss law by its CLI/API name.
LAWS: dict[str, Law] = {law.name: law for law in (POWER, CHINCHILLA, CHINCHILLA_LR)}
#: Laws of optimal hyperparameters (their "loss" is the optimal LR or batch size).
HPARAM_LAWS: dict[str, Law] = {law.name: law for law in (DEEPSEEK_LR, DEEPSEEK_BATCH, STEPLAW_LR,
                                                          STEPLAW_BATCH)}


def get_law(law: str | Law) -> Law:
    """The law called ``law`` (or ``law`` itself when it is already a :class:`Law`).

    Raises
    ------
    LawError
        Unknown name; the message lists the known laws.
    """
    if isinstance(law, Law):
        return law
    try:
        return {**LAWS, **HPARAM_LAWS}[str(law)]
    except KeyError:
        raise LawError(f"unknown law {law!r}; known laws: {', '.join(sorted(LAWS))}") from None
