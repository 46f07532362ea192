"""Loading bundled ladders in tests, with the warnings each is known to raise expected.

delphi's own warnings are errors in the suite (``filterwarnings`` in pyproject.toml). Some
bundled ladders warn on every load, about their data rather than about anything a test does
(Marin's dense ladder counts FLOPs with a convention that drifts with size, OLMo's too, two
(Mis)Fitting rows log a fraction just above 1). :func:`load` expects exactly those warnings,
so a test that loads such a ladder for another purpose says which warnings it expects, and a
new or changed warning on load still fails it. Each warning is also on ``ladder.warnings``.
"""

from __future__ import annotations

import pytest

from delphi.errors import LadderWarning
from delphi.readers import load_ladder

#: Bundled ladder -> phrases of the LadderWarnings loading it raises (one phrase a warning).
KNOWN_LOAD_WARNINGS: dict[str, tuple[str, ...]] = {
    "marin-delphi-dense": ("the FLOP convention k = C/(6·N·D) rises",),
    "marin-isoflop-dclm": ("stray more than 25% from the ladder's median",
                           "the FLOP convention k = C/(6·N·D) rises"),
    "olmo-ladder": ("the FLOP convention k = C/(6·N·D) falls",),
    "misfitting2025": ("clipped fraction of",),
}


def expected_load_warnings(name: str, messages: list[str]) -> None:
    """Assert ``messages`` are exactly the known load warnings of bundled ladder ``name``."""
    phrases = KNOWN_LOAD_WARNINGS.get(name, ())
    unknown = [m for m in messages if not any(p in m for p in phrases)]
    missing = [p for p in phrases if not any(p in m for m in messages)]
    assert not unknown and not missing, (name, unknown, missing)


def load(name: str, **kwargs):
    """``load_ladder(name, **kwargs)``, expecting the ladder's known load warnings (if any)."""
    if name not in KNOWN_LOAD_WARNINGS:
        return load_ladder(name, **kwargs)
    with pytest.warns(LadderWarning) as record:
        ladder = load_ladder(name, **kwargs)
    expected_load_warnings(name, [str(w.message) for w in record])
    return ladder
