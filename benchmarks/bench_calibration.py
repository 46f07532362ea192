"""Benchmark: extrapolation-calibrated intervals, ``auto`` and the ensemble on every public
ladder (issue 11, item 5).

For each ladder, :func:`delphi.selection.compare` refits every default candidate law
(:func:`delphi.selection.default_candidates`) leave-future-out at the same cuts (at most 12,
evenly spaced; the rolling-origin evaluation of Tashman 2000), and this script scores, on the
same (cut budget, run) pairs:

* the **default law** (:func:`delphi.forecast.default_law`): its own leave-future-out error;
* **auto, nested**: at the fold cut at budget b_k, the candidate with the lowest mean |log
  error| on the predictions of *earlier* folds restricted to runs at or below b_k -- what a
  forecaster fitting up to b_k could have seen -- and its prediction at fold k;
* **the ensemble, nested**: inverse-MSE weights (Bates & Granger 1969) from the same
  earlier-fold data, members under 1% dropped and the rest renormalised, and the weighted
  geometric mean of the members' forecasts (so its log error is the weighted mean of theirs).

Folds with no earlier fold (the first) have no nested choice and are left out of all three
numbers. Each fixed candidate is scored on the same pairs, for "auto no worse than the best
fixed law". Coverage of the 90% new-run intervals of the default law, before (delta method)
and after calibration, comes from :func:`delphi.calibration.calibration_backtest` of the
default law on its own cuts (at most 12, as a forecast calibrates), itself nested.

The issue's targets are printed met / not met: pooled calibrated coverage in 85-95% and no
ladder below 70%; auto worse than the best fixed law on at most 2 ladders; auto better than
the default law pooled. Pooled figures are over predictions; the per-ladder mean is also
given. Extra rows (not pooled, no target): openathena-isoflops, and Gadre et al.'s C4- and
RefinedWeb-trained runs (the bundled ``gadre2024`` ladder is the RedPajama ones), read with a
temporary copy of the bundled manifest whose filter keeps the other training set.

Deterministic (seed 0 for every fit), no network. Usage:
python benchmarks/bench_calibration.py [--quick] [--only NAME ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from delphi.selection import fold_weights

#: (ladder, pooled): the ladders of issue 11, item 5; unpooled ones are extra rows.
LADDERS = [
    ("epoch-chinchilla", True), ("porian2024-rw", True), ("porian2024-owt2", True),
    ("gadre2024", True), ("marin-isoflop-comma", True), ("marin-isoflop-dclm", True),
    ("marin-isoflop-nemotron", True), ("misfitting2025-final", True), ("olmo-ladder", True),
    ("marin-delphi-dense", True),
    ("openathena-isoflops", False), ("gadre2024-c4", False), ("gadre2024-rw", False),
]
#: Gadre et al.'s other training sets: ladder name -> the flat table's ``dataset`` value.
GADRE_VARIANTS = {"gadre2024-c4": "c4_original", "gadre2024-rw": "rw_original"}
MAX_FOLDS = 12
LEVEL = 0.9
SEED = 0
#: An ensemble member weighing less than this is dropped (as delphi.selection does).
MIN_WEIGHT = 0.01
#: Targets of issue 11, item 5.
COVERAGE_RANGE = (0.85, 0.95)
COVERAGE_FLOOR = 0.70
MAX_AUTO_WORSE = 2


# ------------------------------------------------------------------------------- loading
def load(name: str):
    """The ladder ``name``: a bundled ladder, or a Gadre variant (:data:`GADRE_VARIANTS`) read
    through a temporary copy of the bundled ``gadre2024`` manifest with its filter changed
    (the data stay in the published-ladders directory).

    Raises LadderError / ManifestError / DataDirError as :func:`delphi.load_ladder`."""
    import delphi
    from delphi.readers.paths import BUNDLED_DIR
    if name not in GADRE_VARIANTS:
        return delphi.load_ladder(name)
    dataset = GADRE_VARIANTS[name]
    text = (BUNDLED_DIR / "gadre2024.toml").read_text()
    for old, new in (('name = "gadre2024"', f'name = "{name}"'),
                     ('equals = "rpj"', f'equals = "{dataset}"'),
                     ("on RedPajama: 35 runs", f"on {dataset}")):
        if old not in text:
            raise RuntimeError(f"bundled gadre2024.toml changed: {old!r} not found")
        text = text.replace(old, new)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.toml"
        path.write_text(text)
        return delphi.load_ladder(path)


def run_budgets(ladder) -> dict[str, float]:
    """Each finished run's compute budget label [FLOPs] (runs within 5% of compute share one,
    labelled by the smallest), exactly as leave-future-out cuts group them."""
    from delphi.law_inputs import budget_labels
    finals, _ = ladder.final_points()
    finals = finals.reset_index(drop=True)
    return dict(zip(finals["run"].astype(str), budget_labels(finals).astype(float)))


# ------------------------------------------------------------------- nested selection
def _pairs(errors) -> dict[tuple[float, str], float]:
    return {(float(b), str(r)): float(e)
            for b, r, e in zip(errors.budget, errors.run, errors.log_error)}


def nested_selection(errors: Mapping[str, object], default: str,
                     run_budget: Mapping[str, float],
                     n_free: Mapping[str, int] | None = None) -> dict:
    """Honest (nested) scores of the default law, ``auto`` and the ensemble.

    Parameters
    ----------
    errors: candidate label -> its leave-future-out errors (an object with arrays
        ``budget`` [FLOPs, the cut's budget label], ``run`` and ``log_error``, one element per
        prediction; :class:`delphi.calibration.LFOErrors`).
    default: label of the default law (one of ``errors``).
    run_budget: run -> its own budget label [FLOPs] (:func:`run_budgets`).
    n_free: label -> free parameters, the tie-break of equal mean errors (fewer first, as
        :func:`delphi.selection.compare` ranks); default 0 for every candidate.

    Only the (budget, run) pairs every candidate predicted are scored. At fold k (budget
    b_k), the *earlier data* are the pairs of folds with budget < b_k whose run has budget
    <= b_k; auto takes the candidate with the lowest mean |log error| on them, and the
    ensemble weights 1/MSE on them (members < 1% dropped, renormalised; its log error is the
    weighted mean of the members', the log of a weighted geometric mean forecast). A fold
    with no earlier data is left out of every score.

    Returns
    -------
    dict: ``n_folds`` (folds with common pairs), ``n_scored_folds``, ``n_skipped_folds``,
    ``n_pairs`` (scored), per-pair arrays ``default``, ``auto``, ``ensemble`` and per
    candidate (``fixed``: label -> array) of log errors, shape (n_pairs,), and ``folds``: per
    scored fold its budget, earlier pairs, auto's choice and the ensemble weights.

    Raises
    ------
    KeyError: ``default`` is not among ``errors``, or a predicted run has no budget.
    """
    labels = list(errors)
    if default not in errors:
        raise KeyError(f"default law {default!r} is not among the candidates {labels}")
    n_free = dict(n_free or {})
    table = {c: _pairs(errors[c]) for c in labels}
    common = set.intersection(*(set(t) for t in table.values()))
    budgets = sorted({b for b, _ in common})
    out = {"n_folds": len(budgets), "folds": [], "default": [], "auto": [], "ensemble": [],
           "fixed": {c: [] for c in labels}}
    for b_k in budgets:
        earlier = sorted(p for p in common
                         if p[0] < b_k and run_budget[p[1]] <= b_k * (1 + 1e-9))
        if not earlier:
            continue                   # nothing a forecaster at b_k could have scored
        mine = sorted(p for p in common if p[0] == b_k)
        past = {c: np.array([table[c][p] for p in earlier]) for c in labels}
        # the rule of delphi.selection.compare: later folds weigh more (fold_weights)
        fw = fold_weights([p[0] for p in earlier])
        mean_abs = {c: float(np.sum(fw * np.abs(e))) for c, e in past.items()}
        chosen = min(labels, key=lambda c: (mean_abs[c], n_free.get(c, 0)))
        inv = np.array([1.0 / max(float(np.sum(fw * past[c] ** 2)), 1e-12) for c in labels])
        w = inv / inv.sum()
        w = np.where(w >= MIN_WEIGHT, w, 0.0)
        w = w / w.sum()
        now = {c: np.array([table[c][p] for p in mine]) for c in labels}
        out["default"] += now[default].tolist()
        out["auto"] += now[chosen].tolist()
        out["ensemble"] += sum(wi * now[c] for wi, c in zip(w, labels)).tolist()
        for c in labels:
            out["fixed"][c] += now[c].tolist()
        out["folds"].append({"budget": b_k, "n_earlier": len(earlier), "n_predicted": len(mine),
                             "auto": chosen, "earlier_mean_abs_error": mean_abs,
                             "weights": {c: float(x) for c, x in zip(labels, w) if x > 0}})
    out["n_scored_folds"] = len(out["folds"])
    out["n_skipped_folds"] = out["n_folds"] - out["n_scored_folds"]
    for k in ("default", "auto", "ensemble"):
        out[k] = np.asarray(out[k], float)
    out["fixed"] = {c: np.asarray(v, float) for c, v in out["fixed"].items()}
    out["n_pairs"] = len(out["default"])
    return out


def _mean_abs(a) -> float | None:
    return float(np.mean(np.abs(a))) if len(a) else None


# ------------------------------------------------------------------------ one ladder
def bench_ladder(ladder, *, candidates: Sequence | None = None, max_folds: int = MAX_FOLDS,
                 seed: int = SEED, level: float = LEVEL, comparison=None,
                 coverage: bool = True) -> dict:
    """Scores of one ladder: nested default / auto / ensemble errors and the default law's
    coverage before and after calibration.

    ``candidates``: default :func:`delphi.selection.default_candidates`. ``comparison``: a
    ready :class:`delphi.selection.Comparison` (its scores' ``backtest.errors`` are read)
    instead of running :func:`delphi.selection.compare`. ``coverage=False`` skips the
    calibration backtest.

    Returns a JSON-ready dict: ``ladder``, ``default_law``, ``candidates``, ``why`` (None,
    or why the errors could not be scored), ``n_folds``, ``n_scored_folds``,
    ``n_skipped_folds``, ``n_pairs``, ``mae`` (default / auto / ensemble / per candidate,
    mean |log error|), ``best_fixed``, ``auto_worse`` (auto's mean |error| above the best
    fixed law's), ``auto_choices``, ``coverage`` (before / after, counts, or ``why``), and
    the per-pair arrays under ``_arrays`` (for pooling; dropped from JSON).
    """
    from delphi.calibration import calibration_backtest
    from delphi.errors import DelphiError
    from delphi.forecast import default_law
    from delphi.selection import Candidate, compare, default_candidates

    law = default_law(ladder)
    cands = list(candidates) if candidates is not None else default_candidates(ladder)
    res: dict = {"ladder": ladder.name, "default_law": law,
                 "candidates": [c.label if isinstance(c, Candidate) else str(c) for c in cands],
                 "why": None, "n_folds": 0, "n_scored_folds": 0, "n_skipped_folds": 0,
                 "n_pairs": 0, "mae": {}, "best_fixed": None, "auto_worse": None,
                 "auto_choices": {}, "not_scored": {}, "coverage": {"why": None}}
    t0 = time.perf_counter()
    try:
        if comparison is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                comparison = compare(ladder, cands, max_folds=max_folds, level=level, seed=seed)
    except DelphiError as exc:
        res["why"] = f"no candidate can be backtested: {exc}"
    if comparison is not None:
        res["cuts"] = list(comparison.cuts)
        res["not_scored"] = {s.candidate.label: s.error for s in comparison.scores
                             if not s.scored}
        # the candidates the ladder's own backtest scored (under compare's reference rule,
        # for ladders with too few cuts, ``ranked`` also lists candidates without a backtest)
        ranked = {s.candidate.label: s for s in comparison.scores if s.scored}
        default_label = next((s.candidate.label for s in comparison.scores
                              if s.candidate.law == law and not s.candidate.fixed), law)
        if default_label not in ranked:
            res["why"] = (f"default law {law} cannot be backtested: "
                          f"{res['not_scored'].get(default_label, 'not a candidate')}")
        else:
            nested = nested_selection(
                {c: s.backtest.errors for c, s in ranked.items()}, default_label,
                run_budgets(ladder),
                {c: len(s.params) - len(s.candidate.fixed) for c, s in ranked.items()})
            res.update({k: nested[k] for k in ("n_folds", "n_scored_folds", "n_skipped_folds",
                                               "n_pairs")})
            res["folds"] = nested["folds"]
            if not nested["n_pairs"]:
                res["why"] = (f"no fold has an earlier fold to choose from ({nested['n_folds']} "
                              f"fold(s) with pairs every candidate predicted)")
            else:
                mae = {"default": _mean_abs(nested["default"]), "auto": _mean_abs(nested["auto"]),
                       "ensemble": _mean_abs(nested["ensemble"])}
                fixed = {c: _mean_abs(v) for c, v in nested["fixed"].items()}
                best = min(fixed, key=fixed.get)
                res["mae"] = {**mae, "fixed": fixed}
                res["best_fixed"] = best
                res["auto_worse"] = bool(mae["auto"] > fixed[best] * (1 + 1e-9))
                res["auto_choices"] = {c: sum(f["auto"] == c for f in nested["folds"])
                                       for c in ranked}
                res["_arrays"] = {k: nested[k] for k in ("default", "auto", "ensemble")}
    res["compare_seconds"] = time.perf_counter() - t0
    if coverage:
        t1 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bt = calibration_backtest(ladder, law, level=level, max_folds=max_folds,
                                          seed=seed)
            n = len(bt.inside_after)
            res["coverage"] = {"why": None, "n": n, "n_predictions": len(bt.errors),
                               "n_folds": bt.errors.n_folds,
                               "inside_before": int(bt.inside_before.sum()),
                               "inside_after": int(bt.inside_after.sum()),
                               "before": float(bt.inside_before.mean()) if n else None,
                               "after": float(bt.inside_after.mean()) if n else None}
            if not n:
                res["coverage"]["why"] = (f"{bt.errors.n_folds} fold(s): a calibrated interval "
                                          f"needs 3 earlier folds")
        except DelphiError as exc:
            res["coverage"] = {"why": f"default law {law} cannot be backtested: {exc}"}
        res["coverage_seconds"] = time.perf_counter() - t1
    return res


# ----------------------------------------------------------------------- pooled, targets
def pool(results: list[dict]) -> dict:
    """Pooled figures over the pooled ladders' results (over predictions, and the mean of the
    per-ladder figures) and the issue's four targets, each with ``met``."""
    scored = [r for r in results if r.get("_arrays")]
    arrays = {k: np.concatenate([r["_arrays"][k] for r in scored]) if scored else np.array([])
              for k in ("default", "auto", "ensemble")}
    out: dict = {"ladders_scored": [r["ladder"] for r in scored], "n_pairs": len(arrays["auto"]),
                 "mae": {k: _mean_abs(v) for k, v in arrays.items()},
                 "mae_ladder_mean": {k: (float(np.mean([r["mae"][k] for r in scored]))
                                         if scored else None)
                                     for k in ("default", "auto", "ensemble")}}
    cov = [r for r in results if r["coverage"].get("n")]
    n = sum(r["coverage"]["n"] for r in cov)
    out["coverage"] = {
        "ladders": [r["ladder"] for r in cov], "n": n,
        "before": sum(r["coverage"]["inside_before"] for r in cov) / n if n else None,
        "after": sum(r["coverage"]["inside_after"] for r in cov) / n if n else None,
        "before_ladder_mean": float(np.mean([r["coverage"]["before"] for r in cov])) if cov
        else None,
        "after_ladder_mean": float(np.mean([r["coverage"]["after"] for r in cov])) if cov
        else None}
    after = out["coverage"]["after"]
    low = [(r["ladder"], r["coverage"]["after"]) for r in cov
           if r["coverage"]["after"] < COVERAGE_FLOOR]
    worse = [r["ladder"] for r in scored if r["auto_worse"]]
    mae = out["mae"]
    out["targets"] = [
        {"target": f"pooled calibrated 90% coverage in {COVERAGE_RANGE[0]:.0%}-"
                   f"{COVERAGE_RANGE[1]:.0%}",
         "value": "-" if after is None else f"{after:.1%} of {n}",
         "met": after is not None and COVERAGE_RANGE[0] <= after <= COVERAGE_RANGE[1]},
        {"target": f"no ladder below {COVERAGE_FLOOR:.0%} calibrated coverage",
         "value": ", ".join(f"{a} {c:.0%}" for a, c in low) or
                  (f"lowest {min(r['coverage']['after'] for r in cov):.0%}" if cov else "-"),
         "met": bool(cov) and not low},
        {"target": f"auto worse than the best fixed law on at most {MAX_AUTO_WORSE} ladders",
         "value": f"{len(worse)} of {len(scored)}" + (f" ({', '.join(worse)})" if worse else ""),
         "met": bool(scored) and len(worse) <= MAX_AUTO_WORSE},
        {"target": "auto better than the default law, pooled mean abs error",
         "value": "-" if mae["auto"] is None else
                  f"auto {mae['auto']:.2%} vs default {mae['default']:.2%}",
         "met": mae["auto"] is not None and mae["auto"] < mae["default"]},
    ]
    return out


# ------------------------------------------------------------------------------ printing
def _pc(v, digits=2) -> str:
    return "-" if v is None else f"{100 * v:.{digits}f}%"


def table(results: list[dict], pooled: dict) -> list[str]:
    """The Markdown table: one row per ladder, then the pooled rows and the targets."""
    lines = ["| ladder | default law | folds scored (skipped) | pairs | default mean abs err | "
             "auto | ensemble | best fixed | auto's picks | 90% coverage before -> after (n) "
             "| note |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        name = r["ladder"] + ("" if r["pooled"] else " (extra)")
        c = r["coverage"]
        cov = (f"{_pc(c['before'], 0)} -> {_pc(c['after'], 0)} ({c['n']})" if c.get("n")
               else f"- ({c['why']})".replace("|", "/"))
        if r["mae"]:
            m = r["mae"]
            best = f"{r['best_fixed']} {_pc(m['fixed'][r['best_fixed']])}"
            picks = ", ".join(f"{k} {v}" for k, v in r["auto_choices"].items() if v)
            note = "auto worse than best fixed" if r["auto_worse"] else ""
            if r["not_scored"]:
                note = "; ".join([note] * bool(note) + [f"{k} not scored" for k in r["not_scored"]])
            lines.append(f"| {name} | {r['default_law']} | {r['n_scored_folds']} "
                         f"({r['n_skipped_folds']}) | {r['n_pairs']} | {_pc(m['default'])} | "
                         f"{_pc(m['auto'])} | {_pc(m['ensemble'])} | {best} | {picks} | {cov} | "
                         f"{note} |")
        else:
            why = str(r["why"]).replace("|", "/").replace("\n", " ")
            lines.append(f"| {name} | {r['default_law']} | - | - | - | - | - | - | - | {cov} | "
                         f"{why[:300]} |")
    p = pooled
    pc = p["coverage"]
    lines.append(f"| **pooled over predictions** ({len(p['ladders_scored'])} ladders; coverage "
                 f"{len(pc['ladders'])}) | | | {p['n_pairs']} | {_pc(p['mae']['default'])} | "
                 f"{_pc(p['mae']['auto'])} | {_pc(p['mae']['ensemble'])} | | | "
                 f"{_pc(pc['before'], 1)} -> {_pc(pc['after'], 1)} ({pc['n']}) | |")
    lm = p["mae_ladder_mean"]
    lines.append(f"| **mean of ladders** | | | | {_pc(lm['default'])} | {_pc(lm['auto'])} | "
                 f"{_pc(lm['ensemble'])} | | | {_pc(pc['before_ladder_mean'], 1)} -> "
                 f"{_pc(pc['after_ladder_mean'], 1)} | |")
    lines += ["", "| target (issue 11, item 5) | measured | met |", "|---|---|---|"]
    for t in p["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {'yes' if t['met'] else '**no**'} |")
    return lines


def _strip(r: dict) -> dict:
    return {k: v for k, v in r.items() if not k.startswith("_")}


def bench(names: Sequence[str] | None = None, *, max_folds: int = MAX_FOLDS,
          verbose: bool = True) -> tuple[list[dict], dict]:
    """Every ladder of :data:`LADDERS` (or ``names``): ``(results, pooled)``. A ladder that
    cannot be loaded gets a row saying why."""
    from delphi.errors import DelphiError
    results = []
    for name, pooled in LADDERS:
        if names and name not in names:
            continue
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ladder = load(name)
            r = bench_ladder(ladder, max_folds=max_folds)
        except DelphiError as exc:
            r = {"ladder": name, "default_law": "-", "why": f"not loaded: {exc}", "mae": {},
                 "coverage": {"why": "not loaded"}, "not_scored": {}}
        r["pooled"] = pooled
        r["seconds"] = time.perf_counter() - t0
        results.append(r)
        if verbose:
            m = r.get("mae") or {}
            print(f"  {name}: {r['seconds']:.0f} s; default {_pc(m.get('default'))}, auto "
                  f"{_pc(m.get('auto'))}, ensemble {_pc(m.get('ensemble'))}; coverage "
                  f"{_pc(r['coverage'].get('before'), 0)} -> "
                  f"{_pc(r['coverage'].get('after'), 0)}"
                  + (f"; {r['why']}" if r.get("why") else ""), flush=True)
    return results, pool([r for r in results if r["pooled"]])


def run(quick: bool = False) -> list[dict]:
    """Rows for ``benchmarks/run_all.py``: the four targets (``quick``: 6 folds a ladder)."""
    results, pooled = bench(max_folds=6 if quick else MAX_FOLDS, verbose=False)
    return [{"benchmark": "calibration (issue 11)", "figure": t["target"], "value": t["value"],
             "unit": "", "baseline": None, "baseline_value": None, "ratio": None,
             "target": None, "met": t["met"],
             "note": f"{sum(r['pooled'] for r in results)} ladders pooled (+"
                     f"{sum(not r['pooled'] for r in results)} extra), leave-future-out, nested; "
                     f"table: python benchmarks/bench_calibration.py"}
            for t in pooled["targets"]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 folds a ladder instead of 12")
    parser.add_argument("--only", nargs="*", help="ladder names (default: all)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits
    started = time.perf_counter()
    with threadpool_limits(1):   # small matrices; leave the other core to the machine
        results, pooled = bench(args.only, max_folds=6 if args.quick else MAX_FOLDS)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print()
    print(f"Leave-future-out, at most {6 if args.quick else MAX_FOLDS} folds a ladder, seed "
          f"{SEED}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{time.perf_counter() - started:.0f} s"
          + (f"; load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}" if load else ""))
    print("\n".join(table(results, pooled)))
    if args.json:
        payload = {"results": [_strip(r) for r in results],
                   "pooled": pooled, "max_folds": 6 if args.quick else MAX_FOLDS, "seed": SEED,
                   "level": LEVEL}
        Path(args.json).write_text(json.dumps(payload, indent=1, default=float))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
