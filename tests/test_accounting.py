"""FLOP, token and parameter accounting (issue 9, section 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import delphi

from bundled import expect_warnings

# The chinchilla law on a ladder of one tokens-per-parameter ratio: alpha is not identified.
ALPHA_FREE = r"^not identified by the ladder: .* for alpha in \[0, "

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


# ---------------------------------------------------------------- FLOP convention k = C/(6ND)
# The ladder: every run's C is 1.8 x 6·N·D (attention and embedding FLOPs counted).
K18 = """run,params,tokens,flops,loss
r1,1.0e8,2.0e9,2.16e18,3.40
r2,2.0e8,4.0e9,8.64e18,3.20
r3,4.0e8,8.0e9,3.456e19,3.03
r4,8.0e8,1.6e10,1.3824e20,2.89
"""
# The target, and its C in the ladder's convention, by hand: 1.8 x 6 x 6.4e9 x 1.28e11.
TARGET_N, TARGET_D = 6.4e9, 1.28e11
TARGET_C_K18 = 1.8 * 6 * 6.4e9 * 1.28e11          # 8.84736e21


def _k18(tmp_path):
    path = tmp_path / "k18.csv"
    path.write_text(K18)
    return path


def test_flops_convention_is_measured_per_run(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    conv = ladder.flops_convention
    # By hand: 2.16e18 / (6 x 1e8 x 2e9) = 1.8, and so for every row.
    assert conv.source == "given" and conv.n_label == "6·N·D"
    assert conv.runs == ("r1", "r2", "r3", "r4")
    assert conv.k == pytest.approx((1.8,) * 4, rel=1e-12)
    assert conv.median == pytest.approx(1.8, rel=1e-12)
    assert conv.spread == pytest.approx(0.0, abs=1e-12)
    assert conv.drift == pytest.approx(0.0, abs=1e-9) and not conv.drifting
    assert not ladder.warnings                     # 1.8 is a plausible convention, no drift
    # Without a flops column C is 6·N·D: k = 1 by construction.
    no_c = tmp_path / "noc.csv"
    no_c.write_text("\n".join(",".join(line.split(",")[:3] + line.split(",")[4:])
                              for line in K18.splitlines()) + "\n")
    conv = delphi.load_ladder(no_c).flops_convention
    assert conv.source == "6ND" and conv.k == (1.0,) * 4


def _ladder_with_k(k, step=4.0):
    import numpy as np
    import pandas as pd

    n = 1e8 * step ** np.arange(len(k))
    d = 20 * n
    c = np.asarray(k) * 6 * n * d
    return pd.DataFrame({"run": [f"r{i}" for i in range(len(k))], "params": n, "tokens": d,
                         "flops": c, "loss": 1.5 + 40 * c ** -0.07}), c


def test_flops_convention_drift_is_reported_with_every_rung():
    import numpy as np

    k = [1.5, 1.4, 1.3, 1.2]       # attention's share shrinks as the model grows
    frame, c = _ladder_with_k(k)
    with pytest.warns(delphi.LadderWarning, match="FLOP convention"):
        ladder = delphi.Ladder(frame)
    conv = ladder.flops_convention
    # Independent figure: least-squares slope of ln k on ln C (numpy.polyfit), taken from the
    # smallest to the largest rung.
    slope = np.polyfit(np.log(c), np.log(k), 1)[0]
    expected = np.expm1(slope * (np.log(c[-1]) - np.log(c[0])))
    assert expected < -0.1
    assert conv.drift == pytest.approx(expected, rel=1e-9) and conv.drifting
    assert conv.median == pytest.approx(1.35) and conv.spread == pytest.approx(0.3 / 1.35)
    [message] = [w for w in ladder.warnings if "FLOP convention" in w]
    assert f"falls by {abs(expected):.0%}" in message
    for i, value in enumerate(k):                   # every rung's value, not only the worst
        assert f"r{i} {value:.3g}" in message
    assert "median 1.35, range 1.2..1.5" in message


def test_flops_convention_scatter_without_trend_is_not_a_drift():
    import numpy as np
    from scipy.stats import linregress

    k = [0.9, 1.3, 1.0, 0.95, 1.35, 1.2]
    frame, c = _ladder_with_k(k, step=2.0)
    ladder = delphi.Ladder(frame)
    fit = linregress(np.log(c), np.log(k))
    drift = np.expm1(fit.slope * (np.log(c[-1]) - np.log(c[0])))
    assert drift > 0.1 and abs(fit.slope / fit.stderr) < 2    # large, but not a steady trend
    conv = ladder.flops_convention
    assert conv.drift == pytest.approx(drift, rel=1e-9)
    assert conv.drift_t == pytest.approx(fit.slope / fit.stderr, rel=1e-9)
    assert not conv.drifting
    assert not [w for w in ladder.warnings if "FLOP convention" in w]
    # The spread is still there for whoever asks: (max - min) / median.
    assert conv.spread == pytest.approx((1.35 - 0.9) / float(np.median(k)))


def test_target_from_n_and_d_is_converted_with_the_ladders_k(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    kw = dict(law="power", fixed={"E": 1.5}, interval=None)
    by_nd = delphi.predict(ladder, {"params": TARGET_N, "tokens": TARGET_D}, **kw)
    by_c = delphi.predict(ladder, {"flops": TARGET_C_K18}, **kw)
    assert by_nd.target.flops == pytest.approx(TARGET_C_K18, rel=1e-12)
    assert by_nd.loss == pytest.approx(by_c.loss, rel=1e-12)
    assert by_nd.target.flops_source == "6ND x ladder k" and by_nd.target.flops_k == 1.8
    assert any("1.8 x 6·N·D" in n and "FLOP convention" in n for n in by_nd.notes)
    target_json = by_nd.to_dict()["target"]
    assert target_json["flops_source"] == "6ND x ladder k" and target_json["flops_k"] == 1.8
    # What the target used to get: C = 6·N·D, 1.8x too little compute for this ladder.
    before = delphi.predict(ladder, {"flops": 6 * TARGET_N * TARGET_D}, **kw)
    assert before.loss / by_c.loss - 1 > 0.01
    # The extrapolation ratio is in one convention too: 8.84736e21 / 1.3824e20 = 64.
    assert by_nd.extrapolation == pytest.approx(64.0, rel=1e-12)


def test_law_of_n_and_d_reads_n_and_d_and_says_c_is_only_for_the_ratio(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    # Every run has D/N = 20: with E fixed the chinchilla law's alpha is not pinned.
    with pytest.warns(delphi.FitWarning, match=ALPHA_FREE):
        f = delphi.predict(ladder, {"params": TARGET_N, "tokens": TARGET_D}, "chinchilla",
                           fixed={"E": 1.5}, interval=None)
    p = f.fit.params
    by_hand = p["E"] + p["A"] / TARGET_N ** p["alpha"] + p["B"] / TARGET_D ** p["beta"]
    assert f.loss == pytest.approx(by_hand, rel=1e-12)
    assert f.extrapolation == pytest.approx(64.0, rel=1e-12)
    assert any("reads N and D, so C only sets the extrapolation ratio" in n for n in f.notes)


def test_target_c_counted_another_way_than_the_ladder_is_refused_for_a_law_of_c(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    six_nd = 6 * TARGET_N * TARGET_D
    # C = 6ND given with N and D, on a ladder whose C is 1.8 x 6ND: 44% less compute.
    # The message gives the ladder-convention C, k x 6ND (review item 6), not the raw 6ND.
    with pytest.raises(delphi.TargetError, match="ladder's FLOP convention") as err:
        delphi.predict(ladder, {"flops": six_nd, "params": TARGET_N, "tokens": TARGET_D},
                       "power", fixed={"E": 1.5}, interval=None)
    assert f"1.8 x {six_nd:.4g} = {1.8 * six_nd:.4g}" in str(err.value)
    # Counted like the ladder, it is accepted (a target alone allows 0.3..2 x 6ND).
    ok = delphi.predict(ladder, {"flops": TARGET_C_K18, "params": TARGET_N,
                                 "tokens": TARGET_D}, "power", fixed={"E": 1.5}, interval=None)
    assert ok.target.flops == TARGET_C_K18
    with pytest.raises(delphi.TargetError, match="disagree with 6 x params x tokens"):
        delphi.Target(flops=2.5 * six_nd, params=TARGET_N, tokens=TARGET_D)


def test_drifting_convention_shows_the_forecast_at_the_largest_rungs_k():
    frame, c = _ladder_with_k([1.5, 1.4, 1.3, 1.2])
    with pytest.warns(delphi.LadderWarning, match=r"the FLOP convention k = C/\(6·N·D\) falls "
                                                  r"by 20% from the smallest to the largest"):
        ladder = delphi.Ladder(frame)
    n, d = 1e11, 2e12
    f = delphi.predict(ladder, {"params": n, "tokens": d}, "power", fixed={"E": 1.5},
                       interval=None)
    assert f.target.flops == pytest.approx(1.35 * 6 * n * d, rel=1e-12)   # the median k
    p = f.fit.params
    alt = p["E"] + p["A"] * (1.2 * 6 * n * d) ** -p["alpha"]               # the largest rung's
    [note] = [x for x in f.notes if "largest rung's k" in x]
    assert f"{alt:.4f}" in note and "k = 1.2 " in note


# ---------------------------------------------------------------- target outside the design
def test_target_tokens_in_sequences_is_outside_the_design(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    # A target whose D was counted in sequences of 2,048: D/N = 6.25e7 / 6.4e9, while every
    # fitted run has D/N = 20, so the target is 20 / (6.25e7 / 6.4e9) = 2,048x below.
    with pytest.warns(delphi.FitWarning, match="outside the ladder's design"):
        f = delphi.predict(ladder, {"params": TARGET_N, "tokens": TARGET_D / 2048}, "power",
                           fixed={"E": 1.5}, interval=None)
    # A forecast-level warning (review item 15), not an informational note.
    [note] = [x for x in f.warnings if x.startswith("outside the ladder's design")]
    assert not [x for x in f.notes if "outside the ladder's design" in x]
    assert f.to_dict()["warnings"] == list(f.warnings)
    assert "2,048x below" in note and "sequence length of 2048" in note
    assert f.extrapolation < 1                     # "0.03x": alone it read as interpolation


def test_target_n_far_beyond_the_ladder_is_named_for_laws_of_n_and_d(tmp_path):
    ladder = delphi.load_ladder(_k18(tmp_path))
    with expect_warnings(delphi.FitWarning, "extrapolated that far in model size", ALPHA_FREE,
                         r"^the target is 1.56e\+04x the largest fitted run's compute: more "
                         r"than four orders of magnitude of extrapolation"):
        f = delphi.predict(ladder, {"params": 1e11, "tokens": 2e12}, "chinchilla",
                           fixed={"E": 1.5}, interval=None)
    [note] = [x for x in f.warnings if "target's N" in x]
    assert "125x above the largest N fitted" in note          # 1e11 / 8e8, by hand
    # Within 10x in N and in D/N: no design note.
    with pytest.warns(delphi.FitWarning, match=ALPHA_FREE):
        inside = delphi.predict(ladder, {"params": TARGET_N, "tokens": TARGET_D},
                                "chinchilla", fixed={"E": 1.5}, interval=None)
    assert not [x for x in inside.notes + inside.warnings if "outside the ladder's design" in x]


# ---------------------------------------------------------------- CLI
def test_cli_target_n_and_d_matches_target_flops_and_says_so(tmp_path, capsys):
    import json

    from delphi.cli import main

    path = str(_k18(tmp_path))
    common = ["--floor", "1.5", "--law", "power", "--json"]
    assert main(["predict", path, "--target-params", "6.4e9", "--target-tokens", "1.28e11",
                 *common]) == 0
    by_nd = json.loads(capsys.readouterr().out)
    assert main(["predict", path, "--target-flops", repr(TARGET_C_K18), *common]) == 0
    by_c = json.loads(capsys.readouterr().out)
    assert by_nd["prediction"]["loss"] == pytest.approx(by_c["prediction"]["loss"], rel=1e-12)
    assert by_nd["target"]["flops_source"] == "6ND x ladder k"
    assert any("ladder's FLOP convention" in n for n in by_nd["notes"])
    assert by_nd["ladder"]["flops_convention"]["k_median"] == pytest.approx(1.8)
    assert main(["predict", path, "--target-params", "6.4e9", "--target-tokens", "1.28e11",
                 "--floor", "1.5", "--law", "power"]) == 0
    assert "target C = 1.8 x 6·N·D = 8.847e+21 FLOPs" in capsys.readouterr().out
    assert main(["fit", path, "--law", "power", "--floor", "1.5", "--json"]) == 0
    conv = json.loads(capsys.readouterr().out)["ladder"]["flops_convention"]
    assert conv["k_median"] == pytest.approx(1.8) and conv["drifting"] is False
    assert conv["k_by_run"] == pytest.approx({"r1": 1.8, "r2": 1.8, "r3": 1.8, "r4": 1.8})


def test_registry_records_a_converted_targets_convention(tmp_path):
    from delphi.registry import Registry

    ladder = delphi.load_ladder(_k18(tmp_path))
    f = delphi.predict(ladder, {"params": TARGET_N, "tokens": TARGET_D}, "power",
                       fixed={"E": 1.5}, interval=None)
    entry = Registry(tmp_path / "r.jsonl").register(f, id="k18")
    assert entry.target.flops == pytest.approx(TARGET_C_K18, rel=1e-12)
    assert entry.target.facts == {"flops_source": "6ND x ladder k", "flops_k": 1.8}
    assert any("FLOP convention" in n for n in entry.forecast.notes)


def test_default_law_with_one_tokens_per_param_is_power_in_c(tmp_path, capsys):
    # Issue 9 §2, as a user types it: no --law. Every run has D/N = 20, so N and D move together
    # and chinchilla's split is arbitrary (beta ends at its bound). The default is then a power
    # law in C and the N, D target gives the same forecast as the C target.
    import json

    from delphi.cli import main
    from delphi.forecast import default_law

    path = str(_k18(tmp_path))
    ladder = delphi.load_ladder(path)
    assert default_law(ladder, delphi.Target(params=TARGET_N, tokens=TARGET_D)) == "power"
    assert main(["predict", path, "--target-params", "6.4e9", "--target-tokens", "1.28e11",
                 "--floor", "1.5", "--json"]) == 0
    by_nd = json.loads(capsys.readouterr().out)
    assert main(["predict", path, "--target-flops", repr(TARGET_C_K18), "--floor", "1.5",
                 "--json"]) == 0
    by_c = json.loads(capsys.readouterr().out)
    assert by_nd["law"] == by_c["law"] == "power"
    assert by_nd["prediction"]["loss"] == pytest.approx(by_c["prediction"]["loss"], rel=1e-12)
    assert any("D/N are 20 for every run" in n for n in by_nd["notes"])
    # A ladder that spans D/N (here 10..40) keeps chinchilla as the default.
    table = pd.DataFrame({"run": ["a", "b", "c", "d"], "params": [1e8, 2e8, 4e8, 8e8],
                          "tokens": [1e9, 8e9, 8e9, 8e9], "loss": [3.5, 3.1, 3.0, 2.95]})
    assert default_law(delphi.Ladder(table),
                              delphi.Target(params=TARGET_N, tokens=TARGET_D)) == "chinchilla"


# ---------------------------------------------------------------- review of issue 9
def test_cli_design_warning_is_a_warning_line_and_in_json_warnings(tmp_path, capsys):
    from delphi.cli import main

    path = str(_k18(tmp_path))
    args = ["predict", path, "--target-params", "6.4e9", "--target-tokens", repr(TARGET_D / 2048),
            "--floor", "1.5", "--law", "power", "--interval", "none"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "warning    outside the ladder's design" in out
    assert "note       outside the ladder's design" not in out
    import json
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(w.startswith("outside the ladder's design") for w in data["warnings"])
    assert not any("outside the ladder's design" in n for n in data["notes"])


def test_implausible_ladder_k_blames_the_ladder_not_the_targets_c(tmp_path):
    # Tokens counted in sequences of 4,096: C / (6 N D) = 4,096 for every run, outside any
    # FLOP convention (0.3..2): the ladder's N x D is what is off, so no advice to count the
    # target's C "the same way" (review item 16).
    n = np.array([1e8, 2e8, 4e8, 8e8])
    d_tokens = 20 * n
    c = 6 * n * d_tokens
    frame = pd.DataFrame({"run": [f"r{i}" for i in range(4)], "params": n,
                          "tokens": d_tokens / 4096, "flops": c,
                          "loss": 1.5 + 300 * c ** -0.12})
    path = tmp_path / "seq.csv"
    frame.to_csv(path, index=False)
    # The ladder itself is suspect on load: its tokens column counts sequences.
    with expect_warnings(delphi.LadderWarning,
                         r"tokens per parameter \(D/N\) is below the plausible range .* the "
                         r"column likely counts sequences",
                         r"the flops column is 4.1e\+03 x 6·N·D on median .* the tokens "
                         r"column is the likely culprit"):
        ladder = delphi.load_ladder(path)
    f = delphi.predict(ladder, {"flops": 1e22}, "power", fixed={"E": 1.5}, interval=None)
    assert not [x for x in f.notes if "counted the same way" in x]
    [note] = [x for x in f.notes if "accounting is suspect" in x]
    assert f"is {4096:.3g} (median over 4 runs)" in note
    # A plausible k (1.8) still gets the reminder.
    k18 = delphi.predict(delphi.load_ladder(_k18(tmp_path)), {"flops": 1e22}, "power",
                         fixed={"E": 1.5}, interval=None)
    assert [x for x in k18.notes if "counted the same way" in x]


def test_cli_fit_text_shows_the_flop_convention_and_the_default_law(tmp_path, capsys):
    from delphi.cli import main

    path = str(_k18(tmp_path))
    # Every run has D/N = 20: N and D cannot be separated, so fit's default is predict's,
    # power in C (review item 4), not chinchilla (which would need 5 points).
    assert main(["fit", path]) == 0
    out = capsys.readouterr().out
    assert "law        power" in out
    # k = C / (6 N D) = 1.8 for all four runs, no drift (review item 18).
    assert "flops      C = k x 6·N·D: median k 1.8, range 1.8..1.8 over 4 runs" in out
