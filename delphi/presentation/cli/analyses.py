"""``delphi isoflop``, ``optimal``, ``plan``, ``compare`` and ``hparams``.

:func:`add_commands` registers the subcommands and returns ``{command: handler}``; each
handler takes the parsed arguments and returns the exit code. Handlers only parse and print:
the science is in :mod:`delphi.analyses` and :mod:`delphi.selection`. Errors are
:class:`~delphi.errors.DelphiError` subclasses, printed by :func:`delphi.cli.main` as one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from .output import json_text, print_json, UsageError
from .options import (LADDER_HELP, METRIC_HELP, add_ladder_options, add_level_option,
                      bound_triple, count, examples, fixed_pair, load_from_args, loss_floor,
                      open_share, positive_float, ratio_at_least_one, serial, target_value)
from ...errors import FitError, LadderError

__all__ = ["add_commands"]

Handler = Callable[[argparse.Namespace], int]


# ------------------------------------------------------------------------------- arg types
def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _common(p: argparse.ArgumentParser) -> None:
    add_ladder_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    # isoflop, plan and compare: their library functions have no parallel step
    # (hparams and optimal, which have, do not call this).
    serial(p)


def _fix_bound_options(p: argparse.ArgumentParser, fix_help: str) -> None:
    """``--fix``, ``--bound`` and ``--fit-max-flops`` of the commands that fit a law."""
    p.add_argument("--fix", type=fixed_pair, action="append", default=[], metavar="NAME=VALUE",
                   help=fix_help)
    p.add_argument("--bound", type=bound_triple, action="append", default=[],
                   metavar="NAME=LO:HI", help="bound a parameter (repeatable)")
    p.add_argument("--fit-max-flops", type=target_value("flops"), metavar="C",
                   help="fit only runs with compute at or below C FLOPs")


def _dump(obj: dict) -> str:
    return json_text(obj)


# ------------------------------------------------------------------------------- isoflop
def _add_isoflop(sub) -> None:
    p = sub.add_parser(
        "isoflop", help="compute-optimal N*(C), D*(C) from isoFLOP budgets (Approach 2) or "
                        "the lower envelope of loss curves (Approach 1)",
        description="Hoffmann et al. 2022 Approaches 1 and 2. Porian et al. 2024's fits: "
                    "--method akima --bootstrap noise --noise 0.002 --center median --weighted.",
        epilog=examples(
            "delphi isoflop marin-isoflop-dclm --target-flops 1e22",
            "delphi isoflop porian2024-owt2 --method akima --bootstrap noise --noise 0.002 "
            "--center median --weighted",
            "delphi isoflop olmo-ladder --approach 1 --json"))
    p.add_argument("ladder", help=LADDER_HELP)
    p.add_argument("--approach", type=int, choices=(1, 2), default=2,
                   help="2: a curve per compute budget (default); 1: lower envelope of curves")
    p.add_argument("--method", choices=("parabola", "cubic", "akima"), default="parabola",
                   help="per-budget fit of loss against ln N (Approach 2; default parabola)")
    p.add_argument("--window", type=integer, metavar="K",
                   help="fit only the K sizes around each budget's lowest loss")
    p.add_argument("--tolerance", type=positive_float, default=0.05, metavar="SHARE",
                   help="runs whose FLOPs agree within this share form a budget (default 0.05)")
    p.add_argument("--bootstrap", choices=("resample", "noise", "none"), default="resample",
                   help="per-budget bootstrap: resample points (default) or add loss noise")
    p.add_argument("--n-boot", type=integer, default=1000, metavar="N",
                   help="bootstrap draws per budget (default 1000)")
    p.add_argument("--noise", type=positive_float, metavar="SD",
                   help="loss noise standard deviation for --bootstrap noise")
    add_level_option(p, "level of the bootstrap percentile intervals")
    p.add_argument("--seed", type=integer, default=0, metavar="SEED",
                   help="bootstrap seed (default 0)")
    p.add_argument("--center", choices=("point", "median"), default="point",
                   help="fit the power law to point optima or bootstrap medians (default: "
                        "point)")
    p.add_argument("--weighted", action="store_true",
                   help="weight budgets by 1/sd^2 of their bootstrap ln N*")
    p.add_argument("--n-grid", type=integer, default=100, metavar="K",
                   help="Approach 1: log-spaced FLOP values (default 100)")
    p.add_argument("--min-runs", type=integer, default=2, metavar="K",
                   help="Approach 1: curves that must cover a FLOP value (default 2)")
    p.add_argument("--keep-edge", action="store_true",
                   help="Approach 1: also fit FLOP values won by the smallest or largest model")
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C",
                   help="also print N*, D* at this compute [FLOPs]")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    _common(p)


def _cmd_isoflop(args) -> int:
    from ...analyses.isoflop import envelope_analysis, isoflop_analysis
    if args.bootstrap == "noise" and args.noise is None:    # checked before the ladder is read
        raise UsageError("--bootstrap noise needs --noise SD, the run-to-run noise standard "
                         "deviation of a loss [loss units], e.g. --noise 0.01")
    ladder = load_from_args(args)
    if args.approach == 1:
        result = envelope_analysis(ladder, n_grid=args.n_grid, min_runs=args.min_runs,
                                   drop_edge=not args.keep_edge)
    else:
        result = isoflop_analysis(ladder, method=args.method, window=args.window,
                                  tolerance=args.tolerance, bootstrap=args.bootstrap,
                                  n_boot=args.n_boot, noise=args.noise, level=args.level,
                                  seed=args.seed, center=args.center, weighted=args.weighted)
    target = result.optimal(args.target_flops) if args.target_flops is not None else None
    if args.json:
        print(_dump({**result.to_dict(), "unit": ladder.unit, "target": target}))
        return 0
    print(result.report())
    print(f"losses in {ladder.unit} ({ladder.metric})")
    if target is not None:
        print(f"at C = {target['flops']:.4g}: N* = {target['params']:.4g} params, "
              f"D* = {target['tokens']:.4g} tokens, D*/N* = {target['tokens_per_param']:.3g}")
    return 0


# ------------------------------------------------------------------------------- optimal
def _add_optimal(sub) -> None:
    p = sub.add_parser(
        "optimal", help="compute-optimal N and D at a budget from a fitted Chinchilla law "
                        "(Hoffmann et al. 2022, Eq. 4)",
        epilog=examples(
            "delphi optimal epoch-chinchilla --target-flops 5.76e23",
            "delphi optimal epoch-chinchilla --target-flops 1e24 --json",
            "delphi optimal gadre2024 --target-flops 1e22 --allow-unidentified "
            "--allow-outside-design"))
    p.add_argument("ladder", help=LADDER_HELP)
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C",
                   help="target compute [FLOPs] (default: the manifest's target)")
    p.add_argument("--floor", type=loss_floor, metavar="E", help="fix the irreducible loss E")
    _fix_bound_options(p, "fix a parameter (repeatable)")
    p.add_argument("--include-unfinished", action="store_true",
                   help="also fit the last checkpoint of runs stopped early")
    p.add_argument("--draws", metavar="PATH",
                   help="CSV or JSON of parameter draws (columns A, B, alpha, beta) to take "
                        "the percentile intervals from instead of the bootstrap")
    add_level_option(p, "level of the percentile intervals of N_opt, D_opt, D/N and a")
    p.add_argument("--n-boot", type=count(0, 1_000_000), default=200, metavar="N",
                   help="bootstrap refits of the law for the intervals (default 200; 0: none, "
                        "else at least 20)")
    p.add_argument("--boot-unit", default="run", choices=["run", "budget"],
                   help="resample whole runs or whole compute budgets (default: run)")
    p.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="bootstrap seed (default 0)")
    p.add_argument("--allow-unidentified", action="store_true",
                   help="give the allocation even when the ladder does not identify alpha or "
                        "beta (flagged in the output) instead of refusing")
    p.add_argument("--allow-outside-design", action="store_true",
                   help="give the allocation even when it lies far outside the ladder's design "
                        "(D/N over 100x beyond the fitted runs', or N* shrinking at 10x the "
                        "largest compute; flagged in the output) instead of refusing")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    add_ladder_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    # no serial(p): -j runs the bootstrap draws in parallel


def _read_draws(path: str):
    import pandas as pd

    file = Path(path).expanduser()
    if not file.is_file():
        raise LadderError(f"parameter draws file not found: {file}")
    try:
        if file.suffix.lower() == ".json":
            data = json.loads(file.read_text())
            return data.get("draws", data) if isinstance(data, dict) else data
        return pd.read_csv(file)
    except (ValueError, OSError) as exc:
        raise FitError(f"cannot read parameter draws from {file}: {exc}") from None


def _manifest_target(ladder_arg: str, format: str | None = None) -> float | None:
    from ...inputs.readers import is_data_source, load_manifest

    # a data file (runs.csv, a W&B export), a TensorBoard directory or standard input ("-")
    if is_data_source(ladder_arg, format):
        return None
    defaults = load_manifest(ladder_arg).predict
    return getattr(defaults, "target_flops", None) if defaults is not None else None


def _cmd_optimal(args) -> int:
    from ...analyses.optimal import compute_optimal
    ladder = load_from_args(args)
    flops = (args.target_flops if args.target_flops is not None
             else _manifest_target(args.ladder, getattr(args, "format", None)))
    if flops is None:
        raise UsageError(f"delphi optimal needs --target-flops (ladder {ladder.name!r} names "
                         f"no target compute)")
    fixed = dict(args.fix)
    if args.floor is not None:
        fixed["E"] = args.floor
    draws = _read_draws(args.draws) if args.draws else None
    allocation = compute_optimal(ladder, flops, fixed=fixed or None,
                                 bounds=dict(args.bound) or None, draws=draws, level=args.level,
                                 n_boot=args.n_boot, boot_unit=args.boot_unit, seed=args.seed,
                                 n_jobs=getattr(args, "jobs", None),
                                 fit_max_flops=args.fit_max_flops,
                                 include_unfinished=args.include_unfinished,
                                 allow_unidentified=args.allow_unidentified,
                                 allow_outside=args.allow_outside_design)
    if args.json:
        print(_dump({**allocation.to_dict(), "ladder": {"name": ladder.name,
                                                        "source": ladder.source,
                                                        "metric": ladder.metric,
                                                        "unit": ladder.unit}}))
    else:
        print(f"ladder     {ladder.name} ({ladder.source}), metric {ladder.metric} [{ladder.unit}]")
        print(allocation.report())
    return 0


# ------------------------------------------------------------------------------- plan
def _add_plan(sub) -> None:
    p = sub.add_parser(
        "plan", help="propose a ladder of small runs for a target compute",
        description="Budgets log-spaced below the target (total = fraction x target), model "
                    "sizes centred on N*(C) (params = 12 * layers * d^2, layers = "
                    "round(d/100), d in steps of 128), tokens = budget / (6N), batch and LR "
                    "from the hyperparameter rule.",
        epilog=examples(
            "delphi plan --target-flops 1e23",
            "delphi plan --target-flops 1e23 --fraction 0.02 --budgets 5 --csv plan.csv",
            "delphi plan --target-flops 1e22 --from marin-isoflop-dclm --from-method isoflop",
            "delphi plan --target-flops 5.9e23 --target-params 7e10 --target-tokens 1.4e12 "
            "--score design.csv --prior-params E=1.69 A=406.4 B=410.7 alpha=0.34 beta=0.28"))
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C",
                   help="target compute [FLOPs] (or --target-params N with --target-tokens D: "
                        "C = 6 N D)")
    p.add_argument("--fraction", type=open_share, default=0.01, metavar="SHARE",
                   help="ladder compute as a share of the target's (default 0.01)")
    p.add_argument("--budgets", type=count(1), default=7, metavar="K",
                   help="number of compute budgets (default 7)")
    p.add_argument("--sizes-per-budget", type=count(1), default=5, metavar="M",
                   help="model sizes per budget (default 5)")
    p.add_argument("--rule", default="adamh", metavar="RULE",
                   help="hyperparameter rule for batch and peak LR (default adamh: Marin's)")
    p.add_argument("--tokens-per-param", type=positive_float, default=20.0, metavar="R",
                   help="prior D*/N* when no --from ladder is given (default 20)")
    p.add_argument("--max-tokens-per-param", type=positive_float, metavar="R",
                   help="drop runs above R tokens per parameter (Marin: 250)")
    p.add_argument("--span", type=ratio_at_least_one, default=100.0, metavar="RATIO",
                   help="largest / smallest budget (default 100, as 3e18..3e20)")
    p.add_argument("--spread", type=ratio_at_least_one, default=10.0, metavar="RATIO",
                   help="largest / smallest model size per budget (default 10)")
    p.add_argument("--from", dest="from_ladder", metavar="LADDER",
                   help="centre sizes on N*(C) fitted to this ladder instead of the prior")
    p.add_argument("--from-method", choices=("chinchilla", "isoflop"), default="chinchilla",
                   help="how --from estimates N*(C): a Chinchilla law (Eq. 4) or an isoFLOP "
                        "power law (Approach 2) (default: chinchilla)")
    p.add_argument("--metric", metavar="COLUMN", help="loss column of the --from ladder")
    p.add_argument("--csv", metavar="PATH", help="write the runs as a tidy CSV (- for "
                        "standard output; the report then goes to stderr)")
    from .design import add_score_options
    add_score_options(p)        # --score DESIGN.csv (issue 25)
    _common(p)


def _optimum_from(args):
    ladder = load_from_args(args, args.from_ladder)
    if args.from_method == "isoflop":
        from ...analyses.isoflop import isoflop_analysis

        result = isoflop_analysis(ladder)
        law = result.params_law
        if law is None:     # one budget: a vertex but no N*(C) to centre the plan on
            raise FitError(f"--from {ladder.name}: {'; '.join(result.notes)}")
        return (lambda c: float(law.predict(c)),
                f"an isoFLOP power law fitted to {ladder.name} ({law.formula})", None, (), None)
    from ...analyses.optimal import compute_optimal
    from ...analyses.planning import optimum_from_allocation

    # An unidentified split or a centre outside the ladder's design is flagged in the plan
    # rather than refused (see delphi.analyses.planning).
    # only the point law centres the plan: no bootstrap
    a = compute_optimal(ladder, args.target_flops, allow_unidentified=True, allow_outside=True,
                        n_boot=0)
    return (optimum_from_allocation(a.G, a.a),
            f"a Chinchilla law fitted to {ladder.name} (N* = {a.G:.4g} (C/6)^{a.a:.4f})",
            a.unidentified, a.outside,
            a.design["tokens_per_param"] if a.design else None)


def _cmd_plan(args) -> int:
    from ...analyses.planning import plan_ladder

    if args.target_flops is None:
        n, d = getattr(args, "target_params", None), getattr(args, "target_tokens", None)
        if n is None or d is None:
            from .output import UsageError
            raise UsageError("plan needs the target's compute: --target-flops C, or "
                             "--target-params N with --target-tokens D")
        if not args.score:
            args.target_flops = 6.0 * n * d      # the plan lays out budgets of C alone
    if args.score:
        from .design import score_command
        return score_command(args)

    optimum, prior, unidentified, outside, design = (
        _optimum_from(args) if args.from_ladder else (None, None, None, (), None))
    plan = plan_ladder(args.target_flops, fraction=args.fraction, budgets=args.budgets,
                       sizes_per_budget=args.sizes_per_budget, rule=args.rule,
                       tokens_per_param=args.tokens_per_param, optimum=optimum, prior=prior,
                       max_tokens_per_param=args.max_tokens_per_param, span=args.span,
                       spread=args.spread, unidentified=unidentified, outside=outside,
                       design_tokens_per_param=design)
    if args.csv == "-":
        # standard output, as '-' reads standard input for a ladder (it wrote a file named
        # '-'); the text report goes to stderr, so `plan --csv - | ...` pipes the CSV alone
        if args.json:
            from .output import UsageError
            raise UsageError("--csv - writes the runs to standard output, where --json "
                             "writes its document: give --csv a file, or leave out --json")
        plan.to_frame().to_csv(sys.stdout, index=False, float_format="%.6g")
        if not getattr(args, "quiet", False):
            print(plan.report(), file=sys.stderr)
        return 0
    written = str(plan.to_csv(args.csv)) if args.csv else None
    if args.json:
        print(_dump({**plan.to_dict(), "csv": written}))
        return 0
    print(plan.report())
    if written:
        print(f"wrote      {written} ({len(plan.runs)} runs)")
    return 0


# ------------------------------------------------------------------------------- compare
def _add_compare(sub) -> None:
    from .options import add_candidate_options
    p = sub.add_parser(
        "compare", help="backtest candidate laws (law, free or pinned floor, Huber delta) "
                        "leave-future-out and rank them",
        description="Each candidate is refitted below each of the same compute cuts and "
                    "predicts the budgets above; one row per candidate: leave-future-out mean "
                    "and max |error|, nested coverage of its 90% intervals before and after "
                    "calibration, AIC/BIC of the full fit, and its ensemble weight. "
                    "`delphi predict --law auto` uses the best; --ensemble averages them.",
        epilog=examples(
            "delphi compare marin-delphi-dense",
            "delphi compare epoch-chinchilla --laws power,chinchilla --max-folds 4",
            "delphi compare marin-delphi-dense --floors free,1.5 --deltas 1e-3,1e-2 --json"))
    p.add_argument("ladder", help=LADDER_HELP)
    add_candidate_options(p)
    _fix_bound_options(p, "fix a parameter in every candidate (repeatable)")
    add_level_option(p, "level of the intervals whose coverage is scored")
    p.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="random seed (>= 0)")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    _common(p)


def _cmd_compare(args) -> int:
    from .options import candidates_from
    from ...fitting import DEFAULT_DELTA
    from ...forecasting.selection import compare, default_candidates
    ladder = load_from_args(args)
    if args.fit_max_flops is not None:
        ladder = ladder.select(max_flops=args.fit_max_flops)
    fixed = dict(args.fix)
    cands = candidates_from(args, ladder, fixed, DEFAULT_DELTA)
    if cands is None:
        cands = default_candidates(ladder, fixed)
    result = compare(ladder, cands, bounds=dict(args.bound) or None, max_folds=args.max_folds,
                     level=args.level, seed=args.seed)
    if not result.ranked:
        result.best          # FitError giving each candidate's reason: nothing was scored
    print(_dump(result.to_dict()) if args.json else result.report())
    return 0


# ------------------------------------------------------------------------------- wiring
def add_commands(subparsers) -> dict[str, Handler]:
    """Register ``isoflop``, ``optimal``, ``plan``, ``compare`` and ``hparams`` on
    ``subparsers`` (the object returned by ``parser.add_subparsers()``); return
    ``{command: handler(args) -> exit code}``."""
    _add_isoflop(subparsers)
    _add_optimal(subparsers)
    _add_plan(subparsers)
    _add_compare(subparsers)
    _add_hparams(subparsers)
    return {"isoflop": _cmd_isoflop, "optimal": _cmd_optimal, "plan": _cmd_plan,
            "compare": _cmd_compare, "hparams": _cmd_hparams}


# ------------------------------------------------------------------------------- hparams
def _add_hparams(subparsers) -> None:
    p = subparsers.add_parser("hparams", help="fit optimal-LR (and batch) laws from LR sweeps "
                              "and recommend them for a target",
                              epilog=examples(
                                  "delphi hparams misfitting2025-final --target-params 1e9 "
                                  "--target-tokens 2e10",
                                  "delphi hparams misfitting2025-final --law deepseek "
                                  "--target-flops 1e21 --json",
                                  "delphi hparams misfitting2025-final --groups"))
    p.add_argument("ladder", help=LADDER_HELP + "; its runs need LR sweeps (peak_lr)")
    p.add_argument("--law", default="steplaw", metavar="LAW",
                   help="deepseek (eta*(C), B*(C)) or steplaw (eta*(N, D), B*(D)); default steplaw")
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C",
                   help="target compute [FLOPs] to recommend a peak LR (and batch) for")
    p.add_argument("--target-params", type=target_value("params"), metavar="N",
                   help="target parameters (steplaw)")
    p.add_argument("--target-tokens", type=target_value("tokens"), metavar="D",
                   help="target tokens (steplaw)")
    p.add_argument("--include-edge", action="store_true",
                   help="also fit sweeps whose best LR is at the edge of the sweep")
    add_level_option(p, "level of the interval on the recommended peak LR (and batch)")
    p.add_argument("--groups", action="store_true", help="show every sweep's optimum")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    add_ladder_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _cmd_hparams(args) -> int:
    from ...analyses.hparams import fit_hparams

    ladder = load_from_args(args)
    result = fit_hparams(ladder, args.law, include_edge=args.include_edge, n_jobs=args.jobs)
    target = any(v is not None for v in (args.target_flops, args.target_params, args.target_tokens))
    # a TargetInputError here is usage (exit 2): main() decides, as for every command
    rec = result.recommend(flops=args.target_flops, params=args.target_params,
                           tokens=args.target_tokens, level=args.level) if target else None
    if args.json:
        print_json({**result.to_dict(), "recommendation": rec})
        return 0
    print(result.report(groups=args.groups))
    if rec is not None:
        def interval(iv: dict | None) -> str:
            if not iv:
                return ""
            if iv["lower"] is None:
                return f" (no interval: {iv['no_interval_reason']})"
            return f" ({iv['level']:.0%} interval [{iv['lower']:.4g}, {iv['upper']:.4g}])"

        batch = (f", batch {rec['batch_size']:.4g} tokens{interval(rec['batch_size_interval'])}"
                 if rec.get("batch_size") else f" ({rec.get('batch_note') or 'no batch law'})")
        print(f"recommendation  peak LR {rec['peak_lr']:.4g}{interval(rec['peak_lr_interval'])}"
              f"{batch}")
        if rec["peak_lr_interval"]["lower"] is not None:
            print(f"interval   {rec['peak_lr_interval']['method']}; the law's own: "
                  f"[{rec['peak_lr_interval']['law_lower']:.4g}, "
                  f"{rec['peak_lr_interval']['law_upper']:.4g}]")
        for n in rec.get("notes", []):
            print(f"note       {n}")
        shown = set(result.warnings)  # the report above printed these already
        for w in rec.get("warnings", []):
            if w not in shown:
                print(f"warning    {w}")
    return 0


