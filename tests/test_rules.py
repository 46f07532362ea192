"""Tests of delphi.rules: the Marin Delphi AdamH recipe, against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from delphi.errors import LadderError
from delphi.rules import AdamHSettings, adamh_rule

SEQ = 4096
STEP_TOKENS = SEQ * 2 ** 16  # 268_435_456 tokens: the batch that would give 2^16 steps


def test_reference_budget_2p5e9():
    # T = T0: start batch = next pow2 of 2.5e9 / 268435456 = 9.31 -> 16 sequences.
    assert 8 < 2.5e9 / STEP_TOKENS <= 16
    s = adamh_rule(2.5e9)
    assert isinstance(s, AdamHSettings)
    assert s.batch_sequences == 16
    assert s.batch_tokens == 16 * 4096 == 65536
    # lr = 0.0063 * sqrt(16/64) * 1^0.3 = 0.0063 * 0.5
    assert s.lr == pytest.approx(0.00315, rel=1e-12)
    # scalar lr = 0.000656 * sqrt(16/64) = 0.000328
    assert s.scalar_lr == pytest.approx(0.000328, rel=1e-12)
    # eps = 1.85e-8 * sqrt(64/16) = 3.7e-8
    assert s.eps == pytest.approx(3.7e-8, rel=1e-12)
    # beta2 = 0.9999^(1/4) = 0.999975 -> clipped to 0.9999
    assert s.beta2 == 0.9999
    assert not s.lr_capped
    assert s.steps == math.ceil(2.5e9 / 65536) == 38147


def test_2e10():
    # 2e10 / 268435456 = 74.5 -> 128 sequences = 2 * B0.
    s = adamh_rule(2e10)
    assert s.batch_sequences == 128
    # lr = 0.0063 * sqrt(2) * (1/8)^0.3 ; (1/8)^0.3 = 2^-0.9 = 0.535887
    assert 2 ** -0.9 == pytest.approx(0.535887, abs=1e-6)
    assert s.lr == pytest.approx(0.0063 * 1.41421356 * 0.5358867, rel=1e-7)
    assert s.lr == pytest.approx(0.0047745, rel=1e-4)
    # scalar lr = 0.000656 * sqrt(2 * 2.5e9 / 2e10) = 0.000656 * 0.5
    assert s.scalar_lr == pytest.approx(0.000328, rel=1e-12)
    # eps = 1.85e-8 * sqrt(2e10 / (2 * 2.5e9)) = 1.85e-8 * 2
    assert s.eps == pytest.approx(3.7e-8, rel=1e-12)
    # beta2 = 0.9999^2 = 0.99980001
    assert s.beta2 == pytest.approx(0.99980001, rel=1e-12)


def test_1e12():
    # 1e12 / 268435456 = 3725.3 -> 4096 sequences = 64 * B0.
    s = adamh_rule(1e12)
    assert s.batch_sequences == 4096
    assert s.batch_tokens == 4096 * 4096
    # lr = 0.0063 * 8 * (2.5e-3)^0.3 ;
    # (2.5e-3)^0.3 = exp(0.3 * ln 0.0025) = exp(-1.797439) = 0.1657227
    assert math.exp(0.3 * math.log(0.0025)) == pytest.approx(0.1657227, rel=1e-6)
    assert s.lr == pytest.approx(0.0504 * 0.1657227, rel=1e-6)
    # scalar lr = 0.000656 * sqrt(64 * 2.5e-3) = 0.000656 * 0.4
    assert s.scalar_lr == pytest.approx(0.0002624, rel=1e-12)
    # eps = 1.85e-8 * sqrt(400 / 64) = 1.85e-8 * 2.5
    assert s.eps == pytest.approx(4.625e-8, rel=1e-12)
    # beta2 = 0.9999^64
    assert s.beta2 == pytest.approx(0.99362012, rel=1e-8)
    assert not s.lr_capped


def test_1e13_clamped_to_8192():
    # 1e13 / 268435456 = 37252.9 -> 65536, clamped to 8192 = 128 * B0.
    s = adamh_rule(1e13)
    assert s.batch_sequences == 8192
    # lr = 0.0063 * sqrt(128) * (2.5e-4)^0.3 = 0.0712741 * 0.0830581
    assert s.lr == pytest.approx(0.0063 * 11.3137085 * 0.0830581, rel=1e-6)
    assert s.lr < 0.01
    # scalar lr = 0.000656 * sqrt(128 * 2.5e-4) = 0.000656 * sqrt(0.032)
    assert s.scalar_lr == pytest.approx(0.000656 * 0.17888544, rel=1e-7)
    # eps = 1.85e-8 * sqrt(4000 / 128) = 1.85e-8 * 5.5901699
    assert s.eps == pytest.approx(1.85e-8 * 5.5901699, rel=1e-7)
    assert s.beta2 == pytest.approx(0.9999 ** 128, rel=1e-12)


def test_halving_once_at_1p2e12():
    # 1.2e12 / 268435456 = 4470.3 -> 8192. There lr = 0.0063 * sqrt(128) * (2.5e9/1.2e12)^0.3
    # = 0.0712741 * 0.1569017 = 0.011183 >= 0.01 -> halve to 4096: 0.0063 * 8 * 0.1569017.
    ratio = (2.5e9 / 1.2e12) ** 0.3
    assert ratio == pytest.approx(0.1569017, rel=1e-6)
    assert 0.0063 * math.sqrt(128) * ratio >= 0.01
    s = adamh_rule(1.2e12)
    assert s.batch_sequences == 4096
    assert s.lr == pytest.approx(0.0504 * 0.1569017, rel=1e-6)
    assert s.lr < 0.01 and not s.lr_capped


def test_halving_several_times():
    # T0 = 2.5e11, T = 2.5e10: start 2.5e10 / 268435456 = 93.1 -> 128;
    # (T0/T)^0.3 = 10^0.3 = 1.995262
    # B=128: 0.0063*sqrt(2)*1.995262 = 0.017777 >= 0.01 -> 64: 0.0063*1.995262 = 0.012570
    # >= 0.01 -> 32: 0.0063*sqrt(0.5)*1.995262 = 0.0088884 < 0.01 -> stop at 32.
    s = adamh_rule(2.5e10, T0=2.5e11)
    assert s.batch_sequences == 32
    assert s.lr == pytest.approx(0.0063 * 0.70710678 * 1.9952623, rel=1e-7)
    # scalar lr = 0.000656 * sqrt(32 * 2.5e11 / (64 * 2.5e10)) = 0.000656 * sqrt(5)
    assert s.scalar_lr == pytest.approx(0.000656 * 2.2360680, rel=1e-7)


def test_tiny_budget_min_batch_and_lr_cap():
    # T = 1e7: start 1e7 / 268435456 = 0.037 -> 1 -> raised to 8 sequences.
    # Uncapped lr = 0.0063 * sqrt(1/8) * 250^0.3 = 0.0063 * 0.353553 * 5.24025 = 0.011672 >= 0.01,
    # but the batch cannot go below 8, so lr is capped at 0.01.
    assert 0.0063 * math.sqrt(8 / 64) * 250 ** 0.3 == pytest.approx(0.011672, rel=1e-4)
    s = adamh_rule(1e7)
    assert s.batch_sequences == 8
    assert s.lr == 0.01
    assert s.lr_capped
    # scalar lr and eps are not capped: 0.000656 * sqrt(8 * 250 / 64), 1.85e-8 * sqrt(64/(8*250))
    assert s.scalar_lr == pytest.approx(0.000656 * math.sqrt(31.25), rel=1e-12)
    assert s.eps == pytest.approx(1.85e-8 * math.sqrt(0.032), rel=1e-12)


def test_batch_always_power_of_two_within_limits():
    for T in np.logspace(6, 15, 37):
        s = adamh_rule(float(T))
        b = s.batch_sequences
        assert 8 <= b <= 8192 and b & (b - 1) == 0
        assert s.lr <= 0.01 and 0.9 < s.beta2 <= 0.9999


def test_exact_power_of_two_start():
    # T = 32 * 268435456 exactly -> start exactly 32 sequences (not 64).
    s = adamh_rule(32 * STEP_TOKENS)
    assert s.batch_sequences == 32


def test_custom_seq_len_scales_start_batch():
    # seq_len = 2048: 2.5e9 / (2048 * 65536) = 18.6 -> 32 sequences of 2048 tokens.
    s = adamh_rule(2.5e9, seq_len=2048)
    assert s.batch_sequences == 32 and s.batch_tokens == 65536


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "many", None, True])
def test_bad_tokens(bad):
    with pytest.raises(LadderError, match="tokens"):
        adamh_rule(bad)


def test_bad_reference_values():
    with pytest.raises(LadderError, match="B0_sequences"):
        adamh_rule(1e9, B0_sequences=0)
    with pytest.raises(LadderError, match="seq_len"):
        adamh_rule(1e9, seq_len=4096.5)
    with pytest.raises(LadderError, match="T0"):
        adamh_rule(1e9, T0=-2.5e9)
