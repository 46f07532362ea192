"""Loading bundled ladders in tests, with the warnings each is known to raise expected.

delphi's own warnings are errors in the suite (``filterwarnings`` in pyproject.toml). Some
bundled ladders warn on every load, about their data rather than about anything a test does
(Marin's dense ladder counts FLOPs with a convention that drifts with size, OLMo's too, the
d512 runs of Marin's isoFLOP ladders count 0.74 x 6·N·D, two (Mis)Fitting rows log a
fraction just above 1). :func:`load` expects exactly those warnings, so a test that loads
such a ladder for another purpose says which warnings it expects, and a new or changed
warning on load still fails it. Each warning is also on ``ladder.warnings``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from delphi.errors import LadderWarning
from delphi.readers import load_ladder

#: Bundled ladder -> phrases of the LadderWarnings loading it raises (one phrase a warning).
KNOWN_LOAD_WARNINGS: dict[str, tuple[str, ...]] = {
    "marin-delphi-dense": ("the FLOP convention k = C/(6·N·D) rises",),
    "marin-isoflop-comma": ("stray more than 25% from the ladder's median",
                            "the FLOP convention k = C/(6·N·D) rises"),
    "marin-isoflop-dclm": ("stray more than 25% from the ladder's median",
                           "the FLOP convention k = C/(6·N·D) rises"),
    "marin-isoflop-nemotron": ("stray more than 25% from the ladder's median",
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


@contextmanager
def expect_warnings(category: type[Warning], *patterns: str, may: tuple[str, ...] = ()):
    """Expect the ``category`` warnings of a block that gives several: each of ``patterns``
    (regular expressions, searched) matches at least one of them, and each of them matches
    one of ``patterns`` or of ``may`` (allowed, not required: warnings that depend on the
    platform's arithmetic). One unexpected warning fails it; warnings of other categories
    pass through to the suite's filters. Yields pytest's record."""
    if not patterns:
        raise ValueError("expect_warnings: give at least one pattern")
    with pytest.warns(category) as record:
        yield record
    messages = [str(w.message) for w in record if issubclass(w.category, category)]
    unknown = [m for m in messages if not any(re.search(p, m) for p in (*patterns, *may))]
    missing = [p for p in patterns if not any(re.search(p, m) for m in messages)]
    assert not unknown and not missing, {"unexpected": unknown, "missing": missing}
