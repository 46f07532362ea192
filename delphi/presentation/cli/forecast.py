"""``delphi predict``, ``fit``, ``backtest``, ``complete`` and ``ladders``: parsing and printing
only; the work is in :mod:`delphi.forecast`, :mod:`delphi.fitting`, :mod:`delphi.curves` and
:mod:`delphi.analyses.backtest`."""

from __future__ import annotations

from ...core.text import level_percent
from ...errors import DelphiError
from .options import (LADDER_HELP, METRIC_HELP, add_fit_options, add_interval_options,
                      add_ladder_options, add_level_option, add_selection_options,
                      add_target_options, count, examples, fit_settings, interval_settings,
                      jobs_kwargs, load_from_args, load_with_defaults, positive_float,
                      selection_settings, serial, target_from, target_value,
                      training_share)
from .output import json_text, note, print_json, UsageError

__all__ = ["add_commands", "add_curve_options", "check_curve_flags", "curve_forecast"]


def add_curve_options(p, flag: bool = True) -> None:
    """``--curve`` (when ``flag``) and ``--curve-points``: the target's whole curve (issue 26)."""
    if flag:
        p.add_argument("--curve", action="store_true",
                       help="forecast the target's whole loss curve (a checkpoint law, default "
                            "chinchilla-ckpt, along --target-schedule with --target-steps and "
                            "--target-batch), with a band at each fraction (--level)")
    p.add_argument("--curve-points", type=count(2), default=50, metavar="N",
                   help="points of the --curve forecast (default 50)")
    p.add_argument("--no-carry-over", action="store_true",
                   help="--curve: record no carry-over of a run's deviation (measured on the "
                        "ladder's size folds), so tracking revises the ladder's final forecast "
                        "unanchored")
    p.add_argument("--fold-weights", action="store_true",
                   help="--curve: also record fold weights (the anchored forecast's weight in "
                        "the revised forecast measured on the size folds), which tracking "
                        "mixes with the weights from the two sds (off by default: it did not "
                        "hold out of sample)")


def check_curve_flags(args) -> None:
    """--no-carry-over and --fold-weights shape the forecast of --curve alone; elsewhere
    they would be dropped without a word."""
    from ...errors import TargetError

    given = [flag for flag, used in (("--no-carry-over", getattr(args, "no_carry_over", False)),
                                     ("--fold-weights", getattr(args, "fold_weights", False)))
             if used]
    if given and getattr(args, "curve", None) is not True:
        raise TargetError(f"{' and '.join(given)} {'shape' if len(given) > 1 else 'shapes'} "
                          f"the forecast curve of --curve alone "
                          f"(no FRACTION:LOSS list); add --curve or leave "
                          f"{'them' if len(given) > 1 else 'it'} out")


def curve_forecast(args, ladder, target, settings: dict, chosen: dict, floor_range=None):
    """:func:`delphi.forecasting.target_curve.predict_curve` with the command's settings."""
    from ...forecasting.target_curve import predict_curve

    if chosen or args.law == "auto" or getattr(args, "ensemble", False):
        raise UsageError("--curve forecasts with one checkpoint law: give --law "
                         "chinchilla-ckpt (the default) or none, not --law auto/--ensemble")
    if floor_range is not None:
        raise UsageError("--curve and a floor range (--floor LO:HI) cannot be combined")
    return predict_curve(ladder, target, args.law, points=args.curve_points,
                         carry=not getattr(args, "no_carry_over", False),
                         fold_weights=getattr(args, "fold_weights", False), **settings,
                         **interval_settings(args), **jobs_kwargs(args),
                         allow_degenerate=getattr(args, "allow_degenerate", False))


def add_commands(sub) -> dict:
    """Add ``predict``, ``fit``, ``complete``, ``backtest`` and ``ladders`` to ``sub`` (from
    ``parser.add_subparsers()``); return ``{command: handler(args) -> exit code}``."""
    p = sub.add_parser("predict", help="fit a law to a ladder and predict a target run",
                       epilog=examples(
                           "delphi predict marin-delphi-dense --target-flops 1e23",
                           "delphi predict epoch-chinchilla --target-params 7e10 "
                           "--target-tokens 1.4e12",
                           "delphi predict marin-moe-535b --floor 1.4:1.8 --json"))
    add_fit_options(p)
    add_target_options(p)
    add_interval_options(p)
    add_selection_options(p)
    p.add_argument("--allow-degenerate", action="store_true",
                   help="extrapolate a degenerate fit (a law that collapsed to a constant over "
                        "the ladder: flat or identical losses) instead of refusing")
    add_curve_options(p)

    p = sub.add_parser("fit", help="fit a law to a ladder and print the fit",
                       epilog=examples(
                           "delphi fit marin-delphi-dense",
                           "delphi fit epoch-chinchilla --law chinchilla --json",
                           "delphi fit marin-moe-535b --law power --fix E=1.5"))
    add_fit_options(p)
    serial(p)

    p = sub.add_parser("complete", help="predict an unfinished run's final loss from its "
                                        "checkpoints and planned LR schedule",
                       epilog=examples(
                           "delphi complete misfitting2025 --run "
                           "misfitting_100m-lr0.002-T12000-e94 --upto-fraction 0.8",
                           "delphi complete misfitting2025 --run "
                           "misfitting_100m-lr0.002-T12000-e94 --upto-step 6000 --json",
                           "delphi complete misfitting2025 --all-runs --upto-fraction 0.5 -j -1"))
    p.add_argument("ladder", help=LADDER_HELP + "; its runs need checkpoints (step, loss)")
    runs = p.add_mutually_exclusive_group(required=True)
    runs.add_argument("--run", action="append", metavar="RUN",
                      help="the run to complete (repeatable: several runs, one result each)")
    runs.add_argument("--all-runs", action="store_true",
                      help="complete every run of the ladder (runs that cannot be completed "
                           "are skipped with a note). --json with several runs: {\"ladder\", "
                           "\"law\", \"n_runs\", \"n_completed\", \"runs\": [one result, or "
                           "{\"run\", \"error\"}, per run]}")
    p.add_argument("--law", default="annealing", metavar="LAW",
                   help="curve law: annealing (default; Tissue et al. 2024) or multipower "
                        "(Luo et al. 2025; more flexible, slower, needs more checkpoints)")
    # one cut of the run: both at once was the smaller, said nowhere
    upto = p.add_mutually_exclusive_group()
    upto.add_argument("--upto-fraction", type=training_share, metavar="F",
                      help="fit only checkpoints up to this share of the run (backtesting)")
    upto.add_argument("--upto-step", type=positive_float, metavar="STEP",
                      help="fit only checkpoints up to this step (backtesting)")
    p.add_argument("--siblings", action="store_true",
                   help="also fit the ladder's runs of the same model and peak LR, up to the "
                        "same step")
    p.add_argument("--keep-warmup", action="store_true",
                   help="also fit the warm-up checkpoints (LR still rising; left out by default)")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    add_level_option(p, "level of the interval from the ladder's own completion errors")
    add_ladder_options(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (a list of them for several runs)")
    p.add_argument("--verbose", action="store_true",
                   help="several runs: each run's full report and every note, at the end, "
                        "instead of one row per run as it is done")


    p = sub.add_parser("backtest", help="fit small runs, predict held-out larger ones",
                       epilog=examples(
                           "delphi backtest marin-delphi-dense --law power --fit-max-flops 1e20",
                           "delphi backtest epoch-chinchilla --law chinchilla "
                           "--leave-one-budget-out --json",
                           "delphi backtest marin-delphi-dense --law power --prefixes"))
    add_fit_options(p)
    p.add_argument("--leave-one-budget-out", action="store_true",
                   help="drop each compute budget in turn and predict its runs (instead of "
                        "--fit-max-flops)")
    add_level_option(p)
    p.add_argument("--interval", default="delta",
                   choices=["delta", "bootstrap", "auto", "calibrated", "reference", "none"],
                   help="interval per prediction (default delta: the fold fit's own, fast); "
                        "auto, calibrated or reference: predict's interval, made from each "
                        "fold's runs alone (auto is predict's default)")
    p.add_argument("--n-boot", type=count(20), default=100, metavar="N",
                   help="bootstrap draws per fit with --interval bootstrap (default 100; at "
                        "least 20)")
    p.add_argument("--prefixes", action="store_true",
                   help="instead: fit growing prefixes of the ladder (by compute budget), show "
                        "each parameter's and the forecast's path, and flag a steady drift "
                        "(monotone over the last 4 prefixes and beyond 2 combined s.e.)")
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C",
                   help="with --prefixes: the target whose forecast is followed (default the "
                        "manifest's target, else the ladder's largest run)")
    p.add_argument("--target-params", type=target_value("params"), metavar="N",
                   help="with --prefixes: target parameters")
    p.add_argument("--target-tokens", type=target_value("tokens"), metavar="D",
                   help="with --prefixes: target tokens")

    p = sub.add_parser("ladders", help="list the bundled ladders",
                       epilog=examples("delphi ladders", "delphi ladders --json"))
    p.add_argument("--json", action="store_true",
                   help="print one JSON list of {name, description}")
    serial(p)
    return {"predict": _cmd_predict, "fit": _cmd_fit, "complete": _cmd_complete,
            "backtest": _cmd_backtest, "ladders": _cmd_ladders}


def _cmd_predict(args) -> int:
    # The ladder first: a bad name or file is told before the fitting stack (scipy) is
    # imported, about half the cost of a command that ends in that error.
    check_curve_flags(args)
    ladder, defaults = load_with_defaults(args)
    from ...forecasting.forecast import default_law, predict

    target = target_from(args, defaults)
    law = args.law or (defaults.law if defaults is not None else None)
    if law is None and not args.ensemble:
        law = default_law(ladder, target)
    floor_range = args.floor if isinstance(args.floor, tuple) else None
    settings = fit_settings(args, defaults)
    chosen = selection_settings(args, ladder, settings, law)
    if chosen and (args.law is None or args.law == "auto"):
        law = None if args.ensemble else "auto"   # a manifest's law gives way to the choice
    # A TargetInputError from target flags is usage (exit 2): main() decides, for every command.
    if args.curve:
        forecast = curve_forecast(args, ladder, target, settings, chosen, floor_range)
    else:
        forecast = predict(ladder, target, law, **settings,
                           **interval_settings(args), **jobs_kwargs(args),
                           floor_range=floor_range, allow_degenerate=args.allow_degenerate,
                           **chosen)
    print(json_text(forecast.to_dict()) if args.json else forecast.report())
    return 0


def _cmd_fit(args) -> int:
    ladder, defaults = load_with_defaults(args)    # before the fitting stack, as in predict
    from ...fitting import fit
    from ...forecasting.forecast import default_law

    law = args.law or (defaults.law if defaults is not None else None)
    if law is None:
        law = default_law(ladder)    # predict's rule, from the ladder alone (no target)
    result = fit(ladder, law, **fit_settings(args, defaults))
    from ...forecasting.forecast import ladder_design_notes
    design_notes, design_warns = ladder_design_notes(ladder, result.law)
    if args.json:
        out = result.to_dict()
        out["design"] = {"notes": design_notes, "warnings": design_warns}
        conv = ladder.flops_convention
        out["ladder"] = {"name": ladder.name, "source": ladder.source,
                         "sha256": result.extra["sha256"], "metric": ladder.metric,
                         "unit": ladder.unit,
                         "flops_convention": conv.to_dict() if conv is not None else None}
        print_json(out)
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
        for w in design_warns:
            print(f"warning    {w}")
        for n in design_notes:
            print(f"note       {n}")
    return 0


def _cmd_complete(args) -> int:
    ladder = load_from_args(args)
    # A completion's report has no ladder exclusions: say which invalid rows were dropped.
    for e in ladder.exclusions:
        if "dropped by drop_invalid" in e.reason:
            note(f"excluded {e.run}: {e.reason}")
    settings = {"upto_fraction": args.upto_fraction, "siblings": args.siblings,
                "keep_warmup": args.keep_warmup,
                "upto_step": None if args.upto_step is None else int(args.upto_step),
                "level": args.level}
    if not args.all_runs and len(args.run) == 1:
        from ...forecasting.curves import complete

        result = complete(ladder, args.run[0], args.law, **settings)
        print(json_text(result.to_dict()) if args.json else result.report())
        return 0
    runs = list(ladder.runs) if args.all_runs else list(dict.fromkeys(args.run))
    if not args.json and not args.verbose:
        return _stream_completions(ladder, runs, args.law, settings, args)
    done, failed = _complete_runs(ladder, runs, args.law, settings, args)
    for run, reason in failed:
        note(f"run {run!r} not completed: {reason}")
    if failed:
        note(f"{len(done)} of {len(runs)} runs completed")
    if args.json:
        # One object, as every command's --json (it was a bare list; docs/usage.md says so):
        # every run asked for is in "runs": completed ones, the others with their reason.
        records = {c.run: c.to_dict() for c in done}
        records.update({run: {"run": run, "error": reason} for run, reason in failed})
        print_json({"ladder": ladder.name, "law": args.law, "n_runs": len(runs),
                    "n_completed": len(done),
                    "runs": [records[r] for r in runs if r in records]})
    else:
        print("\n\n".join(c.report() for c in done))
    if not done:
        raise DelphiError(f"none of the {len(runs)} runs could be completed"
                          + (f" (first: {failed[0][1]})" if failed else ""))
    return 0


#: Runs completed per batch when streaming rows: the first rows appear within seconds, and a
#: batch keeps -j's workers busy.
_STREAM_BATCH = 8
#: The same, serially: the global searches of a batch's runs with as many checkpoints share
#: their batched BFGS (:func:`delphi.fitting.engine.fit_arrays_many`), which in batches of 8
#: they mostly could not (misfitting2025 --all-runs, its 242 runs in one batch: 2.1 s CPU
#: in the process against 4.7-5.1 s; a first batch of 8 before the rest cost 0.1 s more).
_SERIAL_STREAM_BATCH = 256


def _stream_batches(runs: list[str], args) -> list[list[str]]:
    """The batches of runs :func:`_stream_completions` completes, in run order."""
    from ...core.parallel import runs_serially
    serial = runs_serially(jobs_kwargs(args).get("n_jobs"))
    size = _SERIAL_STREAM_BATCH if serial else _STREAM_BATCH
    return [runs[i:i + size] for i in range(0, len(runs), size)]


def _failure_reason(run: str, result: str) -> str:
    """A failed completion's one-line message without its leading ``run 'RUN': ``."""
    return result.replace(f"run {run!r}: ", "", 1)


def _completion_row(run: str, result, width: int) -> str:
    """One row of the multi-run table: run, share of the schedule fitted, prediction, final
    loss and relative error when known; or why the run could not be completed."""
    if isinstance(result, str):
        reason = _failure_reason(run, result)
        reason = reason.split(": ", 1)[-1] if reason.startswith(("LadderError", "FitError")) \
            else reason
        short = reason.split(";")[0].split(" (")[0].replace(f"run {run!r} ", "", 1)
        return f"{run:<{width}}  not completed: {short}"
    used = result.fitted_upto_step / result.total_steps if result.total_steps else float("nan")
    actual = f"{result.actual:8.4f}" if result.actual is not None else f"{'-':>8}"
    err = result.rel_error
    err = f"{err:+8.2%}" if err is not None else f"{'-':>8}"
    flag = "  !" if result.warnings or result.fit.warnings else ""
    iv = f"[{result.lower:.4f}, {result.upper:.4f}]" if result.lower is not None else "-"
    return (f"{run:<{width}}  {used:5.0%}  {result.loss:10.4f}  {iv:>18}  {actual}  {err}{flag}")


def _stream_completions(ladder, runs: list[str], law: str, settings: dict, args) -> int:
    """``complete`` on several runs, as a table written as the runs finish (in run order, a
    batch at a time): one row per run, then a summary. ``--verbose`` gives the full reports."""
    import numpy as np

    from ...forecasting.curves import complete_many
    from .output import command_stdout
    out = command_stdout()
    width = max(len(r) for r in runs) if runs else 3
    header = (f"{'run':<{width}}  {'used':>5}  {'prediction':>10}  "
              f"{f'{level_percent(args.level)} interval':>18}  {'final':>8}  {'error':>8}")

    def emit(line: str) -> None:
        write = out.write if out is not None else (lambda s: None)
        write(line + "\n")
        if out is not None:
            out.flush()

    emit(header)
    done, errors, flagged, failed = 0, [], 0, 0
    for batch in _stream_batches(runs, args):
        for run, result in complete_many(ladder, batch, law, **settings, **jobs_kwargs(args),
                                         show_progress=False):
            if isinstance(result, str) and not args.all_runs:
                raise DelphiError(f"run {run!r} could not be completed: "
                                  f"{_failure_reason(run, result)}")
            emit(_completion_row(run, result, width))
            if isinstance(result, str):
                failed += 1
                continue
            done += 1
            flagged += bool(result.warnings or result.fit.warnings)
            if result.actual is not None:
                errors.append(result.rel_error)
    summary = f"{done} of {len(runs)} run(s) completed"
    if errors:
        summary += (f"; against the {len(errors)} final loss(es) known: median |error| "
                    f"{np.median(np.abs(errors)):.2%}, mean {np.mean(np.abs(errors)):.2%}, "
                    f"max {np.max(np.abs(errors)):.2%}")
    if flagged:
        summary += f"; {flagged} with warnings (!): --verbose or --run RUN shows them"
    if failed:
        summary += f"; {failed} not completed (reason in the row)"
    emit(summary)
    if not done:
        raise DelphiError(f"none of the {len(runs)} runs could be completed")
    return 0


def _complete_runs(ladder, runs: list[str], law: str, settings: dict, args):
    """Complete several runs with :func:`delphi.curves.complete_many` (parallel through
    ``-j``); returns (completions in run order, [(run, reason), ...]).

    With ``--all-runs`` a run that cannot be completed (no schedule, too few checkpoints) is
    skipped with a note; runs named with ``--run`` must all succeed (else a delphi error).
    """
    from ...forecasting.curves import complete_many

    done, failed = [], []
    for run, result in complete_many(ladder, runs, law, **settings, **jobs_kwargs(args)):
        if isinstance(result, str):  # the run's one-line error message
            reason = _failure_reason(run, result)
            if not args.all_runs:
                raise DelphiError(f"run {run!r} could not be completed: {reason}")
            failed.append((run, reason))
        else:
            done.append(result)
    return done, failed


def one_backtest_design(args, prefixes: bool = True) -> None:
    """Usage error (exit 2) unless exactly one backtest design is given."""
    given = [args.fit_max_flops is not None, bool(args.leave_one_budget_out)]
    if prefixes:
        given.append(bool(getattr(args, "prefixes", False)))
    if sum(given) != 1:
        from .output import UsageError
        choices = "--prefixes, --fit-max-flops C or --leave-one-budget-out" if prefixes else \
            "--fit-max-flops C or --leave-one-budget-out"
        raise UsageError(f"choose one backtest design: {choices}")


def _cmd_backtest(args) -> int:
    from ...analyses.backtest import backtest
    from ...forecasting.forecast import default_law

    one_backtest_design(args)
    ladder, defaults = load_with_defaults(args)
    law = args.law or (defaults.law if defaults is not None else None) or default_law(ladder)
    settings = fit_settings(args, defaults)
    if args.prefixes:
        return _backtest_prefixes(args, ladder, law, settings, defaults)
    result = backtest(ladder, law, fit_max_flops=args.fit_max_flops,
                      leave_one_budget_out=args.leave_one_budget_out, fixed=settings["fixed"],
                      bounds=settings["bounds"], delta=settings["delta"],
                      include_unfinished=args.include_unfinished,
                      interval=None if args.interval == "none" else args.interval,
                      level=args.level, n_boot=args.n_boot, **jobs_kwargs(args))
    print(json_text(result.to_dict()) if args.json else result.report())
    return 0


def _backtest_prefixes(args, ladder, law, settings, defaults) -> int:
    from ...analyses.backtest import prefix_fits
    from ...forecasting.forecast import Target

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
                         **jobs_kwargs(args))
    print(json_text(result.to_dict()) if args.json else result.report())
    return 0


def _cmd_ladders(args) -> int:
    from ...inputs.readers import list_ladders

    rows = list_ladders()
    if args.json:
        print_json({"n_ladders": len(rows), "ladders": [
            {"name": n, "description": d} for n, d in rows]})
    else:
        width = max((len(n) for n, _ in rows), default=0)
        for name, description in rows:
            print(f"{name:<{width}}  {description}")
    return 0


