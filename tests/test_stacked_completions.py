"""``complete_many`` in one process fits runs with as many checkpoints as one stacked batch
(:func:`delphi.fitting.engine.fit_arrays_many`): the results are bit-identical to
:func:`delphi.curves.complete` run by run, errors included."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import delphi.fitting.engine as engine
from delphi import DelphiError, FitError, FitWarning, LawError
from delphi.curves import complete, complete_many
from delphi.fitting import fit_arrays

from bundled import load


@pytest.fixture(scope="module")
def misfitting():
    return load("misfitting2025")


def test_stacked_completions_equal_one_by_one(misfitting, monkeypatch):
    runs = [r for r in misfitting.runs if r.startswith(("misfitting_100m-lr0.001",
                                                        "misfitting_100m-lr0.002"))]
    members = []
    real = engine.refine_batch

    def spy(*args, **kwargs):
        if kwargs.get("member") is not None:
            members.append(int(np.max(kwargs["member"])) + 1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "refine_batch", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        many = complete_many(misfitting, runs, upto_fraction=0.5, n_jobs=1)
        # Runs of the two peak LRs with the same length share a batch.
        assert members and max(members) >= 2
        monkeypatch.setattr(engine, "refine_batch", real)
        done = 0
        for run, got in many:
            try:
                one = complete(misfitting, run, upto_fraction=0.5)
            except DelphiError as exc:   # complete_many gives the same one-line message
                assert got == f"{type(exc).__name__}: {exc}"
                continue
            done += 1
            assert got.loss == one.loss
            assert got.fit.params == one.fit.params
            assert got.fit.objective == one.fit.objective
            assert got.fit.message == one.fit.message
            assert got.fit.warnings == one.fit.warnings
            assert got.to_dict() == one.to_dict()
    assert done >= 10 and done < len(runs)   # both completions and errors compared


def test_fit_arrays_many_matches_fit_arrays_and_returns_errors():
    rng = np.random.default_rng(3)
    s1 = np.linspace(1.0, 40.0, 9)
    s2 = np.concatenate([np.zeros(5), np.linspace(0.5, 3.0, 4)])
    requests = []
    for scale in (1.0, 1.3, 0.8):
        y = 2.0 + 1.5 * scale * s1 ** -0.4 - 0.05 * s2 + rng.normal(0, 1e-3, 9)
        requests.append(dict(law="annealing", x={"S1": s1, "S2": s2}, y=y))
    n = np.array([1e7, 3e7, 1e8, 3e8, 1e9, 2e7, 6e7, 2e8])
    d = 20 * n * np.array([1, 1, 1, 1, 1, 3, 3, 3])
    requests.append(dict(law="chinchilla", x={"params": n, "tokens": d},
                         y=1.7 + 400 * n ** -0.34 + 400 * d ** -0.28))   # not stacked
    requests.append(dict(law="annealing", x={"S1": s1[:3], "S2": s2[:3]}, y=np.ones(3)))
    out = engine.fit_arrays_many(requests)
    for req, got in zip(requests[:4], out[:4]):
        one = fit_arrays(**req)
        assert got.params == one.params and got.objective == one.objective
        assert got.n_starts == one.n_starts and got.n_agree == one.n_agree
    with pytest.raises(FitError) as err:
        fit_arrays(**requests[4])
    assert isinstance(out[4], FitError) and str(out[4]) == str(err.value)


def test_warm_fits_many_matches_fit_arrays_and_returns_errors(monkeypatch):
    """Issue 27: warm refits of one law and size run as one stacked batched BFGS; each is
    :func:`fit_arrays` of its own request bit for bit (a refit the batch leaves unfinished
    is polished alone, as there), and a bad warm start is returned as the error it raises."""
    rng = np.random.default_rng(5)
    n = np.geomspace(1e7, 1e9, 12).repeat(2)
    d = n * np.tile([10.0, 40.0], 12)
    y = 1.7 + 400 * n ** -0.34 + 900 * d ** -0.3 + rng.normal(0, 2e-3, len(n))
    full = fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
    requests = []
    for i in (0, 5, 11, 23):        # one point left out each: one size, one batch
        keep = np.arange(len(n)) != i
        requests.append(dict(law="chinchilla", x={"params": n[keep], "tokens": d[keep]},
                             y=y[keep], warm_start=full.params))
    far = {**full.params, "alpha": 0.9, "beta": 0.05}      # a start the batch may not finish
    requests.append(dict(law="chinchilla", x={"params": n[1:], "tokens": d[1:]}, y=y[1:],
                         warm_start=far))
    requests.append(dict(law="chinchilla", x={"params": n, "tokens": d}, y=y,
                         warm_start={"E": 1.7}))           # missing parameters: LawError
    members = []
    real = engine.refine_batch

    def spy(*args, **kwargs):
        if kwargs.get("member") is not None:
            members.append(len(kwargs["member"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "refine_batch", spy)
    out = engine.warm_fits_many(requests)
    monkeypatch.setattr(engine, "refine_batch", real)
    assert members == [5]
    for req, got in zip(requests[:5], out[:5]):
        one = fit_arrays(**req)
        assert got.params == one.params and got.objective == one.objective
        assert got.message == one.message and got.warnings == one.warnings
        assert got.converged == one.converged
    with pytest.raises(LawError) as err:
        fit_arrays(**requests[5])
    assert isinstance(out[5], LawError) and str(out[5]) == str(err.value)
