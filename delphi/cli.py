"""The ``delphi`` command line: argument parsing and printing only; the science is elsewhere.

Start-up is kept light: this module imports only the standard library, :mod:`delphi.errors`
and :mod:`delphi.parallel`, so ``delphi --help`` and usage errors answer without importing
pandas, scipy or the fitting engine. Each handler imports what it needs once the arguments
have parsed. Help texts that name the laws or the fitting defaults are filled in only when
a help page is printed (see :class:`_HelpFormatter`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import traceback
import warnings
from typing import Sequence

from . import __version__
from .errors import DelphiError, DelphiWarning, LawError, for_cli
from .parallel import is_quiet, set_quiet

__all__ = ["main"]


# Placeholders in help texts, filled in (by importing the laws / the engine) only when a help
# page is formatted, so that parsing does not import them.
def _help_values() -> dict[str, str]:
    from .fitting import DEFAULT_DELTA
    from .laws import CURVE_LAWS, LAWS

    return {"{LAWS}": ", ".join(sorted(LAWS)), "{CURVE_LAWS}": ", ".join(sorted(CURVE_LAWS)),
            "{DELTA}": f"{DEFAULT_DELTA:g}"}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, filling ``{LAWS}``, ``{CURVE_LAWS}`` and ``{DELTA}`` in help
    texts when (and only when) a help page is printed."""

    def _expand_help(self, action: argparse.Action) -> str:
        text = super()._expand_help(action)
        if "{" in text:
            for key, value in _help_values().items():
                text = text.replace(key, value)
        return text


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help texts use :class:`_HelpFormatter` (subparsers too)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def _get_values(self, action, arg_strings):
        # argparse drops a lone "--" value (``--floor=--``) and hands the option an empty list
        # without calling its type; a one-value option must get a real value.
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, got '--'")
        return super()._get_values(action, arg_strings)

    def error(self, message: str):
        """A usage error: argparse's usage text and message on stderr, exit code 2; with
        ``--json`` on the command line also the JSON error object (type ``UsageError``) on
        stdout."""
        if _JSON_USAGE_ERRORS:
            _json_error("UsageError", f"{self.prog}: {message}")
        super().error(message)


#: True while :func:`main` parses a command line that has ``--json``: usage errors, raised
#: inside argparse before the arguments exist, are then also reported as JSON.
_JSON_USAGE_ERRORS = False


def note(text: str) -> None:
    """Print an explanatory note (not a result) on stderr, unless ``--quiet``; a closed
    stderr is ignored (notes are advice, the result still goes to stdout)."""
    if not is_quiet():
        try:
            print(f"delphi: note: {for_cli(text)}", file=sys.stderr)
        except BrokenPipeError:
            pass


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value  # range checks happen in the library, which names the quantity


def _level(text: str) -> float:
    value = _positive_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a level is in (0, 1), e.g. 0.9; got {text!r}")
    return value


def _count(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("0 jobs: use 1 for serial, -1 for all cores")
    return value


def _add_jobs_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("-j", "--jobs", type=_jobs, metavar="N",
                   help=f"parallel jobs for {what} (joblib convention: 1 serial, -1 all cores, "
                        f"-2 all but one; default serial unless a joblib parallel_config is "
                        f"active); results do not depend on N")


def _jobs_kwargs(args) -> dict:
    """``{"n_jobs": N}`` when ``-j`` was given, else nothing (the library's default)."""
    jobs = getattr(args, "jobs", None)
    return {} if jobs is None else {"n_jobs": jobs}


def _floor(text: str) -> float | tuple[float, float]:
    """``E`` (one pinned floor) or ``LOW:HIGH`` (a floor range, scanned by predict)."""
    low, sep, high = text.partition(":")
    if not sep:
        return _positive_float(text)
    try:
        return float(low), float(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected E or LOW:HIGH, got {text!r}") from None


def _fixed_pair(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number in {text!r}") from None


def _bound_triple(text: str) -> tuple[str, tuple[float | None, float | None]]:
    name, sep, rest = text.partition("=")
    lo, sep2, hi = rest.partition(":")
    if not sep or not sep2:
        raise argparse.ArgumentTypeError(f"expected NAME=LOWER:UPPER, got {text!r}")
    try:
        return name.strip(), (float(lo) if lo.strip() else None, float(hi) if hi.strip() else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number in {text!r}") from None


def add_ladder_options(p: argparse.ArgumentParser) -> None:
    """How a command reads its ladder: ``--format``, ``--unit``, ``--drop-invalid``,
    ``--allow-outside-paths`` (the keyword arguments of :func:`delphi.load_ladder`; see
    :func:`load_from_args`)."""
    # Not argparse choices: "--format toml" gets its own message (a manifest needs its folder).
    p.add_argument("--format", metavar="FORMAT",
                   help="format of a ladder read from standard input (LADDER '-'): csv "
                        "(default), jsonl or parquet; with a file it must match the file's "
                        "suffix. E.g. `cat runs.csv | delphi predict - --target-flops 1e22`")
    p.add_argument("--unit", metavar="UNIT",
                   help="unit of the loss: nats/token (default), bits/byte (bpb) or bits/token; "
                        "a metric named like bpb / bits-per-byte defaults to bits/byte; a "
                        "manifest's unit cannot be contradicted")
    p.add_argument("--drop-invalid", action="store_true",
                   help="drop invalid rows (bad values, duplicate steps, contradictory run "
                        "state) instead of stopping, and list each with its reason")
    p.add_argument("--allow-outside-paths", action="store_true",
                   help="let a manifest read data outside its own folder and the data "
                        "directory ($DELPHI_DATA_DIR), e.g. an absolute path; only for "
                        "manifests you trust")


def load_from_args(args, source: str | None = None):
    """The ladder a command names (``source``, default ``args.ladder``; ``-`` reads standard
    input), read with the options of :func:`add_ladder_options` and ``--metric``."""
    from .readers import load_ladder

    return load_ladder(args.ladder if source is None else source, metric=args.metric,
                       unit=args.unit, drop_invalid=args.drop_invalid,
                       allow_outside_paths=args.allow_outside_paths,
                       format=getattr(args, "format", None))


def _add_fit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("ladder", help="bundled ladder name, a manifest (.toml) or a tidy "
                                  "CSV/Parquet/JSONL file")
    p.add_argument("--law", metavar="LAW", help="law to fit: {LAWS} (default: "
                   "power when only C is known, chinchilla when the target gives N and D); "
                   "predict and register also take auto (the candidate with the best "
                   "leave-future-out backtest, see `delphi compare`); "
                   "curve laws ({CURVE_LAWS}) are for `delphi complete`")
    p.add_argument("--floor", type=_floor, metavar="E",
                   help="fix the irreducible loss E at this value (the interval is then "
                        "conditional on it); predict also takes a range LOW:HIGH, e.g. 1.4:1.8, "
                        "and reports the forecast at its ends and middle")
    p.add_argument("--fix", type=_fixed_pair, action="append", default=[], metavar="NAME=VALUE",
                   help="fix any parameter (repeatable), e.g. --fix alpha=0.34")
    p.add_argument("--bound", type=_bound_triple, action="append", default=[],
                   metavar="NAME=LO:HI", help="bound a parameter (repeatable; empty side = none)")
    p.add_argument("--metric", metavar="COLUMN", help="source column to use as the loss")
    add_ladder_options(p)
    p.add_argument("--fit-max-flops", type=_positive_float, metavar="C",
                   help="fit only runs with compute at or below C FLOPs")
    p.add_argument("--include-unfinished", action="store_true",
                   help="also fit the last checkpoint of runs stopped early")
    p.add_argument("--huber-delta", type=_positive_float, metavar="DELTA",
                   help="Huber delta on log residuals (default {DELTA})")
    p.add_argument("--no-defaults", action="store_true",
                   help="ignore the manifest's [predict] defaults (target, fixed values, law)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def _add_target_lr_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target-peak-lr", type=_positive_float, metavar="ETA",
                   help="target peak learning rate (chinchilla-lr; default: the fitted optimum)")
    p.add_argument("--target-schedule", metavar="SPEC",
                   help="target LR schedule, e.g. cosine:warmup=50,final=0.1 or "
                        "wsd:decay=0.2,cooldown=1-sqrt (chinchilla-ckpt; default: ends like the "
                        "ladder's finished runs)")
    p.add_argument("--target-steps", type=_positive_float, metavar="T", help="target steps")
    p.add_argument("--target-batch", type=_positive_float, metavar="B",
                   help="target batch size [tokens]; D = steps x batch when --target-tokens "
                        "is not given")
    p.add_argument("--target-active-params", type=_positive_float, metavar="N_ACTIVE",
                   help="MoE target: parameters active per token (C = 6 x N_active x D)")


def _add_interval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval", default="auto",
                   choices=["auto", "calibrated", "bootstrap", "delta", "none"],
                   help="interval method (default auto: calibrated on the ladder's own "
                        "leave-future-out extrapolation errors when it has 3+ folds, else "
                        "bootstrap when it has enough runs, else the approximate delta method)")
    p.add_argument("--level", type=_level, default=0.9, help="interval level (default 0.9)")
    p.add_argument("--n-boot", type=_count(20), default=200,
                   help="bootstrap draws (default 200; at least 20)")
    p.add_argument("--boot-unit", default="run", choices=["run", "budget"],
                   help="resample whole runs (default) or whole compute budgets")
    p.add_argument("--seed", type=_count(0), default=0, help="random seed (bootstrap; >= 0)")
    _add_jobs_option(p, "the bootstrap")


def _add_selection_options(p: argparse.ArgumentParser) -> None:
    """``--ensemble`` and the candidate lists of ``--law auto`` / ``--ensemble``."""
    p.add_argument("--ensemble", action="store_true",
                   help="average the candidate laws' forecasts, weighted by their "
                        "leave-future-out errors; the interval widens by their spread")
    add_candidate_options(p, folds=False)


def add_candidate_options(p: argparse.ArgumentParser, folds: bool = True) -> None:
    """``--laws``, ``--floors``, ``--deltas`` (``compare``, and ``predict``/``register`` with
    ``--law auto`` or ``--ensemble``) and, with ``folds``, ``--max-folds``."""
    p.add_argument("--laws", metavar="LIST",
                   help="candidate laws, comma-separated, e.g. power,chinchilla (default: "
                        "those the ladder supports)")
    p.add_argument("--floors", metavar="LIST",
                   help="candidate floors E: free and/or values, e.g. free,1.5 (default free, "
                        "or the pinned floor)")
    p.add_argument("--deltas", metavar="LIST",
                   help="candidate Huber deltas, e.g. 1e-3,1e-2 (default {DELTA})")
    if not folds:
        return
    p.add_argument("--max-folds", type=_count(1), default=12, metavar="K",
                   help="leave-future-out cuts per candidate, evenly spaced (default 12)")


def candidates_from(args, ladder, fixed: dict, delta: float):
    """The candidates the candidate options name (None: the defaults of
    :func:`delphi.selection.default_candidates` with ``fixed`` and ``delta``)."""
    from .selection import default_candidates, parse_candidates

    if not (args.laws or args.floors or args.deltas):
        return None
    laws = args.laws or ",".join(c.law for c in default_candidates(ladder, fixed, delta))
    return parse_candidates(laws, args.floors, args.deltas or [delta], fixed=fixed)


def selection_settings(args, ladder, settings: dict, law) -> dict:
    """Keyword arguments of :func:`delphi.predict` for ``--law auto`` / ``--ensemble``."""
    auto = law == "auto" or args.ensemble
    if not auto:
        if args.laws or args.floors or args.deltas:
            raise LawError("--laws, --floors and --deltas name the candidates of --law auto "
                           "or --ensemble")
        return {}
    return {"ensemble": args.ensemble,
            "candidates": candidates_from(args, ladder, settings["fixed"], settings["delta"])}


def _interval_settings(args) -> dict:
    return {"interval": None if args.interval == "none" else args.interval, "level": args.level,
            "n_boot": args.n_boot, "boot_unit": args.boot_unit, "seed": args.seed}


def _target_from(args, defaults):
    """The target (a :class:`~delphi.forecast.Target`) from the command line, else the
    manifest's [predict] defaults."""
    from .forecast import Target

    given = any(v is not None for v in (args.target_flops, args.target_params, args.target_tokens,
                                        args.target_steps))
    lr = {"peak_lr": args.target_peak_lr, "schedule": args.target_schedule,
          "steps": args.target_steps, "batch_size": args.target_batch,
          "active_params": args.target_active_params}
    if given or defaults is None:
        return Target(flops=args.target_flops, params=args.target_params,
                      tokens=args.target_tokens, name=args.target_name, **lr)
    return Target(flops=defaults.target_flops, params=defaults.target_params,
                  tokens=defaults.target_tokens, name=args.target_name or defaults.target_name, **lr)


def _add_quiet(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", default=default,
                        help="no progress bars or notes on stderr (results are still printed)")


def _add_quiet_to_subcommands(parser: argparse.ArgumentParser) -> None:
    # `-q` is accepted before or after the subcommand. After it, the subparser must not reset
    # a `-q` given before it to False: its default is SUPPRESS (no attribute unless given).
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases: once each
                _add_quiet(child, argparse.SUPPRESS)
                _add_quiet_to_subcommands(child)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="delphi", description="Predict the final loss of a large training run from a "
        "ladder of small runs.")
    parser.add_argument("--version", action="version", version=f"delphi {__version__}")
    _add_quiet(parser, False)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("predict", help="fit a law to a ladder and predict a target run")
    _add_fit_options(p)
    p.add_argument("--target-flops", type=_positive_float, metavar="C", help="target compute [FLOPs]")
    p.add_argument("--target-params", type=_positive_float, metavar="N", help="target parameters")
    p.add_argument("--target-tokens", type=_positive_float, metavar="D", help="target tokens")
    p.add_argument("--target-name", help="label for the target")
    _add_target_lr_options(p)
    _add_interval_options(p)
    _add_selection_options(p)
    p.add_argument("--allow-degenerate", action="store_true",
                   help="extrapolate a degenerate fit (a law that collapsed to a constant over "
                        "the ladder: flat or identical losses) instead of refusing")

    p = sub.add_parser("fit", help="fit a law to a ladder and print the fit")
    _add_fit_options(p)

    p = sub.add_parser("complete", help="predict an unfinished run's final loss from its "
                                        "checkpoints and planned LR schedule")
    p.add_argument("ladder", help="bundled ladder name, manifest or data file with checkpoints")
    runs = p.add_mutually_exclusive_group(required=True)
    runs.add_argument("--run", action="append", metavar="RUN",
                      help="the run to complete (repeatable: several runs, one result each)")
    runs.add_argument("--all-runs", action="store_true",
                      help="complete every run of the ladder (runs that cannot be completed "
                           "are skipped with a note)")
    p.add_argument("--law", default="annealing", metavar="LAW",
                   help="curve law: annealing (default; Tissue et al. 2024) or multipower "
                        "(Luo et al. 2025; more flexible, slower, needs more checkpoints)")
    p.add_argument("--upto-fraction", type=_positive_float, metavar="F",
                   help="fit only checkpoints up to this share of the run (backtesting)")
    p.add_argument("--upto-step", type=_positive_float, metavar="STEP",
                   help="fit only checkpoints up to this step (backtesting)")
    p.add_argument("--siblings", action="store_true",
                   help="also fit the ladder's runs of the same model and peak LR, up to the "
                        "same step")
    p.add_argument("--keep-warmup", action="store_true",
                   help="also fit the warm-up checkpoints (LR still rising; left out by default)")
    p.add_argument("--metric", metavar="COLUMN", help="source column to use as the loss")
    add_ladder_options(p)
    _add_jobs_option(p, "several runs")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (a list of them for several runs)")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    p = sub.add_parser("hparams", help="fit optimal-LR (and batch) laws from LR sweeps and "
                                       "recommend them for a target")
    p.add_argument("ladder", help="bundled ladder name, manifest or data file with LR sweeps")
    p.add_argument("--law", default="steplaw", metavar="LAW",
                   help="deepseek (eta*(C), B*(C)) or steplaw (eta*(N, D), B*(D)); default steplaw")
    p.add_argument("--target-flops", type=_positive_float, metavar="C")
    p.add_argument("--target-params", type=_positive_float, metavar="N")
    p.add_argument("--target-tokens", type=_positive_float, metavar="D")
    p.add_argument("--include-edge", action="store_true",
                   help="also fit sweeps whose best LR is at the edge of the sweep")
    p.add_argument("--groups", action="store_true", help="show every sweep's optimum")
    p.add_argument("--metric", metavar="COLUMN", help="source column to use as the loss")
    add_ladder_options(p)
    _add_jobs_option(p, "the sweeps' optima and the laws")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    p = sub.add_parser("ladders", help="list the bundled ladders")
    p.add_argument("--json", action="store_true")
    p.add_argument("--debug", action="store_true")

    p = sub.add_parser("backtest", help="fit small runs, predict held-out larger ones")
    _add_fit_options(p)
    p.add_argument("--leave-one-budget-out", action="store_true",
                   help="drop each compute budget in turn and predict its runs (instead of "
                        "--fit-max-flops)")
    p.add_argument("--level", type=_level, default=0.9, help="interval level (default 0.9)")
    p.add_argument("--interval", default="delta", choices=["delta", "bootstrap", "none"],
                   help="interval per prediction (default delta: fast)")
    p.add_argument("--n-boot", type=_count(20), default=100, help="bootstrap draws per fit")
    p.add_argument("--prefixes", action="store_true",
                   help="instead: fit growing prefixes of the ladder (by compute budget), show "
                        "each parameter's and the forecast's path, and flag a steady drift "
                        "(monotone over the last 4 prefixes and beyond 2 combined s.e.)")
    p.add_argument("--target-flops", type=_positive_float, metavar="C",
                   help="with --prefixes: the target whose forecast is followed (default the "
                        "manifest's target, else the ladder's largest run)")
    p.add_argument("--target-params", type=_positive_float, metavar="N",
                   help="with --prefixes: target parameters")
    p.add_argument("--target-tokens", type=_positive_float, metavar="D",
                   help="with --prefixes: target tokens")
    _add_jobs_option(p, "the folds")

    from .cli_analyses import add_analysis_commands
    from .cli_registry import add_registry_commands

    _EXTRA.update(add_analysis_commands(sub))
    _EXTRA.update(add_registry_commands(sub))
    _add_quiet_to_subcommands(parser)
    return parser


#: Handlers of commands defined in other modules (analyses, registry).
_EXTRA: dict = {}


def _load(args):
    from .readers import STDIN, load_manifest
    from .readers.tabular import format_of

    ladder = load_from_args(args)
    # runs.csv, runs.csv.gz, ... or standard input: no manifest, so no [predict] defaults
    is_data_file = args.ladder == STDIN or format_of(args.ladder)[0] is not None
    manifest = None if args.no_defaults or is_data_file else load_manifest(args.ladder)
    return ladder, (manifest.predict if manifest is not None else None)


def _fit_settings(args, defaults) -> dict:
    # Manifest defaults first, command-line options override them.
    fixed = dict(defaults.fixed or {}) if defaults is not None else {}
    given = [name for name, _ in args.fix] + (["E"] if args.floor is not None else [])
    twice = sorted({n for n in given if given.count(n) > 1})
    if twice:
        raise LawError(f"{', '.join(twice)} fixed more than once (--fix/--floor); give one value")
    fixed.update(dict(args.fix))
    if isinstance(args.floor, tuple):
        if args.command != "predict":
            raise LawError("a floor range (--floor LOW:HIGH) is for `delphi predict`; give "
                           "one value")
        fixed.pop("E", None)  # the range replaces a manifest's pinned floor
    elif args.floor is not None:
        fixed["E"] = args.floor
    bounded = [name for name, _ in args.bound]
    if len(set(bounded)) < len(bounded):
        raise LawError("a parameter is bounded more than once (--bound); give one range")
    fit_max = args.fit_max_flops
    if fit_max is None and defaults is not None:
        fit_max = defaults.fit_max_flops
    if args.huber_delta is not None:
        delta = args.huber_delta
    else:
        from .fitting import DEFAULT_DELTA
        delta = DEFAULT_DELTA
    return {"fixed": fixed, "bounds": dict(args.bound) or None, "delta": delta,
            "fit_max_flops": fit_max, "include_unfinished": args.include_unfinished}


def _cmd_predict(args) -> int:
    from .forecast import default_law, predict

    ladder, defaults = _load(args)
    target = _target_from(args, defaults)
    law = args.law or (defaults.law if defaults is not None else None)
    if law is None and not args.ensemble:
        law = default_law(ladder, target)
    floor_range = args.floor if isinstance(args.floor, tuple) else None
    settings = _fit_settings(args, defaults)
    chosen = selection_settings(args, ladder, settings, law)
    if chosen and (args.law is None or args.law == "auto"):
        law = None if args.ensemble else "auto"   # a manifest's law gives way to the choice
    forecast = predict(ladder, target, law, **settings,
                       **_interval_settings(args), **_jobs_kwargs(args), floor_range=floor_range,
                       allow_degenerate=args.allow_degenerate, **chosen)
    print(json.dumps(forecast.to_dict(), indent=2, allow_nan=False) if args.json
          else forecast.report())
    return 0


def _cmd_fit(args) -> int:
    from .fitting import fit
    from .forecast import default_law

    ladder, defaults = _load(args)
    law = args.law or (defaults.law if defaults is not None else None)
    if law is None:
        law = default_law(ladder)    # predict's rule, from the ladder alone (no target)
    result = fit(ladder, law, **_fit_settings(args, defaults))
    if args.json:
        out = result.to_dict()
        conv = ladder.flops_convention
        out["ladder"] = {"name": ladder.name, "source": ladder.source,
                         "sha256": result.extra["sha256"], "metric": ladder.metric,
                         "unit": ladder.unit,
                         "flops_convention": conv.to_dict() if conv is not None else None}
        out["delphi_version"] = __version__
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(f"ladder     {ladder.name} ({ladder.source}), metric {ladder.metric} [{ladder.unit}]")
        conv = ladder.flops_convention
        if conv is not None and conv.source == "given":
            # The same block as the JSON's ladder.flops_convention, in one line.
            drift = ("" if conv.drift is None else
                     f", drift {conv.drift:+.1%} from the smallest to the largest rung"
                     + (" (k is not one number for this ladder)" if conv.drifting else ""))
            print(f"flops      C = k x {conv.n_label}: median k {conv.median:.4g}, range "
                  f"{conv.low:.4g}..{conv.high:.4g} over {len(conv.k)} runs{drift}")
        print(result.report())
    return 0


def _cmd_complete(args) -> int:
    ladder = load_from_args(args)
    # A completion's report has no ladder exclusions: say which invalid rows were dropped.
    for e in ladder.exclusions:
        if "dropped by drop_invalid" in e.reason:
            note(f"excluded {e.run}: {e.reason}")
    if args.upto_fraction is not None and not 0 < args.upto_fraction <= 1:
        raise DelphiError(f"--upto-fraction must be in (0, 1], got {args.upto_fraction:g}")
    settings = {"upto_fraction": args.upto_fraction, "siblings": args.siblings,
                "keep_warmup": args.keep_warmup,
                "upto_step": None if args.upto_step is None else int(args.upto_step)}
    if not args.all_runs and len(args.run) == 1:
        from .curves import complete

        result = complete(ladder, args.run[0], args.law, **settings)
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False) if args.json
              else result.report())
        return 0
    runs = list(ladder.runs) if args.all_runs else list(dict.fromkeys(args.run))
    done, failed = _complete_runs(ladder, runs, args.law, settings, args)
    for run, reason in failed:
        note(f"run {run!r} not completed: {reason}")
    if failed:
        note(f"{len(done)} of {len(runs)} runs completed")
    if args.json:
        # Every run asked for is in the list: completed ones, and the others with their reason.
        records = {c.run: c.to_dict() for c in done}
        records.update({run: {"run": run, "error": reason} for run, reason in failed})
        print(json.dumps([records[r] for r in runs if r in records], indent=2,
                         allow_nan=False))
    else:
        print("\n\n".join(c.report() for c in done))
    if not done:
        raise DelphiError(f"none of the {len(runs)} runs could be completed"
                          + (f" (first: {failed[0][1]})" if failed else ""))
    return 0


def _complete_runs(ladder, runs: list[str], law: str, settings: dict, args):
    """Complete several runs with :func:`delphi.curves.complete_many` (parallel through
    ``-j``); returns (completions in run order, [(run, reason), ...]).

    With ``--all-runs`` a run that cannot be completed (no schedule, too few checkpoints) is
    skipped with a note; runs named with ``--run`` must all succeed (else a delphi error).
    """
    from .curves import complete_many

    done, failed = [], []
    for run, result in complete_many(ladder, runs, law, **settings, **_jobs_kwargs(args)):
        if isinstance(result, str):  # the run's one-line error message
            prefix = f"run {run!r}: "
            reason = result.replace(prefix, "", 1) if prefix in result else result
            if not args.all_runs:
                raise DelphiError(f"run {run!r} could not be completed: {reason}")
            failed.append((run, reason))
        else:
            done.append(result)
    return done, failed


def _cmd_hparams(args) -> int:
    from .analyses.hparams import fit_hparams
    ladder = load_from_args(args)
    result = fit_hparams(ladder, args.law, include_edge=args.include_edge, n_jobs=args.jobs)
    target = any(v is not None for v in (args.target_flops, args.target_params, args.target_tokens))
    rec = result.recommend(flops=args.target_flops, params=args.target_params,
                           tokens=args.target_tokens) if target else None
    if args.json:
        print(json.dumps({**result.to_dict(), "recommendation": rec}, indent=2, allow_nan=False))
        return 0
    print(result.report(groups=args.groups))
    if rec is not None:
        batch = (f", batch {rec['batch_size']:.4g} tokens" if rec.get("batch_size")
                 else f" ({rec.get('batch_note') or 'no batch law'})")
        print(f"recommendation  peak LR {rec['peak_lr']:.4g}{batch}")
        shown = set(result.warnings)  # the report above printed these already
        for w in rec.get("warnings", []):
            if w not in shown:
                print(f"warning    {w}")
    return 0


def _cmd_backtest(args) -> int:
    from .analyses.backtest import backtest
    from .forecast import default_law

    ladder, defaults = _load(args)
    law = args.law or (defaults.law if defaults is not None else None) or default_law(ladder)
    settings = _fit_settings(args, defaults)
    if args.prefixes:
        return _backtest_prefixes(args, ladder, law, settings, defaults)
    result = backtest(ladder, law, fit_max_flops=args.fit_max_flops,
                      leave_one_budget_out=args.leave_one_budget_out, fixed=settings["fixed"],
                      bounds=settings["bounds"], delta=settings["delta"],
                      include_unfinished=args.include_unfinished,
                      interval=None if args.interval == "none" else args.interval,
                      level=args.level, n_boot=args.n_boot, **_jobs_kwargs(args))
    print(json.dumps(result.to_dict(), indent=2, allow_nan=False) if args.json else result.report())
    return 0


def _backtest_prefixes(args, ladder, law, settings, defaults) -> int:
    from .analyses.backtest import prefix_fits
    from .forecast import Target

    if args.fit_max_flops is not None or args.leave_one_budget_out:
        raise DelphiError("choose one backtest design: --prefixes, --fit-max-flops or "
                          "--leave-one-budget-out")
    given = {"flops": args.target_flops, "params": args.target_params,
             "tokens": args.target_tokens}
    target = None
    if any(v is not None for v in given.values()):
        target = Target(**given)
    elif defaults is not None and (defaults.target_flops or defaults.target_params):
        target = Target(flops=defaults.target_flops, params=defaults.target_params,
                        tokens=defaults.target_tokens, name=defaults.target_name)
    result = prefix_fits(ladder, law, target, fixed=settings["fixed"], bounds=settings["bounds"],
                         delta=settings["delta"], include_unfinished=args.include_unfinished,
                         **_jobs_kwargs(args))
    print(json.dumps(result.to_dict(), indent=2, allow_nan=False) if args.json else result.report())
    return 0


def _cmd_ladders(args) -> int:
    from .readers import list_ladders

    rows = list_ladders()
    if args.json:
        print(json.dumps([{"name": n, "description": d} for n, d in rows], indent=2))
    else:
        width = max((len(n) for n, _ in rows), default=0)
        for name, description in rows:
            print(f"{name:<{width}}  {description}")
    return 0


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse accepts, ``--js``...) is on the command
    line, looked at before parsing so that a usage error can be answered in JSON too."""
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if len(name) >= 4 and "--json".startswith(name):
            return True
    return False


def _json_error(kind: str, message: str) -> None:
    """Print ``{"error": {"type": kind, "message": message}}`` on stdout (the JSON error
    contract); a reader that has gone away, or a stdout that cannot be written, is ignored
    (the error is also printed on stderr)."""
    text = json.dumps({"error": {"type": kind, "message": for_cli(message)}}, indent=2)
    try:
        print(text, flush=True)
    except OSError:  # BrokenPipeError, or a full / closed stdout
        _silence_stdout()


class _OutputError(Exception):
    """stdout cannot take the output (``> /dev/full``: no space left; ``>&-``: closed)."""


def _write_stdout(text: str, flush: bool = False) -> None:
    """Write ``text`` to stdout; raises :class:`_OutputError` when stdout is closed or full
    (a BrokenPipeError, a reader that went away, is left to :func:`main`)."""
    if sys.stdout is None:  # Python sets it to None when file descriptor 1 was closed
        if text or flush:
            raise _OutputError("stdout is closed")
        return
    try:
        if text:
            sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise _OutputError(exc.strerror or str(exc)) from None


def _print_error(message: str) -> None:
    """``delphi: error: MESSAGE`` on stderr, CLI spelling of any setting it names."""
    try:
        print(f"delphi: error: {for_cli(message)}", file=sys.stderr, flush=True)
    except BrokenPipeError:  # stderr is a closed pipe too: nobody to tell
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null after its reader went away (``delphi ... | head``), so that
    Python's flush at exit does not print a BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (e.g. captured)
        pass


def _run(args) -> int:
    """Run the parsed command; its printed output is collected and written at the end.

    Collecting the output is what keeps ``--json`` stdout a single JSON document: either the
    result, or (on a delphi error) the error object alone, never a partial result followed by
    an error. Without ``--json``, output printed before an error is still written.
    """
    handlers = {"predict": _cmd_predict, "fit": _cmd_fit, "ladders": _cmd_ladders,
                "complete": _cmd_complete, "hparams": _cmd_hparams, "backtest": _cmd_backtest,
                **_EXTRA}
    as_json = bool(getattr(args, "json", False))
    real_stdout, out = sys.stdout, io.StringIO()
    failed = True
    try:
        sys.stdout = out
        code = handlers[args.command](args)
        failed = False
    except DelphiError as exc:
        sys.stdout = real_stdout
        if getattr(args, "debug", False):
            traceback.print_exc()
        if as_json:
            _json_error(type(exc).__name__, str(exc))
        _print_error(str(exc))
        return 1
    except Exception as exc:
        # Not a delphi error: a bug. The traceback follows on stderr (Python prints it); a
        # JSON reader still gets an error object instead of empty output.
        sys.stdout = real_stdout
        if as_json:
            _json_error("InternalError", f"{type(exc).__name__}: {exc} (a bug in delphi: "
                                         f"please report it with the traceback from stderr)")
        raise
    finally:
        sys.stdout = real_stdout
        if failed and not as_json and out.getvalue().strip():
            _write_stdout(for_cli(out.getvalue()))  # what was printed before the error
    _write_stdout(for_cli(out.getvalue()))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``delphi`` console script; returns the exit code.

    Exit codes: 0 success, 1 a delphi error (bad ladder, law, target or failed fit: one line on
    stderr, no traceback unless ``--debug``), 2 bad command-line usage (argparse).

    With ``--json`` stdout holds exactly one JSON document: the result, or on an error
    ``{"error": {"type": NAME, "message": TEXT}}`` where NAME is the
    :class:`~delphi.errors.DelphiError` subclass (``LadderError``, ``FitError``...), or
    ``UsageError`` for bad command-line usage (exit code 2; argparse's usage text stays on
    stderr), or ``InternalError`` for a bug (its traceback on stderr). The one-line error is
    also printed on stderr, for a person watching the terminal. Messages name settings by
    their flags (``--include-edge``), not their Python keywords (see
    :func:`delphi.errors.option`).

    When the reader of stdout goes away (``delphi ... | head``) delphi stops quietly, exit
    code 0: the command did its work, the reader took what it wanted. When stdout cannot be
    written (``> /dev/full``, or closed with ``>&-``) delphi prints ``cannot write the output:
    REASON`` on stderr, exit code 1.

    ``-q/--quiet`` (before or after the subcommand) turns progress bars and notes off for the
    duration of the call.
    """
    global _JSON_USAGE_ERRORS
    argv = sys.argv[1:] if argv is None else list(argv)
    from . import parallel

    was_quiet = parallel._QUIET
    try:
        _JSON_USAGE_ERRORS = _wants_json(argv)
        try:
            args = _parser().parse_args(argv)
        finally:
            _JSON_USAGE_ERRORS = False
        with warnings.catch_warnings():
            # Warnings are recorded on the ladder and fit and printed in the report; do not
            # print them twice through Python's warning machinery.
            warnings.simplefilter("ignore", DelphiWarning)
            set_quiet(was_quiet or args.quiet)
            code = _run(args)
        _write_stdout("", flush=True)  # here, not at exit, so that a closed pipe is caught below
        return code
    except SystemExit:
        # --help, --version and usage errors: argparse printed and exits.
        try:
            _write_stdout("", flush=True)
        except BrokenPipeError:
            _silence_stdout()
        except _OutputError as exc:
            _print_error(f"cannot write the output: {exc}")
            _silence_stdout()
            return 1
        raise
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except _OutputError as exc:
        # A full disk or a closed stdout is not a bug: one line, no traceback. stdout is then
        # pointed at /dev/null so that Python's flush at exit does not fail again.
        _print_error(f"cannot write the output: {exc}")
        _silence_stdout()
        return 1
    finally:
        set_quiet(was_quiet)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
