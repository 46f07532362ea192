"""Tests of delphi.schedules: schedule shapes, parsing, logged LRs, S1/S2/h and the
multi-power-law loss-reduction sum, against hand computations and naive loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from delphi.errors import LadderError, LawError
from delphi.schedules import (LoggedSchedule, Schedule, features, momentum_filter, multipower_groups,
                             multipower_ld, multipower_ld_grid)


# --------------------------------------------------------------------------- shapes


def _central_differences(f, theta, rel_step=1e-6):
    """Central differences of f (theta -> (n,)) in each parameter: shape (n, len(theta))."""
    theta = np.asarray(theta, dtype=float)
    cols = []
    for j in range(len(theta)):
        h = rel_step * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        cols.append((f(up) - f(down)) / (2 * h))
    return np.stack(cols, axis=1)

def test_cosine_shape():
    s = Schedule("cosine", peak_lr=1e-3, total_steps=1050, warmup_steps=50, final_ratio=0.1)
    # warmup: peak * s / W
    assert s.lr_at(25) == pytest.approx(5e-4, rel=1e-12)
    assert s.lr_at(1) == pytest.approx(2e-5, rel=1e-12)
    assert s.lr_at(50) == pytest.approx(1e-3, rel=1e-12)
    # first decay step: progress 1/1000
    assert s.lr_at(51) == pytest.approx(1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi / 1000))))
    # midpoint of the decay (step 50 + 500): (peak + final * peak) / 2
    assert s.lr_at(550) == pytest.approx((1e-3 + 1e-4) / 2, rel=1e-12)
    # last step: final * peak
    assert s.lr_at(1050) == pytest.approx(1e-4, rel=1e-12)
    lrs = s.lrs()
    assert lrs.shape == (1050,)
    assert lrs[549] == pytest.approx(5.5e-4, rel=1e-12)
    assert np.argmax(lrs) == 49
    assert np.all(np.diff(lrs[49:]) <= 0)
    # vectorised: same shape as input
    np.testing.assert_allclose(s.lr_at(np.array([[25, 550], [1050, 50]])),
                               [[5e-4, 5.5e-4], [1e-4, 1e-3]], rtol=1e-12)


def test_linear_shape_no_warmup():
    s = Schedule("linear", peak_lr=2.0, total_steps=10, final_ratio=0.1)
    # lr = 2 * (1 - 0.9 * s / 10)
    np.testing.assert_allclose(s.lrs(), [2 * (1 - 0.09 * k) for k in range(1, 11)], rtol=1e-12)
    assert s.lr_at(5) == pytest.approx(1.1)
    assert s.lr_at(10) == pytest.approx(0.2)


def test_constant_shape_with_warmup():
    s = Schedule("constant", peak_lr=3.0, total_steps=8, warmup_steps=4)
    np.testing.assert_allclose(s.lrs(), [0.75, 1.5, 2.25, 3, 3, 3, 3, 3], rtol=1e-12)
    assert Schedule("constant", peak_lr=3.0, total_steps=4, warmup_steps=4).lr_at(4) == 3.0


def test_wsd_linear_cooldown():
    s = Schedule("wsd", peak_lr=1.0, total_steps=100, warmup_steps=10, decay_fraction=0.2)
    assert s.decay_steps == 20
    lrs = s.lrs()
    assert lrs[4] == pytest.approx(0.5)           # warmup step 5
    np.testing.assert_array_equal(lrs[9:80], 1.0)  # stable plateau, steps 10..80
    assert s.lr_at(81) == pytest.approx(1 - 1 / 20)
    assert s.lr_at(90) == pytest.approx(0.5)       # cooldown progress 1/2
    assert s.lr_at(100) == 0.0


def test_wsd_one_minus_sqrt_cooldown():
    s = Schedule("wsd", peak_lr=2.0, total_steps=100, warmup_steps=10, decay_fraction=0.2,
                 cooldown="1-sqrt", final_ratio=0.1)
    assert s.lr_at(80) == 2.0
    # step 85: q = 0.25 -> 2 * (0.1 + 0.9 * (1 - 0.5)) = 1.1
    assert s.lr_at(85) == pytest.approx(1.1)
    # step 90: q = 0.5 -> 2 * (0.1 + 0.9 * (1 - sqrt(0.5)))
    assert s.lr_at(90) == pytest.approx(2 * (0.1 + 0.9 * (1 - math.sqrt(0.5))))
    assert s.lr_at(100) == pytest.approx(0.2)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="exp"), "valid kinds: constant, cosine, linear, wsd"),
    (dict(peak_lr=0.0), "peak_lr"),
    (dict(peak_lr=float("nan")), "peak_lr"),
    (dict(total_steps=0), "total_steps"),
    (dict(total_steps=10.0), "total_steps"),
    (dict(warmup_steps=-1), "warmup_steps"),
    (dict(warmup_steps=101), "exceeds total_steps"),
    (dict(warmup_steps=100), "at least one step after warmup"),
    (dict(final_ratio=1.5), "final_ratio"),
    (dict(kind="wsd", decay_fraction=0.0), "decay_fraction"),
    (dict(kind="wsd", decay_fraction=0.001), "0 steps"),
    (dict(kind="wsd", warmup_steps=90, decay_fraction=0.2), "overlap"),
    (dict(kind="wsd", cooldown="cosine"), "valid cooldowns: linear, 1-sqrt"),
])
def test_schedule_validation(kwargs, match):
    base = dict(kind="cosine", peak_lr=1e-3, total_steps=100)
    with pytest.raises(LadderError, match=match):
        Schedule(**{**base, **kwargs})


def test_lr_at_rejects_bad_steps():
    s = Schedule("constant", peak_lr=1.0, total_steps=10)
    with pytest.raises(LadderError, match="1..10.*got 0"):
        s.lr_at(0)
    with pytest.raises(LadderError, match="got 11"):
        s.lr_at([3, 11])
    with pytest.raises(LadderError, match="whole"):
        s.lr_at(2.5)


# --------------------------------------------------------------------------- parsing

def test_parse_examples():
    c = Schedule.parse("cosine:warmup=50,final=0.1", peak_lr=1e-3, total_steps=1000)
    assert c == Schedule("cosine", 1e-3, 1000, warmup_steps=50, final_ratio=0.1)
    w = Schedule.parse("wsd:warmup=100,decay=0.2,cooldown=1-sqrt,final=0", peak_lr=2e-3,
                       total_steps=1000)
    assert w == Schedule("wsd", 2e-3, 1000, warmup_steps=100, decay_fraction=0.2,
                         cooldown="1-sqrt", final_ratio=0.0)
    assert Schedule.parse("constant", peak_lr=1.0, total_steps=5) == Schedule("constant", 1.0, 5)
    lin = Schedule.parse(" Linear : final = 0.1 ", peak_lr=1.0, total_steps=5)
    assert lin == Schedule("linear", 1.0, 5, final_ratio=0.1)


@pytest.mark.parametrize("sched", [
    Schedule("cosine", 1e-3, 1000, warmup_steps=50, final_ratio=0.1),
    Schedule("linear", 3e-4, 200, final_ratio=0.0),
    Schedule("constant", 1e-2, 7, warmup_steps=3),
    Schedule("wsd", 2e-3, 1000, warmup_steps=100, decay_fraction=0.25, cooldown="1-sqrt",
             final_ratio=0.05),
])
def test_parse_round_trip(sched):
    again = Schedule.parse(sched.spec(), peak_lr=sched.peak_lr, total_steps=sched.total_steps)
    assert again == sched
    np.testing.assert_array_equal(again.lrs(), sched.lrs())


@pytest.mark.parametrize("text, match", [
    ("exp:warmup=5", "unknown schedule kind 'exp'.*valid kinds: constant, cosine, linear, wsd"),
    ("cosine:decay=0.2", "unknown key 'decay'.*valid keys: warmup, final"),
    ("constant:final=0.1", "valid keys: warmup$"),
    ("wsd:cool=linear", "valid keys: warmup, decay, cooldown, final"),
    ("cosine:warmup", "malformed"),
    ("cosine:warmup=1.5", "whole number"),
    ("cosine:final=abc", "final must be a number"),
    ("cosine:final=0.1,final=0.2", "twice"),
    ("cosine:final=1.5", "final_ratio"),
    ("", "non-empty"),
])
def test_parse_errors(text, match):
    with pytest.raises(LadderError, match=match):
        Schedule.parse(text, peak_lr=1e-3, total_steps=100)


# --------------------------------------------------------------------------- logged

def test_logged_schedule_interpolation():
    ls = LoggedSchedule.from_logged([400, 200, 600], [1e-3, 1e-3, 5e-4], total_steps=700)
    assert ls.peak_lr == 1e-3
    assert ls.total_steps == 700
    lrs = ls.lrs()
    assert lrs.shape == (700,)
    assert lrs[99] == pytest.approx(5e-4)     # step 100: halfway from (0, 0) to (200, 1e-3)
    assert lrs[0] == pytest.approx(5e-6)      # step 1
    assert lrs[199] == pytest.approx(1e-3)    # step 200 (logged)
    assert lrs[299] == pytest.approx(1e-3)    # step 300, between two equal points
    assert lrs[499] == pytest.approx(7.5e-4)  # step 500, halfway from 1e-3 to 5e-4
    assert lrs[649] == pytest.approx(5e-4)    # step 650: held at the last logged value
    np.testing.assert_allclose(ls.lr_at([100, 500]), [5e-4, 7.5e-4])


def test_logged_schedule_defaults_duplicates_and_step0():
    ls = LoggedSchedule.from_logged([0, 10, 10, 20], [0.5, 1.0, 1.0, 0.0])
    assert ls.total_steps == 20
    assert ls.lr_at(5) == pytest.approx(0.75)  # logged step 0 is used, not the 0 anchor
    assert ls.lr_at(15) == pytest.approx(0.5)
    assert list(ls.steps) == [0, 10, 20]


def test_logged_schedule_reproduces_a_cosine():
    exact = Schedule("cosine", 1e-3, 4000, warmup_steps=200, final_ratio=0.1)
    logged_steps = np.arange(200, 4001, 200)
    ls = LoggedSchedule.from_logged(logged_steps, exact.lr_at(logged_steps))
    np.testing.assert_allclose(ls.lrs(), exact.lrs(), atol=1e-3 * 0.9 * (np.pi / 19) ** 2 / 16)
    f_exact = features(exact, [1000, 4000])
    f_logged = features(ls, [1000, 4000])
    np.testing.assert_allclose(f_logged["S1"], f_exact["S1"], rtol=1e-3)


@pytest.mark.parametrize("steps, lr, total, match", [
    ([1, 2], [1.0], None, "equal length"),
    ([], [], None, "non-empty"),
    ([1.5, 2], [1.0, 1.0], None, "whole numbers"),
    ([-1, 2], [1.0, 1.0], None, "whole numbers"),
    ([1, 2], [1.0, -1.0], None, "at step 2"),
    ([1, 2], [1.0, float("nan")], None, "at step 2"),
    ([5, 5], [1.0, 2.0], None, "step 5 is logged twice"),
    ([1, 2], [0.0, 0.0], None, "every logged learning rate is 0"),
    ([0], [1.0], None, "total_steps"),
    ([1, 2], [1.0, 1.0], 0, "total_steps"),
])
def test_logged_schedule_errors(steps, lr, total, match):
    with pytest.raises(LadderError, match=match):
        LoggedSchedule.from_logged(steps, lr, total)


# --------------------------------------------------------------------------- features

def _naive_s2(lrs, lam):
    """Tissue et al. 2024 Eq. 3 by a Python loop; eta_0 = peak, warmup drops ignored."""
    peak_step = int(np.argmax(lrs)) + 1
    m, total, out = 0.0, 0.0, []
    for i in range(1, len(lrs) + 1):
        drop = lrs[i - 2] - lrs[i - 1] if i > peak_step else 0.0
        m = lam * m + drop
        total += m
        out.append(total)
    return np.array(out)


def test_features_hand_computed():
    lrs = np.array([0.5, 1.0, 1.0, 0.6, 0.2])  # 2 warmup steps, peak at step 2
    f = features(lrs, [1, 3, 4, 5], momentum=0.5)
    np.testing.assert_allclose(f["S1"], [0.5, 2.5, 3.1, 3.3])
    # drops: 0 (warmup), 0 (peak), 0, 0.4, 0.4; m = 0, 0, 0, 0.4, 0.5*0.4 + 0.4 = 0.6
    np.testing.assert_allclose(f["S2"], [0.0, 0.0, 0.4, 1.0])
    np.testing.assert_allclose(f["h"], [0.5, 1.0, 0.6, 0.2])
    np.testing.assert_allclose(f["lr"], [0.5, 1.0, 0.6, 0.2])
    assert set(f) == {"S1", "S2", "h", "lr"}
    # an explicit peak_lr rescales h only
    g = features(lrs, [4], peak_lr=2.0, momentum=0.5)
    assert g["h"][0] == pytest.approx(0.3) and g["S2"][0] == pytest.approx(0.4)


@pytest.mark.parametrize("sched", [
    Schedule("cosine", 1e-3, 3000, warmup_steps=100, final_ratio=0.1),
    Schedule("wsd", 2e-3, 3000, warmup_steps=50, decay_fraction=0.3, cooldown="1-sqrt"),
    Schedule("linear", 5e-4, 3000, final_ratio=0.0),
])
def test_features_match_loops(sched):
    lrs = sched.lrs()
    steps = np.array([1, 10, 100, 101, 1500, 2999, 3000])
    f = features(sched, steps)
    s1_loop = []
    for s in steps:
        acc = 0.0
        for i in range(s):
            acc += lrs[i]
        s1_loop.append(acc)
    np.testing.assert_allclose(f["S1"], s1_loop, rtol=1e-12)
    np.testing.assert_allclose(f["S2"], _naive_s2(lrs, 0.999)[steps - 1], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(f["h"], lrs[steps - 1] / sched.peak_lr, rtol=1e-12)
    np.testing.assert_allclose(f["lr"], lrs[steps - 1], rtol=0)


def test_constant_schedule_has_no_annealing():
    sched = Schedule("constant", 1e-3, 500, warmup_steps=50)
    steps = np.array([10, 50, 51, 500])
    f = features(sched, steps)
    np.testing.assert_array_equal(f["S2"], 0.0)
    np.testing.assert_allclose(f["S1"], [1e-3 * 55 / 50, 1e-3 * 1275 / 50,
                                         1e-3 * (1275 / 50 + 1), 1e-3 * (1275 / 50 + 450)])
    res = multipower_ld(sched, steps, C=2.0, beta=0.5, gamma=0.6)
    np.testing.assert_array_equal(res.ld, 0.0)
    np.testing.assert_array_equal(res.grad, 0.0)
    assert res.grad.shape == (4, 3)


def test_features_errors():
    with pytest.raises(LadderError, match="momentum"):
        features([1.0, 1.0], [1], momentum=1.0)
    with pytest.raises(LadderError, match="1..2"):
        features([1.0, 1.0], [3])
    with pytest.raises(LadderError, match=r"lrs\[1\] \(step 2\)"):
        features([1.0, -1.0], [1])
    with pytest.raises(LadderError, match="all 0"):
        features([0.0, 0.0], [1])
    with pytest.raises(LadderError, match="peak_lr"):
        features([1.0], [1], peak_lr=0)


# --------------------------------------------------------------------------- multi-power

def _naive_ld(lrs, t, C, beta, gamma):
    """Luo et al. 2025 LD(t)/B by a double loop: eta_0 = peak; steps up to the peak skipped."""
    peak_step = int(np.argmax(lrs)) + 1
    eta = {k: lrs[k - 1] for k in range(1, len(lrs) + 1)}
    total = 0.0
    for k in range(peak_step + 1, t + 1):
        S = 0.0
        for tau in range(k, t + 1):
            S += eta[tau]
        if S == 0.0:
            continue
        x = eta[k] ** (-gamma) * S
        total += (eta[k - 1] - eta[k]) * (1.0 - (C * x + 1.0) ** (-beta))
    return total


def test_multipower_ld_hand_computed():
    lrs = np.array([1.0, 1.0, 0.5, 0.5])
    res = multipower_ld(lrs, [1, 2, 3, 4], C=1.0, beta=1.0, gamma=1.0)
    # only k = 3 contributes, drop 0.5; x(3) = 0.5^-1 * 0.5 = 1, x(4) = 0.5^-1 * 1.0 = 2
    # G(1) = 1 - 1/2, G(2) = 1 - 1/3
    np.testing.assert_allclose(res.ld, [0.0, 0.0, 0.25, 1.0 / 3.0], rtol=1e-12)
    # dG/dC = beta x u^-(beta+1): x=2, u=3 -> 2/9; dG/dbeta = u^-beta ln u = ln(3)/3
    # dG/dgamma = -beta C x ln(eta) u^-(beta+1) = -2 ln(0.5) / 9
    np.testing.assert_allclose(res.grad[3], 0.5 * np.array([2 / 9, math.log(3) / 3,
                                                             -2 * math.log(0.5) / 9]))


@pytest.mark.parametrize("sched", [
    Schedule("cosine", 1e-3, 60, warmup_steps=5, final_ratio=0.1),
    Schedule("wsd", 2e-3, 60, warmup_steps=6, decay_fraction=0.25, cooldown="1-sqrt",
             final_ratio=0.0),
    Schedule("linear", 1.0, 40, final_ratio=0.2),
])
def test_multipower_ld_matches_double_loop(sched):
    lrs = sched.lrs()
    T = sched.total_steps
    steps = np.array([1, 5, 6, 7, T // 2, T - 1, T])
    C, beta, gamma = 2.0, 0.6, 0.5
    res = multipower_ld(lrs, steps, C, beta, gamma)
    expected = [_naive_ld(lrs, int(t), C, beta, gamma) for t in steps]
    np.testing.assert_allclose(res.ld, expected, rtol=1e-10, atol=1e-15)
    assert res.ld[-1] > 0


def test_multipower_ld_with_rewarm_and_zero_lr():
    # decay to 0, then re-warm: eta_k = 0 with S_k(t) > 0 gives G = 1 (x = inf)
    lrs = np.array([1.0, 1.0, 0.5, 0.0, 0.5])
    res = multipower_ld(lrs, [3, 4, 5], C=1.0, beta=1.0, gamma=1.0)
    # t=3: k=3: 0.5 * G(0.5^-1 * 0.5 = 1) = 0.25
    # t=4: k=3: 0.5 * G(2 * 0.5) = 0.25; k=4: S_4(4) = 0 -> 0
    # t=5: k=3: 0.5 * G(2 * 1.0) = 1/3; k=4: 0.5 * G(inf) = 0.5; k=5: -0.5 * G(2 * 0.5) = -0.25
    np.testing.assert_allclose(res.ld, [0.25, 0.25, 1 / 3 + 0.5 - 0.25], rtol=1e-12)
    assert np.all(np.isfinite(res.grad))


@pytest.mark.parametrize("C, beta, gamma", [(2.0, 0.6, 0.5), (0.3, 1.7, 1.2)])
def test_multipower_ld_gradient_vs_finite_differences(C, beta, gamma):
    sched = Schedule("cosine", 3e-3, 300, warmup_steps=20, final_ratio=0.05)
    steps = np.array([50, 150, 299, 300])
    res = multipower_ld(sched, steps, C, beta, gamma)
    fd = _central_differences(lambda t: multipower_ld(sched, steps, *t).ld, [C, beta, gamma])
    np.testing.assert_allclose(res.grad, fd, rtol=1e-6, atol=1e-12)


def test_multipower_ld_max_terms_approximation():
    sched = Schedule("cosine", 1e-3, 5000, warmup_steps=100, final_ratio=0.1)
    steps = np.array([1000, 2500, 4999, 5000])
    exact = multipower_ld(sched, steps, 2.0, 0.6, 0.5)
    same = multipower_ld(sched, steps, 2.0, 0.6, 0.5, max_terms=5000)
    np.testing.assert_array_equal(same.ld, exact.ld)
    approx = multipower_ld(sched, steps, 2.0, 0.6, 0.5, max_terms=200)
    np.testing.assert_allclose(approx.ld, exact.ld, rtol=1e-3)
    np.testing.assert_allclose(approx.grad, exact.grad, rtol=1e-3)
    coarse = multipower_ld(sched, steps, 2.0, 0.6, 0.5, max_terms=20)
    np.testing.assert_allclose(coarse.ld, exact.ld, rtol=5e-3)


def test_multipower_ld_memory_blocks_agree():
    # more checkpoints than one block holds for 1e4 drops must still be exact
    sched = Schedule("linear", 1e-3, 12000, warmup_steps=2000, final_ratio=0.0)
    steps = np.arange(2000, 12001, 40)
    res = multipower_ld(sched, steps, 1.5, 0.7, 0.4)
    one = multipower_ld(sched, steps[[10, -1]], 1.5, 0.7, 0.4)
    np.testing.assert_allclose(res.ld[[10, -1]], one.ld, rtol=1e-12)
    assert res.ld.shape == (steps.size,) and res.grad.shape == (steps.size, 3)
    assert np.all(np.diff(res.ld) >= 0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(C=-1.0), "C must be >= 0"),
    (dict(beta=-0.1), "beta must be >= 0"),
    (dict(gamma=float("nan")), "gamma must be finite"),
    (dict(max_terms=0), "max_terms"),
])
def test_multipower_ld_bad_parameters(kwargs, match):
    args = dict(C=1.0, beta=0.5, gamma=0.5)
    args.update(kwargs)
    with pytest.raises(LawError, match=match):
        multipower_ld([1.0, 0.5], [2], **args)


def test_multipower_ld_overflowing_x_is_its_limit():
    # eta_3 = 1e-300, gamma = 5: eta^-gamma overflows float64 -> treated as x = inf, G = 1
    res = multipower_ld([1.0, 1.0, 1e-300, 1e-300], [3, 4], C=1.0, beta=0.5, gamma=5.0)
    np.testing.assert_allclose(res.ld, [1.0, 1.0])
    np.testing.assert_array_equal(res.grad, 0.0)


# --------------------------------------------------------------------------- vectorised forms

def _reference_filter(d, lam):
    """m_i = lam m_{i-1} + d_i, m_0 = 0, one step at a time."""
    out, m = np.empty(len(d)), 0.0
    for i, v in enumerate(d):
        m = lam * m + v
        out[i] = m
    return out


@pytest.mark.parametrize("lam", [0.0, 1e-3, 0.5, 0.9, 0.999, 0.9999])
@pytest.mark.parametrize("T", [1, 7, 3001, 120_000])
def test_momentum_filter_matches_reference_recursion(lam, T):
    rng = np.random.default_rng(T)
    d = rng.normal(0.0, 1e-3, T)
    got = momentum_filter(d, lam)
    ref = _reference_filter(d, lam)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.max(np.abs(ref)))
    # same-sign inputs (LR drops of a decaying schedule): elementwise relative agreement
    pos = np.abs(d)
    np.testing.assert_allclose(momentum_filter(pos, lam), _reference_filter(pos, lam),
                               rtol=1e-12)


def test_momentum_filter_extreme_scales_and_errors():
    d = np.full(50_000, 1e200)         # lam^-t and d lam^-t would overflow without blocks
    np.testing.assert_allclose(momentum_filter(d, 0.99), _reference_filter(d, 0.99), rtol=1e-12)
    d = np.full(50_000, 1e-300)
    np.testing.assert_allclose(momentum_filter(d, 0.999), _reference_filter(d, 0.999),
                               rtol=1e-12)
    assert momentum_filter([], 0.9).shape == (0,)
    with pytest.raises(LadderError, match="momentum"):
        momentum_filter([1.0], 1.0)
    with pytest.raises(LadderError, match="finite"):
        momentum_filter([1.0, np.nan], 0.5)


@pytest.mark.parametrize("sched", [
    Schedule("cosine", 1e-3, 3000, warmup_steps=100, final_ratio=0.1),
    Schedule("wsd", 2e-3, 30000, warmup_steps=50, decay_fraction=0.3, cooldown="1-sqrt"),
])
def test_features_s2_matches_reference_recursion_tightly(sched):
    lrs = sched.lrs()
    steps = np.unique(np.linspace(1, sched.total_steps, 50).astype(int))
    f = features(sched, steps)
    ref = _naive_s2(lrs, 0.999)[steps - 1]
    np.testing.assert_allclose(f["S2"], ref, rtol=1e-12, atol=1e-300)


def test_schedules_do_not_import_scipy_signal():
    import subprocess
    import sys
    code = ("import sys, delphi.schedules; "
            "assert 'scipy.signal' not in sys.modules, 'scipy.signal imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


_GROUP_SCHEDULES = [
    Schedule("cosine", 1e-3, 60, warmup_steps=5, final_ratio=0.1),
    Schedule("wsd", 2e-3, 60, warmup_steps=6, decay_fraction=0.25, cooldown="1-sqrt",
             final_ratio=0.0),
    Schedule("linear", 1.0, 40, final_ratio=0.2),
]


def test_multipower_groups_with_single_steps_equal_exact_sum():
    # a ratio this close to 1 makes every group one step: the exact sum of multipower_ld
    lrs = [s.lrs() for s in _GROUP_SCHEDULES] + [np.array([1.0, 1.0, 0.5, 0.0, 0.5])]
    steps, group = [], []
    for g, arr in enumerate(lrs):   # interleave runs: rows need not be grouped by run
        t = np.unique(np.r_[1, 3, len(arr) // 2, len(arr) - 1, len(arr)])
        steps.append(t)
        group.append(np.full(t.size, g))
    order = np.argsort(np.concatenate([np.arange(t.size) for t in steps]), kind="stable")
    steps, group = np.concatenate(steps)[order], np.concatenate(group)[order]
    groups = multipower_groups(lrs, steps, group, ratio=1.0001)
    for C, beta, gamma in ((2.0, 0.6, 0.5), (0.3, 1.7, 1.2), (0.0, 0.5, 0.5)):
        ld, grad = multipower_ld_grid(groups, C, beta, gamma)
        for g, arr in enumerate(lrs):
            rows = group == g
            ex = multipower_ld(arr, steps[rows], C, beta, gamma)
            np.testing.assert_allclose(ld[rows], ex.ld, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(grad[rows], ex.grad, rtol=1e-11, atol=1e-14)


def test_multipower_ld_grid_overflow_and_zero_lr_groups_are_their_limits():
    """The grid finds overflowing C x from its maximum and builds the mask only then (issue
    26): a batch mixing points that overflow (eta 1e-300, gamma 5) with points that do not,
    and a run with eta = 0 < S, equals the exact sum point by point."""
    # run 0: one drop to eta = 1e-60 (at gamma 7, ln(C x) ~ 830: exp overflows; at gamma 0.3
    # LD ~ 1e-91, which the exact sum underflows to 0: atol 1e-80)
    lrs = [np.array([1e-50, 1e-60, 1e-60, 1e-60, 1e-60]), np.array([1.0, 1.0, 0.5, 0.0, 0.5])]
    steps, group = np.array([3, 4, 5, 3, 4, 5]), np.array([0, 0, 0, 1, 1, 1])
    groups = multipower_groups(lrs, steps, group, ratio=1.0001)
    C, beta, gamma = np.array([1.0, 2.0, 0.0]), np.array([0.5, 0.7, 0.5]), np.array([7.0, 0.3, 7.0])
    ld, grad = multipower_ld_grid(groups, C, beta, gamma)
    assert np.all(np.isfinite(ld)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(ld[0, :3], 1e-50 - 1e-60, rtol=1e-12)   # G = 1: the drop
    for i in range(3):
        for g, arr in enumerate(lrs):
            rows = group == g
            ex = multipower_ld(arr, steps[rows], C[i], beta[i], gamma[i])
            np.testing.assert_allclose(ld[i, rows], ex.ld, rtol=1e-12, atol=1e-80)
            np.testing.assert_allclose(grad[i, rows], ex.grad, rtol=1e-11, atol=1e-80)


def test_multipower_ld_grid_equals_point_by_point():
    sched = Schedule("cosine", 3e-3, 2000, warmup_steps=50, final_ratio=0.1)
    steps = np.arange(10, 2001, 10)
    groups = multipower_groups(sched, steps)
    rng = np.random.default_rng(5)
    C = np.exp(rng.uniform(np.log(1e-2), np.log(1e2), 17))
    beta, gamma = rng.uniform(0.05, 3.0, 17), rng.uniform(0.0, 1.5, 17)
    ld, grad = multipower_ld_grid(groups, C, beta, gamma)
    assert ld.shape == (17, steps.size) and grad.shape == (17, steps.size, 3)
    for i in range(17):
        one, g_one = multipower_ld_grid(groups, C[i], beta[i], gamma[i])
        np.testing.assert_allclose(ld[i], one, rtol=1e-12)
        np.testing.assert_allclose(grad[i], g_one, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("spec, T", [("cosine:warmup=50,final=0.1", 5000),
                                     ("linear:warmup=20,final=0.0", 2000),
                                     ("wsd:warmup=50,decay=0.4,cooldown=1-sqrt,final=0", 5000)])
def test_multipower_groups_accuracy_and_gradient(spec, T):
    sched = Schedule.parse(spec, peak_lr=3e-3, total_steps=T)
    steps = np.unique(np.r_[np.linspace(1, T, 30).astype(int), T])
    groups = multipower_groups(sched, steps)
    assert groups.drop.size < 0.1 * steps.size * T     # far fewer terms than the exact sum
    for C, beta, gamma in ((2.0, 0.6, 0.5), (0.3, 1.5, 0.03), (30.0, 0.2, 1.2)):
        ex = multipower_ld(sched, steps, C, beta, gamma)
        ld, grad = multipower_ld_grid(groups, C, beta, gamma)
        np.testing.assert_allclose(ld, ex.ld, rtol=0, atol=1e-3 * ex.ld.max())  # ~1e-4 typical, 6e-4 worst seen
        # the derivatives are exact for the grouped sum: central differences agree
        fd = _central_differences(lambda t: multipower_ld_grid(groups, *t, grad=False)[0],
                                  [C, beta, gamma])
        for j in range(3):
            np.testing.assert_allclose(grad[:, j], fd[:, j], rtol=1e-5,
                                       atol=1e-9 * np.abs(fd[:, j]).max())


def test_multipower_groups_errors():
    with pytest.raises(LawError, match="ratio"):
        multipower_groups([1.0, 0.5], [2], ratio=1.0)
    with pytest.raises(LadderError, match="1..2"):
        multipower_groups([1.0, 0.5], [3])
    with pytest.raises(LadderError, match="group"):
        multipower_groups([[1.0, 0.5]], [2], [1])
