"""``delphi compare-recipes``: which recipe (ladder) wins at a target compute.

:func:`add_commands` registers the subcommand and returns ``{command: handler}``. The handler
only parses and prints: the science is in :mod:`delphi.analyses.recipes`. Standard library
only at import.
"""

from __future__ import annotations

import argparse
from typing import Callable

# As delphi.analyses.recipes.DECISIONS / DEFAULT_DECISION / RUN_NOISES (not imported here:
# the parser is built without the numerical stack; tests/test_recipes.py checks they agree).
DECISIONS = ("law", "anchored", "shrunk", "confident", "robust")
DEFAULT_DECISION = "robust"
RUN_NOISES = ("paired", "independent")

from ...core.text import level_percent
from .output import print_json
from .options import (LADDER_HELP, METRIC_HELP, add_ladder_options, add_level_option, count,
                      examples, fixed_pair, loss_floor, target_value)

__all__ = ["add_commands"]

Handler = Callable[[argparse.Namespace], int]


def _add(sub) -> None:
    p = sub.add_parser(
        "compare-recipes",
        help="which recipe wins at scale: compare two or more ladders at a target compute "
             "(paired interval of the difference, P(better), effective compute multiplier, "
             "crossover)",
        description="Fit every ladder (recipe) with the same law and compare each with the "
                    "first (the reference) at each target: by compute, each recipe at its "
                    "own compute-optimal allocation (the envelope L*(C)); by N and D, both at "
                    "that N and D. The difference's interval comes from paired bootstrap "
                    "draws (the same design cells resampled for every recipe). --backtest "
                    "scores such decisions on the ladders' own larger budgets.",
        epilog=examples(
            "delphi compare-recipes marin-isoflop-comma marin-isoflop-dclm --target-flops 1e22",
            "delphi compare-recipes marin-isoflop-comma marin-isoflop-dclm "
            "marin-isoflop-nemotron --target-flops 1e21 --target-flops 1e23 --json",
            "delphi compare-recipes marin-isoflop-comma marin-isoflop-dclm "
            "marin-isoflop-nemotron --backtest",
            "delphi compare-recipes marin-isoflop-comma marin-isoflop-dclm --target-flops 1e22 "
            "--registry preds.jsonl --id dclm-vs-comma --author me"))
    p.add_argument("ladders", nargs="+", metavar="LADDER",
                   help=f"two or more ladders, the reference first; each a {LADDER_HELP}; at "
                        f"most one from standard input")
    p.add_argument("--target-flops", type=target_value("flops"), action="append", default=[],
                   metavar="C", help="target compute [FLOPs] (repeatable: one row each)")
    p.add_argument("--target-params", type=target_value("params"), action="append", default=[],
                   metavar="N", help="target parameters, with --target-tokens (repeatable)")
    p.add_argument("--target-tokens", type=target_value("tokens"), action="append", default=[],
                   metavar="D", help="target tokens, one per --target-params (repeatable)")
    p.add_argument("--law", metavar="LAW", choices=("chinchilla", "power"),
                   help="law fitted to every ladder: chinchilla or power (default: chinchilla "
                        "when every ladder varies N and D, else power in C)")
    p.add_argument("--floor", type=loss_floor, metavar="E",
                   help="fix the irreducible loss E of every recipe at this value")
    p.add_argument("--shared-floor", action="store_true",
                   help="fit one E for all recipes jointly (when they share an eval set and "
                        "tokenizer); the intervals are then conditional on it")
    p.add_argument("--shared-exponents", action="store_true",
                   help="fit the exponents (alpha, beta; with --shared-floor also E) jointly "
                        "for all recipes; the intervals are then conditional on them")
    p.add_argument("--decision", choices=DECISIONS, default=DEFAULT_DECISION,
                   help="rule naming the winner: law (the fits' difference at the target), "
                        "anchored (observed difference at the largest budget both ran + the "
                        "law's change from there), shrunk (anchored where the change's paired "
                        "interval excludes 0, else the observed difference), confident "
                        "(anchored where its own interval excludes 0, else the observed "
                        "difference), robust (as confident, but with each recipe's own floor E "
                        "and with one shared E alike); default "
                        f"{DEFAULT_DECISION}")
    p.add_argument("--run-noise", choices=RUN_NOISES, default="paired",
                   help="new-run noise of the recipes: paired (default: correlated as their "
                        "log residuals at matched (budget, size) cells) or independent")
    p.add_argument("--fix", type=fixed_pair, action="append", default=[], metavar="NAME=VALUE",
                   help="fix any parameter of every recipe (repeatable)")
    p.add_argument("--fit-max-flops", type=target_value("flops"), metavar="C",
                   help="fit only runs with compute at or below C FLOPs")
    p.add_argument("--pairing", choices=("auto", "run", "budget", "none"), default="auto",
                   help="how draws share random numbers across recipes: run (the same (budget, "
                        "size) cells), budget (the same budgets), none (independent, unpaired); "
                        "auto: run when most cells are shared, else none")
    p.add_argument("--interval", default="auto",
                   choices=["auto", "calibrated", "reference", "bootstrap", "delta", "none"],
                   help="interval of each recipe's own forecast, as `delphi predict` "
                        "(default auto)")
    add_level_option(p)
    p.add_argument("--n-boot", type=count(20), default=200, metavar="N",
                   help="paired bootstrap draws (default 200; at least 20)")
    p.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="random seed of the draws (>= 0)")
    p.add_argument("--backtest", action="store_true",
                   help="decision backtest instead of a forecast: fit at or below each cut, "
                        "score every pair at every larger budget against the single-scale "
                        "baseline")
    p.add_argument("--max-cuts", type=count(1), default=4, metavar="K",
                   help="--backtest: cuts, evenly spaced among those possible (default 4)")
    reg = p.add_argument_group("preregister the comparison (one prediction entry per recipe "
                               "and target; score it with `delphi score --loss-a --loss-b`)")
    reg.add_argument("--registry", metavar="PATH",
                     help="append the comparison to this registry file (JSON Lines)")
    reg.add_argument("--id", metavar="ID",
                     help="the entry's id (with --registry); with several recipes or targets "
                          "the ids are ID-<recipe>-<k>, k the target's place (1, 2...)")
    reg.add_argument("--author", metavar="NAME", help="who makes the comparison")
    reg.add_argument("--notes", metavar="TEXT", help="free text kept with each entry")
    reg.add_argument("--sign-key", metavar="FILE",
                     help="sign the entries with this Ed25519 private key (`delphi registry "
                          "keygen`)")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    add_ladder_options(p)
    p.add_argument("--names", metavar="A,B,...", type=lambda t: [x.strip() for x in t.split(",")],
                   help="labels of the recipes, one per LADDER in order (default: the ladders' "
                        "names; needed when two files share a name, e.g. a/runs.csv b/runs.csv)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _cmd(args) -> int:
    from ...analyses.recipes import backtest_recipes, compare_recipes
    from .options import load_from_args
    from .output import UsageError

    if len(args.ladders) < 2:
        raise UsageError("compare-recipes needs at least two ladders (the reference first)")
    if args.ladders.count("-") > 1:
        raise UsageError("standard input ('-') holds one ladder; give the others as files or "
                         "names")
    if (args.registry is None) != (args.id is None):
        raise UsageError("--registry PATH and --id ID go together (to preregister the "
                         "comparison)")
    if args.registry is None and (args.author or args.notes or args.sign_key):
        raise UsageError("--author, --notes and --sign-key are for an entry: give --registry "
                         "PATH --id ID too")
    if args.registry is not None and args.backtest:
        raise UsageError("--backtest scores past decisions; it registers nothing (drop "
                         "--registry/--id)")
    if not (args.backtest or args.target_flops or args.target_params or args.target_tokens):
        # as `delphi predict LADDER` with no target: a usage error (exit 2), before any fit
        raise UsageError("no target: give --target-flops C (or --target-params N with "
                         "--target-tokens D), or --backtest to score past decisions")
    key = None
    if args.registry is not None:
        from ...registry import Registry, load_signing_key
        from ...registry.invariants import check_id

        check_id(args.id)          # before the fits
        key = None if args.sign_key is None else load_signing_key(args.sign_key)
        reg = Registry(args.registry)
        if reg.path.exists() and args.id in {e.id for e in reg.entries()}:
            from ...errors import RegistryError
            raise RegistryError(f"id {args.id!r} is already in {reg.path}; ids are unique: "
                                f"choose another")
    ladders = [load_from_args(args, source) for source in args.ladders]
    fixed = dict(args.fix)
    if args.floor is not None:
        if "E" in fixed:
            raise UsageError("E fixed twice (--fix E=... and --floor); give one")
        fixed["E"] = args.floor
    jobs = {} if args.jobs is None else {"n_jobs": args.jobs}
    if args.backtest:
        if args.target_flops or args.target_params or args.target_tokens:
            raise UsageError("--backtest predicts the ladders' own larger budgets; it takes no "
                             "--target-* options")
        result = backtest_recipes(ladders, law=args.law, fixed=fixed or None,
                                  shared_floor=args.shared_floor, pairing=args.pairing,
                                  level=args.level, n_boot=args.n_boot, seed=args.seed,
                                  max_cuts=args.max_cuts, names=args.names,
                                  decision=args.decision, run_noise=args.run_noise,
                                  shared_exponents=args.shared_exponents, **jobs)
    else:
        result = compare_recipes(
            ladders, target_flops=args.target_flops or None,
            target_params=args.target_params or None, target_tokens=args.target_tokens or None,
            law=args.law, fixed=fixed or None, shared_floor=args.shared_floor,
            fit_max_flops=args.fit_max_flops, pairing=args.pairing, level=args.level,
            n_boot=args.n_boot, seed=args.seed,
            interval=None if args.interval == "none" else args.interval, names=args.names,
            decision=args.decision, run_noise=args.run_noise,
            shared_exponents=args.shared_exponents, **jobs)
    entries = []
    if args.registry is not None:
        entries = reg.register_comparison(result, id=args.id, author=args.author,
                                          notes=args.notes, settings={"seed": args.seed},
                                          sign_key=key)
    if args.json:
        out = result.to_dict()
        if args.registry is not None:
            out["registered"] = [{"id": e.id, "hash": e.hash, "recipe": e.comparison.recipe,
                                  "target_flops": e.comparison.target_flops}
                                 for e in entries]
        print_json(out)
    else:
        print(result.report())
        if entries:
            print()
        for e in entries:
            c = e.comparison
            iv = c.interval
            print(f"registered {e.id} in {args.registry}: {c.recipe} - {c.reference} at "
                  f"C = {c.target_flops:.3g}: {c.difference:+.4f} {level_percent(iv.level)} "
                  f"[{iv.lower:+.4f}, {iv.upper:+.4f}], P(better) {c.p_better:.3f}; hash "
                  f"{e.hash}")
    return 0


def add_commands(sub) -> dict[str, Handler]:
    """Register ``compare-recipes``; returns ``{"compare-recipes": handler}``."""
    _add(sub)
    return {"compare-recipes": _cmd}
