"""``delphi accuracy``: a task's benchmark accuracy at a target (N, D), in two steps.

Parsing and printing only; the work is in :mod:`delphi.accuracy`. Imports only the standard
library at the top (start-up stays light).
"""

from __future__ import annotations


from ...core.text import level_percent
from .output import print_json
from .options import (LADDER_HELP, add_ladder_options, add_level_option, count, examples,
                      jobs_kwargs, load_from_args, positive_float, target_value)

__all__ = ["add_commands"]


def add_commands(sub) -> dict:
    """Add ``accuracy`` to ``sub``; return ``{"accuracy": handler}``."""
    p = sub.add_parser(
        "accuracy", help="predict a benchmark task's accuracy: task loss from N and D, then "
                         "accuracy from task loss (Bhagia et al. 2024)",
        epilog=examples(
            "delphi accuracy olmo-ladder --task hellaswag --target-params 1.28e9 "
            "--target-tokens 1.28e11",
            "delphi accuracy olmo-ladder --task all --target-params 1.28e9 "
            "--target-tokens 1.28e11 --json",
            "delphi accuracy olmo-ladder --task mmlu --target-params 3.2e9 "
            "--target-tokens 6.4e10 --fit-max-params 8e8 --compare"))
    p.add_argument("ladder", nargs="?", default="olmo-ladder",
                   help=LADDER_HELP + " (default olmo-ladder); its runs need the tasks' columns "
                                      "at every checkpoint")
    p.add_argument("--task", required=True, metavar="TASK",
                   help="task name of the tasks manifest, or 'all' (one row per task)")
    p.add_argument("--tasks", metavar="MANIFEST", default=None,
                   help="tasks manifest: a bundled name or a .toml path (default "
                        "olmo-ladder-tasks: the paper's eight tasks)")
    p.add_argument("--target-params", type=target_value("params"), required=True, metavar="N",
                   help="target model size N in parameters")
    p.add_argument("--target-tokens", type=target_value("tokens"), required=True, metavar="D",
                   help="target training tokens D")
    add_level_option(p)
    # 1,000,000: the bootstrap's MAX_DRAWS (not imported, to keep --help's imports light).
    p.add_argument("--n-boot", type=count(20, 1_000_000), default=None, metavar="N",
                   help="bootstrap draws over runs, both steps refitted per draw, at least 20: "
                        "exactly N (default: 100-200, sized so that each end of the interval "
                        "has a Monte-Carlo standard error <= 0.1 of its width; 200 before)")
    p.add_argument("--calibration-draws", type=count(10, 1_000_000), default=None, metavar="N",
                   help="bootstrap draws per leave-future-out cut of the calibration, at least "
                        "10: exactly N (default: 20-40, sized as --n-boot; 40 before). "
                        "--n-boot 200 --calibration-draws 40 gives the fixed counts of before")
    p.add_argument("--seed", type=count(0), default=0, help="random seed (default 0)")
    add_fit_options(p)
    p.add_argument("--huber-delta", type=positive_float, metavar="DELTA", default=None,
                   help="Huber delta of step 1 on log residuals (default 0.001, the loss "
                        "fits'); a step-1 warning suggests a larger one when most residuals "
                        "exceed it")
    p.add_argument("--no-calibration", dest="calibrate", action="store_false",
                   help="leave out the extrapolation calibration (by default the bootstrap's "
                        "draws are stretched by how far leave-future-out predictions inside the "
                        "fitted runs fell outside their own bootstrap: median |z| / 0.6745, "
                        "at least 1)")
    p.add_argument("--compare", action="store_true",
                   help="also show the baselines (step 2 on the ladder's own loss; the one-step "
                        "law) at the target and their errors on a held-out split (the largest "
                        "model size, fitted on the others)")
    p.add_argument("--metric", default=None, help="the ladder's own loss column (default: the "
                                                  "manifest's; used by the c4-loss baseline)")
    add_ladder_options(p)
    p.add_argument("--registry", metavar="PATH", default=None,
                   help="also append the prediction to this registry (unit accuracy; scored "
                        "later with `delphi score --registry PATH --id ID --actual 0.612`); "
                        "needs --id")
    p.add_argument("--id", metavar="ID", default=None,
                   help="the registry id (with --task all: ID/TASK for each task)")
    p.add_argument("--author", default=None, help="author recorded with --registry")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return {"accuracy": _accuracy}


def add_fit_options(group) -> None:
    """The options of the two fits, shared by ``delphi accuracy`` and ``delphi plot
    accuracy``: --runs, --fit-max-params, --step1-law, --lower."""
    group.add_argument("--runs", type=run_list, metavar="RUN,RUN", default=None,
                       help="fit only these runs (comma-separated; default every finished run)")
    group.add_argument("--fit-max-params", type=target_value("params"), metavar="N", default=None,
                       help="fit only runs with at most N parameters")
    group.add_argument("--step1-law", default="chinchilla", metavar="LAW",
                       help="task-loss law of step 1 (default chinchilla, the paper's Eq. 1)")
    group.add_argument("--lower", type=_lower, default="fit", metavar="fit|chance|FRACTION",
                       help="step 2's accuracy at very high loss C: 'fit' (default: fitted "
                            "within [chance, 1]), 'chance' (fixed at the task's chance level) "
                            "or a fraction to fix it at")


def run_list(text: str) -> list[str]:
    """``--runs RUN,RUN``: the run names, blanks dropped; none at all is an error (it would
    silently mean every run)."""
    import argparse

    runs = [r.strip() for r in text.split(",") if r.strip()]
    if not runs:
        raise argparse.ArgumentTypeError(f"no run named in {text!r}: give RUN,RUN")
    return runs


def _check_registry(args) -> None:
    """Before any fitting: the registry's folder exists and the id(s) are new."""
    from pathlib import Path

    from ...analyses.accuracy import load_tasks
    from ...errors import RegistryError
    from ...registry import Registry

    path = Path(args.registry)
    if not path.parent.is_dir():
        raise RegistryError(f"the registry's folder {str(path.parent)!r} does not exist "
                            f"(nothing was predicted or written)")
    if not path.exists():
        return
    ids = ([f"{args.id}/{name}" for name in load_tasks(args.tasks)] if args.task == "all"
           else [args.id])
    taken = sorted(set(ids) & {e.id for e in Registry(path).entries()})
    if taken:
        raise RegistryError(f"id(s) {', '.join(taken)} already in {args.registry}: entries "
                            f"are immutable, use a new --id (nothing was predicted or written)")


def _lower(text: str):
    """``--lower``: 'fit', 'chance' or a fraction in [0, 1)."""
    import argparse

    if text in ("fit", "chance"):
        return text
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected 'fit', 'chance' or a fraction in [0, 1), "
                                         f"got {text!r}")
    return value


def _flags(f) -> str:
    """Short flags for a row: what each warning means for the prediction."""
    out = []
    for w in f.warnings:
        if "impossible" in w:
            out.append("noisy (>2-pt)")
        elif w.startswith("step 1: poorly determined"):
            out.append(f"step-1 A loose: +-{50 * (f.mean_upper - f.mean_lower):.1f} pts")
        else:
            out.append("!")
    return ", ".join(dict.fromkeys(out))


def _fmt_row(f) -> str:
    return (f"{f.task.name:<14} {f.task_loss:9.4f} {100 * f.accuracy:7.1f} "
            f"[{100 * f.lower:5.1f}, {100 * f.upper:5.1f}] {100 * f.noise_sd:6.2f} "
            f"{100 * f.task.chance:6.1f}  {_flags(f)}")


def _accuracy(args) -> int:
    from ...analyses.accuracy import compare_accuracy, load_tasks, predict_accuracy

    ladder = load_from_args(args)
    runs = args.runs
    kwargs = dict(target_params=args.target_params, target_tokens=args.target_tokens,
                  level=args.level, n_boot=args.n_boot, seed=args.seed, runs=runs,
                  calibration_draws=args.calibration_draws,
                  fit_max_params=args.fit_max_params, tasks_manifest=args.tasks,
                  step1_law=args.step1_law, lower=args.lower, calibrate=args.calibrate,
                  step1_delta=args.huber_delta)
    if args.task == "all":
        # -j: the tasks in parallel (a task's bootstrap refits are batched, not spread).
        kwargs.update(jobs_kwargs(args))
    elif getattr(args, "jobs", None) not in (None, 1):
        from .output import note
        note(f"-j {args.jobs}: `delphi accuracy` with one task runs serially (its bootstrap refits "
             f"are batched); -j runs the tasks of --task all in parallel")
    if (args.registry is None) != (args.id is None):
        from .output import UsageError

        raise UsageError("--registry and --id go together: --registry PATH --id ID "
                         "(nothing was predicted or written)")
    if args.registry is not None:
        _check_registry(args)
    result = predict_accuracy(ladder, args.task, **kwargs)
    forecasts = result if isinstance(result, list) else [result]
    entries = []
    if args.registry is not None:
        from ...registry import Registry

        reg = Registry(args.registry)
        for f in forecasts:
            ident = args.id if not isinstance(result, list) else f"{args.id}/{f.task.name}"
            entries.append(reg.register_accuracy(f, id=ident, author=args.author))
    comparisons = []
    if args.compare:
        names = [f.task.name for f in forecasts]
        tasks = load_tasks(args.tasks)
        for name in names:
            comparisons.append(compare_accuracy(
                ladder, tasks[name], target_params=args.target_params,
                target_tokens=args.target_tokens, runs=runs,
                fit_max_params=args.fit_max_params, step1_law=args.step1_law,
                lower=args.lower, step1_delta=args.huber_delta))
    if args.json:
        docs = []
        for i, f in enumerate(forecasts):
            d = f.to_dict()
            if comparisons:
                d["compare"] = comparisons[i].to_dict()
            if entries:
                d["registered"] = {"registry": args.registry, "id": entries[i].id,
                                   "hash": entries[i].hash}
            docs.append(d)
        print_json(docs if isinstance(result, list) else docs[0])
        return 0
    if isinstance(result, list):
        f0 = forecasts[0]
        print(f"ladder {f0.ladder}: accuracy at N = {args.target_params:.4g}, "
              f"D = {args.target_tokens:.4g} (two-step: task loss, then sigmoid; points)")
        column = f"{level_percent(args.level)} interval"
        print(f"{'task':<14} {'task loss':>9} {'acc':>7} {column:>14} "
              f"{'noise':>6} {'chance':>6}")
        for f in forecasts:
            print(_fmt_row(f))
        # One line per kind of warning, naming its tasks: the step-1 warning recurs on
        # most tasks and its figures are in each task's --json.
        kinds: dict[str, list[str]] = {}
        for f in forecasts:
            for w in f.warnings:
                key = w.split("; ")[0] if w.startswith("step 1: poorly determined") else w
                kinds.setdefault(key, []).append(f.task.name)
        for w, names in kinds.items():
            print(f"  warning ({', '.join(dict.fromkeys(names))}): {w}")
        print("noise: checkpoint-to-checkpoint sd of accuracy in points (around a line over "
              "the last 10% of each run's checkpoints, pooled); 'step-1 A loose: +-x pts': A "
              "and alpha of step 1 trade off over the fitted sizes and move the expected "
              "accuracy by +-x points (in the interval); 'noisy': checkpoint noise alone "
              "exceeds a 2-point half-width; '!': other warnings (listed above)")
        cals = [f.calibration for f in forecasts if f.calibration]
        if cals:
            print(f"interval: bootstrap (both steps) + run and checkpoint noise, stretched by "
                  f"the extrapolation calibration (x{min(c['scale'] for c in cals):.2f}-"
                  f"{max(c['scale'] for c in cals):.2f}: how far leave-future-out predictions "
                  f"inside the fitted runs fell outside their own bootstrap; "
                  f"--no-calibration turns it off)")
    else:
        print(result.report())
    for c in comparisons:
        print(c.report())
    for e in entries:
        print(f"registered {e.kind} {e.id} in {args.registry}: accuracy "
              f"{100 * e.forecast.loss:.2f} points (hash {e.hash[:16]})")
    return 0
