"""``delphi register``, ``delphi score`` and ``delphi registry`` (``list``, ``show``, ``report``,
``verify``, ``head``, ``repair``, ``keygen``).

:func:`add_commands` adds the three commands to ``delphi``'s subparsers and returns their
handlers. Parsing and printing only: the work is in :mod:`delphi.registry`.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ...core.text import level_percent
from ...errors import RegistryError
from .options import (Parser, add_fit_options, add_interval_options, add_selection_options,
                      add_target_options, examples, fit_settings, interval_settings,
                      jobs_kwargs, load_with_defaults, selection_settings, serial,
                      iso_timestamp, loss_value, outcome_unit, outcome_value, target_from,
                      training_share)
from . import forecast as forecast_cmd
from .output import note, print_json, UsageError

if TYPE_CHECKING:
    from ...registry import Registry

# delphi.registry (pydantic, filelock) and delphi.forecast (the fitting stack) are imported by
# the handlers, after parsing: `delphi --help` and usage errors stay quick.

__all__ = ["add_commands"]

Handler = Callable[[argparse.Namespace], int]


def _add_sign_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sign-key", metavar="FILE",
                   help="sign the entry with this Ed25519 private key (from `delphi registry "
                        "keygen`); only the public key and the signature are written")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


#: The bundled registry of Marin's public forecasts (relative to a checkout of the
#: repository), used by the read-only examples.
_BUNDLED = "ladders/marin-registry.jsonl"


def _add_location(p: Parser, action: str, entry: bool = False) -> None:
    """``--registry PATH`` (and, with ``entry``, ``--id ID``) of a registry action, as on
    ``register`` and ``score``.

    The positional form of earlier releases (``registry ACTION PATH``, ``registry show ID
    PATH``) is still accepted for one release: it fills the same options and sets
    ``args.legacy_form`` (the handler then says on stderr which form to use). Giving both
    forms, or neither, is a usage error (exit code 2).
    """
    p.add_argument("--registry", metavar="PATH", help="registry file (JSON Lines)")
    if entry:
        p.add_argument("--id", metavar="ID", help="the entry's id")
    # Hidden: the deprecated positional form (ID PATH or PATH).
    p.add_argument("legacy_args", nargs="*", help=argparse.SUPPRESS)
    p.checks.append(lambda parser, ns: _resolve_location(parser, ns, action, entry))


def _resolve_location(parser: argparse.ArgumentParser, ns: argparse.Namespace, action: str,
                      entry: bool) -> None:
    legacy = list(getattr(ns, "legacy_args", None) or [])
    ns.legacy_form = None
    new = "--registry PATH" + (" --id ID" if entry else "")
    if legacy:
        old = "ID PATH" if entry else "PATH"
        if len(legacy) != (2 if entry else 1):
            parser.error(f"expected {new} (the deprecated positional form is "
                         f"`delphi registry {action} {old}`); got {' '.join(legacy)!r}")
        if ns.registry is not None or (entry and ns.id is not None):
            parser.error(f"give {new} once: not both positionally ({old}) and as options")
        ns.registry = legacy[-1]
        if entry:
            ns.id = legacy[0]
        ns.legacy_form = old
    else:
        missing = [flag for flag, value in (("--registry", ns.registry),
                                            ("--id", ns.id if entry else "")) if value is None]
        if missing:
            parser.error(f"the following arguments are required: {', '.join(missing)}")
    ns.legacy_args = []


def _legacy_note(args) -> None:
    """On stderr (unless --quiet): the positional form is deprecated, and the new command."""
    import shlex

    if not getattr(args, "legacy_form", None):
        return
    action = args.registry_command
    entry = f" --id {shlex.quote(args.id)}" if args.legacy_form == "ID PATH" else ""
    note(f"`delphi registry {action} {args.legacy_form}` is deprecated and will be removed in "
         f"the next release; use `delphi registry {action} --registry "
         f"{shlex.quote(str(args.registry))}{entry}`")


def add_commands(subparsers) -> dict[str, Handler]:
    """Add ``register``, ``score`` and ``registry`` to ``subparsers`` (from
    ``parser.add_subparsers(dest="command")``).

    Returns
    -------
    ``{command: handler}``; ``handler(args)`` returns the exit code and raises
    :class:`~delphi.errors.DelphiError` on bad input (the caller prints it on one line).
    """
    p = subparsers.add_parser(
        "register", help="forecast a target (as `delphi predict`) and append the prediction to "
        "a registry", description="Fit LADDER and forecast the target exactly as `delphi "
        "predict` does (manifest defaults included), then append the forecast to the registry. "
        "With --external-loss, record a forecast made elsewhere instead (no LADDER).",
        epilog=examples(
            "delphi register marin-moe-535b --registry preds.jsonl --id hero-535b --author me",
            "delphi register marin-delphi-dense --registry preds.jsonl --id dense-1e23 "
            "--target-flops 1e23 --json",
            "delphi register --registry preds.jsonl --id paper-7b --external-loss 2.1 "
            "--external-source https://example.org/paper --target-flops 1e23"))
    add_fit_options(p)
    for action in p._actions:  # LADDER is not needed for an external forecast
        if action.dest == "ladder":
            action.nargs, action.default, action.required = "?", None, False
    add_target_options(p)
    add_interval_options(p)
    add_selection_options(p)
    p.add_argument("--registry", required=True, metavar="PATH", help="registry file (JSON Lines)")
    p.add_argument("--id", required=True, metavar="ID",
                   help="short unique id, e.g. marin-535b-a23b")
    p.add_argument("--author", metavar="NAME", help="who makes the forecast")
    p.add_argument("--kind", choices=("prediction", "projection"), default="prediction",
                   help="prediction: a run that will exist (default); projection: hypothetical")
    p.add_argument("--notes", metavar="TEXT", help="free text kept with the entry")
    p.add_argument("--curve", metavar="CURVE", nargs="?", const=True,
                   help="forecast curve for partial scoring: 'FRACTION:LOSS,...' or a CSV file "
                        "with columns fraction,loss; --curve alone (after LADDER) forecasts "
                        "the target's whole curve from the ladder with a band at each fraction "
                        "(as delphi predict --curve), which delphi track scores against")
    forecast_cmd.add_curve_options(p, flag=False)
    p.add_argument("--created-at", type=iso_timestamp, metavar="ISO",
                   help="explicit UTC timestamp (only to transcribe history; default now; at "
                        "most 5 minutes in the future)")
    _add_sign_key(p)
    ext = p.add_argument_group("external forecast (made outside delphi)")
    ext.add_argument("--external-loss", type=outcome_value, metavar="LOSS",
                     help="record this forecast loss instead of fitting LADDER")
    ext.add_argument("--external-source", metavar="TEXT",
                     help="where the external forecast was published (required with it)")
    ext.add_argument("--external-made-at", metavar="DATE", help="when it was made (ISO date)")
    ext.add_argument("--external-interval", type=external_interval, metavar="LO:HI:LEVEL[:KIND]",
                     help="its interval for the final loss, e.g. 2.55:2.65:0.9:new-run")
    ext.add_argument("--target-metric", metavar="METRIC",
                     help="eval metric of an external forecast")
    ext.add_argument("--target-unit", type=outcome_unit, metavar="UNIT",
                     help="unit of an external forecast's loss")

    p = subparsers.add_parser("score", help="append the observed loss of a registered "
                              "prediction and score it",
                              epilog=examples(
                                  "delphi score --registry preds.jsonl --id hero-535b "
                                  "--actual 2.05",
                                  "delphi score --registry preds.jsonl --id dense-1e23 "
                                  "--actual 2.31 --source 'wandb run' --json",
                                  "delphi score --registry preds.jsonl --id dclm-vs-comma "
                                  "--loss-a 2.91 --loss-b 2.76"))
    p.add_argument("--registry", required=True, metavar="PATH",
                   help="registry file (JSON Lines)")
    p.add_argument("--id", required=True, metavar="ID", help="the prediction's id")
    p.add_argument("--actual", type=outcome_value, metavar="LOSS",
                   help="observed loss (for an accuracy prediction: the accuracy as a "
                        "fraction, 0.612)")
    p.add_argument("--loss-a", type=loss_value, metavar="LA",
                   help="a comparison of recipes (`compare-recipes --registry`): the "
                        "reference's (A's) observed final loss, with --loss-b; the difference "
                        "LB - LA is scored against the registered interval")
    p.add_argument("--loss-b", type=loss_value, metavar="LB",
                   help="a comparison of recipes: the recipe's (B's) observed final loss")
    p.add_argument("--fraction", type=training_share, default=1.0, metavar="F",
                   help="share of training done when measured, in (0, 1] (default 1: final)")
    p.add_argument("--source", metavar="TEXT",
                   help="where the number comes from (W&B run, issue...)")
    p.add_argument("--unit", type=outcome_unit, metavar="UNIT",
                   help="unit of --actual (nats/token, bits/byte, bits/token; accuracy "
                        "predictions take a fraction, unit accuracy); an outcome in another "
                        "unit than the prediction's is refused (default: the prediction's "
                        "unit)")
    p.add_argument("--author", metavar="NAME", help="who measured or reports the outcome")
    p.add_argument("--notes", metavar="TEXT", help="free text kept with the outcome")
    p.add_argument("--created-at", type=iso_timestamp, metavar="ISO",
                   help="explicit UTC timestamp (default now; at most 5 minutes in the future)")
    p.add_argument("--force", action="store_true",
                   help="record a final --actual more than 1.3x above or below the prediction "
                        "(refused without it, naming the factor and the likely unit: a final "
                        "outcome is recorded once and cannot be corrected)")
    _add_sign_key(p)
    _add_common(p)
    serial(p)

    p = subparsers.add_parser(
        "registry", help="list, show, report, verify, publish the head of, repair a registry; "
        "make a signing key",
        description="Every action names its registry with --registry PATH (and show its entry "
        "with --id ID), as register and score do. The positional form of earlier releases "
        "(registry ACTION PATH, registry show ID PATH) still works in this release, with a "
        "note on stderr.",
        epilog=examples(f"delphi registry report --registry {_BUNDLED}",
                        f"delphi registry show --registry {_BUNDLED} --id marin-535b-a23b",
                        f"delphi registry verify --registry {_BUNDLED}"))
    # Parser explicitly: the actions' checks run whatever class the parent parser is.
    serial(p)
    sub = p.add_subparsers(dest="registry_command", required=True, metavar="ACTION",
                           parser_class=Parser)
    q = sub.add_parser("list", help="one line per entry",
                       epilog=examples(f"delphi registry list --registry {_BUNDLED}",
                                       f"delphi registry list --registry {_BUNDLED} --json"))
    _add_location(q, "list")
    _add_common(q)
    q = sub.add_parser("show", help="one entry, with its outcomes and scores",
                       epilog=examples(
                           f"delphi registry show --registry {_BUNDLED} --id marin-535b-a23b",
                           f"delphi registry show --registry {_BUNDLED} --id marin-moe-1e23 "
                           f"--json"))
    _add_location(q, "show", entry=True)
    _add_common(q)
    q = sub.add_parser("report", help="scoreboard over scored predictions (markdown or JSON)",
                       epilog=examples(f"delphi registry report --registry {_BUNDLED}",
                                       f"delphi registry report --registry {_BUNDLED} --json"))
    _add_location(q, "report")
    _add_common(q)
    q = sub.add_parser("verify", help="recompute the hash chain; exit 1 at the first problem",
                       epilog=examples(
                           f"delphi registry verify --registry {_BUNDLED}",
                           # The bundled registry's head when it was last extended.
                           f"delphi registry verify --registry {_BUNDLED} --expect-head "
                           f"6fd4b8ae5fd3d2f05c9ae77649316bc7839aa6af6d502451c72cb1f84721ed19",
                           "delphi registry verify --registry preds.jsonl --trusted-keys "
                           "me.key.pub"))
    _add_location(q, "verify")
    q.add_argument("--expect-head", metavar="HASH", type=_head_hash,
                   help="a head hash published earlier (detects entries removed from the end "
                        "and a rewritten history)")
    q.add_argument("--trusted-keys", metavar="FILE",
                   help="public keys, one 'ed25519:KEY NAME' per line: every entry must be "
                        "signed by one of them (detects forged appends)")
    _add_common(q)
    q = sub.add_parser("head", help="print the hash of the last entry, to publish elsewhere "
                       "(a commit, an issue comment) and check later with verify --expect-head",
                       epilog=examples(f"delphi registry head --registry {_BUNDLED}",
                                       f"delphi registry head --registry {_BUNDLED} --json"))
    _add_location(q, "head")
    _add_common(q)
    q = sub.add_parser("repair", help="remove a torn last line left by an interrupted append "
                       "(keeps a backup)",
                       epilog=examples("delphi registry repair --registry preds.jsonl",
                                       "delphi registry repair --registry preds.jsonl --json"))
    _add_location(q, "repair")
    _add_common(q)
    q = sub.add_parser("keygen", help="make an Ed25519 signing key: FILE (private, mode 0600) "
                       "and FILE.pub (the public key, for --trusted-keys)",
                       epilog=examples("delphi registry keygen me.key --name me",
                                       "delphi registry keygen keys/ci.key --json"))
    q.add_argument("key_file", metavar="FILE", help="private key file to create (never "
                   "overwritten; keep it out of the repository)")
    q.add_argument("--name", metavar="NAME", help="signer name written with the public key "
                   "(default: FILE's name)")
    _add_common(q)
    return {"register": _cmd_register, "score": _cmd_score, "registry": _cmd_registry}


# --------------------------------------------------------------------------- parsing helpers
def _head_hash(text: str) -> str:
    """``--expect-head``: 64 hex digits, either case (a usage error otherwise)."""
    from ...registry.chain import check_head

    try:
        return check_head(text)
    except RegistryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _registry(path) -> Registry:
    """A Registry whose writers say so on stderr (unless --quiet) while a lock is held."""
    from ...registry import Registry

    return Registry(path, on_wait=note)


def _parse_curve(text: str | None) -> list[tuple[float, float]] | None:
    if text is None:
        return None
    try:
        if Path(text).is_file():
            with open(text, newline="") as fh:
                rows = list(csv.DictReader(fh))
            return [(float(r["fraction"]), float(r["loss"])) for r in rows]
        return [(float(f), float(v)) for f, v in
                (item.split(":") for item in text.split(",") if item.strip())]
    except (KeyError, ValueError, TypeError):
        raise RegistryError(f"--curve: expected 'FRACTION:LOSS,...' or a CSV with columns "
                            f"fraction,loss, got {text!r}") from None


def external_interval(text: str) -> tuple:
    """``--external-interval LO:HI:LEVEL[:KIND]`` as ``(lo, hi, level[, kind])``; a value of
    another shape is a usage error (the numbers' ranges are the registry's check)."""
    parts = text.split(":")
    try:
        if len(parts) not in (3, 4):
            raise ValueError
        return (float(parts[0]), float(parts[1]), float(parts[2]),
                *(parts[3:] if len(parts) == 4 else []))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOWER:UPPER:LEVEL[:KIND], e.g. "
                                         f"2.55:2.65:0.9:new-run, got {text!r}") from None


# --------------------------------------------------------------------------- handlers
def _cmd_register(args) -> int:
    from ...registry import load_signing_key

    forecast_cmd.check_curve_flags(args)
    reg = _registry(args.registry)
    key = None if args.sign_key is None else load_signing_key(args.sign_key)  # before the fit
    if reg.path.exists() and any(e.id == args.id for e in reg.entries()):
        # Fail before spending time on the fit; the append re-checks under the lock.
        raise RegistryError(f"id {args.id!r} is already in {reg.path}; ids are unique: "
                            f"choose another")
    common = dict(id=args.id, author=args.author, kind=args.kind, notes=args.notes,
                  curve=None if args.curve is True else _parse_curve(args.curve),
                  created_at=args.created_at, sign_key=key)
    forecast = None
    if args.external_loss is not None:
        fit_flags = [flag for flag, used in (
            ("LADDER", args.ladder is not None), ("--floor", args.floor is not None),
            ("--fix", bool(args.fix)), ("--bound", bool(args.bound)),
            ("--fit-max-flops", args.fit_max_flops is not None),
            ("--metric", args.metric is not None)) if used]
        if fit_flags:
            raise UsageError(f"{', '.join(fit_flags)} cannot be used with --external-loss "
                             f"(an external forecast records no fit)")
        if args.curve is True:
            raise UsageError("--curve alone forecasts the curve from LADDER; an external "
                             "forecast's curve is given as --curve 'FRACTION:LOSS,...'")
        if not args.external_source:
            raise UsageError("--external-loss needs --external-source (where the forecast "
                             "was published)")
        target = {"flops": args.target_flops, "params": args.target_params,
                  "tokens": args.target_tokens, "name": args.target_name,
                  "active_params": args.target_active_params, "peak_lr": args.target_peak_lr,
                  "schedule": args.target_schedule, "steps": args.target_steps,
                  "batch_size": args.target_batch, "metric": args.target_metric,
                  "unit": args.target_unit}
        entry = reg.register_external(target={k: v for k, v in target.items() if v is not None},
                                      loss=args.external_loss, source=args.external_source,
                                      law=args.law, made_at=args.external_made_at,
                                      interval=args.external_interval, **common)
    else:
        if args.ladder is None:
            raise UsageError("give LADDER to forecast from, or --external-loss for a forecast "
                             "made elsewhere")
        external_only = [flag for flag, value in (
            ("--target-metric", args.target_metric), ("--target-unit", args.target_unit),
            ("--external-source", args.external_source),
            ("--external-made-at", args.external_made_at),
            ("--external-interval", args.external_interval)) if value]
        if external_only:
            raise UsageError(f"{', '.join(external_only)}: only for an external forecast "
                             f"(--external-loss); a delphi forecast takes them from LADDER")
        # Target, law and settings exactly as `delphi predict` chooses them (manifest defaults
        # first, command-line options over them).
        from ...forecasting.forecast import default_law, predict

        ladder, defaults = load_with_defaults(args)
        target = target_from(args, defaults)
        law = args.law or (defaults.law if defaults is not None else None)
        if law is None and not args.ensemble:
            law = default_law(ladder, target)
        settings = {**fit_settings(args, defaults), **interval_settings(args)}
        chosen = selection_settings(args, ladder, settings, law)
        if chosen and (args.law is None or args.law == "auto"):
            law = None if args.ensemble else "auto"   # a manifest's law gives way
        if args.curve is True:
            forecast = forecast_cmd.curve_forecast(args, ladder, target,
                                                   fit_settings(args, defaults), chosen)
        else:
            forecast = predict(ladder, target, law, **settings, **jobs_kwargs(args), **chosen)
        entry = reg.register(forecast, settings=settings, **common)
    if args.json:
        print_json(entry.fields())
    else:
        if forecast is not None:
            print(forecast.report())
            print()
        fc = entry.forecast
        unit = f" {entry.target.unit}" if entry.target.unit else ""
        print(f"registered {entry.kind} {entry.id}: {fc.loss:.4f}{unit}"
              f"{' (external)' if fc.external else ''} in {reg.path}")
        print(f"hash       {entry.hash}")
        if entry.signature is not None:
            print(f"signed     {_fingerprint(entry.signature.key)}")
    return 0


def _check_score_values(ns) -> None:
    """Usage errors (exit 2) of ``score``: --actual, or --loss-a with --loss-b."""
    from .output import UsageError

    pair = (ns.loss_a is not None, ns.loss_b is not None)
    if ns.actual is not None and any(pair):
        raise UsageError("give --actual LOSS (a prediction) or --loss-a LA --loss-b LB (a "
                         "comparison of recipes), not both")
    if ns.actual is None and not all(pair):
        raise UsageError("score needs --actual LOSS (or --loss-a LA and --loss-b LB for a "
                         "comparison of recipes)")
    if any(pair) and ns.fraction != 1.0:
        raise UsageError("a comparison is scored with final losses: --fraction is for --actual")


def _cmd_score(args) -> int:
    _check_score_values(args)
    if args.loss_a is not None:
        result = _registry(args.registry).score_comparison(
            args.id, args.loss_a, args.loss_b, source=args.source, author=args.author,
            notes=args.notes, created_at=args.created_at, unit=args.unit,
            sign_key=args.sign_key)
        if args.json:
            print_json(result.to_dict())
        else:
            print(result.report())
        return 0
    score = _registry(args.registry).score(args.id, args.actual, fraction=args.fraction,
                                          source=args.source, author=args.author,
                                          notes=args.notes, created_at=args.created_at,
                                          unit=args.unit, sign_key=args.sign_key,
                                          force=args.force)
    if args.json:
        print_json(score.to_dict())
    else:
        print(score.report())
    return 0


def _cmd_registry(args) -> int:
    action = args.registry_command
    if action == "keygen":
        from ...registry import generate_key

        # Checked before: generate_key creates a missing folder (mode 0700); say so.
        parent = Path(args.key_file).parent
        missing = [] if parent.exists() else [p for p in (parent, *parent.parents)
                                              if not p.exists()]
        line, pub = generate_key(args.key_file, name=args.name)
        key, name = line.split(" ", 1)
        if args.json:
            print_json({"private_key_file": args.key_file, "public_key_file": str(pub),
                         "public_key": key, "name": name, "fingerprint": _fingerprint(key),
                         "created_folders": [str(p) for p in reversed(missing)]})
        else:
            print(line)
            print(f"private key  {args.key_file} (mode 0600: keep it secret, out of the "
                  f"repository)\npublic key   {pub} (give it to verify --trusted-keys)")
            if missing:
                made = ", ".join(str(p) for p in reversed(missing))
                what = "folder did" if len(missing) == 1 else "folders did"
                print(f"created      {made} (the {what} not exist; mode 0700)")
        return 0
    _legacy_note(args)
    reg = _registry(args.registry)
    if action == "verify":
        report = reg.verify(expect_head=args.expect_head, trusted_keys=args.trusted_keys)
        if args.json:
            print_json(report.to_dict())
        else:
            print(report)
            if report.trusted or any(s.key for s in report.signers):
                print("\n".join(report.signer_lines()))
            elif report.ok and report.signers:
                print("no entry is signed: the chain shows the file is intact since a published "
                      "head, not who wrote it (see `delphi registry keygen`)")
        return 0 if report.ok else 1
    if action == "head":
        head = reg.head()
        if args.json:
            print_json({"path": str(reg.path), "head": head,
                         "n_entries": reg.verify().n_entries})
        else:
            print(head)
        return 0
    if action == "repair":
        before = reg.verify()
        backup = reg.repair()
        after = reg.verify()
        if args.json:
            print_json({"repaired": backup is not None, "backup": str(backup) if backup else None,
                         "before": before.to_dict(), "after": after.to_dict()})
        elif backup is None:
            print(f"nothing to repair: {after}")
        elif before.fix is not None:
            print(f"repaired {reg.path}: {before.fix}\nbackup   {backup}\n{after}")
        else:
            print(f"repaired line {before.line}: it {before.problem}\nbackup   {backup}\n{after}")
        return 0 if after.ok else 1
    if not reg.path.exists():
        raise RegistryError(f"no registry at {reg.path}")
    if action == "list":
        entries = reg.entries()
        if args.json:
            print_json({"registry": str(reg.path), "n_entries": len(entries),
                         "entries": [e.fields() for e in entries]})
        else:
            for i, e in enumerate(entries, 1):
                print(_summary_line(i, e))
        return _warn_if_broken(reg)
    if action == "show":
        entry = reg.get(args.id)
        outcomes = reg.outcomes(args.id) if entry.kind != "outcome" else []
        scores = reg.scores(args.id) if entry.kind == "prediction" else []
        compared = (reg.comparison_scores(args.id) if entry.kind == "prediction"
                    and entry.comparison is not None else [])
        if args.json:
            print_json({"entry": entry.fields(),
                         "outcomes": [o.fields() for o in outcomes],
                         "scores": [s.to_dict() for s in scores],
                         **({"comparison_scores": [c.to_dict() for c in compared]}
                            if entry.comparison is not None else {})})
        else:
            # a summary: the whole entry (a curve prediction's is ~4,000 lines of JSON) is
            # --json's
            print(_show_text(entry.fields()))
            for s in scores:
                print()
                print(s.report())
            for c in compared:
                print()
                print(c.report())
            if entry.kind == "prediction" and not scores:
                print("\nno outcome yet")
        return _warn_if_broken(reg)
    if action == "report":
        board = reg.report()
        verified = reg.verify()
        if args.json:
            print_json({**board.to_dict(), "verified": verified.ok,
                         "verify": verified.to_dict()})
        else:
            print(board.to_markdown())
        return _warn_if_broken(reg, verified)
    raise RegistryError(f"unknown registry action {action!r}")  # pragma: no cover


def _fingerprint(key: str) -> str:
    from ...registry.signing import fingerprint

    return fingerprint(key)


def _show_text(d: dict) -> str:
    """``registry show`` without --json: the entry's id, target, ladder, law, forecast and
    hash in a few lines (``d`` is :meth:`Entry.fields`); the whole entry is --json's."""
    def g(x) -> str:
        return "-" if x is None else f"{x:.5g}" if isinstance(x, float) else str(x)

    accuracy = (d.get("target") or {}).get("unit") == "accuracy"

    def fl(x) -> str:       # a loss, as predict prints it; an accuracy in points, as list
        return "-" if x is None else f"{100 * x:.2f}" if accuracy else f"{x:.4f}"

    t = d.get("target") or {}
    lines = [f"entry      {d.get('id')} ({d.get('kind')}), {d.get('created_at')}, author "
             f"{g(d.get('author'))}, delphi {g(d.get('delphi_version'))}"]
    o = d.get("outcome")
    if o:
        lines.append(f"outcome    actual {g(o.get('actual'))} at fraction "
                     f"{g(o.get('fraction'))} of {o.get('of')}"
                     + (f" ({o['source']})" if o.get("source") else ""))
    if t:
        what = ", ".join(f"{sym} = {int(t[k])}" if k == "steps" and float(t[k]).is_integer()
                         else f"{sym} = {t[k]:.3g}" if isinstance(t[k], float) else
                         f"{sym} = {t[k]}" for k, sym in
                         (("flops", "C"), ("params", "N"), ("active_params", "N_active"),
                          ("tokens", "D"), ("steps", "steps"), ("batch_size", "batch"),
                          ("peak_lr", "peak_lr"), ("schedule", "schedule"))
                         if t.get(k) is not None)
        lines.append(f"target     {t.get('name') or '(unnamed)'}: {what or '-'}; metric "
                     f"{g(t.get('metric'))} [{g(t.get('unit'))}]")
    lad = d.get("ladder")
    if lad:
        sha = lad.get("sha256")
        lines.append(f"ladder     {g(lad.get('name'))} ({g(lad.get('source'))}"
                     + (f", sha256 {sha[:12]}...)" if sha else ")"))
    law = d.get("law")
    if law:
        params = ", ".join(f"{k}={v:.4g}" for k, v in (law.get("params") or {}).items()
                           if isinstance(v, (int, float)))
        lines.append(f"law        {law.get('name')}"
                     + (f": {law['formula']}" if law.get("formula") else "")
                     + (f"; {params}" if params else ""))
    f = d.get("forecast")
    if f:
        unit = "points" if accuracy else t.get("unit") or ""
        iv = f.get("interval") or {}
        text = f"forecast   {fl(f.get('loss'))} {unit}"
        if iv.get("lower") is not None:
            text += (f", {level_percent(iv.get('level', 0))} {iv.get('kind') or ''} interval "
                     f"[{fl(iv['lower'])}, {fl(iv.get('upper'))}] ({iv.get('method')})")
        else:
            text += ", no interval"
        if f.get("extrapolation") is not None:
            text += f", {f['extrapolation']:.3g}x the largest fitted run's compute"
        if f.get("curve"):
            text += (f"; curve of {len(f['curve'])} points"
                     + (" with a band" if f.get("band") else ""))
        if f.get("external"):
            text += "; external"
        lines.append(text)
        if f.get("source"):
            lines.append(f"source     {f['source']}")
    lines.append(f"hash       {d.get('hash')} (previous {str(d.get('prev_hash'))[:12]}...)")
    lines.append("full entry --json")
    return "\n".join(lines)


def _summary_line(i: int, e) -> str:
    when = e.created_at.strftime("%Y-%m-%d %H:%M")
    if e.kind == "outcome":
        o = e.outcome
        what = f"actual {o.actual:.4f} at fraction {o.fraction:g} for {o.of}"
    else:
        ext = " external" if e.forecast.external else ""
        value = (f"{100 * e.forecast.loss:.2f} pts" if e.target.unit == "accuracy"
                 else f"{e.forecast.loss:.4f}")
        what = f"{value}{ext}  {e.target.name or ''}"
    return f"{i:>4}  {e.id:<32} {e.kind:<10} {when}  {what}"


def _warn_if_broken(reg, report=None) -> int:
    """Exit code of a read command: 1 (with the reason on stderr) when the chain is broken."""
    report = report if report is not None else reg.verify()
    if not report.ok:
        print(f"delphi: error: the registry does not verify, so what was printed cannot be "
              f"trusted: {report}", file=sys.stderr)
        return 1
    return 0
