"""Usability of the API, the CLI's text and its JSON for the four users (terminal, pipe,
notebook, --json): errors that name what is missing, short reprs, one JSON shape, notes."""

from __future__ import annotations

import pandas as pd
import pytest

import delphi
from delphi.errors import MissingArgumentError


def _ladder():
    rows = [{"run": f"r{i}", "params": n, "tokens": 20 * n, "loss": 1.7 + 400 / n ** 0.3}
            for i, n in enumerate([1e7, 3e7, 1e8, 3e8, 1e9])]
    return delphi.load_ladder(pd.DataFrame(rows))


@pytest.mark.parametrize("call, func", [
    (lambda lad: delphi.fit(lad), "fit()"),
    (lambda lad: delphi.backtest(lad), "backtest()"),
    (lambda lad: delphi.prefix_fits(lad), "prefix_fits()"),
    (lambda lad: delphi.leave_future_out(lad), "leave_future_out()"),         # were TypeErrors
    (lambda lad: delphi.calibration_backtest(lad), "calibration_backtest()"),  # of Python's
])
def test_a_missing_law_names_the_function_and_the_laws(call, func):
    with pytest.raises(MissingArgumentError) as e:
        call(_ladder())
    msg = str(e.value)
    assert func in msg and "chinchilla" in msg and "power" in msg and "overtrain" in msg
    assert isinstance(e.value, TypeError) and isinstance(e.value, delphi.DelphiError)


def test_a_missing_target_shows_the_target_forms():
    with pytest.raises(MissingArgumentError, match=r"predict\(\) needs a target.*'flops'.*"
                                                   r"'params'.*'tokens'"):
        delphi.predict(_ladder())


def test_a_target_given_as_n_and_d_says_which_fields_they_are():
    with pytest.raises(delphi.TargetError, match="N is 'params'; D is 'tokens'|"
                                                 "D is 'tokens'; N is 'params'"):
        delphi.predict(_ladder(), {"N": 1e10, "D": 2e11}, "chinchilla")


# --------------------------------------------------------------------------- notebook reprs
#: The public result records that have a text report: each gets a short one-line repr.
RECORDS = ["Forecast", "Comparison", "DesignScore", "Backtest", "Completion", "AccuracyForecast",
           "CurveForecast", "Suggestions", "Fit", "Tracking", "RecipeComparison"]


@pytest.mark.parametrize("name", RECORDS)
def test_every_result_record_defines_its_own_repr_and_pretty_text(name):
    cls = getattr(delphi, name)
    # a dataclass's generated __repr__ dumps every field (thousands of characters)
    assert cls.__repr__.__code__.co_filename.startswith(str(
        __import__("pathlib").Path(delphi.__file__).parent)), f"{name} uses the generated repr"
    assert hasattr(cls, "_repr_pretty_")


@pytest.fixture(scope="module")
def forecast():
    return delphi.predict(_ladder8(), {"params": 1e10, "tokens": 2e11}, "chinchilla",
                          interval="delta", identify=False)


def _ladder8():
    rows = [{"run": f"r{i}", "params": n, "tokens": 20 * n,
             "loss": (1.7 + 400 / n ** 0.3) * (1 + 0.01 * (-1) ** i)}
            for i, n in enumerate([1e7, 2e7, 4e7, 8e7, 1.6e8, 3.2e8, 6.4e8, 1.3e9])]
    return delphi.load_ladder(pd.DataFrame(rows))


def _short(r: str) -> None:
    assert "\n" not in r and len(r) < 400, r


def test_forecast_repr_has_the_loss_interval_law_and_target(forecast):
    r = repr(forecast)
    _short(r)
    assert r.startswith("Forecast(") and f"loss={forecast.loss:.4g} nats/token" in r
    assert f"[{forecast.lower:.4g}, {forecast.upper:.4g}] (90% delta)" in r
    assert "law='chinchilla'" in r and "N=1e+10" in r and "D=2e+11" in r
    assert str(forecast) == forecast.report() and len(str(forecast)) > len(r)
    iv = repr(forecast.interval)
    _short(iv)
    assert iv.startswith(f"Interval([{forecast.lower:.4g}, {forecast.upper:.4g}] new run")


def test_curve_forecast_and_completion_reprs_are_one_line(forecast):
    from delphi.forecasting.curves import Completion
    from delphi.forecasting.target_curve import CurveForecast
    cf = CurveForecast(forecast=forecast, points=(), level=0.9, schedule="cosine")
    _short(repr(cf))
    assert repr(cf).startswith("CurveForecast(loss=") and "schedule='cosine'" in repr(cf)
    c = Completion(run="r1", loss=2.5, total_steps=1000, fitted_upto_step=400,
                   n_checkpoints=8, schedule="cosine", fit=forecast.fit, actual=2.55)
    _short(repr(c))
    assert "loss=2.5 at step 1000" in repr(c) and "actual=2.55 (+2.00%)" in repr(c)


def test_comparison_and_backtest_reprs_name_the_best_and_the_errors():
    lad = _ladder8()
    c = delphi.compare(lad, candidates=["power", "chinchilla"])
    _short(repr(c))
    assert f"best={c.best.candidate.label!r}" in repr(c) and f"cuts={len(c.cuts)}" in repr(c)
    # a candidate with no calibrated prediction: a cell a reader understands, and its meaning
    uncal = [s for s in c.scores if s.scored and not s.n_calibrated]
    assert uncal, "the fixture should have a candidate without calibrated predictions"
    table = c.report()
    assert "- -> - of 0" not in table and "none calibrated" in table
    assert "\ncover      share of a candidate's calibrated" in table
    b = delphi.backtest(lad, "chinchilla", fit_max_flops=1e19)
    _short(repr(b))
    assert f"mean_abs_rel_error={b.summary['mean_abs_rel_error']:.3%}" in repr(b)


def test_design_score_repr_has_the_width_and_interval():
    design = [{"params": n, "tokens": r * n} for n in (1e7, 3e7, 1e8, 3e8) for r in (10, 40)]
    prior = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    s = delphi.score_design(design, {"params": 7e10, "tokens": 1.4e12}, prior)
    _short(repr(s))
    assert f"width={s.width:.4g}" in repr(s) and f"[{s.lower:.4g}, {s.upper:.4g}]" in repr(s)
    assert str(s) == s.report()


# ------------------------------------------------------------------- notes: terminal vs pipe
LONG = ("the ladder's FLOP convention k = C/(6ND) is 0.96 (median of 7 runs); a target given "
        "by N and D gets C = k 6ND, and its flops_source says so in the JSON")


class _Tty:
    """A stderr that says it is a terminal and keeps what is written."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def fileno(self):
        raise OSError("not a real terminal")

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_a_note_on_a_terminal_is_wrapped_to_its_width(monkeypatch):
    from delphi.presentation.cli import output
    monkeypatch.setattr(output, "is_quiet", lambda: False)
    tty = _Tty()
    monkeypatch.setattr(output.sys, "stderr", tty)
    monkeypatch.setenv("COLUMNS", "60")
    output.note(LONG)
    lines = tty.text.splitlines()
    assert len(lines) > 2 and all(len(x) <= 60 for x in lines), lines
    assert lines[0].startswith("delphi: note: the ladder's")
    assert all(x.startswith(" " * 14) and x[14] != " " for x in lines[1:])
    assert " ".join(x.strip() for x in lines) == "delphi: note: " + LONG   # no word lost
    monkeypatch.delenv("COLUMNS")
    tty.text = ""
    output.note(LONG)           # no COLUMNS and no size to ask: 80 columns
    lines = tty.text.splitlines()
    assert all(len(x) <= 80 for x in lines) and max(map(len, lines)) > 60 and len(lines) > 1


def test_a_note_to_a_pipe_stays_on_one_line(monkeypatch, capsys):
    from delphi.presentation.cli import output
    monkeypatch.setattr(output, "is_quiet", lambda: False)
    monkeypatch.setenv("COLUMNS", "60")
    output.note(LONG)
    err = capsys.readouterr().err
    assert err == "delphi: note: " + LONG + "\n"


# ------------------------------------------------------------------ one --json shape: object
def _cli(capsys, *argv):
    from delphi.presentation.cli import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ladders_json_is_an_object_with_the_list(capsys):
    import json
    code, out, _ = _cli(capsys, "ladders", "--json")
    doc = json.loads(out)
    assert code == 0 and isinstance(doc, dict) and doc["n_ladders"] == len(doc["ladders"]) > 0
    assert {"name", "description"} <= set(doc["ladders"][0])


def test_registry_list_json_is_an_object_with_the_entries(capsys):
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "ladders" / "marin-registry.jsonl"
    code, out, _ = _cli(capsys, "registry", "list", "--registry", str(path), "--json")
    doc = json.loads(out)
    assert code == 0 and isinstance(doc, dict) and doc["registry"] == str(path)
    assert doc["n_entries"] == len(doc["entries"]) > 0 and "id" in doc["entries"][0]


# ----------------------------------------------------- one run name: a missing run column
def test_several_model_sizes_under_one_run_name_say_the_run_column_is_missing():
    rows = [{"run": "exp1", "params": n, "tokens": 20 * n, "loss": 1.7 + 400 / n ** 0.3}
            for n in (1e7, 2e7, 4e7, 8e7, 1.6e8)]
    with pytest.raises(delphi.LadderError, match=r"every row of the ladder has run 'exp1'.*"
                                                 r"run column missing.*--columns run=NAME"):
        delphi.load_ladder(pd.DataFrame(rows))


def test_a_token_sweep_under_one_run_name_is_a_ladder_error_not_a_one_point_fit():
    rows = [{"run": "exp1", "params": 1e8, "tokens": r * 1e8, "loss": 1.7 + 400 / (r * 1e8) ** .3}
            for r in (5, 10, 20, 40, 80)]
    lad = delphi.load_ladder(pd.DataFrame(rows))
    for law in ("power", "chinchilla"):
        with pytest.raises(delphi.LadderError, match=r"all 5 rows have run 'exp1'.*1 point.*"
                                                     r"tokens 5e\+08\.\.8e\+09.*run column"):
            delphi.fit(lad, law)


# ------------------------------------------- registry: tracked checkpoints are not "0 scored"
def _tracked_registry(path):
    from delphi.registry import Registry
    reg = Registry(path)
    reg.register_external(id="p", loss=2.0, target={"flops": 1e21}, source="test",
                          curve=[(0.1, 3.0), (0.5, 2.4), (1.0, 2.0)])
    for fr in (0.2, 0.3, 0.4):
        reg.score("p", 2.8 - fr, fraction=fr)
    return reg


def test_registry_report_counts_tracked_checkpoints(tmp_path, capsys):
    import json
    reg = _tracked_registry(tmp_path / "r.jsonl")
    board = reg.report()
    assert (board.n_partial, board.tracked) == (3, ("p",))
    assert board.counts_text() == "0 final outcomes, 3 tracked checkpoints (of 1 prediction)"
    assert "3 tracked checkpoints (partial outcomes) of p" in board.to_markdown()
    assert board.to_dict()["n_partial"] == 3
    code, out, _ = _cli(capsys, "report", "--registry", str(reg.path), "--html",
                        str(tmp_path / "page"))
    assert code == 0 and "1 prediction, 0 final outcomes, 3 tracked checkpoints" in out
    assert "0 scored" not in out
    code, out, _ = _cli(capsys, "report", "--registry", str(reg.path), "--html",
                        str(tmp_path / "page2"), "--json")
    doc = json.loads(out)
    assert (doc["n_scored"], doc["n_partial"], doc["tracked"]) == (0, 3, ["p"])


# ------------------------------------------------------ suggest --n-refit: one minimum
def test_suggest_n_refit_minimum_is_the_apis(capsys):
    from delphi.analyses.design import MIN_REFIT
    from delphi.presentation.cli import design as cli_design
    assert cli_design.MIN_REFIT == MIN_REFIT == 8
    from delphi.presentation.cli import main
    with pytest.raises(SystemExit):
        main(["suggest", "--help"])
    assert "at least 8, one per noise stratum" in " ".join(capsys.readouterr().out.split())
    # the CLI takes what the API takes: 8 parses, 7 is a usage error
    from delphi.presentation.cli.main import build_parser
    parser, _ = build_parser()
    args = parser.parse_args(["suggest", "x.csv", "--target-flops", "1e22", "--n-refit", "8"])
    assert args.n_refit == 8
    with pytest.raises(SystemExit):
        parser.parse_args(["suggest", "x.csv", "--target-flops", "1e22", "--n-refit", "7"])
    with pytest.raises(delphi.FitError, match=">= 8"):
        delphi.suggest_runs(_ladder8(), {"params": 1e10, "tokens": 2e11}, method="refit",
                            n_refit=7)


# -------------------------------------- a final loss in another unit is refused, not recorded
@pytest.mark.parametrize("actual, likely", [
    (2.4 / 0.6931471805599453, "1/ln 2: an actual in bits against a prediction in nats"),
    (0.9, "bits/byte against a prediction in nats/token"),
    (6.0, "another unit, metric or evaluation set"),
])
def test_a_final_loss_far_off_its_prediction_is_refused_unless_forced(tmp_path, capsys, actual,
                                                                       likely):
    import json
    from delphi.registry import Registry
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_external(id="p", loss=2.4, target={"flops": 1e21}, source="test")
    before = reg.path.read_bytes()
    with pytest.raises(delphi.RegistryError, match="not recorded") as e:
        reg.score("p", actual)
    assert f"{actual / 2.4:.3g}x the prediction" in str(e.value) and likely in str(e.value)
    assert "force=True (CLI --force)" in str(e.value)
    assert reg.path.read_bytes() == before                   # nothing written
    code, out, err = _cli(capsys, "score", "--registry", str(reg.path), "--id", "p",
                          "--actual", repr(actual), "--json")
    assert code == 1 and json.loads(out)["error"]["type"] == "RegistryError"
    assert "--force" in err and reg.path.read_bytes() == before
    code, out, _ = _cli(capsys, "score", "--registry", str(reg.path), "--id", "p",
                        "--actual", repr(actual), "--force", "--json")
    assert code == 0 and json.loads(out)["actual"] == actual
    assert reg.verify().ok and reg.verify().n_entries == 2


def test_near_misses_and_partial_outcomes_are_not_refused(tmp_path):
    from delphi.registry import Registry
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_external(id="p", loss=2.4, target={"flops": 1e21}, source="test",
                          curve=[(0.1, 3.0), (0.5, 2.6), (1.0, 2.4)])
    assert reg.score("p", 4.5, fraction=0.5).fraction == 0.5    # 1.7x the curve: tracked
    assert reg.score("p", 2.4 * 1.29).final                      # within 1.3x: recorded


# ------------------------------------------------ the notebook user's slips: say the fix
def test_typos_of_a_law_or_ladder_name_suggest_the_name():
    with pytest.raises(delphi.LawError, match=r"unknown law 'chinchila' \(did you mean "
                                              r"'chinchilla'\?\)"):
        delphi.fit(_ladder(), "chinchila")
    with pytest.raises(delphi.LadderError, match=r"did you mean 'marin-delphi-dense'\?"):
        delphi.load_ladder("marin-delphi-dens")
    with pytest.raises(delphi.LawError) as e:      # nothing close: no guess
        delphi.fit(_ladder(), "zzz")
    assert "did you mean" not in str(e.value)


def test_a_target_given_as_a_string_says_to_pass_the_number():
    with pytest.raises(delphi.TargetError, match=r"pass the number 1e\+22, not the string '1e22'"):
        delphi.predict(_ladder(), "1e22", "power")


def test_complete_and_suggest_without_their_required_argument_say_what_to_give():
    with pytest.raises(MissingArgumentError, match=r"complete\(\) needs a run: one of the "
                                                   r"ladder's 5 runs \('r0', 'r1'"):
        delphi.complete(_ladder())
    with pytest.raises(MissingArgumentError, match=r"suggest_runs\(\) needs the target.*'flops'"):
        delphi.suggest_runs(_ladder())
