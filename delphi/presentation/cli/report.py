"""``delphi report``: one self-contained HTML page for a ladder or a registry.

Parsing and printing only: the page is made by :mod:`delphi.report`.
"""

from __future__ import annotations

import argparse

from .options import (add_fit_options, add_interval_options, add_selection_options,
                      add_target_options, examples, fit_settings, interval_settings,
                      jobs_kwargs, load_with_defaults, selection_settings,
                      target_from, target_value)
from .output import note, print_json, UsageError
from ...core.text import level_percent, plural

__all__ = ["add_commands"]

_EXAMPLES = examples(
    "delphi report marin-moe-535b --html out/        # the manifest's target and settings",
    "delphi report epoch-chinchilla --html out/      # no target: the fit alone",
    "delphi report marin-delphi-dense --target-flops 1e22 --law power --seed 1 --html out/",
    "delphi report --registry ladders/marin-registry.jsonl --html tracker/",
    "delphi report marin-moe-535b --html out/ --generated-at 2026-12-01T00:00:00Z",
    "delphi report --recipes marin-isoflop-comma marin-isoflop-dclm --target-flops 1e22 "
    "--html recipes/")


def add_commands(sub) -> dict:
    """Add ``report`` to ``sub`` (from ``parser.add_subparsers()``); return
    ``{"report": handler(args) -> exit code}``."""
    p = sub.add_parser(
        "report", help="write a self-contained HTML page for a ladder (forecast, fit, "
        "residuals, backtest, runs), a registry (scorecard, curves, chain) or a comparison of "
        "recipes (--recipes A B ...)",
        description="Write OUT/index.html: for LADDER, the forecast (as `delphi predict` "
        "makes it, with the same options and manifest defaults) with its figure, the fit "
        "with its warnings and exclusions, the residuals, a backtest and the table of runs "
        "(with no target, here or in the manifest, the fit alone); with --registry, the scorecard of every prediction, the forecast curves against "
        "their partial outcomes, and whether the hash chain verifies, with its head; with --recipes A B "
        "[C ...] and a target, the comparison of `delphi compare-recipes` (figure, table, "
        "notes and warnings). The page is "
        "self-contained (inline SVG figures and CSS, no script, no external file) and states "
        "when it was made: --generated-at, else $SOURCE_DATE_EPOCH, else now; the same inputs "
        "and --seed then give the same bytes.",
        epilog=_EXAMPLES)
    add_fit_options(p)
    for action in p._actions:  # LADDER is not needed for a registry page
        if action.dest == "ladder":
            action.nargs, action.default, action.required = "?", None, False
    add_target_options(p)
    add_interval_options(p)
    add_selection_options(p)
    p.add_argument("--allow-degenerate", action="store_true",
                   help="extrapolate a degenerate fit instead of refusing (as predict)")
    out = p.add_argument_group("the page")
    out.add_argument("--html", required=True, metavar="OUT",
                     help="folder to write the page to, as OUT/index.html (created when "
                          "missing; must not be a file)")
    out.add_argument("--registry", metavar="PATH",
                     help="make the registry page of this registry file instead of a "
                          "ladder page (no LADDER)")
    out.add_argument("--recipes", nargs="+", metavar="LADDER",
                     help="make the page of a comparison of these ladders (recipes, the "
                          "reference first; as `delphi compare-recipes`, with one "
                          "--target-flops C, or --target-params N and --target-tokens D) "
                          "instead of a ladder page (no LADDER)")
    out.add_argument("--generated-at", metavar="ISO",
                     help="the time the page states, e.g. 2026-12-01T12:00:00Z (default: "
                          "$SOURCE_DATE_EPOCH when set, else now); with the same inputs and "
                          "--seed the page is then byte-identical")
    out.add_argument("--backtest-max-flops", type=target_value("flops"), metavar="C",
                     help="the backtest fits runs at or below C FLOPs and predicts the larger "
                          "ones (default: below the largest fitted compute budget; else "
                          "leave one budget out)")
    out.add_argument("--no-backtest", action="store_true", help="leave the backtest out")
    p.checks.append(_check_page_kind)
    return {"report": _cmd_report}


def _check_page_kind(parser, ns) -> None:
    """A usage error (exit 2) unless exactly one page is asked for: LADDER (with its fit and
    target options) or --registry PATH."""
    if ns.registry is None and ns.ladder is None and ns.recipes is None:
        parser.error("give LADDER for a ladder page, --registry PATH for a registry page, or "
                     "--recipes A B ... for a comparison page")
    if ns.recipes is not None:
        used = [flag for flag, value in (
            ("LADDER", ns.ladder is not None), ("--registry", ns.registry is not None),
            ("--backtest-max-flops", ns.backtest_max_flops is not None),
            ("--no-backtest", ns.no_backtest), ("--ensemble", ns.ensemble),
            ("--allow-degenerate", ns.allow_degenerate)) if value]
        if used:
            parser.error(f"--recipes makes a comparison page: {', '.join(used)} "
                         f"{'belongs' if len(used) == 1 else 'belong'} to a ladder or registry "
                         f"page")
        if len(ns.recipes) < 2:
            parser.error("--recipes needs two or more ladders (the reference first)")
        return
    if ns.registry is not None:
        used = [flag for flag, value in (
            ("LADDER", ns.ladder is not None), ("--law", ns.law is not None),
            ("--floor", ns.floor is not None), ("--fix", bool(ns.fix)),
            ("--target-flops", ns.target_flops is not None),
            ("--target-params", ns.target_params is not None),
            ("--target-tokens", ns.target_tokens is not None),
            ("--backtest-max-flops", ns.backtest_max_flops is not None)) if value]
        if used:
            verb = "belongs" if len(used) == 1 else "belong"
            parser.error(f"give LADDER or --registry PATH, not both: {', '.join(used)} {verb} "
                         f"to a ladder page, --registry to a registry page")


def _cmd_report(args) -> int:
    from ...errors import for_cli
    from ..report.html import check_html_folder

    check_html_folder(args.html)      # before the fits, not after them
    if args.registry is not None:
        return _registry_report(args)
    if args.recipes is not None:
        return _recipes_report(args)
    from ...forecasting.forecast import default_law
    from ..report import ladder_page

    ladder, defaults = load_with_defaults(args)
    given = any(getattr(args, k, None) is not None for k in (
        "target_flops", "target_params", "target_tokens", "target_steps", "target_name",
        "target_peak_lr", "target_schedule", "target_batch", "target_active_params"))
    in_manifest = defaults is not None and any(
        v is not None for v in (defaults.target_flops, defaults.target_params,
                                defaults.target_tokens))
    # No target here or in the manifest: a page of the fit alone.
    target = target_from(args, defaults) if given or in_manifest else None
    law = args.law or (defaults.law if defaults is not None else None)
    if law is None and not args.ensemble:
        law = default_law(ladder, target)
    # fit_settings allows a floor range (--floor LO:HI) for predict only; the page shows the
    # forecast across it exactly as predict reports it.
    settings = fit_settings(argparse.Namespace(**{**vars(args), "command": "predict"}),
                            defaults)
    chosen = selection_settings(args, ladder, settings, law)
    if chosen and (args.law is None or args.law == "auto"):
        law = None if args.ensemble else "auto"
    floor_range = args.floor if isinstance(args.floor, tuple) else None
    report = ladder_page(ladder, target, law, generated_at=args.generated_at,
                         backtest=not args.no_backtest,
                         backtest_max_flops=args.backtest_max_flops, **settings,
                         **interval_settings(args), **jobs_kwargs(args),
                         floor_range=floor_range, allow_degenerate=args.allow_degenerate,
                         **chosen)
    # Messages in the page name settings by their flags, as everything the CLI prints.
    path = _write(for_cli(report.html), args.html)
    return _print(args, path, report)


def _registry_report(args) -> int:
    from ..report import registry_page

    report = registry_page(args.registry, generated_at=args.generated_at)
    path = _write(report.html, args.html)
    code = _print(args, path, report)
    if not report.summary["verified"]:
        note(f"the registry does not verify: {report.objects['verify']}; the page says so")
        return 1
    return code


def _recipes_report(args) -> int:
    from ...analyses.recipes import compare_recipes
    from ...errors import for_cli
    from ..report import recipes_page
    from .options import load_from_args
    from .output import UsageError

    if "-" in args.recipes:
        raise UsageError("--recipes reads its ladders from files or names, not standard input "
                         "('-')")
    if isinstance(args.floor, tuple):
        raise UsageError("--recipes fixes the floor at one value (--floor E), not a range")
    if args.target_flops is None and args.target_params is None and args.target_tokens is None:
        from .output import UsageError
        raise UsageError("report --recipes needs a target: --target-flops C, or --target-params N with "
                         "--target-tokens D")
    if args.law == "auto":
        raise UsageError("--recipes fits one law to every recipe: chinchilla or power (--law)")
    ladders = [load_from_args(args, source) for source in args.recipes]
    fixed = dict(args.fix)
    if args.floor is not None:
        if "E" in fixed:
            raise UsageError("E fixed twice (--fix E=... and --floor); give one")
        fixed["E"] = args.floor
    extra = {} if args.huber_delta is None else {"delta": args.huber_delta}
    comparison = compare_recipes(
        ladders, target_flops=args.target_flops, target_params=args.target_params,
        target_tokens=args.target_tokens, law=args.law, fixed=fixed or None,
        fit_max_flops=args.fit_max_flops, level=args.level, n_boot=args.n_boot,
        seed=args.seed, interval=None if args.interval == "none" else args.interval,
        **extra, **jobs_kwargs(args))
    report = recipes_page(comparison, generated_at=args.generated_at)
    path = _write(for_cli(report.html), args.html)
    return _print(args, path, report)


def _write(page: str, out: str):
    from ..report import write_html

    return write_html(page, out)


def _print(args, path, report) -> int:
    board = report.objects.get("scoreboard")     # a registry page's scores
    if args.json:
        # partial outcomes (tracked checkpoints) beside n_scored, which counts final ones
        tracked = ({"n_partial": board.n_partial, "tracked": list(board.tracked)}
                   if board is not None else {})
        print_json({"path": str(path), "kind": report.kind, **report.summary, **tracked})
        return 0
    s = report.summary
    if report.kind == "ladder" and s["prediction"] is None:
        print(f"wrote {path}: ladder {s['ladder']['name']}, fit of {s['law']} (no target, so "
              f"no forecast: give --target-flops C, or --target-params N --target-tokens D)")
    elif report.kind == "recipes":
        rows = "; ".join(f"{c['recipe']} - {s['reference']} at C = {c['target_flops']:.3g}: "
                         f"{c['difference']['loss']:+.4f} [{c['difference']['lower']:+.4f}, "
                         f"{c['difference']['upper']:+.4f}]" for c in s["comparisons"])
        print(f"wrote {path}: recipes {', '.join(s['recipes'])}; {rows}")
    elif report.kind == "ladder":
        p = s["prediction"]
        iv = (f", {level_percent(p['level'])} interval [{p['lower']:.4f}, {p['upper']:.4f}] "
              f"({p['method']})" if p["lower"] is not None else ", no interval")
        print(f"wrote {path}: ladder {s['ladder']['name']}, prediction {p['loss']:.4f} "
              f"{p['unit']}{iv}")
    else:
        state = "verified" if s["verified"] else "DOES NOT VERIFY"
        counts = (f"{plural(s['n_predictions'], 'prediction')}, "
                  + (board.counts_text() if board is not None else f"{s['n_scored']} scored")
                  if s.get("readable", True) else "not readable as entries, nothing scored")
        print(f"wrote {path}: registry {s['registry']}, {counts}; chain {state}, head "
              f"{s['head'] or '(none verified)'}")
    return 0
