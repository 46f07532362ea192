"""The ``delphi`` command: the parser, the global options, and running a command so that
stdout holds its result (or, with ``--json``, exactly one JSON document).

Start-up is kept light: this module and the command modules import only the standard library,
:mod:`delphi.errors` and :mod:`delphi.parallel` at their top, so ``delphi --help`` and usage
errors answer without importing pandas, scipy or the fitting engine. Each handler imports what
it needs once the arguments have parsed.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
import traceback
import warnings
from typing import Callable, Sequence

from ... import __version__
from ...core import parallel
from ...errors import DelphiError, DelphiWarning, TargetInputError, for_cli
from ...core.parallel import set_quiet
from ...core.shared_fits import shared_fits
from . import accuracy as accuracy_cmd
from . import analyses, forecast, output, registry, report
from . import design as design_cmd
from . import plot as plot_cmd
from . import recipes as recipes_cmd
from . import track as track_cmd
from .options import Parser, jobs_count, target_given
from .output import OutputError, UsageError, json_error, print_error, silence_stdout, wants_json, write_stdout

__all__ = ["main", "build_parser"]

Handler = Callable[[argparse.Namespace], int]

#: The command modules, in the order of ``delphi --help``; each has ``add_commands(sub)``.
COMMAND_MODULES = (forecast, analyses, design_cmd, registry, report, plot_cmd, accuracy_cmd,
                   recipes_cmd, track_cmd)


def _add_global_options(parser: argparse.ArgumentParser, default) -> None:
    """``-q/--quiet``, ``--debug`` and ``-j/--jobs``, on the main parser (``default`` their
    real defaults) and on every subcommand (``default`` SUPPRESS: an option given before the
    subcommand is not reset by the subparser's default)."""
    suppress = default is argparse.SUPPRESS
    parser.add_argument("-q", "--quiet", action="store_true",
                        default=default if suppress else False,
                        help="no progress bars or notes on stderr (results are still printed)")
    parser.add_argument("--debug", action="store_true", default=default if suppress else False,
                        help="show the traceback of an error")
    parser.add_argument("-j", "--jobs", type=jobs_count, metavar="N",
                        default=default if suppress else None,
                        help="parallel workers for bootstraps, folds, sweeps and several runs "
                             "(joblib convention: 1 serial, -1 all cores, -2 all but one, -N "
                             "all but N-1, at least one; "
                             "default serial unless a joblib parallel_config is active); "
                             "results do not depend on N")


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The innermost subcommand's parser that parsed ``args`` (``delphi registry list``'s)."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if chosen is None or chosen not in subs[0].choices:
            return parser
        parser = subs[0].choices[chosen]


def _json_before_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``delphi --json CMD ...`` as ``delphi CMD ... --json``: the command's own ``--json``
    is set; a command without one is a usage error that says so (exit 2)."""
    before = vars(args).pop("json_before", False)
    if not before:
        return
    if "json" not in vars(args):
        cmd = _command_parser(parser, args)
        cmd.error(f"--json: `{cmd.prog}` prints no JSON (it has no --json option)")
    args.json = True


def _add_global_options_to_subcommands(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases: once each
                _add_global_options(child, argparse.SUPPRESS)
                _add_global_options_to_subcommands(child)


def _check_environment() -> None:
    """Refuse a malformed ``SOURCE_DATE_EPOCH`` (the reproducible-build date, read by
    ``delphi report`` and also by numpy's f2py at scipy's import, which would otherwise end in
    a traceback): it must be whole, non-negative seconds since 1970-01-01 UTC."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is not None and value.strip() and not value.strip().isdigit():
        raise DelphiError(f"SOURCE_DATE_EPOCH must be whole, non-negative seconds since "
                          f"1970-01-01 UTC (e.g. 1767225600), got {value!r}; unset it or fix it")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived. A KeyboardInterrupt, so that everything that stops cleanly on
    Ctrl-C does so on these too: joblib terminates its loky workers on a KeyboardInterrupt,
    whereas the default action of SIGTERM kills delphi alone and leaves its workers running,
    holding delphi's stdout open (issue 22)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The signals that end delphi the way Ctrl-C does (SIGHUP only where it exists).
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                      if hasattr(signal, name))


def _raise_terminated(signum, frame):
    # A second signal while the workers are being stopped kills at once (the default action).
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    raise Terminated(signum)


def _install_stop_handlers() -> dict:
    """Make SIGTERM and SIGHUP raise :class:`Terminated` for the duration of a command; returns
    the previous handlers. Nothing is installed off the main thread (Python allows handlers
    only there) or for a signal that is ignored (``nohup delphi ...`` keeps ignoring SIGHUP)."""
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for sig in _STOP_SIGNALS:
        try:
            handler = signal.getsignal(sig)
            if handler is signal.SIG_IGN:
                continue
            signal.signal(sig, _raise_terminated)
            previous[sig] = handler
        except (OSError, ValueError):  # pragma: no cover - an embedding that refuses
            pass
    return previous


def _restore_handlers(previous: dict) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (OSError, ValueError):  # pragma: no cover
            pass


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """The ``delphi`` parser and ``{command: handler(args) -> exit code}``."""
    parser = Parser(
        prog="delphi", description="Predict the final loss of a large training run from a "
        "ladder of small runs.")
    parser.add_argument("--version", action="version", version=f"delphi {__version__}")
    _add_global_options(parser, None)
    # Each command that prints JSON has its own --json; given before the command it means the
    # same (the global options go either side, and a user does not know --json is not one).
    parser.add_argument("--json", dest="json_before", action="store_true",
                        help="print one JSON document (the command's --json, which can also "
                             "go before the command)")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict[str, Handler] = {}
    for module in COMMAND_MODULES:
        handlers.update(module.add_commands(sub))
    _add_global_options_to_subcommands(parser)
    return parser, handlers


_PARSER: tuple[argparse.ArgumentParser, dict[str, Handler]] | None = None


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """:func:`build_parser`'s result, built once per process: building it (some 600 options,
    each checked by a help formatter) costs more than most commands' parsing, and in-process
    callers (tests, notebooks) run :func:`main` hundreds of times. Parsing does not change the
    parser, and no default is read from the environment when it is built."""
    global _PARSER
    if _PARSER is None:
        _PARSER = build_parser()
    return _PARSER


def _fresh_lists(args: argparse.Namespace) -> argparse.Namespace:
    """A list value that is an option's default (``--fix`` not given: ``[]``) is the parser's
    own object; each call gets its copy, so a handler that extends it cannot change the next
    call's default."""
    for name, value in vars(args).items():
        if isinstance(value, list):
            setattr(args, name, list(value))
    return args


def _run(args, handlers: dict) -> int:
    """Run the parsed command; its printed output is collected and written at the end.

    Collecting the output is what keeps ``--json`` stdout a single JSON document: either the
    result, or (on a delphi error) the error object alone, never a partial result followed by
    an error. Without ``--json``, output printed before an error is still written.
    """
    as_json = bool(getattr(args, "json", False))
    if getattr(args, "serial_command", False) and args.jobs not in (None, 1):
        name = " ".join(filter(None, (args.command, getattr(args, "registry_command", None))))
        output.note(f"-j {args.jobs}: `delphi {name}` has no parallel step; it runs serially")
    elif getattr(args, "jobs", None) is not None and args.jobs < 0:
        # joblib's -N is all cores but N-1, at least one: say so when that is none of them,
        # rather than run serially without a word
        cores = os.cpu_count() or 1
        if cores + 1 + args.jobs < 1:
            output.note(f"-j {args.jobs} asks for all cores but {-args.jobs - 1}; this machine "
                        f"has {cores}, so it runs serially")
    real_stdout, out = sys.stdout, io.StringIO()
    failed = True
    output._COMMAND_STDOUT = real_stdout
    try:
        sys.stdout = out
        _check_environment()
        with shared_fits():     # a fit asked for twice in one command runs once
            code = handlers[args.command](args)
        failed = False
    except UsageError as exc:
        sys.stdout = real_stdout
        if as_json:
            json_error("UsageError", str(exc))
        print_error(str(exc))
        return 2
    except DelphiError as exc:
        sys.stdout = real_stdout
        if getattr(args, "debug", False):
            traceback.print_exc()
        if isinstance(exc, TargetInputError) and target_given(args):
            # target flags that do not give what the law reads are usage on every command
            # (predict, register, suggest, hparams...); a manifest's target stays exit 1
            if as_json:
                json_error("UsageError", str(exc))
            print_error(str(exc))
            return 2
        if as_json:
            json_error(type(exc).__name__, str(exc))
        print_error(str(exc))
        return 1
    except Exception as exc:
        # Not a delphi error: a bug. The traceback follows on stderr (Python prints it); a
        # JSON reader still gets an error object instead of empty output.
        sys.stdout = real_stdout
        if as_json:
            json_error("InternalError", f"{type(exc).__name__}: {exc} (a bug in delphi: "
                                         f"please report it with the traceback from stderr)")
        raise
    finally:
        sys.stdout = real_stdout
        output._COMMAND_STDOUT = None
        if failed and not as_json and out.getvalue().strip():
            write_stdout(for_cli(out.getvalue()))  # what was printed before the error
    write_stdout(for_cli(out.getvalue()))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``delphi`` console script; returns the exit code.

    Exit codes: 0 success, 1 a delphi error (bad ladder, law, manifest target or failed fit:
    one line on stderr, no traceback unless ``--debug``), 2 bad command-line usage (argparse),
    a bad value of a flag included: ``--level 2``, ``--target-params -1`` (or ``abc``, ``0``,
    ``nan``, or a value beyond the plausible magnitudes), the message naming the flag, and
    ``predict`` target flags that do not give what the law reads (a manifest's target that
    does not: 1, :class:`~delphi.errors.TargetInputError`); also ``--huber-delta 0``, ``--floor
    2:1``, ``--unit furlongs``, ``score --actual nan``..., the message naming the flag;
    every value is checked while parsing (the argument types of ``options.py``), so that exit
    code 1 means the data, law or fit, never a mistyped flag. Flags that contradict each
    other (``--fix E=2 --floor 1.5``) are usage errors too.

    With ``--json`` stdout holds exactly one JSON document: the result, or on an error
    ``{"error": {"type": NAME, "message": TEXT}, "delphi_version": VERSION}`` where NAME is the
    :class:`~delphi.errors.DelphiError` subclass (``LadderError``, ``FitError``...), or
    ``UsageError`` for bad command-line usage (exit code 2; argparse's usage text stays on
    stderr), or ``InternalError`` for a bug (its traceback on stderr). The one-line error is
    also printed on stderr, for a person watching the terminal. Messages name settings by
    their flags (``--include-edge``), not their Python keywords (see
    :func:`delphi.errors.option`).

    Ctrl-C (SIGINT) stops with ``delphi: error: interrupted`` on stderr and exit code 130
    (with ``--json``, the error type ``Interrupted``), not a traceback. SIGTERM and SIGHUP stop
    the same way (parallel workers stopped, one line ``delphi: error: terminated (SIGTERM)``,
    error type ``Interrupted``), with the shell's exit code 128 + the signal's number (143 for
    SIGTERM, 129 for SIGHUP); a second one kills at once.

    When the reader of stdout goes away (``delphi ... | head``) delphi stops quietly, exit
    code 0: the command did its work, the reader took what it wanted. When stdout cannot be
    written (``> /dev/full``, or closed with ``>&-``) delphi prints ``cannot write the output:
    REASON`` on stderr, exit code 1.

    The global options ``-q/--quiet`` (no progress bars or notes), ``--debug`` (tracebacks on
    errors) and ``-j/--jobs`` (parallel workers) go before or after the subcommand; quiet
    holds for the duration of the call. So does ``--json`` for every command that has it
    (``delphi --json predict ...``); before a command without it, it is a usage error saying
    so.
    """
    argv = sys.argv[1:] if argv is None else list(argv)

    was_quiet = parallel._QUIET
    previous_handlers = _install_stop_handlers()
    try:
        output.JSON_USAGE_ERRORS = wants_json(argv)
        try:
            parser, handlers = _parser()
            args = _fresh_lists(parser.parse_args(argv))
            _json_before_command(parser, args)
        finally:
            output.JSON_USAGE_ERRORS = False
        with warnings.catch_warnings():
            # Warnings are recorded on the ladder and fit and printed in the report; do not
            # print them twice through Python's warning machinery.
            warnings.simplefilter("ignore", DelphiWarning)
            set_quiet(was_quiet or args.quiet)
            code = _run(args, handlers)
        write_stdout("", flush=True)  # here, not at exit, so that a closed pipe is caught below
        return code
    except SystemExit:
        # --help, --version and usage errors: argparse printed and exits.
        try:
            write_stdout("", flush=True)
        except BrokenPipeError:
            silence_stdout()
        except OutputError as exc:
            print_error(f"cannot write the output: {exc}")
            silence_stdout()
            return 1
        raise
    except BrokenPipeError:
        silence_stdout()
        return 0
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM or SIGHUP: nothing was written to stdout (output is collected until
        # the end); one line, the shell's exit code for the signal, and the JSON error a
        # script waits for.
        if isinstance(exc, Terminated):
            what, how, code = "terminated", exc.args[0], 128 + exc.signum
        else:
            what, how, code = "interrupted", "Ctrl-C", 130
        if wants_json(argv):
            json_error("Interrupted", f"{what} ({how}); " + (
                "the records above were written before it" if output.JSON_LINES
                else "nothing was computed to the end"))
        print_error(what if code == 130 else f"{what} ({how})")
        return code
    except OutputError as exc:
        # A full disk or a closed stdout is not a bug: one line, no traceback. stdout is then
        # pointed at /dev/null so that Python's flush at exit does not fail again.
        print_error(f"cannot write the output: {exc}")
        silence_stdout()
        return 1
    finally:
        set_quiet(was_quiet)
        output.JSON_LINES = False
        _restore_handlers(previous_handlers)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
