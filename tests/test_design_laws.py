"""Issue 21, item 1: the default law follows the ladder's design. A fixed-data size sweep
(every run at one token count D, N varied) gets ``power-n``, L(N) = E + A/N^alpha (Kaplan et
al. 2020, Eq. 1.1 with a floor); one D/N gets ``power`` in C; both varied, ``chinchilla``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import delphi
from bundled import expect_warnings
from delphi.cli.main import main
from delphi.errors import FitWarning, TargetError, for_cli
from delphi.forecast import default_law, one_token_count
from delphi.laws import CHINCHILLA, POWER_N, get_law
from delphi.selection import default_candidates

#: Hoffmann et al. 2022's fitted Chinchilla law (Approach 3), the truth of the sweeps below.
TRUTH = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
SIZES = np.array([2e7, 5e7, 1e8, 2e8, 5e8, 1e9])


def _truth(n, d):
    return CHINCHILLA.predict(TRUTH, {"params": np.atleast_1d(n).astype(float),
                                      "tokens": np.broadcast_to(d, np.shape(np.atleast_1d(n)))
                                      .astype(float)})


def sweep(d=2e10, noise=0.0, seed=0, jitter=0.0) -> delphi.Ladder:
    """Six sizes at one token count ``d`` (times 1 + U(-jitter, jitter) per run)."""
    rng = np.random.default_rng(seed)
    tokens = d * (1 + rng.uniform(-jitter, jitter, SIZES.size))
    loss = _truth(SIZES, tokens) * np.exp(rng.normal(0, noise, SIZES.size))
    return delphi.load_ladder(pd.DataFrame({"run": [f"n{i}" for i in range(SIZES.size)],
                                            "params": SIZES, "tokens": tokens, "loss": loss}))


def test_power_n_is_the_chinchilla_law_at_one_d():
    # At one D, Chinchilla's law is E' + A/N^alpha with E' = E + B/D^beta: power-n recovers
    # it from noise-free runs to the optimiser's precision.
    d = 2e10
    f = delphi.fit(sweep(d), "power-n")
    assert f.law is POWER_N and f.converged
    assert f.params["E"] == pytest.approx(TRUTH["E"] + TRUTH["B"] / d ** TRUTH["beta"], rel=1e-4)
    assert f.params["A"] == pytest.approx(TRUTH["A"], rel=1e-3)
    assert f.params["alpha"] == pytest.approx(TRUTH["alpha"], rel=1e-4)
    np.testing.assert_allclose(f.predict({"params": [7e9]}), _truth(7e9, d), rtol=1e-5)
    assert get_law("power-n") is POWER_N


def test_the_default_law_follows_the_design():
    fixed_d = sweep()
    assert one_token_count(fixed_d) == pytest.approx(2e10)
    assert default_law(fixed_d) == "power-n"
    assert default_law(fixed_d, delphi.Target(params=3e9)) == "power-n"
    assert default_law(fixed_d, delphi.Target(params=3e9, tokens=2e10)) == "power-n"
    assert default_law(fixed_d, delphi.Target(flops=1e21)) == "power"    # C is given
    # D within 1% is one D (logged token counts differ by a batch); 5% apart is not.
    assert default_law(sweep(jitter=0.004)) == "power-n"
    varied = sweep(jitter=0.05)
    assert one_token_count(varied) is None
    # One D/N: power in C; D/N varied over 2x and more: chinchilla.
    n = SIZES
    one_ratio = delphi.load_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(n.size)],
                                                 "params": n, "tokens": 20 * n,
                                                 "loss": _truth(n, 20 * n)}))
    assert one_token_count(one_ratio) is None and default_law(one_ratio) == "power"
    grid_n = np.repeat(SIZES[:3], 3)
    grid_d = grid_n * np.tile([10.0, 20.0, 40.0], 3)
    grid = delphi.load_ladder(pd.DataFrame({"run": [f"g{i}" for i in range(grid_n.size)],
                                            "params": grid_n, "tokens": grid_d,
                                            "loss": _truth(grid_n, grid_d)}))
    assert default_law(grid) == "chinchilla"
    assert default_law(grid, delphi.Target(params=1e9, tokens=2e10)) == "chinchilla"


def test_predict_on_a_fixed_d_sweep_notes_the_design_and_warns_on_another_d():
    d = 2e10
    lad = sweep(d, noise=0.003, seed=1)
    f = delphi.predict(lad, {"params": 3e9})
    assert f.fit.law.name == "power-n"
    # 3x the largest N, run noise 0.3%: the truth (the loss at the ladder's D) within 1%.
    assert f.loss == pytest.approx(float(_truth(3e9, d)[0]), rel=0.01)
    assert f.interval is not None and f.interval.lower < f.loss < f.interval.upper
    [note] = [n for n in f.notes if n.startswith("law 'power-n' in N alone")]
    assert "D = 2e+10 tokens" in note and "does not measure D's effect" in note
    assert not any("differs from the ladder's one token count" in w for w in f.warnings)
    same_d = delphi.predict(lad, {"params": 3e9, "tokens": d})
    assert same_d.loss == f.loss and not any("token count" in w for w in same_d.warnings)
    with pytest.warns(FitWarning, match="target's D = 6e\\+10 tokens differs from the ladder's"):
        other = delphi.predict(lad, {"params": 3e9, "tokens": 6e10})
    assert other.loss == f.loss         # power-n reads N only
    [w] = [w for w in other.warnings if "differs from the ladder's one token count" in w]
    assert "D = 6e+10" in w and "2e+10" in w


def test_a_target_of_n_alone_needs_a_law_in_n():
    lad = sweep()
    with pytest.raises(TargetError, match=r"law 'power' needs the target's flops; give flops "
                                          r"\(CLI --target-flops\)"):
        delphi.predict(lad, {"params": 3e9}, "power")
    # F15: through the API the message names both spellings (it named the CLI flags only)
    with pytest.raises(TargetError, match=r"a target needs flops \(CLI --target-flops\), or "
                                          r"both params \(CLI --target-params\) and tokens "
                                          r"\(CLI --target-tokens\)") as err:
        delphi.Target(tokens=1e10)
    assert for_cli(str(err.value)).startswith("a target needs --target-flops, or both "
                                              "--target-params and --target-tokens")
    with pytest.raises(TargetError, match=r"a target needs flops \(CLI --target-flops\)"):
        delphi.predict(lad, {})


def test_candidates_on_a_fixed_d_sweep_are_the_laws_it_can_identify():
    names = [c.law for c in default_candidates(sweep())]
    assert names == ["power", "power-n"]          # chinchilla's B and beta: unidentified
    assert "power-n" not in [c.law for c in default_candidates(sweep(jitter=0.05))]


def test_cli_predicts_a_fixed_d_sweep_from_n_alone(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    sweep(noise=0.003, seed=1).table[["run", "params", "tokens", "loss"]].to_csv(path,
                                                                                index=False)
    assert main(["predict", str(path), "--target-params", "3e9", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["law"] == "power-n" and doc["target"]["params"] == 3e9
    assert doc["prediction"]["loss"] == pytest.approx(float(_truth(3e9, 2e10)[0]), rel=0.01)
    assert any(n.startswith("law 'power-n' in N alone") for n in doc["notes"])


def test_a_law_in_c_on_a_fixed_d_sweep_says_so_too():
    # C = 6 N D is N times a constant here: the power law in C is the same model, and a
    # target with another D would be read as more or less compute: said, and warned.
    lad = sweep(noise=0.003, seed=1)
    f = delphi.predict(lad, {"flops": 6 * 3e9 * 2e10})
    assert f.fit.law.name == "power"
    assert any(n.startswith("law 'power' in C alone: every run was trained on D = 2e+10")
               for n in f.notes)
    with pytest.warns(FitWarning, match="law 'power' predicts the target's extra or missing "
                                        "tokens as compute"):
        delphi.predict(lad, {"params": 3e9, "tokens": 6e10}, "power")


def test_power_n_on_a_ladder_that_varies_d_warns_that_d_is_taken_as_noise():
    n = np.repeat(SIZES[:3], 3)
    d = n * np.tile([10.0, 20.0, 40.0], 3)
    lad = delphi.load_ladder(pd.DataFrame({"run": [f"g{i}" for i in range(n.size)],
                                           "params": n, "tokens": d, "loss": _truth(n, d)}))
    # (N alone cannot fit this grid well: the profiles of E and alpha may be flat too.) The
    # warning is about the design, before any interval: no bootstrap (2 s of refits) here.
    with expect_warnings(FitWarning, r"law 'power-n' reads N alone but the ladder's runs "
                                     r"were trained on D = 2e\+08\.\.4e\+09 tokens",
                         may=(r"not identified by the ladder: .* for (E|alpha) in",)):
        delphi.predict(lad, {"params": 3e9}, "power-n", divergence_threshold=float("inf"),
                       interval=None)


def test_auto_names_what_the_target_lacks_for_a_skipped_candidate():
    f = delphi.predict(sweep(noise=0.003, seed=1), {"params": 3e9}, "auto")
    assert f.fit.law.name == "power-n"
    [n] = [n for n in f.notes if "not considered" in n]
    assert n.startswith("candidate(s) power not considered: the target gives no flops")
    assert "target.params" in n and "target.tokens" in n     # C = 6ND: N with D also works


def test_delphi_fit_states_what_the_design_lets_the_law_measure(tmp_path, capsys):
    # The fit alone (no target) says what predict says of the design: a fixed-D sweep's law
    # in N does not measure D, in the text report and in --json.
    path = tmp_path / "sweep.csv"
    sweep(noise=0.002).table[["run", "params", "tokens", "loss"]].to_csv(path, index=False)
    assert main(["fit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "note       law 'power-n' in N alone: every run was trained on D = 2e+10" in out
    assert main(["fit", str(path), "--json"]) == 0
    design = json.loads(capsys.readouterr().out)["design"]
    assert design["notes"] and "does not measure D's effect" in design["notes"][0]
    assert design["warnings"] == []
