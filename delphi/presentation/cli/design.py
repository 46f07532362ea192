"""``delphi suggest`` (which run to train next) and the options of ``delphi plan --score``
(what a proposed ladder is worth before it is trained).

:func:`add_commands` registers ``suggest`` and returns ``{command: handler}``;
:func:`add_score_options` and :func:`score_command` are called by ``delphi plan``. Handlers
only parse and print: the science is in :mod:`delphi.analyses.design`. Standard library only
at import.
"""

from __future__ import annotations

import argparse
from typing import Callable

from .output import json_text
from .options import (add_fit_options, add_level_option, add_target_options, count, examples,
                      fixed_pair, positive_float, target_value)

__all__ = ["add_commands", "add_score_options", "score_command"]

Handler = Callable[[argparse.Namespace], int]

#: ``--n-refit``'s minimum: :data:`delphi.analyses.design.MIN_REFIT`, the API's (one draw per
#: noise stratum), spelled here so that the parser does not import the fitting stack (a test
#: holds the two equal).
MIN_REFIT = 8


def _dump(obj: dict) -> str:
    return json_text(obj)


def _add_suggest(sub) -> None:
    p = sub.add_parser(
        "suggest", help="which run to train next: rank candidate runs by how much they narrow "
                        "the target forecast's calibrated interval per FLOP",
        description="Each candidate (N, D, and peak LR for LR-aware laws; by default a grid "
                    "around the ladder's design up to --budget) is scored by the expected "
                    "width of the target's calibrated (or reference) new-run interval with it "
                    "added: a run above the largest fitted compute lowers the extrapolation "
                    "ratio r, and every run narrows the parameter spread (linearised Fisher "
                    "information, or --method refit: refits over bootstrap draws with the "
                    "candidate at its predicted loss plus noise). Ranked by width reduction "
                    "per FLOP; --n K picks K greedily, each conditioned on the ones before.",
        epilog=examples(
            "delphi suggest epoch-chinchilla --target-params 7e10 --target-tokens 1.4e12 "
            "--budget 3e22",
            "delphi suggest epoch-chinchilla --target-params 7e10 --target-tokens 1.4e12 "
            "--budget 3e22 --n 3 --json",
            "delphi suggest examples/my_runs.csv --target-params 7e10 --target-tokens 1.4e12 "
            "--fit-max-flops 3e20 --budget 2e21 --method refit"))
    add_fit_options(p)
    add_target_options(p)
    p.add_argument("--budget", type=target_value("flops"), metavar="FLOPS",
                   help="compute available for the next runs: each candidate, and a batch's "
                        "total, costs at most this (default: the fitted runs' total compute)")
    p.add_argument("--n", type=count(1), default=1, metavar="K",
                   help="runs to pick (greedy batch, each conditioned on the ones before; "
                        "default 1: rank every candidate)")
    p.add_argument("--no-repeats", dest="repeats", action="store_false",
                   help="with --n: pick each candidate at most once (default: a candidate may "
                        "be picked again, as extra seeds of the same run)")
    p.add_argument("--candidates", default="grid", metavar="FILE|grid",
                   help="CSV (or .jsonl, .parquet) of candidate runs (columns params, tokens, "
                        "optionally flops, peak_lr, run; no losses), or grid (default)")
    p.add_argument("--method", choices=("fisher", "refit"), default="fisher",
                   help="how the parameter spread after a candidate is computed (default "
                        "fisher; refit is slower)")
    p.add_argument("--interval", choices=("auto", "calibrated", "reference"), default="auto",
                   help="the interval whose width is narrowed (default auto, as predict)")
    p.add_argument("--criterion", choices=("width", "spread"), default="width",
                   help="what is ranked per FLOP: width (default), the interval's width; "
                        "spread, the bootstrap forecasts' spread at the target alone (no "
                        "extrapolation term, no run noise)")
    add_level_option(p)
    p.add_argument("--n-boot", type=count(20), default=200, metavar="N",
                   help="the forecast's bootstrap draws (default 200)")
    p.add_argument("--n-refit", type=count(MIN_REFIT), default=64, metavar="N",
                   help=f"--method refit: draws per candidate (default 64; at least "
                        f"{MIN_REFIT}, one per noise stratum of the candidate's loss, as "
                        f"suggest_runs(n_refit=...) takes)")
    p.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="random seed (>= 0)")
    p.add_argument("--show", type=count(1), default=15, metavar="K",
                   help="rows of the table (default 15; --json has all)")


def _cmd_suggest(args) -> int:
    from ...analyses.design import suggest_runs
    from .options import fit_settings, load_with_defaults, target_from

    ladder, defaults = load_with_defaults(args)
    target = target_from(args, defaults)
    settings = fit_settings(args, defaults)
    law = args.law or (defaults.law if defaults is not None and defaults.law else None)
    result = suggest_runs(ladder, target, law, budget=args.budget, n=args.n,
                          candidates=args.candidates, method=args.method, level=args.level,
                          interval=args.interval, n_boot=args.n_boot, n_refit=args.n_refit,
                          seed=args.seed, n_jobs=args.jobs, repeats=args.repeats,
                          criterion=args.criterion, **settings)
    print(_dump(result.to_dict()) if args.json else result.report(limit=args.show))
    return 0


def add_commands(subparsers) -> dict[str, Handler]:
    """Register ``suggest`` on ``subparsers``; return ``{"suggest": handler}``."""
    _add_suggest(subparsers)
    return {"suggest": _cmd_suggest}


# ------------------------------------------------------------------------------ plan --score
def add_score_options(p: argparse.ArgumentParser) -> None:
    """``--score DESIGN.csv`` and the prior law it is scored under (``delphi plan``)."""
    g = p.add_argument_group("scoring a proposed design (--score)")
    g.add_argument("--score", metavar="DESIGN.csv",
                   help="instead of planning, score this proposed ladder (columns params, "
                        "tokens, optionally flops, peak_lr): its expected interval width at "
                        "the target under the prior law (--from LADDER fitted, or "
                        "--prior-params)")
    g.add_argument("--target-params", type=target_value("params"), metavar="N",
                   help="--score: target parameters (a law of N and D needs them)")
    g.add_argument("--target-tokens", type=target_value("tokens"), metavar="D",
                   help="--score: target tokens")
    g.add_argument("--prior-params", type=fixed_pair, action="extend", nargs="+", default=[],
                   metavar="NAME=VALUE",
                   help="--score: published parameters of the prior law, e.g. "
                        "E=1.69 A=406.4 B=410.7 alpha=0.34 beta=0.28")
    g.add_argument("--prior-law", default="chinchilla", metavar="LAW",
                   help="--score: the law of --prior-params (default chinchilla)")
    g.add_argument("--noise", type=positive_float, metavar="SD",
                   help="--score: run-to-run noise, sd of log loss (default: the prior fit's, "
                        "else 0.005)")
    g.add_argument("--score-method", choices=("fisher", "refit"), default="fisher",
                   help="--score: fisher (linearised; default fisher) or refit (refits of "
                        "simulated ladders)")
    g.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="--score --score-method refit: random seed (>= 0)")


def score_command(args) -> int:
    """``delphi plan --score DESIGN.csv``: print the :class:`~delphi.analyses.design.
    DesignScore`."""
    from ...analyses.design import score_design
    from .options import load_from_args
    from .output import UsageError

    if bool(args.prior_params) == bool(args.from_ladder):
        raise UsageError("--score needs one prior law: --from LADDER (the law fitted to it) "
                         "or --prior-params NAME=VALUE ... (published values)")
    if args.from_ladder:
        from ...fitting import fit
        prior = fit(load_from_args(args, args.from_ladder), args.prior_law)
    else:
        prior = dict(args.prior_params)
    target = {"flops": args.target_flops, "params": args.target_params,
              "tokens": args.target_tokens}
    result = score_design(args.score, target, prior, law=args.prior_law, noise=args.noise,
                          method=args.score_method, seed=args.seed)
    print(_dump(result.to_dict()) if args.json else result.report())
    return 0
