"""Run state (issue 9, section 1): what a row's state is, and contradictions as errors."""

from __future__ import annotations

import pytest

import delphi
from delphi.cli import main

# The input: `main` is at fraction 1 but marked final = false. Before, final = false
# was silently ignored when fraction = 1 and `main` entered the fit as a finished run.
CONTRADICTION = """run,step,tokens,lr,peak_lr,loss,fraction,final,flops
a,42149,2.64e12,0.000264,0.002140,2.277,1.0,true,3.168e22
b,105149,6.55e12,0.000264,0.002140,2.224,1.0,true,7.86e22
main,127500,8.02e12,0.002140,0.002140,2.256,1.0,false,9.624e22
"""


def test_final_false_at_fraction_one_is_an_error_naming_the_row(tmp_path, capsys):
    path = tmp_path / "contradiction.csv"
    path.write_text(CONTRADICTION)
    ladder = delphi.load_ladder(path)
    with pytest.raises(delphi.LadderError,
                       match=r"final = false with fraction = 1: run 'main' \(row 2\)"):
        ladder.final_points()
    code = main(["predict", str(path), "--target-flops", "1e23"])
    err = capsys.readouterr().err
    assert code == 1 and "run 'main' (row 2)" in err and "Traceback" not in err


def test_final_false_without_fraction_still_excludes_the_run(tmp_path):
    # No contradiction without a fraction: final = false means unfinished, named as such.
    path = tmp_path / "unfinished.csv"
    path.write_text(CONTRADICTION.replace(",fraction", "").replace(",1.0,", ","))
    finals, excluded = delphi.load_ladder(path).final_points()
    assert sorted(finals["run"]) == ["a", "b"]
    assert [e.run for e in excluded] == ["main"] and "final = false" in excluded[0].reason
