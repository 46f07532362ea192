"""Options and argument types shared by the ``delphi`` commands.

The parser classes (help texts filled in when printed), the argument types (numbers, levels,
``NAME=VALUE``, ``NAME=LO:HI``, floors), the option groups several commands share (how a ladder
is read, what is fitted, the target, the interval, the candidate laws) and the translation of
parsed options into the library's keyword arguments. Standard library only at import: the
library modules are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import math
import re

from ...errors import LadderError
from . import output

# Placeholders in help texts, filled in (by importing the laws / the engine) only when a help
# page is formatted, so that parsing does not import them.
def help_values() -> dict[str, str]:
    from ...fitting import DEFAULT_DELTA
    from ...laws import CURVE_LAWS, LAWS

    return {"{LAWS}": ", ".join(sorted(LAWS)), "{CURVE_LAWS}": ", ".join(sorted(CURVE_LAWS)),
            "{DELTA}": f"{DEFAULT_DELTA:g}"}


def shows_default(action: argparse.Action) -> bool:
    """Whether ``action`` has a default worth printing in its help: not None, not a flag's
    False, not an empty list (repeatable options), not suppressed."""
    default = action.default
    if default is None or default is argparse.SUPPRESS or isinstance(default, bool):
        return False
    if isinstance(default, (list, tuple, dict)) and not default:
        return False
    return bool(action.option_strings) or action.nargs in (argparse.OPTIONAL,
                                                           argparse.ZERO_OR_MORE)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with three additions, applied only when a help page is printed:

    * ``{LAWS}``, ``{CURVE_LAWS}`` and ``{DELTA}`` in help texts are filled in;
    * an option with a default (:func:`shows_default`) whose help does not mention one gets
      ``(default: VALUE)`` appended (as argparse's ArgumentDefaultsHelpFormatter, without
      repeating a default the text already states);
    * a description or epilog holding line breaks is printed as written
      (RawDescriptionHelpFormatter: the examples keep one command per line); one without
      is wrapped to the terminal as usual.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if shows_default(action) and "default" not in text.lower():
            text += " (default: %(default)s)"
        return text

    def _expand_help(self, action: argparse.Action) -> str:
        text = super()._expand_help(action)
        if "{" in text:
            for key, value in help_values().items():
                text = text.replace(key, value)
        return text

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def examples(*lines: str) -> str:
    """An epilog listing example command lines, one per line (kept as written by
    :class:`HelpFormatter`); ``tests/test_cli_help.py`` parses every one of them."""
    return "examples:\n" + "".join(f"  {line}\n" for line in lines)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help texts use :class:`HelpFormatter` (subparsers too).

    ``checks`` (a list of ``check(parser, namespace)``) run after this parser has parsed its
    arguments, with this parser (so that :meth:`error` names the right command): the
    registry actions use one to accept their old positional form.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.checks: list = []
        # argparse takes "-1e22" for an option (its negative numbers have no exponent): then
        # "--target-flops -1e22" says "expected one argument" instead of "must be positive";
        # likewise a floor range "--floor -1:2"
        num = r"(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
        self._negative_number_matcher = re.compile(rf"^-{num}(:[-+]?{num})?$")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        for check in self.checks:
            check(self, namespace)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unrecognised argument is reported by the subcommand it was
        given to (its usage line, not the top level's), with a hint when it is a target
        option on a command that takes none."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            while True:     # the innermost subcommand parsed (delphi registry verify ...)
                subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
                chosen = getattr(namespace, subs[0].dest, None) if subs else None
                if chosen is None or chosen not in subs[0].choices:
                    break
                parser = subs[0].choices[chosen]
            hint = ""
            if any(x.startswith("--target-") for x in extras):
                hint = ("; `delphi predict` (and register, plot forecast) take targets; "
                        "`delphi fit` fits the ladder only")
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace

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
        if output.JSON_USAGE_ERRORS:
            output.json_error("UsageError", f"{self.prog}: {message}")
        usage = self.format_usage()
        if usage.count("\n") > 4:
            # a command with many options: a 20-line usage block would bury the one line
            # that matters; the full list is a --help away
            shown = " ".join((f"[{a.metavar or a.dest.upper()} ...]" if a.nargs == "*" else
                              a.metavar or a.dest.upper())
                             for a in self._get_positional_actions()
                             if a.help != argparse.SUPPRESS)
            usage = f"usage: {self.prog} [options] {shown} (every option: {self.prog} --help)\n"
        self.exit(2, f"{usage}{self.prog}: error: {message}\n")


def column_map(text: str) -> dict[str, str]:
    """``params=n_params,tokens=D`` as ``{"params": "n_params", "tokens": "D"}``."""
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, column = part.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise argparse.ArgumentTypeError(f"expected NAME=COLUMN[,NAME=COLUMN...], got "
                                             f"{text!r}")
        if name.strip() in out:
            raise argparse.ArgumentTypeError(f"{name.strip()!r} is named twice "
                                             f"({text!r}); map each column once")
        out[name.strip()] = column.strip()
    return out


def scale_pair(text: str) -> tuple[str, float]:
    """``params=1e6`` as ``("params", 1e6)`` (``--scale``). An unknown column or a factor that
    is not a positive finite number is a usage error here, in the reader's words
    (:func:`delphi.readers.scale_problem`, which :func:`delphi.load_ladder` also applies)."""
    name, sep, factor = text.partition("=")
    if not sep or not name.strip() or not factor.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=FACTOR, e.g. params=1e6, got {text!r}")
    try:
        value = float(factor)
    except ValueError:
        raise not_a_number(factor.strip()) from None
    from ...inputs.readers import scale_problem     # here: parsing --help imports no pandas

    problem = scale_problem(name.strip(), value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return name.strip(), value


def not_a_number(text: str) -> argparse.ArgumentTypeError:
    """The usage error for a value that is not a number; a decimal comma (2,45) is named."""
    hint = ""
    if "," in text:
        try:
            float(text.replace(",", "."))
            hint = f" (a decimal comma? write {text.replace(',', '.')})"
        except ValueError:
            pass
    return argparse.ArgumentTypeError(f"not a number: {text!r}{hint}")


def number(text: str) -> float:
    """Any float (``inf`` and ``nan`` too): for a type that checks its own range."""
    try:
        return float(text)
    except ValueError:
        raise not_a_number(text) from None


# Every value a flag takes is checked while parsing, so that a bad one is a usage error
# naming the flag (exit code 2, UsageError in --json), never a library error (exit 1)
# that a script would take for bad data.
def positive_float(text: str) -> float:
    """A positive finite number (``--huber-delta``, ``--tolerance``, seconds...)."""
    value = number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


def loss_value(text: str) -> float:
    """An observed or forecast loss (``--loss-a``, ``--external-loss``): a finite number in
    :data:`delphi.units.LOSS_RANGE` [nats/token, bits/token or bits/byte], the range the
    registry accepts."""
    from ...inputs.units import LOSS_RANGE

    value = number(text)
    lo, hi = LOSS_RANGE
    if not (math.isfinite(value) and lo <= value <= hi):
        raise argparse.ArgumentTypeError(f"{text!r} is not a plausible loss: a loss is a finite "
                                         f"number in [{lo:g}, {hi:g}] (nats/token, bits/token "
                                         f"or bits/byte); check the number and its unit")
    return value


def outcome_value(text: str) -> float:
    """``score --actual``: a loss (:func:`loss_value`) or, for an accuracy prediction, a
    fraction in (0, 1]. Which of the two applies depends on the registered prediction,
    which the registry checks; a value that is neither is refused here."""
    from ...inputs.units import LOSS_RANGE

    value = number(text)
    lo, hi = LOSS_RANGE
    if not (math.isfinite(value) and (lo <= value <= hi or 0 < value <= 1)):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a loss (a finite number in "
                                         f"[{lo:g}, {hi:g}]) nor an accuracy fraction in (0, 1]")
    return value


def loss_floor(text: str) -> float:
    """An irreducible loss E (``--floor``): a finite number in [0, the top of
    :data:`delphi.units.LOSS_RANGE`]; 0 is a law without a floor."""
    from ...inputs.units import LOSS_RANGE

    value = number(text)
    if not (math.isfinite(value) and 0 <= value <= LOSS_RANGE[1]):
        raise argparse.ArgumentTypeError(f"the irreducible loss E is a finite number in "
                                         f"[0, {LOSS_RANGE[1]:g}], got {text!r}")
    return value


def loss_unit(text: str) -> str:
    """``--unit`` of a ladder: one of :data:`delphi.units.UNITS` (or an alias such as bpb),
    as :func:`delphi.units.normalize_unit` names it."""
    from ...inputs.units import normalize_unit

    try:
        return normalize_unit(text)
    except LadderError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def outcome_unit(text: str) -> str:
    """``score --unit``, ``register --target-unit``: a loss unit (:func:`loss_unit`) or
    ``accuracy`` (a benchmark accuracy, a fraction)."""
    from ...registry.schema import ACCURACY_UNIT

    if text.strip().lower() == ACCURACY_UNIT:
        return ACCURACY_UNIT
    try:
        return loss_unit(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or {ACCURACY_UNIT!r} for a benchmark "
                                         f"accuracy)") from None


def ladder_format(text: str) -> str:
    """``--format``: a format :func:`delphi.load_ladder` knows
    (:func:`delphi.readers.format_problem`); whether it suits LADDER is the reader's check."""
    from ...inputs.readers import format_problem

    problem = format_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def target_value(column: str):
    """The argparse type of a target flag (``--target-params`` for ``column`` ``params``), or
    of another count of ``column`` (``--fit-max-flops``, ``--budget``): a positive finite
    number within the plausible magnitudes a ladder's ``column`` is held to
    (:data:`delphi.inputs.ladder.MAGNITUDES`, as :class:`~delphi.forecast.Target` checks
    it). Anything else is a usage error naming the flag (exit code 2, as ``--level 2`` or
    ``--target-params abc``), not a TargetError from the library (exit code 1) that names the
    API's ``target`` key."""
    def parse(text: str) -> float:
        value = positive_float(text)
        from ...inputs.ladder import MAGNITUDES   # here: parsing --help imports no pandas

        lo, hi, noun = MAGNITUDES.get(column, (0.0, math.inf, ""))
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value:.4g} is outside {lo:g}..{hi:g}: not a "
                                             f"plausible {noun} (in other units?)")
        return value
    parse.__name__ = "target value"     # argparse's message for a ValueError names the type
    return parse


def training_share(text: str) -> float:
    """A share of training done, in (0, 1] (1 = the final checkpoint)."""
    value = number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"a share of training done is in (0, 1], e.g. 0.56 "
                                         f"for 56% of the run or 1 for its end; got {text!r}")
    return value


def iso_timestamp(text: str) -> str:
    """``--created-at``: an ISO 8601 timestamp with a time zone (``2026-12-04T12:00:00Z``),
    the form the registry reads; returned as given (whether it is too far ahead of the clock
    is the registry's check)."""
    import datetime as _dt

    try:
        value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 timestamp, e.g. "
                                         f"2026-12-04T12:00:00Z; got {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone; add Z or +00:00")
    return text


def open_share(text: str) -> float:
    """A share strictly between 0 and 1 (``plan --fraction``: ladder / target compute)."""
    value = number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a share is in (0, 1), e.g. 0.01 for 1%; got {text!r}")
    return value


def ratio_at_least_one(text: str) -> float:
    """A ratio largest / smallest (``plan --span``, ``--spread``): a finite number >= 1."""
    value = number(text)
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"a ratio of largest to smallest is at least 1, got "
                                         f"{text!r}")
    return value


def level(text: str) -> float:
    from ...core.quantiles import percent_hint   # the library's message for --level 90
    value = number(text)
    hint = percent_hint(value)
    if hint is not None:
        raise argparse.ArgumentTypeError(f"{hint} (got {text!r})")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a level is in (0, 1), e.g. 0.9; got {text!r}")
    return value


def count(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, got {value}")
        return value
    return parse


def jobs_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("0 jobs: use 1 for serial, -1 for all cores")
    return value


def serial(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Mark ``p`` as a command with no parallel step: ``-j N`` (N > 1) is accepted like on
    every command, and :func:`delphi.cli.main` says on stderr that it runs serially."""
    p.set_defaults(serial_command=True)
    return p


def jobs_kwargs(args) -> dict:
    """``{"n_jobs": N}`` when ``-j`` was given, else nothing (the library's default)."""
    jobs = getattr(args, "jobs", None)
    return {} if jobs is None else {"n_jobs": jobs}


def floor_value(text: str) -> float | tuple[float, float]:
    """``E`` (one pinned floor, :func:`loss_floor`) or ``LOW:HIGH`` (a floor range, scanned by
    predict: 0 <= LOW < HIGH, both finite)."""
    low, sep, high = text.partition(":")
    if not sep:
        return loss_floor(text)
    try:
        lo, hi = float(low), float(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected E or LOW:HIGH, got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise argparse.ArgumentTypeError(f"a floor range LOW:HIGH needs 0 <= LOW < HIGH, both "
                                         f"finite; got {text!r}")
    return lo, hi


def fixed_pair(text: str) -> tuple[str, float]:
    """``--fix NAME=VALUE``: a finite value (which names the law takes is the law's check)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number in {text!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"a fixed value must be finite, got {text!r}")
    return name.strip(), number


def bound_triple(text: str) -> tuple[str, tuple[float | None, float | None]]:
    """``--bound NAME=LO:HI`` (an empty side is no bound): LO < HI, neither NaN."""
    name, sep, rest = text.partition("=")
    lo, sep2, hi = rest.partition(":")
    if not sep or not sep2 or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=LOWER:UPPER, got {text!r}")
    try:
        low = float(lo) if lo.strip() else None
        high = float(hi) if hi.strip() else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number in {text!r}") from None
    if any(v is not None and math.isnan(v) for v in (low, high)) or (
            low is not None and high is not None and not low < high):
        raise argparse.ArgumentTypeError(f"a bound needs LOWER < UPPER, got {text!r}")
    return name.strip(), (low, high)


#: Help of the positional LADDER of every command that reads one.
LADDER_HELP = ("bundled ladder name (see `delphi ladders`), a manifest (.toml), a tidy "
               "CSV/Parquet/JSONL file, a W&B runs table exported from the UI (Name, State, "
               "summary columns), a TensorBoard log directory (tbparse extra), or - for "
               "standard input (see --format)")
METRIC_HELP = ("source column to use as the loss (default: the manifest's metric, else the "
               "data's loss column)")


def add_ladder_options(p: argparse.ArgumentParser) -> None:
    """How a command reads its ladder: ``--format``, ``--unit``, ``--drop-invalid``,
    ``--allow-outside-paths`` (the keyword arguments of :func:`delphi.load_ladder`; see
    :func:`load_from_args`)."""
    # Not argparse choices: "--format toml" gets its own message (a manifest needs its folder).
    p.add_argument("--format", type=ladder_format, metavar="FORMAT",
                   help="format of a ladder read from standard input (LADDER '-'): csv "
                        "(default), jsonl or parquet; tensorboard reads LADDER as a TensorBoard "
                        "log directory (needs the tbparse extra); with a file it must match "
                        "the file's suffix. E.g. `cat runs.csv | delphi predict - "
                        "--target-flops 1e22`")
    p.add_argument("--unit", type=loss_unit, metavar="UNIT",
                   help="unit of the loss: nats/token (default), bits/byte (bpb) or bits/token; "
                        "a metric named like bpb / bits-per-byte defaults to bits/byte; a "
                        "manifest's unit cannot be contradicted")
    p.add_argument("--columns", type=column_map, metavar="NAME=COLUMN,...",
                   help="map a data file's columns to delphi's names, e.g. --columns "
                        "params=n_params,tokens=D (names: run, params, tokens, flops, loss, "
                        "step, ...; a manifest maps its own in [columns])")
    p.add_argument("--scale", type=scale_pair, action="append", default=[],
                   metavar="NAME=FACTOR",
                   help="multiply a column after reading (repeatable), for a data file that "
                        "counts in other units: --scale params=1e6 (parameters in millions), "
                        "--scale tokens=1e9 (tokens in billions); names: params, tokens, flops, "
                        "loss, step, lr, peak_lr, batch_size, active_params; recorded in the "
                        "ladder's warnings; a manifest scales in [scale]")
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
    from ...inputs.readers import load_ladder

    scale: dict[str, float] = {}
    for name, factor in getattr(args, "scale", None) or []:
        if name in scale and scale[name] != factor:
            raise output.UsageError(f"--scale {name} given twice ({scale[name]:g} and "
                                    f"{factor:g}); give each column one factor")
        scale[name] = factor
    return load_ladder(args.ladder if source is None else source, metric=args.metric,
                       unit=args.unit, drop_invalid=args.drop_invalid,
                       allow_outside_paths=args.allow_outside_paths,
                       format=getattr(args, "format", None),
                       columns=getattr(args, "columns", None), scale=scale or None)


def add_fit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("ladder", help=LADDER_HELP)
    p.add_argument("--law", metavar="LAW", help="law to fit: {LAWS} (default: "
                   "from the ladder's design: power-n when every run has one token count D, "
                   "power when only C is known or D/N is one value, chinchilla when the "
                   "target gives N and D and the ladder varies both); "
                   "predict and register also take auto (the candidate with the best "
                   "leave-future-out backtest, see `delphi compare`); "
                   "curve laws ({CURVE_LAWS}) are for `delphi complete`")
    p.add_argument("--floor", type=floor_value, metavar="E",
                   help="fix the irreducible loss E at this value (the interval is then "
                        "conditional on it); predict also takes a range LOW:HIGH, e.g. 1.4:1.8, "
                        "and reports the forecast at its ends and middle")
    p.add_argument("--fix", type=fixed_pair, action="append", default=[], metavar="NAME=VALUE",
                   help="fix any parameter (repeatable), e.g. --fix alpha=0.34")
    p.add_argument("--bound", type=bound_triple, action="append", default=[],
                   metavar="NAME=LO:HI", help="bound a parameter (repeatable; empty side = none)")
    p.add_argument("--metric", metavar="COLUMN", help=METRIC_HELP)
    add_ladder_options(p)
    p.add_argument("--fit-max-flops", type=target_value("flops"), metavar="C",
                   help="fit only runs with compute at or below C FLOPs")
    p.add_argument("--include-unfinished", action="store_true",
                   help="also fit the last checkpoint of runs stopped early")
    p.add_argument("--huber-delta", type=positive_float, metavar="DELTA",
                   help="Huber delta on log residuals (default {DELTA})")
    p.add_argument("--no-defaults", action="store_true",
                   help="ignore the manifest's [predict] defaults (target, fixed values, law)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


class Once(argparse.Action):
    """An option that may be given once: a second value is a usage error, not a silent
    overwrite (``--target-flops 1e22 --target-flops 1e23`` forecast only 1e23)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            several = ("`delphi compare-recipes` and delphi.compare_recipes take several"
                       if parser.prog.endswith("report") else "delphi.predict takes several")
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest):g} and "
                         f"{values:g}); give one target per command ({several})")
        setattr(namespace, self.dest, values)


def add_target_options(p: argparse.ArgumentParser) -> None:
    """The target of ``predict`` and ``register``: ``--target-flops/-params/-tokens/-name`` and
    the learning-rate options of :func:`add_target_lr_options`."""
    p.add_argument("--target-flops", type=target_value("flops"), metavar="C", action=Once,
                   help="target compute [FLOPs]")
    p.add_argument("--target-params", type=target_value("params"), metavar="N", action=Once,
                   help="target parameters")
    p.add_argument("--target-tokens", type=target_value("tokens"), metavar="D", action=Once,
                   help="target tokens")
    p.add_argument("--target-name", metavar="NAME", help="label for the target")
    add_target_lr_options(p)


def add_target_lr_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target-peak-lr", type=target_value("peak_lr"), metavar="ETA",
                   help="target peak learning rate (chinchilla-lr; default: the fitted optimum)")
    p.add_argument("--target-schedule", metavar="SPEC",
                   help="target LR schedule, e.g. cosine:warmup=50,final=0.1 or "
                        "wsd:decay=0.2,cooldown=1-sqrt (chinchilla-ckpt; default: ends like the "
                        "ladder's finished runs)")
    p.add_argument("--target-steps", type=target_value("steps"), metavar="T", help="target steps")
    p.add_argument("--target-batch", type=target_value("batch_size"), metavar="B",
                   help="target batch size [tokens]; D = steps x batch when --target-tokens "
                        "is not given")
    p.add_argument("--target-active-params", type=target_value("active_params"),
                   metavar="N_ACTIVE",
                   help="MoE target: parameters active per token (C = 6 x N_active x D)")


def add_interval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval", default="auto",
                   choices=["auto", "calibrated", "reference", "bootstrap", "delta", "none"],
                   help="interval method (default auto: calibrated on the ladder's own "
                        "leave-future-out extrapolation errors when it has 3+ folds, blended "
                        "with the reference class of public ladders; else the reference class "
                        "alone; either widens the bootstrap interval when there are enough "
                        "runs, else the approximate delta method's). auto always gives an "
                        "interval it can make; a method named here that cannot be made is an "
                        "error (exit 1) saying why; none gives none")
    add_level_option(p)
    p.add_argument("--n-boot", type=count(20), default=200, metavar="N",
                   help="bootstrap draws (default 200; at least 20)")
    p.add_argument("--boot-unit", default="run", choices=["run", "budget"],
                   help="resample whole runs or whole compute budgets (default: run)")
    p.add_argument("--seed", type=count(0), default=0, metavar="SEED",
                   help="random seed (bootstrap; >= 0)")


#: One interval level for every command (predict, register, backtest, isoflop, optimal,
#: compare): the library's :data:`delphi.uncertainty.DEFAULT_LEVEL`, spelled out here so that
#: parsing does not import numpy (tests/test_cli_help.py checks they agree).
DEFAULT_LEVEL = 0.9


def add_level_option(p: argparse.ArgumentParser, what: str = "interval level") -> None:
    """``--level``: in (0, 1), default :data:`DEFAULT_LEVEL`."""
    p.add_argument("--level", type=level, default=DEFAULT_LEVEL, metavar="LEVEL",
                   help=f"{what}, in (0, 1) (default {DEFAULT_LEVEL:g})")


def add_selection_options(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--max-folds", type=count(1), default=12, metavar="K",
                   help="leave-future-out cuts per candidate, evenly spaced (default 12)")


def candidates_from(args, ladder, fixed: dict, delta: float):
    """The candidates the candidate options name (None: the defaults of
    :func:`delphi.selection.default_candidates` with ``fixed`` and ``delta``)."""
    from ...forecasting.selection import default_candidates, parse_candidates

    if not (args.laws or args.floors or args.deltas):
        return None
    laws = args.laws or ",".join(c.law for c in default_candidates(ladder, fixed, delta))
    return parse_candidates(laws, args.floors, args.deltas or [delta], fixed=fixed)


def selection_settings(args, ladder, settings: dict, law) -> dict:
    """Keyword arguments of :func:`delphi.predict` for ``--law auto`` / ``--ensemble``."""
    auto = law == "auto" or args.ensemble
    if not auto:
        if args.laws or args.floors or args.deltas:
            raise output.UsageError("--laws, --floors and --deltas name the candidates of "
                                    "--law auto or --ensemble")
        return {}
    return {"ensemble": args.ensemble,
            "candidates": candidates_from(args, ladder, settings["fixed"], settings["delta"])}


def interval_settings(args) -> dict:
    return {"interval": None if args.interval == "none" else args.interval, "level": args.level,
            "n_boot": args.n_boot, "boot_unit": args.boot_unit, "seed": args.seed}


def target_given(args) -> bool:
    """Whether the command line gives the target (its C, N, D or steps), rather than the
    manifest's [predict] defaults; False for a command without target flags."""
    return any(getattr(args, f, None) is not None
               for f in ("target_flops", "target_params", "target_tokens", "target_steps"))


def target_from(args, defaults):
    """The target (a :class:`~delphi.forecast.Target`) from the command line, else the
    manifest's [predict] defaults."""
    from ...forecasting.forecast import Target

    given = target_given(args)
    lr = {"peak_lr": args.target_peak_lr, "schedule": args.target_schedule,
          "steps": args.target_steps, "batch_size": args.target_batch,
          "active_params": args.target_active_params}
    if not given and (defaults is None or (defaults.target_flops is None
                                           and defaults.target_params is None)):
        from .output import UsageError
        raise UsageError("no target: give --target-flops C, or --target-params N and "
                         "--target-tokens D (--target-params alone for a law in N), or a "
                         "manifest with a [predict] target")
    if given or defaults is None:
        return Target(flops=args.target_flops, params=args.target_params,
                      tokens=args.target_tokens, name=args.target_name, **lr)
    return Target(flops=defaults.target_flops, params=defaults.target_params,
                  tokens=defaults.target_tokens, name=args.target_name or defaults.target_name, **lr)


def load_with_defaults(args):
    from ...inputs.readers import is_data_source, load_manifest

    ladder = load_from_args(args)
    # runs.csv, a W&B export, a TensorBoard directory or standard input: no manifest, so no
    # [predict] defaults
    is_data_file = is_data_source(args.ladder, getattr(args, "format", None))
    manifest = None if args.no_defaults or is_data_file else load_manifest(args.ladder)
    if args.no_defaults:
        ladder.predict_defaults = {}    # left out on purpose: no note that they were
    return ladder, (manifest.predict if manifest is not None else None)


def fit_settings(args, defaults) -> dict:
    # Manifest defaults first, command-line options override them.
    fixed = dict(defaults.fixed or {}) if defaults is not None else {}
    given = [name for name, _ in args.fix] + (["E"] if args.floor is not None else [])
    twice = sorted({n for n in given if given.count(n) > 1})
    if twice:
        raise output.UsageError(f"{', '.join(twice)} fixed more than once (--fix/--floor); "
                                f"give one value")
    fixed.update(dict(args.fix))
    if isinstance(args.floor, tuple):
        if args.command != "predict":
            raise output.UsageError("a floor range (--floor LOW:HIGH) is for `delphi predict`; "
                                    "give one value")
        fixed.pop("E", None)  # the range replaces a manifest's pinned floor
    elif args.floor is not None:
        fixed["E"] = args.floor
    bounded = [name for name, _ in args.bound]
    if len(set(bounded)) < len(bounded):
        raise output.UsageError("a parameter is bounded more than once (--bound); give one "
                                "range")
    fit_max = args.fit_max_flops
    if fit_max is None and defaults is not None:
        fit_max = defaults.fit_max_flops
    if args.huber_delta is not None:
        delta = args.huber_delta
    else:
        from ...fitting import DEFAULT_DELTA
        delta = DEFAULT_DELTA
    return {"fixed": fixed, "bounds": dict(args.bound) or None, "delta": delta,
            "fit_max_flops": fit_max, "include_unfinished": args.include_unfinished}


