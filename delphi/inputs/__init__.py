"""Inputs: reading runs into a validated :class:`~delphi.inputs.ladder.Ladder` (``readers/``), run
states, loss units, LR schedules, hyperparameter rules and the law inputs derived from them.
The lowest layer above ``delphi.core`` and ``delphi.errors``: it imports no other layer."""
