"""Property test (issue 22, item 2): one outlier takes no good run with it.

A clean synthetic ladder (an exact law with 0.3% scatter) gets one outlier: any run's loss
times any factor from 0.3 to 3 (another unit, a diverged or mis-logged run), an extra run
with the inputs of any run and such a loss, or a W&B export in which that extra run repeats
the run's ``Name``. Then every other run is fitted, and the outlier is fitted or excluded with
a reason (never silently dropped), and no outlier screen stops. In a tidy table a repeated run
name with the same inputs is an error naming both rows.

Reproducible as ``test_fuzz.py``: ``derandomize=True``, ``database=None``; 60 examples.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import delphi  # noqa: E402
from delphi.errors import LadderError, LadderWarning  # noqa: E402
from delphi.fitting import fit  # noqa: E402

SETTINGS = settings(max_examples=60, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def clean_ladder(design: str, seed: int) -> pd.DataFrame:
    """``grid``: 5 sizes x 4 tokens/param (20 runs, chinchilla); ``frontier``: 8 compute-optimal
    runs at 20 tokens/param (a power law in C). Losses of Hoffmann et al.'s law, 0.3% scatter."""
    n = 1e8 * 2.0 ** np.arange(5 if design == "grid" else 8)
    ratios = (10, 20, 40, 80) if design == "grid" else (20,)
    params = np.repeat(n, len(ratios))
    tokens = params * np.tile(ratios, len(n))
    loss = 1.69 + 406.4 / params ** 0.34 + 410.7 / tokens ** 0.28
    loss *= np.exp(np.random.default_rng(seed).normal(0, 0.003, len(loss)))
    runs = [f"N{p:.3g}-D{t:.3g}" for p, t in zip(params, tokens)]
    return pd.DataFrame({"run": runs, "params": params, "tokens": tokens,
                         "flops": 6 * params * tokens, "loss": loss})


def wandb_export(frame: pd.DataFrame, folder: str) -> Path:
    path = Path(folder) / "runs.csv"
    pd.DataFrame({"Name": frame["run"], "State": "finished",
                  "parameter_count": frame["params"], "throughput/total_tokens": frame["tokens"],
                  "throughput/total_gflops": frame["flops"] / 1e9,
                  "eval/paloma/macro_loss": frame["loss"]}).to_csv(path, index=False)
    return path


@SETTINGS
@given(design=st.sampled_from(["grid", "frontier"]), seed=st.integers(0, 3),
       where=st.integers(0, 19), factor=st.floats(0.3, 3.0),
       how=st.sampled_from(["scale", "add", "wandb-name", "tidy-name"]))
def test_one_outlier_excludes_no_other_run(design, seed, where, factor, how):
    frame = clean_ladder(design, seed)
    k = where % len(frame)
    law = "chinchilla" if design == "grid" else "power"
    if how == "scale":
        frame.loc[k, "loss"] *= factor
        odd = frame["run"][k]
    else:
        extra = frame.iloc[[k]].assign(loss=lambda t: t["loss"] * factor)
        if how == "add":
            extra = extra.assign(run="odd")
        frame = pd.concat([frame, extra], ignore_index=True)
        odd = {"add": "odd", "wandb-name": f"{frame['run'][k]} #2"}.get(how)
    if how == "tidy-name":
        # Two rows of one run at one D: an error naming both, nothing fitted.
        with pytest.raises(LadderError, match=rf"duplicate rows .*\(rows {k}, {len(frame) - 1}\)"):
            delphi.load_ladder(frame)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if how == "wandb-name":
            with tempfile.TemporaryDirectory() as folder:
                ladder = delphi.load_ladder(wandb_export(frame, folder))
        else:
            ladder = delphi.load_ladder(frame)
        result = fit(ladder, law, identify=False)
    said = [str(w.message) for w in caught]
    if how == "wandb-name" and factor == 1:
        # The same row twice is one run listed twice: the copy is dropped, and said.
        assert [(e.run, e.reason) for e in result.exclusions] == [
            (frame["run"][k], f"row {len(frame) - 1} repeats row {k} exactly; the copy dropped")]
        assert sorted(result.labels) == sorted(frame["run"][:-1])
        return
    if how == "wandb-name":
        assert any(f"{frame['run'][k]!r} (rows {k}, {len(frame) - 1})" in m for m in said
                   if "appear more than once" in m), said
        assert {issubclass(w.category, LadderWarning) for w in caught if
                "appear more than once" in str(w.message)} == {True}
    assert not any("outlier screens stop" in m for m in said), said
    excluded = {e.run: e.reason for e in result.exclusions}
    good = [r for r in ladder.runs if r != odd]
    assert not set(good) & set(excluded), {r: excluded[r] for r in set(good) & set(excluded)}
    assert set(good) <= set(result.labels)
    # The outlier: fitted, or excluded with its reason; never both, never neither.
    assert (odd in result.labels) != (odd in excluded), (odd, result.labels, excluded)
    assert excluded.get(odd, "kept").strip()
    target = {c: np.array([v]) for c, v in (("params", 1e10), ("tokens", 2e11),
                                            ("flops", 1.2e22)) if c in result.law.inputs}
    assert math.isfinite(result.predict(target)[0])
