"""``delphi plot KIND LADDER -o FILE``: the figures of :mod:`delphi.plot`, written to a PNG,
SVG or PDF file (the format from the file's suffix).

Standard library only at import: matplotlib (with its non-interactive Agg backend, no display
needed) and the library are imported by the handler, so ``delphi --help`` stays light.
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

from ...errors import DelphiError, for_cli
from .accuracy import add_fit_options as add_accuracy_fit_options
from .output import command_stdout, note, print_json, UsageError
from .options import (HelpFormatter, add_fit_options, add_interval_options,
                      add_target_options, count,
                      fit_settings, interval_settings, jobs_kwargs, load_from_args,
                      load_with_defaults, number, positive_float, target_from,
                      training_share)

__all__ = ["add_commands", "KINDS", "FORMATS"]

#: KIND -> what it draws (the help text); mirrors :data:`delphi.plot.KINDS`.
KINDS = {
    "forecast": "the fit extrapolated to the target, with its intervals (plot_forecast)",
    "fit": "the fitted law and its points; the target too when one is given (plot_fit)",
    "residuals": "log residuals of the fit against C, N or D (plot_residuals)",
    "backtest": "relative errors of held-out runs with their intervals (plot_backtest)",
    "isoflop": "loss against N per compute budget with each vertex, and N*(C) (plot_isoflop)",
    "frontier": "compute-optimal N*(C) and its power law (plot_isoflop_frontier)",
    "completion": "a run's checkpoints, fitted trajectory and final loss (plot_completion)",
    "accuracy": "a task's chained accuracy prediction: task loss, sigmoid, N, D -> accuracy "
                "(plot_accuracy)",
    "recipes": "two or more ladders (recipes) compared at a target: curves with bands, the "
               "difference against compute, the crossover (plot_recipes)",
}
#: Suffix -> matplotlib format.
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}

EXAMPLES = """examples:
  delphi plot forecast marin-moe-535b -o hero.png          # the manifest's target and floor
  delphi plot forecast marin-delphi-dense --target-flops 1e22 --residuals -o dense.svg
  delphi plot backtest marin-delphi-dense --law power --leave-one-budget-out -o backtest.pdf
  delphi plot isoflop marin-isoflop-dclm -o isoflop.png
  delphi plot completion misfitting2025 --run misfitting_100m-lr0.002-T12000-e94 --upto-fraction 0.5 -o run.png
  delphi plot fit epoch-chinchilla --law chinchilla --json -o chinchilla.png
  delphi plot accuracy olmo-ladder --task hellaswag --target-params 3.2e9 --target-tokens 6.4e10 --fit-max-params 8e8 -o hs.png
  delphi plot recipes marin-isoflop-comma marin-isoflop-dclm --target-flops 1e22 -o recipes.png"""


def output_file(text: str) -> Path:
    """``-o FILE``: a path whose suffix names a format (.png, .svg or .pdf), or ``-`` for
    standard output (the format from ``--figure-format``)."""
    path = Path(text)
    if text == "-":
        return path
    if path.suffix.lower() not in FORMATS:
        raise argparse.ArgumentTypeError(
            f"cannot tell the format of {text!r} from its suffix "
            f"{path.suffix or '(none)'!r}: use {', '.join(FORMATS)}")
    # Checked before the work (a fit, a bootstrap), not after it.
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: its folder {str(folder)!r} "
                                         f"does not exist")
    return path


def add_commands(sub) -> dict:
    """Add ``plot`` to ``sub``; return ``{"plot": handler}``."""
    p = sub.add_parser(
        "plot", help="draw a figure (forecast, fit, residuals, backtest, isoflop, frontier, "
                     "completion, accuracy) to a PNG, SVG or PDF file",
        description="Draw one of delphi.plot's figures for a ladder and write it to FILE;\n"
                    "the format comes from FILE's suffix (.png, .svg, .pdf), and print its\n"
                    "caption: what the figure shows and, in full, every warning (a figure for\n"
                    "a paper carries its warnings in its caption; --warnings draws them on the\n"
                    "figure too). KIND is one of:\n" +
                    "\n".join(f"  {k:<11} {v}" for k, v in KINDS.items()),
        epilog=EXAMPLES, formatter_class=_Formatter)
    p.add_argument("kind", choices=list(KINDS), metavar="KIND",
                   help=f"what to draw: {', '.join(KINDS)}")
    add_fit_options(p)
    p.add_argument("more_ladders", nargs="*", metavar="LADDER",
                   help="recipes: the other ladders (recipes) compared with the first, the "
                        "reference; every other KIND takes one ladder")
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE",
                   help="file to write: .png, .svg or .pdf (the format from the suffix); "
                        "'-' writes to standard output (a pipe or a file, not a terminal)")
    p.add_argument("--figure-format", choices=sorted(set(FORMATS.values())), default=None,
                   help="the format of -o - (default png); with a file, its suffix decides")
    p.add_argument("--dpi", type=count(20), default=150,
                   help="resolution of a PNG [dots per inch] (default 150)")
    p.add_argument("--x", choices=("flops", "params", "tokens"), default="flops",
                   help="forecast, fit, residuals: x axis C (flops), N (params) or D "
                        "(tokens); N and D need a law of N and D; accuracy: C or N only "
                        "(default: flops)")
    p.add_argument("--residuals", action="store_true",
                   help="forecast, fit: add a panel of log residuals under the loss")
    p.add_argument("--warnings", dest="warnings", action="store_true", default=False,
                   help="also draw the warnings in a box under the figure (default: only in "
                        "the caption printed)")
    p.add_argument("--no-warnings", dest="warnings", action="store_false", default=False,
                   help="no warning box (the default; kept for scripts of earlier releases)")
    targets = p.add_argument_group("target (forecast; fit draws it when given)")
    add_target_options(targets)
    intervals = p.add_argument_group("intervals (forecast; backtest: auto means delta, the "
                                     "fold fits' own; calibrated and reference as in "
                                     "`delphi backtest`)")
    add_interval_options(intervals)
    bt = p.add_argument_group("backtest")
    bt.add_argument("--leave-one-budget-out", action="store_true",
                    help="drop each compute budget in turn and predict its runs (instead of "
                         "--fit-max-flops)")
    iso = p.add_argument_group("isoflop, frontier (Approach 2; --n-boot, --level and --seed "
                               "apply)")
    iso.add_argument("--method", choices=("parabola", "cubic", "akima"), default="parabola",
                     help="per-budget fit of loss against ln N (default parabola)")
    iso.add_argument("--window", type=count(3), metavar="K",
                     help="fit only the K sizes around each budget's lowest loss")
    iso.add_argument("--quantity", choices=("params", "tokens"), default="params",
                     help="frontier: N*(C) (params) or D*(C) (tokens) (default: params)")
    cp = p.add_argument_group("completion (--law is the curve law, default annealing)")
    cp.add_argument("--run", metavar="RUN", help="the run to complete")
    # one cut of the run: both at once was the smaller, said nowhere
    upto = cp.add_mutually_exclusive_group()
    upto.add_argument("--upto-fraction", type=training_share, metavar="F",
                      help="fit only checkpoints up to this share of the run")
    upto.add_argument("--upto-step", type=positive_float, metavar="STEP",
                      help="fit only checkpoints up to this step")
    cp.add_argument("--siblings", action="store_true",
                    help="also fit the ladder's runs of the same model and peak LR")
    cp.add_argument("--keep-warmup", action="store_true",
                    help="also fit the warm-up checkpoints")
    cp.add_argument("--full-range", action="store_true",
                    help="y axis over every checkpoint (default: from half the fitted steps "
                         "on, so the extrapolated part shows)")
    ac = p.add_argument_group("accuracy (--target-params, --target-tokens, --n-boot, --level, "
                              "--seed, --x flops|params and --huber-delta (step 1's) apply; the "
                              "loss figures' other options, e.g. --law, --floor, --interval, "
                              "are refused)")
    ac.add_argument("--task", metavar="TASK", help="the task (of --tasks) to draw")
    ac.add_argument("--tasks", metavar="MANIFEST", default=None,
                    help="tasks manifest (default olmo-ladder-tasks)")
    add_accuracy_fit_options(ac)
    ac.add_argument("--actual", type=accuracy_fraction, metavar="ACC", default=None,
                    help="the target's observed accuracy, a fraction in (0, 1] (0.612, not "
                         "61.2 points), drawn as a star")
    ac.add_argument("--no-calibration", dest="calibrate", action="store_false",
                    help="leave out the interval's extrapolation calibration (as `delphi "
                         "accuracy --no-calibration`)")
    rc = p.add_argument_group("recipes (LADDER LADDER [...]; one --target-flops, or "
                              "--target-params and --target-tokens; --law chinchilla|power, "
                              "--floor, --fix, --fit-max-flops, --n-boot, --level, --seed "
                              "apply)")
    rc.add_argument("--pairing", choices=("auto", "run", "budget", "none"), default="auto",
                    help="recipes: how the draws share random numbers across recipes (as "
                         "`delphi compare-recipes`; default auto)")
    rc.add_argument("--shared-floor", action="store_true",
                    help="recipes: fit one E for all recipes jointly")
    p.checks.append(_check_output)
    p.checks.append(_check_accuracy)
    p.checks.append(_check_ladders)
    return {"plot": _cmd_plot}


def accuracy_fraction(text: str) -> float:
    """``--actual``: an accuracy fraction in (0, 1]; points (61.2) would be drawn at 6120."""
    value = number(text)
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not an accuracy fraction in (0, 1] "
                                         f"(0.612, not 61.2 points)")
    return value


#: The options ``plot accuracy`` reads (argparse dests). Every other option of ``delphi plot``
#: belongs to the loss figures; given to ``plot accuracy`` it is refused, not ignored. The global
#: -q/--debug/-j default to SUPPRESS on subcommands and are not checked.
_ACCURACY_DESTS = frozenset({
    "kind", "ladder", "output", "figure_format", "dpi", "x", "warnings", "json",
    "metric", "format", "unit", "drop_invalid", "allow_outside_paths", "columns", "scale",
    "target_params", "target_tokens", "level", "n_boot", "seed",
    "task", "tasks", "fit_max_params", "runs", "step1_law", "lower", "actual", "calibrate",
    "huber_delta"})


def _check_ladders(parser, ns) -> None:
    """Usage errors (exit 2): more than one ladder for a KIND other than recipes, or fewer
    than two for recipes."""
    more = list(getattr(ns, "more_ladders", None) or [])
    if ns.kind != "recipes" and more:
        parser.error(f"plot {ns.kind} takes one ladder; got {1 + len(more)} "
                     f"({', '.join([ns.ladder, *more])}): several ladders are for "
                     f"`delphi plot recipes A B ...`")
    if ns.kind == "recipes":
        if not more:
            parser.error("plot recipes needs two or more ladders (the reference first): "
                         "delphi plot recipes A B [C ...] --target-flops C -o FILE")
        if "-" in [ns.ladder, *more]:
            parser.error("plot recipes reads its ladders from files or names, not standard "
                         "input ('-')")


def _flag(action: argparse.Action) -> str:
    return next((s for s in action.option_strings if s.startswith("--")),
                action.option_strings[0])


def _check_accuracy(parser, ns) -> None:
    """Usage errors (exit 2) of ``plot accuracy``: an option of the loss figures given (its
    value differs from argparse's default), or ``--x tokens`` (the figure draws N or C)."""
    if ns.kind != "accuracy":
        return
    given = [_flag(a) for a in parser._actions
             if a.option_strings and a.dest not in _ACCURACY_DESTS
             and a.default is not argparse.SUPPRESS
             and getattr(ns, a.dest, a.default) != a.default]
    if given:
        parser.error(f"plot accuracy does not use {', '.join(given)}: "
                     f"{'it is an option' if len(given) == 1 else 'they are options'} of the "
                     f"loss figures; the accuracy fits take --step1-law, --lower, --runs and "
                     f"--fit-max-params")
    if ns.x == "tokens":
        parser.error("plot accuracy draws N (--x params) or C = 6ND (--x flops) on its x axis, "
                     "not D (--x tokens)")


class _Formatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Keep the examples' line breaks; fill the ``{LAWS}``-style placeholders."""


def _check_output(parser, ns) -> None:
    """Usage errors (exit 2) of -o/--figure-format/--json."""
    if str(ns.output) == "-":
        if ns.json:
            parser.error("--json and -o - both write to standard output: give -o FILE with "
                         "--json")
    elif ns.figure_format is not None and FORMATS[ns.output.suffix.lower()] != ns.figure_format:
        parser.error(f"--figure-format {ns.figure_format} does not match -o {ns.output} "
                     f"(the suffix decides a file's format; --figure-format is for -o -)")


def _cmd_plot(args) -> int:
    stdout = command_stdout()
    if str(args.output) == "-" and stdout is None:
        raise DelphiError("-o -: standard output is closed")
    if str(args.output) == "-" and (args.figure_format or "png") != "svg" and \
            stdout.isatty():
        raise DelphiError(f"-o - would write a binary {(args.figure_format or 'png').upper()} "
                          f"to the terminal: redirect it (> figure.png), pipe it, or give "
                          f"-o FILE")
    import matplotlib

    matplotlib.use("Agg")     # files only: no display, whatever the environment says
    import matplotlib.pyplot as plt

    from .. import plot as P

    show = args.warnings
    kind = args.kind
    if kind == "completion":
        ax, drawn = _completion(args, P, show)
    elif kind in ("isoflop", "frontier"):
        ax, drawn = _isoflop(args, P, show, plt)
    elif kind == "accuracy":
        axes, drawn = _accuracy(args, P, show)
        ax = axes[0]
    elif kind == "recipes":
        ax, drawn = _recipes(args, P, show)
    else:
        ax, drawn = _fit_kinds(args, P, show)
    caption = for_cli(P.caption(drawn))
    _cli_spelling(ax.figure)
    path = args.output
    to_stdout = str(path) == "-"
    fmt = (args.figure_format or "png") if to_stdout else FORMATS[path.suffix.lower()]
    try:
        with warnings.catch_warnings():
            # a run named in a script the font lacks is drawn as boxes; not the user's warning
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing",
                                    category=UserWarning)
            if to_stdout:
                # A text stream in tests (capsys) has no binary buffer: SVG goes as text.
                sink = getattr(stdout, "buffer", None)
                if sink is None and fmt != "svg":
                    raise DelphiError("-o -: standard output takes text only here; use "
                                      "--figure-format svg or -o FILE")
                ax.figure.savefig(sink if sink is not None else stdout, format=fmt,
                                  dpi=args.dpi, bbox_inches="tight")
                stdout.flush()
            else:
                ax.figure.savefig(path, format=fmt, dpi=args.dpi, bbox_inches="tight")
    except BrokenPipeError:
        raise                   # the reader went away: main exits quietly, as for text
    except OSError as exc:
        raise DelphiError(f"cannot write the figure to "
                          f"{'standard output' if to_stdout else repr(str(path))}: "
                          f"{exc.strerror or exc}") from None
    finally:
        plt.close(ax.figure)
    if to_stdout:
        note(f"wrote the {kind} figure ({fmt}) to standard output")
        note(f"caption: {caption}")
    elif args.json:
        print_json({"path": str(path.resolve()), "kind": kind, "format": fmt,
                    "caption": caption})
    else:
        print(f"wrote the {kind} figure to {path}")
        print(f"caption: {caption}")
    return 0


def _cli_spelling(fig) -> None:
    """Every text of ``fig`` as the command line prints it: a setting named
    ``drop_invalid=True (CLI --drop-invalid)`` by the library reads ``--drop-invalid``."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        value = text.get_text()
        if "(CLI " in value:
            text.set_text(for_cli(value))


def _law(args, defaults, ladder, target=None) -> str:
    from ...forecasting.forecast import default_law

    law = args.law or (defaults.law if defaults is not None else None)
    if law == "auto":
        raise UsageError("delphi plot draws one law: give --law NAME (see `delphi compare` "
                         "for the law auto would choose)")
    return law or default_law(ladder, target)


def _given_target(args):
    return any(v is not None for v in (args.target_flops, args.target_params,
                                       args.target_tokens, args.target_steps))


def _fit_kinds(args, P, show: bool):
    ladder, defaults = load_with_defaults(args)
    settings = fit_settings(args, defaults)
    if args.kind == "forecast":
        from ...forecasting.forecast import predict

        target = target_from(args, defaults)
        law = _law(args, defaults, ladder, target)
        forecast = predict(ladder, target, law, **settings, **interval_settings(args),
                           **jobs_kwargs(args))
        return P.plot_forecast(forecast, ladder=ladder, x=args.x, residuals=args.residuals,
                               warnings=show), forecast
    if args.kind == "backtest":
        from ...analyses.backtest import backtest
        from .forecast import one_backtest_design
        one_backtest_design(args, prefixes=False)

        # the figure's default stays the fold fits' own (delta) interval
        interval = {"auto": "delta", "none": None}.get(args.interval, args.interval)
        result = backtest(ladder, _law(args, defaults, ladder), fixed=settings["fixed"],
                          fit_max_flops=settings["fit_max_flops"],
                          leave_one_budget_out=args.leave_one_budget_out,
                          bounds=settings["bounds"], delta=settings["delta"],
                          include_unfinished=settings["include_unfinished"],
                          interval=interval, level=args.level, n_boot=args.n_boot,
                          **jobs_kwargs(args))
        return P.plot_backtest(result, notes=show), result
    from ...fitting import fit

    target = target_from(args, defaults) if _given_target(args) else None
    result = fit(ladder, _law(args, defaults, ladder, target), **settings)
    if args.kind == "residuals":
        return P.plot_residuals(result, x=args.x, ladder=ladder, warnings=show), result
    return P.plot_fit(result, x=args.x, target=target, ladder=ladder,
                      residuals=args.residuals, warnings=show), result


def _isoflop(args, P, show: bool, plt):
    from ...analyses.isoflop import isoflop_analysis

    ladder = load_from_args(args)
    result = isoflop_analysis(ladder, method=args.method, window=args.window,
                              n_boot=args.n_boot, level=args.level, seed=args.seed)
    if args.kind == "frontier":
        return P.plot_isoflop_frontier(result, quantity=args.quantity), result
    fig, (ax, fax) = plt.subplots(1, 2, figsize=(16, 5.2), layout="constrained",
                                  gridspec_kw={"width_ratios": [1.6, 1]})
    return P.plot_isoflop(result, ladder, ax=ax, frontier_ax=fax, warnings=show), result


def _accuracy(args, P, show: bool):
    from ...analyses.accuracy import predict_accuracy

    if not args.task or args.task == "all":
        raise UsageError("plot accuracy draws one task: --task TASK (see `delphi accuracy "
                         "--task all` for every task)")
    if args.target_params is None or args.target_tokens is None:
        raise UsageError("plot accuracy needs --target-params N and --target-tokens D")
    from ...laws import LAWS

    law = LAWS.get(args.step1_law)      # unknown names: predict_accuracy lists the known ones
    if law is not None and not {"params", "tokens"} <= set(law.inputs):
        # refused before the bootstrap, not after it: panels 1 and 3 draw step 1 along N, D
        raise UsageError(f"plot accuracy draws step 1 along N and D: --step1-law "
                         f"{args.step1_law} is a law of {', '.join(law.inputs)}; give a law of "
                         f"N and D (default chinchilla)")
    ladder = load_from_args(args)
    forecast = predict_accuracy(ladder, args.task, target_params=args.target_params,
                                target_tokens=args.target_tokens, level=args.level,
                                n_boot=args.n_boot, seed=args.seed,
                                runs=args.runs, fit_max_params=args.fit_max_params,
                                tasks_manifest=args.tasks, step1_law=args.step1_law,
                                lower=args.lower, calibrate=args.calibrate,
                                step1_delta=args.huber_delta)
    # --x tokens was refused at parsing (_check_accuracy)
    return P.plot_accuracy(forecast, x=args.x, actual=args.actual, warnings=show), forecast


def _recipes(args, P, show: bool):
    from ...analyses.recipes import compare_recipes

    if isinstance(args.floor, tuple):
        raise UsageError("plot recipes fixes the floor at one value (--floor E), not a range")
    if args.target_flops is None and args.target_params is None and args.target_tokens is None:
        from .output import UsageError
        raise UsageError("plot recipes needs a target: --target-flops C, or --target-params N with "
                         "--target-tokens D")
    ladders = [load_from_args(args, source) for source in [args.ladder, *args.more_ladders]]
    fixed = dict(args.fix)
    if args.floor is not None:
        if "E" in fixed:
            raise UsageError("E fixed twice (--fix E=... and --floor); give one")
        fixed["E"] = args.floor
    kwargs = {} if args.huber_delta is None else {"delta": args.huber_delta}
    result = compare_recipes(ladders, target_flops=args.target_flops,
                             target_params=args.target_params, target_tokens=args.target_tokens,
                             law=args.law, fixed=fixed or None, shared_floor=args.shared_floor,
                             fit_max_flops=args.fit_max_flops, pairing=args.pairing,
                             level=args.level, n_boot=args.n_boot, seed=args.seed,
                             forecasts=False, **kwargs, **jobs_kwargs(args))
    return P.plot_recipes(result, warnings=show), result


def _completion(args, P, show: bool):
    from ...forecasting.curves import complete

    if not args.run:
        raise UsageError("plot completion needs the run to complete: --run RUN (see "
                         "`delphi complete --all-runs` for the ladder's runs)")
    ladder = load_from_args(args)
    result = complete(ladder, args.run, args.law or "annealing",
                      upto_fraction=args.upto_fraction,
                      upto_step=None if args.upto_step is None else int(args.upto_step),
                      siblings=args.siblings, keep_warmup=args.keep_warmup)
    return P.plot_completion(result, ladder, full_range=args.full_range,
                             warnings=show), result
