"""Task laws (delphi.laws.task): formulas, bounds and synthetic recovery by the one engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from delphi.errors import LawError
from delphi.fitting import fit_arrays
from delphi.laws import TASK_LAWS, get_law, onestep_law, sigmoid_law


def _paper_sigmoid(L, a, x0, k, b):
    """The reference code's form a / (1 + exp(-k (L - x0))) + b, written out independently."""
    return a / (1.0 + np.exp(-k * (L - x0))) + b


def test_sigmoid_is_the_papers_form_with_asymptotes_as_coefficients():
    law = sigmoid_law(0.25)
    L = np.linspace(0.1, 3.0, 30)
    values = {"U": 0.9, "C": 0.25, "k": 5.0, "L0": 1.2}
    ours = law.predict(values, {"task_loss": L})
    # a = C - U, b = U (module docstring)
    theirs = _paper_sigmoid(L, 0.25 - 0.9, 1.2, 5.0, 0.9)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    # Asymptotes: chance at very high loss, U at very low loss.
    far = law.predict(values, {"task_loss": np.array([1e3, 0.0])})
    assert far[0] == pytest.approx(0.25, abs=1e-12)
    assert far[1] == pytest.approx(0.25 + 0.65 / (1 + math.exp(-6.0)), rel=1e-12)


def test_sigmoid_bounds_and_registration():
    law = sigmoid_law(1 / 3)
    assert law.param("U").lower == pytest.approx(1 / 3) and law.param("U").upper == 1.0
    assert law.chance == pytest.approx(1 / 3) and law.floor is None
    assert get_law("task-sigmoid") is TASK_LAWS["task-sigmoid"]
    assert get_law("task-onestep") is TASK_LAWS["task-onestep"]
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(LawError, match="chance level"):
            sigmoid_law(bad)


@pytest.mark.parametrize("law_factory,theta,inputs", [
    (sigmoid_law, [4.0, 1.1], {"task_loss": np.array([0.5, 1.0, 1.7])}),
    (onestep_law, [-1.0, 0.5, 0.8, 0.3, 0.25],
     {"params": np.array([2e8, 1e9, 3e9]), "tokens": np.array([4e9, 2e10, 1e11])}),
])
def test_gradients_match_finite_differences(law_factory, theta, inputs):
    law = law_factory(0.25)
    th = np.array(theta)
    logphi, d = law.log_basis(th, inputs)
    for j in range(len(th)):
        h = 1e-6 * max(1.0, abs(th[j]))
        up, dn = th.copy(), th.copy()
        up[j] += h
        dn[j] -= h
        num = (law.log_basis(up, inputs)[0] - law.log_basis(dn, inputs)[0]) / (2 * h)
        np.testing.assert_allclose(d[:, :, j], num, rtol=1e-6, atol=1e-8)
    lb, db = law.log_basis_batch(np.stack([th, th]), inputs)
    np.testing.assert_allclose(lb[1], logphi)
    np.testing.assert_allclose(db[1], d)
    np.testing.assert_allclose(law.log_basis_grid(th[None], inputs)[0], logphi)


def test_sigmoid_recovery_with_free_upper_asymptote():
    """Simulate 600 checkpoints spanning the whole sigmoid (U interior), noise sd 0.005.

    With 600 points and that noise the standard errors are ~1e-3 on U and L0 and ~1% on k
    (Fit.stderr says so); the tolerances are about 5 standard errors."""
    law = sigmoid_law(0.25)
    rng = np.random.default_rng(1)
    L = rng.uniform(0.2, 2.6, 600)
    true = {"U": 0.85, "C": 0.25, "k": 4.0, "L0": 1.3}
    acc = law.predict(true, {"task_loss": L}) + rng.normal(0, 0.005, L.size)
    fit = fit_arrays(law, {"task_loss": L}, acc, fixed={"C": 0.25}, delta=1.0)
    assert fit.converged
    assert fit.params["U"] == pytest.approx(0.85, abs=0.006)
    assert fit.params["L0"] == pytest.approx(1.3, abs=0.01)
    assert fit.params["k"] == pytest.approx(4.0, rel=0.05)
    for name in ("U", "k", "L0"):
        assert abs(fit.params[name] - true[name]) < 5 * fit.stderr[name]


def test_sigmoid_recovery_upper_fixed_at_one_is_bit_identical_for_a_seed():
    law = sigmoid_law(0.2)
    rng = np.random.default_rng(2)
    L = rng.uniform(0.8, 2.0, 400)
    true = {"U": 1.0, "C": 0.2, "k": 6.0, "L0": 0.9}
    acc = law.predict(true, {"task_loss": L}) + rng.normal(0, 0.004, L.size)
    fits = [fit_arrays(law, {"task_loss": L}, acc, fixed={"C": 0.2, "U": 1.0}, delta=1.0)
            for _ in range(2)]
    assert fits[0].params == fits[1].params
    # Only the low-accuracy half of the curve is seen: k and L0 are correlated; 3% / 0.03.
    assert fits[0].params["k"] == pytest.approx(6.0, rel=0.03)
    assert fits[0].params["L0"] == pytest.approx(0.9, abs=0.03)


def test_onestep_recovery_predicts_the_grid_and_an_extrapolation():
    """A 6 x 6 grid of (N, D) with noise sd 0.002: the law's parameters trade off (A with E,
    alpha with A), so the test checks what the baseline is used for, the predicted accuracy:
    within 3 noise sd on the grid and within 1.5 points at 4x the largest N."""
    law = onestep_law(0.25)
    N, D = np.meshgrid(np.geomspace(1e8, 1.6e9, 6), np.geomspace(2e9, 2e11, 6))
    N, D = N.ravel(), D.ravel()
    true = {"U": 1.0, "C": 0.25, "E": -1.5, "A": 1.2, "B": 1.0, "alpha": 0.35, "beta": 0.3}
    rng = np.random.default_rng(3)
    acc = law.predict(true, {"params": N, "tokens": D}) + rng.normal(0, 0.002, N.size)
    fit = fit_arrays(law, {"params": N, "tokens": D}, acc, fixed={"C": 0.25, "U": 1.0},
                     delta=1.0)
    grid = law.predict(fit.params, {"params": N, "tokens": D})
    want = law.predict(true, {"params": N, "tokens": D})
    assert np.max(np.abs(grid - want)) < 3 * 0.002
    x = {"params": np.array([6.4e9]), "tokens": np.array([2e11])}
    assert law.predict(fit.params, x)[0] == pytest.approx(law.predict(true, x)[0], abs=0.015)
