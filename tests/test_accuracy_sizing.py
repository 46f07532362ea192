"""The accuracy bootstraps sized to their interval's Monte-Carlo error (issue 27).

The defaults (``n_boot=None``, ``calibration_draws=None``) draw 100-200 main draws and
20-40 per calibration cut; here the floors and caps are shrunk to 10-20 (monkeypatched) so
that three simulated ladders cost about ten CPU-seconds. The "before" of each comparison is the
fixed count (``n_boot=20, calibration_draws=20``: the caps), computed in the test. The
comparison at the real counts on the OLMo ladder's eight tasks and two simulated ladders is
``benchmarks/bench_accuracy_sizing.py``.
"""

from __future__ import annotations

import math

import numpy as np

import delphi
import delphi.analyses.accuracy as acc
import pytest
from delphi.accuracy import predict_accuracy
from task_ladders import TASK, simulate_noisy

KW = dict(target_params=1.6e9, target_tokens=3.2e10, smooth=1, check_every=0)


#: At a tenth of the default draws the ends' Monte-Carlo error is ~3x larger relative to the
#: width, so the test's rule is looser (0.25 instead of 0.1), so that it stops below the
#: caps on these ladders (it does on all three) and the comparison has something to compare.
SMALL = dict(AUTO_BOOT=(10, 10, 20), AUTO_CAL=(10, 10, 20), MC_FRACTION=0.25)


@pytest.fixture
def small_counts(monkeypatch):
    for k, v in SMALL.items():
        monkeypatch.setattr(acc, k, v)


def _ladder(seed):
    # 12 runs of 8 checkpoints: 4 calibration cuts, the cheapest ladder with a calibration.
    return delphi.load_ladder(simulate_noisy(seed, mults=(0.5, 1, 2, 5), ckpts=8))


@pytest.fixture(scope="module")
def pairs():
    """Per simulated ladder (seeds 9, 10, 13: the cheapest of seeds 0-13 to forecast, chosen
    by CPU time alone): (ladder, fixed at the caps, sized 10-20)."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SMALL.items():
            mp.setattr(acc, k, v)
        for seed in (9, 10, 13):
            lad = _ladder(seed)
            out[seed] = (lad, predict_accuracy(lad, TASK, n_boot=20, calibration_draws=20,
                                               seed=seed, **KW),
                         predict_accuracy(lad, TASK, seed=seed, **KW))
    return out


@pytest.mark.parametrize("seed", [9, 10, 13])
def test_sized_interval_is_the_fixed_one_within_its_monte_carlo_error(pairs, seed):
    """Sized (floor 10, cap 20) against fixed at the cap, on three simulated ladders: each
    end within 3 of the sized interval's own Monte-Carlo standard errors (the sized draws
    are a prefix of the fixed ones, so their difference has at most that variance), the
    standard errors reported, and the rule's verdict consistent with them; a sized count at
    both caps is the fixed forecast exactly (prefix-stable seeding)."""
    _, fixed, sized = pairs[seed]
    assert fixed.sizing is None and fixed.n_boot == 20
    sz = sized.sizing
    assert sized.n_boot in (10, 20)
    assert sized.calibration is not None and sized.calibration["draws_per_cut"] in (10, 20)
    se_lo, se_hi, width = sz["mc_se_lower"], sz["mc_se_upper"], sz["mc_width"]
    assert 0 < se_lo < width and 0 < se_hi < width
    assert math.isclose(width, sized.upper - sized.lower, rel_tol=0.05)
    assert abs(sized.lower - fixed.lower) <= 3 * se_lo
    assert abs(sized.upper - fixed.upper) <= 3 * se_hi
    if sized.n_boot < 20 or sized.calibration["draws_per_cut"] < 20:
        # Stopped below a cap only when the rule was met.
        assert sz["met"] and max(se_lo, se_hi) <= SMALL["MC_FRACTION"] * width
    else:
        assert (sized.lower, sized.upper, sized.calibration["scale"]) == \
            (fixed.lower, fixed.upper, fixed.calibration["scale"])
    d = sized.to_dict()["bootstrap"]
    assert d["n"] == sized.n_boot and d["sizing"]["mc_se_lower"] == se_lo


def test_the_rule_stops_below_the_caps(pairs):
    """The comparison above is not only of identical draws: the sized forecasts used fewer."""
    assert any(sized.n_boot < 20 or sized.calibration["draws_per_cut"] < 20
               for _, _, sized in pairs.values())


def test_sizing_that_needs_the_caps_is_the_fixed_count_bit_for_bit(pairs, small_counts,
                                                                    monkeypatch):
    """A rule never met draws up to the caps in blocks: the same draws, refits and noise as
    the fixed count in one block, so the same forecast exactly; met at once, the floors."""
    lad, fixed, _ = pairs[9]
    monkeypatch.setattr(acc, "MC_FRACTION", 0.0)
    capped = predict_accuracy(lad, TASK, seed=9, **KW)
    assert capped.n_boot == 20 and capped.calibration["draws_per_cut"] == 20
    assert capped.sizing["met"] is False
    for k in ("accuracy", "lower", "upper", "mean_lower", "mean_upper", "bootstrap_lower",
              "bootstrap_upper", "task_loss_lower", "task_loss_upper"):
        assert getattr(capped, k) == getattr(fixed, k), k
    assert capped.calibration["scale"] == fixed.calibration["scale"]
    monkeypatch.setattr(acc, "MC_FRACTION", math.inf)
    a = predict_accuracy(lad, TASK, seed=9, calibrate=False, **KW)
    b = predict_accuracy(lad, TASK, seed=9, calibrate=False, **KW)
    assert a.n_boot == 10 and a.sizing["met"] and a.sizing["calibration"] == "off"
    assert a.to_dict() == b.to_dict()


def test_an_explicit_count_is_exactly_that_count(pairs, small_counts):
    """``n_boot`` given: exactly that many main draws, and no sizing without a calibration."""
    lad = pairs[10][0]
    g = predict_accuracy(lad, TASK, n_boot=13, calibrate=False, seed=0, **KW)
    assert g.n_boot == 13 and g.sizing is None and g.to_dict()["bootstrap"]["n"] == 13
    with pytest.raises(delphi.errors.FitError, match=r"n_boot \(CLI --n-boot\) must be None"):
        predict_accuracy(lad, TASK, n_boot=1, **KW)


def test_a_huge_draw_count_is_refused_naming_its_setting(pairs):
    """A count past the bootstrap's cap is an error naming it (it was numpy's OverflowError
    from ``SeedSequence.spawn``, a traceback at the command line)."""
    lad = pairs[10][0]
    with pytest.raises(delphi.errors.FitError, match=r"n_boot \(CLI --n-boot\) .*1,000,000"):
        predict_accuracy(lad, TASK, n_boot=10**20, **KW)
    with pytest.raises(delphi.errors.FitError,
                       match=r"calibration_draws \(CLI --calibration-draws\) .*1,000,000"):
        predict_accuracy(lad, TASK, calibration_draws=10**20, **KW)


@pytest.mark.parametrize("flag", ["--n-boot", "--calibration-draws"])
def test_the_command_line_caps_the_draw_counts(flag, capsys):
    """At the command line too: a usage error naming the option, before any fit."""
    from delphi.cli.main import main
    from delphi.forecasting.uncertainty import MAX_DRAWS
    with pytest.raises(SystemExit) as exc:
        main(["accuracy", "--task", "hellaswag", "--target-params", "7e9",
              "--target-tokens", "2e12", flag, str(10**20)])
    assert exc.value.code == 2
    assert f"argument {flag}: must be at most {MAX_DRAWS:,}" in capsys.readouterr().err


def test_numpy_integer_counts_are_counts(pairs):
    """A notebook's ``np.int64`` count is the same count (it was refused as not an integer);
    a bool is still not a count."""
    lad = pairs[10][0]
    got = predict_accuracy(lad, TASK, n_boot=np.int64(20), calibrate=False, **KW)
    want = predict_accuracy(lad, TASK, n_boot=20, calibrate=False, **KW)
    assert got.to_dict() == want.to_dict()
    with pytest.raises(delphi.errors.FitError, match=r"n_boot \(CLI --n-boot\) must be None"):
        predict_accuracy(lad, TASK, n_boot=True, **KW)
