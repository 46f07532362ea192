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


# Issue 9, section 3: a rung in bits per byte inside a nats ladder (0.91 where the trend says
# about 2.7). Before, it was fitted: E went to 0 and the 90% interval was [0.38, 16.9].
MIXED_UNITS = """run,flops,loss
moe-v16-1e18,1e18,3.522
moe-v16-3e18,3e18,3.339
moe-v16-1e19,1e19,3.154
moe-v16-3e19,3e19,3.000
moe-v16-1e20,1e20,2.848
moe-v16-3e20,3e20,0.91
"""


def test_a_rung_far_below_the_trend_is_excluded_and_named(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text(MIXED_UNITS)
    forecast = delphi.predict(delphi.load_ladder(path), {"flops": 1e22}, "power")
    below = [e for e in forecast.fit.exclusions if e.run == "moe-v16-3e20"]
    assert below and "far below the trend" in below[0].reason and "bits per byte" in below[0].reason
    # The right value: the same forecast from the five consistent rungs alone.
    clean = tmp_path / "clean.csv"
    clean.write_text("".join(MIXED_UNITS.splitlines(keepends=True)[:-1]))
    reference = delphi.predict(delphi.load_ladder(clean), {"flops": 1e22}, "power")
    assert forecast.loss == pytest.approx(reference.loss, rel=1e-9)
    assert forecast.fit.params["E"] > 1.0  # not driven to 0 by the stray rung
