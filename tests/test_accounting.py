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


# Tokens counted in sequences of 4,096 (the isoFLOP rows): D/N is about 0.002.
SEQUENCES = """run,params,tokens,flops,loss
isoflop-1e+18-d768-L8-B16,272513792,543440,2.999993e18,3.7304
isoflop-3e+18-d896-L10-B32,358306688,1154528,9.000084e18,3.4946
isoflop-6e+18-d1280-L13-B32,669160448,1140736,1.800022e19,3.3554
isoflop-1e+19-d1536-L16-B32,998036992,1216448,2.999968e19,3.2754
isoflop-3e+19-d1792-L18-B64,1384584448,2578112,9.000041e19,3.0905
isoflop-1e+20-d2304-L23-B128,2544614912,4545280,3.000003e20,2.9135
"""


def test_tokens_counted_in_sequences_are_named_with_the_sequence_length(tmp_path):
    path = tmp_path / "seq.csv"
    path.write_text(SEQUENCES)
    with pytest.warns(delphi.LadderWarning):
        ladder = delphi.load_ladder(path)
    # Independent figure: the median over rows of C / (6 N D), from the CSV text itself.
    rows = [line.split(",") for line in SEQUENCES.splitlines()[1:]]
    k = sorted(float(c) / (6 * float(n) * float(d)) for _, n, d, c, _ in rows)
    median = (k[2] + k[3]) / 2
    assert abs(median / 4096 - 1) < 0.2 and f"is {median:.4g}" in " ".join(ladder.warnings)
    [tokens] = [w for w in ladder.warnings if "tokens per parameter" in w]
    assert "sequence length of 4096" in tokens
    [flops] = [w for w in ladder.warnings if "the flops column is" in w]
    assert "tokens column is the likely culprit" in flops  # not "forward-only"
    # Without the flops column there used to be no warning at all.
    no_flops = tmp_path / "seq2.csv"
    no_flops.write_text("\n".join(",".join(line.split(",")[:3] + line.split(",")[4:])
                                  for line in SEQUENCES.splitlines()) + "\n")
    with pytest.warns(delphi.LadderWarning, match="tokens per parameter"):
        delphi.load_ladder(no_flops)
