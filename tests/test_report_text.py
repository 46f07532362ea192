"""The text report reads as one account (issue 12, CLI): grouped exclusions, run noise on the
new-run line, no contradictory interval notes, one convergence wording."""

from __future__ import annotations

import numpy as np
import pandas as pd

import delphi
from delphi.fitting.result import exclusion_lines
from delphi.ladder import Exclusion


def test_runs_sharing_a_reason_share_a_line_with_the_count():
    ex = [Exclusion(run=f"r{i}", reason="same reason") for i in range(7)]
    ex += [Exclusion(run="x", reason="its own"), Exclusion(run="y", reason="pair"),
           Exclusion(run="z", reason="pair")]
    lines = exclusion_lines(ex)
    # 7 runs with one reason: one line, the count, 3 names and how many more
    assert lines[0] == "excluded   7 runs (r0, r1, r2, ... (4 more)): same reason"
    # up to 3 runs sharing a reason keep a line each
    assert lines[1:] == ["excluded   x: its own", "excluded   y: pair", "excluded   z: pair"]


def test_reasons_differing_only_in_numbers_are_one_group():
    # The isoFLOP exclusion names each run's budget: 19 such lines read as one reason.
    ex = [Exclusion(run=f"r{i}", reason=f"isoFLOP point: not the lowest loss of its compute "
                                        f"budget (~{c:.0e} FLOPs)")
          for i, c in enumerate([3e18, 3e18, 1e19, 1e19, 3e19])]
    ex.append(Exclusion(run="d", reason="diverged: 12% above the trend"))
    lines = exclusion_lines(ex)
    assert lines == [
        "excluded   5 runs (r0, r1, r2, ... (2 more)): isoFLOP point: not the lowest loss of its "
        "compute budget (each run's own numbers in --json / Fit.excluded)",
        "excluded   d: diverged: 12% above the trend"]
    # Three or fewer keep their own numbers, one line each.
    assert exclusion_lines(ex[:2]) == [f"excluded   r{i}: {ex[i].reason}" for i in range(2)]


def _ladder(n):
    c = 1e17 * 10 ** (0.5 * np.arange(n))
    rng = np.random.default_rng(5)
    loss = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.003, n))
    return delphi.load_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(n)], "flops": c,
                                            "loss": loss}))


def test_run_noise_is_named_on_the_new_run_line_only():
    f = delphi.predict(_ladder(8), {"flops": 1e22}, "power", interval="delta")
    lines = f.report().splitlines()
    new = next(x for x in lines if "interval for one new run" in x)
    mean = next(x for x in lines if "interval for the expected loss" in x)
    assert f"run noise {f.interval.noise:.2%}" in new
    assert "run noise" not in mean.replace("without run noise", "")


def test_no_interval_is_not_preceded_by_a_method_note():
    # 4 runs, 3 free parameters: 1 dof, no noise estimate. auto would pick the delta method
    # ("too few runs ... delta-method interval") and then fail: only the failure is said.
    from delphi.reference import COLUMNS, ReferenceClass
    none = ReferenceClass(rows=pd.DataFrame(columns=list(COLUMNS)))   # no reference interval
    f = delphi.predict(_ladder(4), {"flops": 1e22}, "power", reference=none)
    assert f.interval is None
    assert any(n.startswith("no interval:") for n in f.notes)
    assert not any("delta-method interval" in n for n in f.notes)


def test_convergence_line_does_not_mix_success_and_failure():
    # L-BFGS-B often stops with ABNORMAL_TERMINATION_IN_LNSRCH at an optimum.
    from delphi.fitting.engine import convergence_message
    ok = convergence_message(True, 5e-9, "ABNORMAL_TERMINATION_IN_LNSRCH")
    assert ok == ("stationary (scaled gradient 5.0e-09, tolerance 1e-05); L-BFGS-B: stopped "
                  "where its line search could not improve further, as expected at an optimum")
    bad = convergence_message(False, 0.3, "ABNORMAL_TERMINATION_IN_LNSRCH")
    assert bad.startswith("NOT stationary") and bad.endswith(
        "L-BFGS-B: line search could not improve further")
    fit = delphi.fit(_ladder(8), "power")
    line = next(x for x in fit.report().splitlines() if x.startswith("converged"))
    assert fit.converged and line.startswith("converged  yes: stationary")
