"""FLOP, token and parameter accounting (issue 9, section 2)."""

from __future__ import annotations

import pytest

import delphi

# An MoE ladder: 10x more total than active parameters, compute from the active ones.
MOE = """run,params,active_params,tokens,loss
m1,1e9,1e8,2e9,3.4
m2,2e9,2e8,4e9,3.2
m3,4e9,4e8,8e9,3.03
m4,8e9,8e8,1.6e10,2.89
m5,1.6e10,1.6e9,3.2e10,2.78
"""


def test_moe_target_without_active_params_is_refused(tmp_path):
    path = tmp_path / "moe.csv"
    path.write_text(MOE)
    ladder = delphi.load_ladder(path)
    # Before: C = 6 x total N x D, ten times the compute the ladder's convention gives.
    with pytest.raises(delphi.TargetError, match="target-active-params"):
        delphi.predict(ladder, {"params": 1e11, "tokens": 2e11}, "power", interval=None)
    with_active = delphi.predict(ladder, {"params": 1e11, "tokens": 2e11,
                                          "active_params": 1e10}, "power", interval=None)
    # The right value: the same law at C = 6 x 1e10 x 2e11 = 1.2e22 FLOPs, given directly.
    direct = delphi.predict(ladder, {"flops": 6 * 1e10 * 2e11}, "power", interval=None)
    assert with_active.loss == pytest.approx(direct.loss, rel=1e-12)


def test_dense_ladder_target_from_n_and_d_is_unchanged(tmp_path):
    path = tmp_path / "dense.csv"
    path.write_text(MOE.replace(",active_params", "").replace(",1e8,", ",").replace(",2e8,", ",")
                    .replace(",4e8,", ",").replace(",8e8,", ",").replace(",1.6e9,", ","))
    ladder = delphi.load_ladder(path)
    a = delphi.predict(ladder, {"params": 1e11, "tokens": 2e11}, "power", interval=None)
    b = delphi.predict(ladder, {"flops": 6 * 1e11 * 2e11}, "power", interval=None)
    assert a.loss == pytest.approx(b.loss, rel=1e-12)
