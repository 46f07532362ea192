"""Usability of the API, the CLI's text and its JSON for the four users (terminal, pipe,
notebook, --json): errors that name what is missing, short reprs, one JSON shape, notes."""

from __future__ import annotations

import pandas as pd
import pytest

import delphi
from delphi.errors import MissingArgumentError


def _ladder():
    rows = [{"run": f"r{i}", "params": n, "tokens": 20 * n, "loss": 1.7 + 400 / n ** 0.3}
            for i, n in enumerate([1e7, 3e7, 1e8, 3e8, 1e9])]
    return delphi.load_ladder(pd.DataFrame(rows))


@pytest.mark.parametrize("call, func", [
    (lambda lad: delphi.fit(lad), "fit()"),
    (lambda lad: delphi.backtest(lad), "backtest()"),
    (lambda lad: delphi.prefix_fits(lad), "prefix_fits()"),
])
def test_a_missing_law_names_the_function_and_the_laws(call, func):
    with pytest.raises(MissingArgumentError) as e:
        call(_ladder())
    msg = str(e.value)
    assert func in msg and "chinchilla" in msg and "power" in msg and "overtrain" in msg
    assert isinstance(e.value, TypeError) and isinstance(e.value, delphi.DelphiError)


def test_a_missing_target_shows_the_target_forms():
    with pytest.raises(MissingArgumentError, match=r"predict\(\) needs a target.*'flops'.*"
                                                   r"'params'.*'tokens'"):
        delphi.predict(_ladder())


def test_a_target_given_as_n_and_d_says_which_fields_they_are():
    with pytest.raises(delphi.TargetError, match="N is 'params'; D is 'tokens'|"
                                                 "D is 'tokens'; N is 'params'"):
        delphi.predict(_ladder(), {"N": 1e10, "D": 2e11}, "chinchilla")
