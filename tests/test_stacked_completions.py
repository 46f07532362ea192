"""``complete_many`` in one process fits runs with as many checkpoints as one stacked batch
(:func:`delphi.fitting.engine.fit_arrays_many`): the results are bit-identical to
:func:`delphi.curves.complete` run by run, errors included."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import delphi.fitting.engine as engine
from delphi import DelphiError, FitError, FitWarning
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
