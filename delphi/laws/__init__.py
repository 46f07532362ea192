"""The laws delphi fits, by name. See :mod:`delphi.laws.base` for what a law is."""

from __future__ import annotations

import difflib

from ..errors import LawError, MissingArgumentError
from .base import Law, Param
from .chinchilla import CHINCHILLA
from .curves import ANNEALING, MULTIPOWER
from .hparams import DEEPSEEK_BATCH, DEEPSEEK_LR, STEPLAW_BATCH, STEPLAW_LR
from .lr import CHINCHILLA_CKPT, CHINCHILLA_LR, LR_FORMS
from .overtrain import OVERTRAIN
from .power import POWER, POWER_N
from .task import TASK_LAWS, onestep_law, sigmoid_law

__all__ = ["Law", "Param", "LAWS", "CHECKPOINT_LAWS", "CURVE_LAWS", "HPARAM_LAWS", "get_law", "POWER", "POWER_N", "CHINCHILLA",
           "CHINCHILLA_LR", "OVERTRAIN", "TASK_LAWS", "sigmoid_law", "onestep_law"]

#: Every loss law by its CLI/API name.
LAWS: dict[str, Law] = {law.name: law for law in (POWER, POWER_N, CHINCHILLA, CHINCHILLA_LR,
                                                  CHINCHILLA_CKPT, OVERTRAIN, *LR_FORMS)}
#: Laws fitted to every checkpoint of a run rather than to its final loss.
CHECKPOINT_LAWS = frozenset({CHINCHILLA_CKPT.name})
#: Loss-curve laws for one model size (inputs from the LR schedule).
CURVE_LAWS: dict[str, Law] = {law.name: law for law in (MULTIPOWER, ANNEALING)}
#: Laws of optimal hyperparameters (their "loss" is the optimal LR or batch size).
HPARAM_LAWS: dict[str, Law] = {law.name: law for law in (DEEPSEEK_LR, DEEPSEEK_BATCH, STEPLAW_LR,
                                                          STEPLAW_BATCH)}


def get_law(law: str | Law | None, *, needed_by: str | None = None) -> Law:
    """The law called ``law`` (or ``law`` itself when it is already a :class:`Law`).

    ``needed_by``: the public function asking (``"fit"``), named in the error when ``law`` is
    None (the caller gave none).

    Raises
    ------
    LawError
        Unknown name; the message lists the known laws.
    MissingArgumentError
        ``law`` is None: the message names ``needed_by`` and lists the laws.
    """
    if isinstance(law, Law):
        return law
    if law is None:
        where = f"{needed_by}() needs" if needed_by else "no law given: pass"
        raise MissingArgumentError(
            f"{where} a law: law='chinchilla' (L(N, D), needs params and tokens) or "
            f"law='power' (L(C), needs flops), or one of {', '.join(sorted(LAWS))}; "
            f"delphi.compare(ladder) ranks the candidates on the ladder itself")
    try:
        return {**LAWS, **CURVE_LAWS, **HPARAM_LAWS, **TASK_LAWS}[str(law)]
    except KeyError:
        names = sorted({**LAWS, **CURVE_LAWS, **TASK_LAWS})
        close = difflib.get_close_matches(str(law), names, n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise LawError(f"unknown law {law!r}{hint}; known laws: {', '.join(names)}") from None
